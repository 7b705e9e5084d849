"""Offboarding from the console's people page (/console/<slug>/people/) reaches open chat sockets like
any other offboarding: deactivating closes every socket of the person and ends their sessions;
removing someone who belongs to another tenant too closes their sockets on this tenant only."""
import time

import pytest
from chat import history
from django.contrib.sessions.models import Session
from django.test import Client

from chat_testing import chat_socket, db, next_frame, send
from tenants import services
from tenants.models import Membership

pytestmark = pytest.mark.django_db(transaction=True)

CLOSE_WITHIN_S = 5.0


async def _closed_with(communicator, close_code: int, error_code: str) -> None:
    started = time.monotonic()
    frame = await next_frame(communicator, timeout=CLOSE_WITHIN_S)
    assert frame["type"] == "error" and frame["code"] == error_code, frame
    assert await communicator.receive_output(timeout=CLOSE_WITHIN_S) == {"type": "websocket.close", "code": close_code}
    assert time.monotonic() - started < CLOSE_WITHIN_S


def _admin_client(tenant, make_user) -> Client:
    admin = make_user("adam")
    services.add_member(tenant, admin, role=Membership.Role.ADMIN)
    client = Client()
    client.force_login(admin)
    return client


def _offboard(client, tenant, user) -> int:
    membership = Membership.objects.get(tenant=tenant, user=user)
    return client.post(f"/console/{tenant.slug}/people/{membership.pk}/offboard/").status_code


async def test_deactivating_from_the_console_closes_the_sockets_and_ends_the_sessions(
        tenant, conversation, member, session_key, make_user):
    client = await db(_admin_client)(tenant, make_user)
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        assert await db(_offboard)(client, tenant, member) == 302
        await _closed_with(communicator, 4401, "signed_out")
    assert not await db(lambda: Session.objects.filter(session_key=key).exists())()


async def test_removing_from_the_console_closes_this_tenants_sockets_only(
        tenant, other_tenant, conversation, member, session_key, make_user):
    client = await db(_admin_client)(tenant, make_user)
    elsewhere = await db(lambda: (services.add_member(other_tenant, member),
                                  history.create_conversation(other_tenant, member))[1])()
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (removed, _), chat_socket(elsewhere.pk, key) as (kept, _):
        assert await db(_offboard)(client, tenant, member) == 302
        await _closed_with(removed, 4403, "access_revoked")
        await send(kept, "{broken")
        assert (await next_frame(kept, timeout=10))["code"] == "invalid_json"  # still served
