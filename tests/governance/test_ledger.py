"""The usage ledger: one row per chat reply and per API call, kept when conversations go; the console's
numbers and the monthly CSV come from it."""
import csv
import datetime
import io

import pytest
from chat import history
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from chat import services as chat_services
from governance import ledger, selectors, usage_csv
from governance.models import UsageRecord
from governance.models.ledger import AppendOnlyError
from governance_testing import chat_turn
from api import services as api_services
from chat.models import Conversation


def _ledger_sum(tenant) -> int:
    return sum(r.num_total_tokens for r in UsageRecord.objects.filter(tenant_id=tenant.pk))


def test_usage_totals_equal_the_ledger_after_conversations_are_deleted(tenant, other_tenant, make_member):
    bob, eve = make_member(tenant, "bob"), make_member(other_tenant, "eve")
    first, second = history.create_conversation(tenant, bob), history.create_conversation(tenant, bob)
    for conversation, (p, o) in [(first, (10, 5)), (first, (20, 7)), (second, (30, 9))]:
        chat_turn(bob, conversation, prompt_tokens=p, output_tokens=o)
    chat_turn(eve, history.create_conversation(other_tenant, eve), prompt_tokens=1000, output_tokens=1)
    key, _ = api_services.create_api_key(tenant, "tool")
    usage = api_services.record_api_usage(key, endpoint="chat.completions", status_code=200, request_id="chatcmpl-1",
                                      num_prompt_tokens=40, num_cached_tokens=16, num_output_tokens=4)
    ledger.record_api_call(usage, key)

    assert chat_services.delete_conversation(bob, first.pk)
    assert chat_services.delete_conversation(bob, second.pk)
    assert not Conversation.objects.filter(tenant=tenant).exists()

    today = selectors.usage_overview(tenant, days=2)[-1]
    assert today["num_replies"] == 3 and today["num_api_requests"] == 1
    assert today["prompt_tokens"] == 10 + 20 + 30 + 40 and today["output_tokens"] == 5 + 7 + 9 + 4
    assert today["total_tokens"] == _ledger_sum(tenant) == 125 and today["api_tokens"] == 44
    assert today["cached_tokens"] == 16
    (by_key,) = selectors.api_usage_by_key(tenant, days=2)
    assert by_key["key"] == key and by_key["total_tokens"] == 44
    key.delete()  # a deleted key's calls stay counted, under the name it had
    (by_key,) = selectors.api_usage_by_key(tenant, days=2)
    assert by_key["key"] is None and by_key["key_name"] == "tool" and by_key["total_tokens"] == 44


def test_a_reply_finished_after_its_conversation_was_deleted_is_still_in_the_ledger(tenant, make_member):
    bob = make_member(tenant, "bob")
    conversation = history.create_conversation(tenant, bob)
    plan = chat_services.plan_turn(bob, conversation.pk, content="hi", profile_name=None)
    turn = chat_services.begin_turn(plan, "chat-gone-1")
    conversation_id = conversation.pk
    conversation.delete()  # the employee deletes it mid-reply
    from chat.replies import ReplyStream
    from inference.outputs import StreamDelta

    stream = ReplyStream()
    stream.take(StreamDelta("chat-gone-1", "x", [5, 6], True, "stop", 12, 0, 2))
    assert chat_services.finish_turn(turn.reply, stream) is None
    row = UsageRecord.objects.get(request_id="chat-gone-1")
    assert (row.num_prompt_tokens, row.num_output_tokens, row.username, row.conversation_id) == (12, 2, "bob",
                                                                                                  conversation_id)
    assert chat_services.finish_turn(turn.reply, stream) is None  # a retried save does not count it twice
    assert UsageRecord.objects.filter(request_id="chat-gone-1").count() == 1


def test_ledger_rows_are_append_only(tenant, make_member):
    bob = make_member(tenant, "bob")
    chat_turn(bob, history.create_conversation(tenant, bob), prompt_tokens=3, output_tokens=2)
    row = UsageRecord.objects.get()
    row.num_output_tokens = 0
    with pytest.raises(AppendOnlyError):
        row.save()
    with pytest.raises(AppendOnlyError):
        row.delete()
    assert UsageRecord.objects.get().num_output_tokens == 2


def test_monthly_csv_holds_exactly_that_months_rows(tenant, other_tenant, make_member, tmp_path):
    bob, eve = make_member(tenant, "bob"), make_member(other_tenant, "eve")
    for _ in range(3):
        chat_turn(bob, history.create_conversation(tenant, bob), prompt_tokens=10, output_tokens=5)
    chat_turn(eve, history.create_conversation(other_tenant, eve), prompt_tokens=7, output_tokens=7)
    last_month = timezone.now().replace(day=1) - datetime.timedelta(days=3)
    UsageRecord.objects.filter(pk=UsageRecord.objects.filter(tenant_id=tenant.pk).first().pk).update(
        created_at=last_month)
    month = timezone.localdate().strftime("%Y-%m")

    out = tmp_path / "usage.csv"
    call_command("export_usage", tenant="acme", month=month, output=str(out))
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert len(rows) == 2 and {r["username"] for r in rows} == {"bob"} and {r["tenant"] for r in rows} == {"acme"}
    assert sum(int(r["total_tokens"]) for r in rows) == 30
    earlier = io.StringIO()
    assert usage_csv.write_month(earlier, tenant.pk, timezone.localtime(last_month).strftime("%Y-%m")) == 1

    with pytest.raises(CommandError, match="YYYY-MM"):
        call_command("export_usage", tenant="acme", month="2026-13")
    with pytest.raises(CommandError, match="No tenant"):
        call_command("export_usage", tenant="nope", month=month)


def test_console_csv_export_is_for_that_tenants_admins_only(client, tenant, other_tenant, make_member):
    from tenants.models import Membership

    admin = make_member(tenant, "ann", role=Membership.Role.ADMIN)
    chat_turn(admin, history.create_conversation(tenant, admin), prompt_tokens=4, output_tokens=4)
    client.force_login(admin)
    response = client.get("/console/acme/usage.csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert response.content.decode().count("\n") == 2  # header + one reply
    assert client.get("/console/acme/usage.csv?month=soon").status_code == 400
    key, _ = api_services.create_api_key(tenant, "=HYPERLINK(1)")
    ledger.record_api_call(api_services.record_api_usage(key, endpoint="completions", status_code=200), key)
    assert "'=HYPERLINK(1)" in client.get("/console/acme/usage.csv").content.decode()  # never a formula
    assert client.get("/console/globex/usage.csv").status_code == 404
