"""Telling every server process (replica) that a tenant's pinned prompt changed, over the channel layer.

A change commits in one process: a console save, the admin site, a management command. That process
re-pins in its own engine at once (tenant_changed), then sends {"type": "pins.changed", ...} to the
group pin_group(). Each server process runs one PinListener (pagoda.asgi starts it): a daemon thread
with its own event loop and its own channel-layer instance, which receives the message and re-pins
that tenant in its engine.

    pin_events.tenant_changed(tenant.pk, tenant.pin_key)   # from transaction.on_commit in services
    pin_events.start_listener()                             # once per server process

With the in-memory layer (no REDIS_URL) there is one process and nothing to announce or listen for.
Announcements lost while Redis was unreachable are made up for by a full reconcile every time the
listener (re)joins the group, and by the periodic watcher (PAGODA_PIN_SYNC_SECONDS) when it is on.
The group name carries a fingerprint of the database, so installations that share one Redis (staging
and production, or test runs) never re-pin each other's tenants.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import DEFAULT_CHANNEL_LAYER, InMemoryChannelLayer, channel_layers, get_channel_layer
from django.conf import settings
from django.db import connections

import engine_runtime
from pagoda import ttl_cache
from tenants import pinning

logger = logging.getLogger(__name__)

MESSAGE_TYPE = "pins.changed"
# Names this process in its own announcements, so its listener skips what it has already applied.
ORIGIN = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
SEND_TIMEOUT_S = 3.0  # an admin's save must not hang on an unreachable Redis
# channels-redis forgets a group member after its group_expiry (a day by default): join again well before.
REJOIN_EVERY_S = 600.0
MAX_RETRY_DELAY_S = 30.0


def installation_id(db: dict | None = None) -> str:
    """12 hex digits naming an installation by its database's identity (channel-layer group names carry
    it). `db` is a DATABASES entry (default: this process's "default")."""
    db = db or settings.DATABASES["default"]
    identity = f"{db['ENGINE']}|{db.get('HOST', '')}|{db.get('PORT', '')}|{db['NAME']}"
    return hashlib.sha256(identity.encode()).hexdigest()[:12]


def pin_group(db: dict | None = None) -> str:
    """The channel-layer group of an installation: pagoda.pins.<installation_id(db)>."""
    return "pagoda.pins." + installation_id(db)


def shares_processes(layer: Any) -> bool:
    """Whether `layer` reaches other processes (channels-redis does; the in-memory layer does not)."""
    return layer is not None and not isinstance(layer, InMemoryChannelLayer)


def tenant_changed(tenant_id: int, pin_key: str) -> None:
    """After a commit that changed what `tenant_id` should have pinned: re-pin here, then tell the others."""
    ttl_cache.clear_all()  # the system prompt API calls read (a deactivation saves no row)
    pinning.sync_key(tenant_id, pin_key)
    announce(tenant_id, pin_key)


def announce(tenant_id: int, pin_key: str) -> bool:
    """Send the change to every listening process; False when there is no shared layer or Redis failed.

    A failure is logged, never raised: the change is saved, and the other processes still pick it up at
    their next reconcile.
    """
    layer = get_channel_layer()
    if not shares_processes(layer):
        return False
    message = {"type": MESSAGE_TYPE, "tenant_id": tenant_id, "pin_key": pin_key, "origin": ORIGIN}
    group = pin_group()

    async def send() -> None:
        await asyncio.wait_for(layer.group_send(group, message), SEND_TIMEOUT_S)

    try:
        _run_blocking(send)
    except Exception:
        logger.warning("could not announce the pin change of %s to the other replicas", pin_key, exc_info=True)
        return False
    return True


def _run_blocking(make_coro: Callable[[], Any]) -> None:
    """Run a coroutine to completion from sync code, also when called on a thread with a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        async_to_sync(make_coro)()
        return
    # async_to_sync refuses to run on an event loop's own thread: use a short-lived thread instead.
    failure: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(make_coro())
        except BaseException as exc:  # reported to the caller below
            failure.append(exc)

    worker = threading.Thread(target=run, name="pagoda-pin-announce", daemon=True)
    worker.start()
    worker.join(SEND_TIMEOUT_S + 1)
    if failure:
        raise failure[0]


def apply_message(message: dict) -> bool:
    """Re-pin what an announcement names in this process's engine; True when it was applied.

    Skipped: other message types, this process's own announcements (already applied before sending),
    and any message while no engine runs (the start-up hook pins from the database when it is ready).
    """
    if message.get("type") != MESSAGE_TYPE or message.get("origin") == ORIGIN:
        return False
    pin_key = str(message.get("pin_key", ""))
    if not pin_key.startswith("tenant:"):
        logger.warning("ignoring a pin announcement without a tenant pin key: %r", message)
        return False
    ttl_cache.clear_all()  # another process changed the tenant's prompt: API calls here read it again
    engine = engine_runtime.peek()
    if engine is None:
        return False
    try:
        pinning.sync_key(int(message["tenant_id"]), pin_key, engine, only_if_changed=True)
    finally:
        connections.close_all()  # this thread's own connection must not linger between messages
    return True


def catch_up() -> None:
    """Reconcile every tenant pin with the database: what was announced while nobody listened."""
    engine = engine_runtime.peek()
    if engine is None:
        return
    try:
        pinning.reconcile(engine)
    finally:
        connections.close_all()


class PinListener:
    """Receives pin announcements in a daemon thread and applies them; rejoins after Redis outages.

    `layer` defaults to a private instance of the default channel layer (channels-redis lets only one
    event loop at a time receive on an instance, and the server's consumers receive on the shared one).
    `apply` and `on_join` run in worker threads (they use the ORM); their failures are logged.
    """

    def __init__(self, layer: Any = None, group: str | None = None,
                 apply: Callable[[dict], bool] = apply_message, on_join: Callable[[], None] = catch_up):
        self.layer = layer if layer is not None else channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
        self.group = group or pin_group()
        self.apply, self.on_join = apply, on_join
        self.joined = threading.Event()  # set while the listener is in the group
        self.num_received = 0
        self.num_applied = 0
        self.num_joins = 0
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._stopping = False

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="pagoda-pin-listener", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Leave the group and end the thread (idempotent)."""
        self._stopping = True
        loop, task = self._loop, self._task
        if loop is not None and task is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop closed meanwhile: the thread is ending anyway
                pass
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._task = loop.create_task(self._main())
            loop.run_until_complete(self._task)
        except asyncio.CancelledError:
            pass
        finally:
            self.joined.clear()
            loop.close()

    async def _main(self) -> None:
        delay = 1.0
        while not self._stopping:
            try:
                await self._session()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis down or restarting: join again later
                self.joined.clear()
                logger.warning("pin listener lost the channel layer (%s); joining again in %.0f s", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_RETRY_DELAY_S)
            else:
                delay = 1.0

    async def _session(self) -> None:
        channel = await self.layer.new_channel("pagoda-pins")
        await self.layer.group_add(self.group, channel)
        self.num_joins += 1
        self.joined.set()
        logger.info("pin listener joined %s", self.group)
        rejoin = asyncio.create_task(self._rejoin_every(channel))
        try:
            await asyncio.to_thread(self._guarded, self.on_join)
            while True:
                message = await self.layer.receive(channel)
                self.num_received += 1
                if await asyncio.to_thread(self._guarded, self.apply, message):
                    self.num_applied += 1
        finally:
            rejoin.cancel()
            try:
                await asyncio.wait_for(self.layer.group_discard(self.group, channel), 2.0)
            except Exception:  # Redis is gone: the membership expires on its own
                pass

    async def _rejoin_every(self, channel: str) -> None:
        while True:
            await asyncio.sleep(REJOIN_EVERY_S)
            try:
                await self.layer.group_add(self.group, channel)
            except Exception as exc:  # the receive loop notices the outage and reconnects
                logger.warning("pin listener could not renew its group membership: %s", exc)

    @staticmethod
    def _guarded(function: Callable, *args: Any) -> Any:
        try:
            return function(*args)
        except Exception:
            logger.exception("pin listener: %s failed", getattr(function, "__name__", function))
            return False


_listener: PinListener | None = None
_listener_lock = threading.Lock()


def start_listener() -> PinListener | None:
    """Start this process's listener once; None with the in-memory layer (one process, nothing to hear)."""
    global _listener
    with _listener_lock:
        if _listener is not None:
            return _listener
        if not shares_processes(get_channel_layer()):
            logger.info("in-memory channel layer: pin changes stay in this process")
            return None
        _listener = PinListener()
        _listener.start()
        return _listener


def listener() -> PinListener | None:
    """This process's running listener, if any."""
    return _listener


def listener_status() -> dict | None:
    """{"joined", "group", "num_joins", "num_received", "num_applied"} of this process's listener, or None."""
    running = _listener
    if running is None:
        return None
    return {"joined": running.joined.is_set(), "group": running.group, "num_joins": running.num_joins,
            "num_received": running.num_received, "num_applied": running.num_applied}
