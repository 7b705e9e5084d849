"""Offboarding reaches open sockets, on the real ASGI stack (no model needed): a logout, deactivation,
a password change, removal from the tenant and tenant deactivation close the user's sockets with an
error frame first; an unrelated socket stays open; and a turn re-checks the session even when no
announcement came (a session deleted straight in the database)."""
import asyncio
import time

import pytest
from chat import history
from django.contrib.sessions.models import Session
from django.test import Client

from chat_testing import chat_socket, db, next_frame, send
from tenants import accounts, services
from chat.models import Message
from tenants.models import Membership

pytestmark = pytest.mark.django_db(transaction=True)

CLOSE_WITHIN_S = 5.0


async def _expect_closed_with_frame(communicator, close_code: int, error_code: str) -> float:
    """The error frame, then the close; returns how long they took."""
    started = time.monotonic()
    frame = await next_frame(communicator, timeout=CLOSE_WITHIN_S)
    assert frame["type"] == "error" and frame["code"] == error_code and frame["message"], frame
    assert await communicator.receive_output(timeout=CLOSE_WITHIN_S) == {"type": "websocket.close", "code": close_code}
    return time.monotonic() - started


async def _expect_no_reply(communicator) -> None:
    await send(communicator, {"type": "user_message", "content": "still there?"})
    assert await communicator.receive_nothing(timeout=0.5)


async def _expect_open(communicator) -> None:
    """Still served: a bad frame gets its error frame."""
    await send(communicator, "{broken")
    assert (await next_frame(communicator, timeout=10))["code"] == "invalid_json"


def _logged_in_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


async def test_logout_closes_that_sessions_sockets_only(conversation, member):
    laptop, phone = await db(_logged_in_client)(member), await db(_logged_in_client)(member)
    async with chat_socket(conversation.pk, laptop.cookies["sessionid"].value) as (on_laptop, _), \
            chat_socket(conversation.pk, phone.cookies["sessionid"].value) as (on_phone, _):
        response = await db(lambda: laptop.post("/accounts/logout/"))()
        assert response.status_code == 302
        await _expect_closed_with_frame(on_laptop, 4401, "signed_out")
        await _expect_no_reply(on_laptop)
        await _expect_open(on_phone)  # logging out of one device leaves the other logged in


async def test_deactivation_closes_every_socket_and_ends_the_sessions(conversation, member, session_key):
    keys = [await db(session_key)(member), await db(session_key)(member)]
    async with chat_socket(conversation.pk, keys[0]) as (first, _), chat_socket(conversation.pk, keys[1]) as (second, _):
        def deactivate():
            member.is_active = False
            member.save()

        await db(deactivate)()
        for communicator in (first, second):
            await _expect_closed_with_frame(communicator, 4401, "signed_out")
        await _expect_no_reply(first)
    assert not await db(lambda: Session.objects.filter(session_key__in=keys).exists())()


async def test_a_password_change_closes_the_users_sockets(conversation, member, session_key):
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        def change_password():
            member.set_password("a new one, 2 words")
            member.save()

        await db(change_password)()
        await _expect_closed_with_frame(communicator, 4401, "signed_out")
        await _expect_no_reply(communicator)


async def test_removal_from_the_tenant_closes_only_that_tenants_sockets(conversation, member, other_tenant,
                                                                        session_key):
    await db(lambda: services.add_member(other_tenant, member))()
    elsewhere = await db(lambda: history.create_conversation(other_tenant, member))()
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (removed, _), chat_socket(elsewhere.pk, key) as (kept, _):
        await db(lambda: services.remove_member(Membership.objects.get(user=member, tenant=conversation.tenant)))()
        await _expect_closed_with_frame(removed, 4403, "access_revoked")
        await _expect_no_reply(removed)
        await _expect_open(kept)


async def test_tenant_deactivation_closes_its_members_sockets(conversation, member, tenant, make_user, session_key):
    colleague = await db(make_user)("cole", tenant)
    theirs = await db(lambda: history.create_conversation(tenant, colleague))()
    keys = await db(session_key)(member), await db(session_key)(colleague)
    async with chat_socket(conversation.pk, keys[0]) as (mine, _), chat_socket(theirs.pk, keys[1]) as (colleagues, _):
        await db(lambda: services.update_tenant(tenant, is_active=False))()
        for communicator in (mine, colleagues):
            await _expect_closed_with_frame(communicator, 4403, "access_revoked")


async def test_another_users_change_leaves_the_socket_open(conversation, member, tenant, make_user, session_key):
    colleague = await db(make_user)("cole", tenant)
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        def deactivate_colleague():
            colleague.is_active = False
            colleague.save()

        await db(deactivate_colleague)()
        await asyncio.sleep(0.3)
        await _expect_open(communicator)


async def test_a_turn_rechecks_the_session_without_any_announcement(conversation, member, session_key):
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        await db(lambda: Session.objects.filter(session_key=key).delete())()  # no signal: a queryset delete
        await send(communicator, {"type": "user_message", "content": "hello"})
        await _expect_closed_with_frame(communicator, 4401, "signed_out")
        await _expect_no_reply(communicator)
    assert await db(Message.objects.count)() == 0


async def test_a_turn_rechecks_an_account_deactivated_without_signals(conversation, member, session_key,
                                                                      django_user_model):
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        await db(lambda: django_user_model.objects.filter(pk=member.pk).update(is_active=False))()
        await send(communicator, {"type": "regenerate"})
        await _expect_closed_with_frame(communicator, 4401, "signed_out")
    assert await db(Message.objects.count)() == 0


def test_end_sessions_deletes_only_that_users_sessions(member, make_user, session_key):
    other = make_user("otto")
    mine, theirs = session_key(member), session_key(other)
    assert accounts.end_sessions(member.pk) == 1
    assert set(Session.objects.values_list("session_key", flat=True)) == {theirs}
    assert mine != theirs


def test_saving_a_login_time_reads_nothing_more(member, django_assert_num_queries):
    from django.utils import timezone

    member.last_login = timezone.now()
    with django_assert_num_queries(1):  # the UPDATE only: no access fields changed, nothing to look up
        member.save(update_fields=["last_login"])


async def test_a_deactivation_while_the_socket_connects_closes_it(conversation, member, session_key, monkeypatch):
    """Regression: the page saw the socket open (accepted) before it had joined its announcement groups,
    and an account deactivated in between stayed connected until its next turn."""
    from chat.consumers import ChatConsumer

    join = ChatConsumer._join_access_groups

    async def deactivated_meanwhile(consumer):
        def deactivate():
            member.is_active = False
            member.save()  # announced now, to groups this socket has not joined yet

        await db(deactivate)()
        await join(consumer)

    monkeypatch.setattr(ChatConsumer, "_join_access_groups", deactivated_meanwhile)
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, connected):
        assert connected
        await _expect_closed_with_frame(communicator, 4401, "signed_out")
