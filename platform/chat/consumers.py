"""ChatConsumer: one WebSocket per open conversation at /ws/chat/<conversation_id>/ (frames: chat.protocol).

The socket arrives authenticated by its session cookie and origin-checked (pagoda.asgi wraps every
route in pagoda.ws_origin.SameOriginValidator + AuthMiddlewareStack). A turn runs as a task beside
the receive loop, so a stop frame, or the socket closing, is handled while the reply streams: either
aborts the engine request at once (its KV blocks are freed before the engine's next step and its
stream ends with finish_reason "abort"), and the partial reply is saved as stopped. Every database
step runs in a thread (`_db`) and so does tokenizing: the event loop only moves frames.

Offboarding takes effect on an open socket: it joins its user's and its tenant's groups
(chat.revocation) and, told that access changed, checks again (chat.access) and closes with an error
frame first when it may no longer chat; a running reply is stopped and saved as such. Every turn runs
the same check before it starts, so a lost announcement cannot let a turn through.

One reply at a time per conversation, whichever tab, process or replica asks: a turn first takes the
conversation's reply lease (chat.turn_lock) and a second tab's turn is refused with "reply_in_progress".
The conversation's other tabs follow the reply live (chat.follow): the socket writing it tells its
frames to the conversation's group, and a stop from a following tab reaches it the same way. A tab
opened mid-reply asks the group for the reply so far and carries on from it.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import uuid

from channels.consumer import get_handler_name
from channels.db import aclose_old_connections
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

import engine_runtime
from chat import access, follow, prompting, protocol, revocation, selectors, services, turn_lock
from chat.errors import (CLOSE_UNAUTHENTICATED, EXPECTED_ERRORS, ChatAccessError, ChatError, access_error,
                         to_chat_error)
from chat.replies import ReplyStream
from governance import budgets
from observability import arrival, track_request
from pagoda.db import db_call as _db  # each call gives its connection back at once
from chat.models import Message

logger = logging.getLogger(__name__)

# daphne kills an application that takes over 10 s to close. A closing socket aborts its request at
# once, then waits at most this long for the turn to save the partial reply before cancelling it.
DISCONNECT_GRACE_S = 5.0
# A reply's final save that fails is tried once more this long after, on a fresh connection (one that
# dropped, a database failing over). The save is idempotent: a first try that did write is harmless.
SAVE_RETRY_DELAY_S = 1.0
# Joining or leaving a group must not hold up a socket when Redis is unreachable (the per-turn check
# still applies without the group).
GROUP_TIMEOUT_S = 3.0


class ChatConsumer(AsyncWebsocketConsumer):
    """Streams the replies of one conversation of the logged-in user."""

    async def connect(self) -> None:
        self.conversation_id = int(self.scope["url_route"]["kwargs"]["conversation_id"])
        self.user = self.scope.get("user")
        self.conversation = None
        self.turn_task: asyncio.Task | None = None
        self.engine = None  # with request_id: the request a stop or a close aborts
        self.request_id: str | None = None
        self.stop_requested = False
        self.closed = False
        session = self.scope.get("session")
        self.session_key: str | None = session.session_key if session is not None else None
        self.access_groups: list[str] = []
        self.followers: follow.Followers | None = None  # with a turn running: the conversation's other tabs
        self.catching_up: follow.CatchingUp | None = None  # opened mid-reply: until that reply ends
        self.lock: turn_lock.ReplyLock | None = None  # with a turn running: its conversation's reply lease
        # Accept, then close with our code: a socket refused during the handshake reaches the browser
        # as a bare 1006, and the page could not tell "log in again" from "no such conversation".
        await aclose_old_connections()  # the one the session middleware used to find the user
        await self.accept()
        if self.user is None or not self.user.is_authenticated:
            await self._close(CLOSE_UNAUTHENTICATED)
            return
        try:
            self.conversation = await _db(selectors.conversation_for_socket)(
                self.user, self.conversation_id)
        except ChatAccessError as exc:
            await self._close(exc.close_code)
            return
        # From the join until it is known whether another tab's reply runs, that reply's frames are held:
        # one that starts meanwhile is followed from its start, one already running is caught up on.
        self.catching_up = follow.CatchingUp()
        await self._join_access_groups()
        try:
            held = await _db(self._recheck)()
        except ChatAccessError as exc:
            await self._end_access(exc.close_code)
            return
        except Exception:  # noqa: BLE001 - the database away: the page shows a running reply when it ends
            logger.warning("could not recheck chat socket of conversation %s", self.conversation_id, exc_info=True)
            held = None
        catching_up = self.catching_up
        if catching_up is None:  # a reply started (or ended) since the join: followed as it is
            return
        if held is not None and await follow.ask(self.channel_layer, self.conversation_id, self.channel_name):
            return  # opened while another tab's reply is being written: its socket sends it so far
        self.catching_up = None
        for frame in catching_up.give_up():
            await self._send(frame)

    def _recheck(self) -> str | None:
        """Once the groups are joined, in one database call: the owner of a reply being written (if this
        socket follows the conversation's replies), then access read again (a logout, deactivation or
        removal made since the handshake was announced before this socket could hear it, and the page
        already sees it open)."""
        following = follow.conversation_group(self.conversation_id) in self.access_groups
        held = turn_lock.holder(self.conversation_id) if following else None
        access.verify_socket(self.user, self.session_key, self.conversation_id)
        return held

    async def disconnect(self, code: int) -> None:
        self.closed = True
        self._abort()
        await self._leave_access_groups()
        task = self.turn_task
        if task is None or task.done():
            return
        done, _ = await asyncio.wait({task}, timeout=DISCONNECT_GRACE_S)
        if not done:  # stuck before the engine (a slow database): give up, the finally still saves
            task.cancel()
            await asyncio.wait({task}, timeout=1.0)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.conversation is None or self.closed:
            return
        try:
            frame = protocol.parse_client_frame(text_data, settings.PAGODA_CHAT_MAX_MESSAGE_CHARS)
        except ChatError as exc:
            await self._send(protocol.error_frame(exc))
            return
        if frame.type == protocol.STOP:
            if self.turn_task is not None and not self.turn_task.done():
                self._abort()
            else:  # the reply may be another tab's: the socket writing it stops it (else nobody hears)
                await follow.Followers(self.channel_layer, self.conversation_id, self.channel_name).stop()
            return
        if self.turn_task is not None and not self.turn_task.done():
            await self._send(protocol.error_frame(ChatError("busy", "A reply is still being written; stop it first.")))
            return
        self.stop_requested = False
        arrival.stamp()  # the turn's TTFT counts from here (the task below inherits it)
        self.turn_task = asyncio.create_task(self._turn(frame))

    async def dispatch(self, message: dict) -> None:
        """channels' dispatch without its thread hop to close old database connections before each
        message. Every database call here closes its own (pagoda.db.db_call); and a reply's every frame
        reaches each socket of its conversation as a message (chat.follow), so that hop came once a
        frame per socket, queued in the one thread where the sockets' database calls run."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    # -- access -------------------------------------------------------------------------------------
    async def access_changed(self, event: dict) -> None:
        """A chat.revocation announcement: close now if this socket's session ended, else check again."""
        if self.conversation is None or self.closed:
            return
        if "session" in event:  # a logout: of this socket's session, or of another one of the user's
            if event["session"] == revocation.session_digest(self.session_key):
                await self._end_access(CLOSE_UNAUTHENTICATED)
            return
        try:
            await _db(access.verify_socket)(self.user, self.session_key, self.conversation_id)
        except ChatAccessError as exc:
            await self._end_access(exc.close_code)

    async def chat_follow(self, event: dict) -> None:
        """A frame of the reply another socket of this conversation is writing: passed on to this page."""
        if event.get("origin") == self.channel_name or self.conversation is None:
            return
        catching_up = self.catching_up
        if catching_up is None:
            await self._send(event["frame"])
            return
        for frame in catching_up.on_follow(event["frame"]):
            await self._send(frame)
        if catching_up.finished:
            self.catching_up = None

    async def chat_catchup(self, event: dict) -> None:
        """A tab opened mid-reply asks for the reply so far: answered by the socket writing it."""
        if event.get("origin") != self.channel_name and self.followers is not None:
            await self.followers.answer(event["origin"])

    async def chat_snapshot(self, event: dict) -> None:
        """The reply so far, as this socket asked for it (chat_catchup): passed on, with what was held."""
        if self.catching_up is None or self.conversation is None:
            return
        for frame in self.catching_up.on_snapshot(event["frame"]):
            await self._send(frame)

    async def chat_stop(self, event: dict) -> None:
        """Another tab of this conversation pressed stop: stop this socket's reply, if one runs."""
        if event.get("origin") != self.channel_name and self.turn_task is not None and not self.turn_task.done():
            self._abort()

    async def _end_access(self, close_code: int) -> None:
        """Stop the running reply (saved as stopped), send the error frame, close: nothing else goes out,
        and nothing the client sends after is answered."""
        if self.closed:
            return
        self.closed = True
        self._abort()
        logger.info("chat socket of conversation %s closed: access ended (%s)", self.conversation_id, close_code)
        try:
            await self.send(text_data=protocol.error_frame(access_error(close_code)))
        except Exception:  # noqa: BLE001 - already gone
            pass
        await self.close(code=close_code)

    async def _join_access_groups(self) -> None:
        layer = self.channel_layer
        if layer is None:
            return
        groups = [revocation.user_group(self.user.pk), revocation.tenant_group(self.conversation.tenant_id),
                  follow.conversation_group(self.conversation_id)]  # and the other tabs' replies (chat.follow)
        try:
            for group in groups:
                await asyncio.wait_for(layer.group_add(group, self.channel_name), GROUP_TIMEOUT_S)
                self.access_groups.append(group)
        except Exception:  # noqa: BLE001 - Redis away: the per-turn check still holds
            logger.warning("chat socket of conversation %s could not join its access groups", self.conversation_id,
                           exc_info=True)

    async def _leave_access_groups(self) -> None:
        groups, self.access_groups = self.access_groups, []
        for group in groups:
            try:
                await asyncio.wait_for(self.channel_layer.group_discard(group, self.channel_name), GROUP_TIMEOUT_S)
            except Exception:  # noqa: BLE001 - Redis away: the membership expires on its own
                pass

    # -- helpers -------------------------------------------------------------------------------------
    async def _send(self, text: str) -> None:
        if self.closed:
            return
        try:
            await self.send(text_data=text)
        except Exception:  # noqa: BLE001 - gone before the server told us (daphne: autobahn's Disconnected)
            # As a close: the reply is stopped and saved as such, not failed with "internal_error".
            logger.info("chat socket of conversation %s was gone mid-send", self.conversation_id)
            self.closed = True
            self._abort()

    async def _close(self, code: int) -> None:
        self.closed = True
        await self.close(code=code)

    def _abort(self) -> None:
        """Stop the running reply now (thread-safe, returns at once); remembered if it has not started."""
        self.stop_requested = True
        if self.engine is not None and self.request_id is not None:
            self.engine.abort(self.request_id)

    # -- one turn --------------------------------------------------------------------------------------
    async def _turn(self, frame: protocol.ClientFrame) -> None:
        """Run the turn holding the conversation's reply lease; refused while another tab's reply runs.
        The lease, the session's check and the turn's plan are one database call."""
        self.lock = lock = turn_lock.ReplyLock(self.conversation_id, settings.PAGODA_CHAT_REPLY_LOCK_SECONDS)
        try:
            acquired, plan = await lock.acquire(then=functools.partial(self._plan, frame))
        except ChatAccessError as exc:  # signed out, deleted, or the user left the tenant since it opened
            await self._end_access(exc.close_code)
            return
        except EXPECTED_ERRORS as exc:  # refused before anything was saved (the lease is given back)
            await self._send(protocol.error_frame(to_chat_error(exc)))
            return
        except Exception as exc:  # the database is away
            logger.exception("chat turn of conversation %s failed before it started", self.conversation_id)
            await self._send(protocol.error_frame(to_chat_error(exc)))
            return
        if not acquired:
            await self._send(protocol.error_frame(ChatError(
                "reply_in_progress", "A reply is already being written in another tab; wait for it or stop it.")))
            return
        try:
            await self._locked_turn(plan)
        finally:
            self.followers = None
            await lock.release()  # a no-op when _stream gave it back already

    def _plan(self, frame: protocol.ClientFrame) -> services.TurnPlan:
        """Under the lease, in its database call: the session still logs the user in (not logged out,
        deactivated...), and what the turn needs."""
        access.verify_session(self.user.pk, self.session_key)
        return services.plan_turn(
            self.user, self.conversation_id, content=frame.content, profile_name=frame.profile,
            attachment_ids=frame.attachment_ids,
            parent_id=frame.parent_id, edit_of=frame.message_id if frame.type == protocol.EDIT else None,
            answer_id=frame.message_id if frame.type == protocol.REGENERATE else None)

    async def _locked_turn(self, plan: services.TurnPlan) -> None:
        try:
            engine = await engine_runtime.aget_engine(timeout=settings.PAGODA_CHAT_ENGINE_WAIT_SECONDS)
            params = plan.profile.to_sampling_params(n=1, logprobs=None)  # the page shows one reply
            prompt_ids = await asyncio.to_thread(self._prompt_ids, engine, plan, params.max_tokens)
        except EXPECTED_ERRORS as exc:  # refused before anything was saved
            await self._refuse(to_chat_error(exc))
            return
        except Exception as exc:
            logger.exception("chat turn of conversation %s failed before it started", self.conversation_id)
            await self._refuse(to_chat_error(exc))
            return
        if self.closed:
            return
        request_id = f"chat-{self.conversation_id}-{uuid.uuid4().hex[:16]}"
        # governance: reserve the turn's most against the token budgets (QuotaExceeded: spent)
        num_tokens = len(prompt_ids) + (params.max_tokens or engine.max_model_len - len(prompt_ids))
        try:
            budget_warning, turn = await _db(self._begin)(plan, request_id, num_tokens)
        except EXPECTED_ERRORS as exc:  # refused before anything was saved
            await self._refuse(to_chat_error(exc))
            return
        except Exception as exc:  # e.g. the conversation was deleted a moment ago; nothing was saved
            logger.exception("could not save the turn of conversation %s", self.conversation_id)
            await self._refuse(to_chat_error(exc))
            return
        if budget_warning is not None:  # governance: 80% of a budget is spent
            await self._send(protocol.budget_warning_frame(**budgets.warning_fields(budget_warning)))
        start = protocol.start_frame(
            message_id=turn.reply.pk, user_message_id=turn.user_message.pk if turn.user_message else None,
            title=turn.title, profile=plan.profile.name,
            attachments=[{"id": a.pk, "name": a.name, "num_tokens": a.num_tokens} for a in plan.attachments])
        await self._send(start)
        self.followers = follow.Followers(self.channel_layer, self.conversation_id, self.channel_name)
        # parent_id: what the new user message follows, or (regenerating) the user message answered again
        parent = plan.user_parent if plan.content is not None else plan.answered
        await self.followers.tell_start(protocol.followed(start, user_content=plan.content,
                                                          parent_id=parent.pk if parent is not None else None),
                                        turn.reply.pk)
        await self._stream(engine, plan, turn, prompt_ids, params, request_id)

    def _begin(self, plan: services.TurnPlan, request_id: str, num_tokens: int):
        """In one database call: reserve the turn's tokens (QuotaExceeded when a budget is spent), then
        save the user message and the pending reply; a turn that could not be saved reserves nothing."""
        budget_warning = budgets.reserve_chat(self.user, plan.conversation.tenant, request_id, num_tokens)
        try:
            return budget_warning, services.begin_turn(plan, request_id, settings.PAGODA_CHAT_STALE_REPLY_SECONDS)
        except BaseException:
            try:
                budgets.release(request_id)  # governance: the turn never ran
            except Exception:  # noqa: BLE001 - the database away: the reservation lapses by itself
                logger.warning("could not release the reservation of %s", request_id, exc_info=True)
            raise

    async def _refuse(self, error: ChatError) -> None:
        """A turn refused before its reply began: the lease is given back before the page hears why, as
        at a reply's end, so a turn sent the moment the error arrives is not refused as in progress."""
        await self.lock.release()
        await self._send(protocol.error_frame(error))

    @staticmethod
    def _prompt_ids(engine, plan: services.TurnPlan, max_tokens: int | None) -> list[int]:
        system = plan.system_prompt.text if plan.system_prompt else None
        num_reserved = min(max_tokens or engine.max_model_len, engine.max_model_len // 4)
        prompt_ids, _ = prompting.build_prompt_ids(engine.encode_chat, system, plan.turns,
                                                   max_model_len=engine.max_model_len, num_reserved=num_reserved)
        return prompt_ids

    async def _stream(self, engine, plan: services.TurnPlan, turn: services.Turn, prompt_ids: list[int], params,
                      request_id: str) -> None:
        """Forward the reply's deltas, then save it (whatever ends it) and send done or error."""
        stream = ReplyStream()
        failure: ChatError | None = None
        try:
            if not self.stop_requested:  # a stop that came while the turn was being saved
                self.engine, self.request_id = engine, request_id
                await self._forward(engine, plan, prompt_ids, params, request_id, stream)
        except EXPECTED_ERRORS as exc:  # the engine refused it (queue full) or died mid-reply
            failure = to_chat_error(exc)
        except Exception as exc:
            logger.exception("chat request %s failed", request_id)
            failure = to_chat_error(exc)
        finally:
            self.engine = self.request_id = None
            saved = await self._save_reply(turn, stream, failure)
        if not saved and failure is None:  # never `done` for a reply the page would not show again
            failure = ChatError("reply_not_saved", "The reply could not be saved (a database error); try again.")
        if failure is not None:
            end = protocol.error_frame(failure, message_id=turn.reply.pk)
        else:
            end = protocol.done_frame(message_id=turn.reply.pk, status=stream.status,
                                      finish_reason=stream.finish_reason or "abort", usage=stream.usage())
        # Free before the page hears the end, and the page's frame last: a next turn sent the moment it
        # arrives finds neither this task nor the lease still held.
        await self.lock.release()
        await self.followers.tell_end(protocol.followed(end, content=stream.text))
        await self._send(end)

    async def _save_reply(self, turn: services.Turn, stream: ReplyStream, failure: ChatError | None) -> bool:
        """Store what the reply became (tried twice); False when it could not be, and its row stays pending.

        Shielded: a turn cancelled by a closing socket still stores what it has. A row left pending is
        shown failed once it is stale, and stored so on the conversation's next turn (services.begin_turn).
        """
        return await asyncio.shield(self._save_with_retry(turn, stream, failure))

    async def _save_with_retry(self, turn: services.Turn, stream: ReplyStream, failure: ChatError | None) -> bool:
        status, error = (Message.Status.ERROR, failure.message) if failure else (None, "")
        for attempt in (1, 2):
            if attempt == 2:
                await asyncio.sleep(SAVE_RETRY_DELAY_S)
            try:
                await _db(services.finish_turn)(turn.reply, stream, status=status, error=error)
                return True
            except Exception:  # e.g. the database went away
                logger.exception("could not save reply %s (try %s of 2)", turn.reply.pk, attempt)
        return False

    async def _forward(self, engine, plan: services.TurnPlan, prompt_ids: list[int], params, request_id: str,
                       stream: ReplyStream) -> None:
        tenant = plan.conversation.tenant.engine_key
        aborted = False
        with track_request(request_id, tenant=tenant, profile=plan.profile.name, source="chat", prompt=plan.turns,
                           extra={"conversation_id": self.conversation_id}) as recorder:
            async for delta in engine.generate(request_id, prompt_ids, params, tenant=tenant):
                recorder.on_delta(delta)
                stream.take(delta)
                if delta.text:
                    frame = protocol.delta_frame(delta.text)
                    await self._send(frame)
                    await self.followers.tell_delta(frame, delta.text)
                if self.stop_requested and not delta.finished and not aborted:
                    aborted = True  # the stop came before the engine had the request: abort it now
                    engine.abort(request_id)
