"""Keeping the engine's pinned prefixes in step with the active system prompts.

The database says which prompt is active; the engine holds one pin per tenant under `tenant.pin_key`.
Every function here is idempotent and tolerates a missing engine (then the start-up hook pins later).
The last failure per tenant (pin cap reached, prompt too long) is kept in memory for the console.

Changes made in this process re-pin right after their transaction commits, and are announced to
every other server process (replicas) through the channel layer (tenants.pin_events), which re-pin
at once. A background thread also compares the active prompts with what was pinned every
PAGODA_PIN_SYNC_SECONDS: the safety net for announcements lost while Redis was unreachable.
One lock serialises all of it per process (requests, the watcher and the listener).
"""
import logging
import threading
import time
from typing import Any

from django.conf import settings
from django.db import close_old_connections

import engine_runtime
from tenants.models import SystemPrompt, Tenant

logger = logging.getLogger(__name__)

_PIN_PREFIX = "tenant:"
_errors_lock = threading.Lock()
_sync_lock = threading.RLock()  # one pin change at a time in this process (reconcile calls unpin_key)
_pin_errors: dict[str, str] = {}  # pin key -> why the active prompt is not pinned
_pinned_versions: dict[str, int] = {}  # pin key -> SystemPrompt id last pinned (or tried) under it


def _set_error(key: str, reason: str | None) -> None:
    with _errors_lock:
        if reason is None:
            _pin_errors.pop(key, None)
        else:
            _pin_errors[key] = reason


def pin_error(tenant: Tenant) -> str | None:
    with _errors_lock:
        return _pin_errors.get(tenant.pin_key)


def count_prompt_tokens(text: str, engine: Any = None) -> int | None:
    """Tokens of `text` rendered as the system turn; None when no engine is running to count them."""
    engine = engine or engine_runtime.peek()
    if engine is None:
        return None
    return len(engine.encode_system_prefix(text))


def _engine_errors() -> tuple[type[BaseException], ...]:
    try:
        from inference.errors import EngineError
    except ImportError:  # no engine package: nothing raised one of its errors
        return ()
    return (EngineError,)


def _pin(engine: Any, prompt: SystemPrompt) -> None:
    tenant = prompt.tenant
    try:
        token_ids = engine.encode_system_prefix(prompt.text)
        if prompt.num_tokens != len(token_ids):
            SystemPrompt.objects.filter(pk=prompt.pk).update(num_tokens=len(token_ids))
            prompt.num_tokens = len(token_ids)
        if tenant.pin_key in engine.pins():  # replacing: the older version's blocks go first
            engine.unpin_prefix(tenant.pin_key)
        info = engine.pin_prefix(tenant.pin_key, token_ids, tenant=tenant.engine_key)
    except _engine_errors() as exc:  # PinCapacityError, PromptTooLongError, EngineDeadError
        logger.warning("could not pin %s: %s", tenant.pin_key, exc)
        engine.unpin_prefix(tenant.pin_key)  # never leave an older version pinned in its place
        _set_error(tenant.pin_key, f"{type(exc).__name__}: {exc}")
        return
    finally:
        _pinned_versions[tenant.pin_key] = prompt.pk
    _set_error(tenant.pin_key, None)
    logger.info("pinned %s v%s: %d tokens, %d blocks", tenant.pin_key, prompt.version, info.num_tokens, info.num_blocks)


def sync_tenant(tenant_id: int, engine: Any = None, *, only_if_changed: bool = False) -> None:
    """Pin the tenant's active prompt (re-pinning replaces an older one), or unpin when none is active.

    only_if_changed: leave a pin alone when it already holds the active version (an announcement of a
    change this process has already picked up). Raises Tenant.DoesNotExist for an unknown tenant.
    """
    engine = engine or engine_runtime.peek()
    if engine is None:
        return
    with _sync_lock:
        tenant = Tenant.objects.get(pk=tenant_id)
        prompt = SystemPrompt.objects.filter(tenant=tenant, is_active=True).select_related("tenant").first()
        if prompt is None or not tenant.is_active:
            unpin_key(tenant.pin_key, engine)
            return
        if only_if_changed and _pinned_versions.get(tenant.pin_key) == prompt.pk and tenant.pin_key in engine.pins():
            return
        _pin(engine, prompt)


def sync_key(tenant_id: int, pin_key: str, engine: Any = None, *, only_if_changed: bool = False) -> None:
    """sync_tenant, and unpin `pin_key` when it is no longer the tenant's: the tenant was deleted, or
    renamed (its prompt is pinned under the new key by sync_tenant)."""
    try:
        sync_tenant(tenant_id, engine, only_if_changed=only_if_changed)
    except Tenant.DoesNotExist:
        unpin_key(pin_key, engine)
        return
    current = Tenant.objects.filter(pk=tenant_id).first()
    if current is not None and current.pin_key != pin_key:
        unpin_key(pin_key, engine)


def unpin_key(key: str, engine: Any = None) -> None:
    engine = engine or engine_runtime.peek()
    with _sync_lock:
        if engine is not None:
            engine.unpin_prefix(key)
        _pinned_versions.pop(key, None)
        _set_error(key, None)


def reconcile(engine: Any, *, force: bool = False) -> None:
    """Make the engine's tenant pins match the active prompts in the database.

    Only prompts that changed since they were last pinned are re-pinned, unless `force`.
    """
    with _sync_lock:
        wanted = {}
        for prompt in SystemPrompt.objects.filter(is_active=True, tenant__is_active=True).select_related("tenant"):
            wanted[prompt.tenant.pin_key] = prompt
            if force or _pinned_versions.get(prompt.tenant.pin_key) != prompt.pk:
                _pin(engine, prompt)
        for key in set(engine.pins()) | set(_pinned_versions):
            if key.startswith(_PIN_PREFIX) and key not in wanted:
                unpin_key(key, engine)


def pin_all_active_prompts(engine: Any) -> None:
    """Start-up hook: pin every active tenant's active prompt, then keep watching for changes."""
    _pinned_versions.clear()
    reconcile(engine, force=True)
    interval = settings.PAGODA_PIN_SYNC_SECONDS
    if interval > 0:
        threading.Thread(
            target=_watch, args=(engine, interval), name="pagoda-pin-sync", daemon=True
        ).start()


def _watch(engine: Any, interval: float) -> None:
    """Reconcile every `interval` seconds for as long as `engine` is the process's running engine."""
    while True:
        time.sleep(interval)
        if engine_runtime.peek() is not engine:
            return
        try:
            close_old_connections()
            reconcile(engine)
        except Exception:  # a database hiccup must not end the watcher
            logger.exception("pin reconciliation failed")
        finally:
            close_old_connections()


def pin_status(tenant: Tenant, engine: Any = None) -> dict:
    """{"engine", "pinned", "num_tokens", "num_prompt_tokens", "num_blocks", "error"} for the console.

    Only whole KV blocks are pinned, so num_tokens (covered by them) can be below num_prompt_tokens.
    """
    engine = engine or engine_runtime.peek()
    if engine is None:
        return {"engine": False, "pinned": False, "num_tokens": None, "num_prompt_tokens": None, "num_blocks": None,
                "error": None}
    info = engine.pins().get(tenant.pin_key)
    return {
        "engine": True,
        "pinned": info is not None,
        "num_tokens": getattr(info, "num_tokens", None),  # tokens in whole pinned blocks
        "num_prompt_tokens": getattr(info, "num_prompt_tokens", None),  # tokens asked to pin
        "num_blocks": getattr(info, "num_blocks", None),
        "error": pin_error(tenant),
    }
