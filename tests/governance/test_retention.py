"""Retention: apply_retention deletes exactly the conversations whose last activity is older than their
tenant's period, keeps their usage, and audits every run. An employee exports and erases their own
conversations, and reaches nobody else's."""
import datetime
import json

from chat import history
from django.core.management import call_command
from django.utils import timezone

from governance import retention
from governance.models import UsageRecord
from governance_testing import chat_turn
from tenants import services
from chat.models import Conversation, Message
from tenants.models import AuditLog


def _aged(conversation, days: float, now):
    """Move the conversation and its messages `days` into the past."""
    at = now - datetime.timedelta(days=days)
    Conversation.objects.filter(pk=conversation.pk).update(created_at=at, updated_at=at)
    Message.objects.filter(conversation=conversation).update(created_at=at)
    return conversation


def test_apply_retention_deletes_exactly_what_is_older_than_the_period(tenant, other_tenant, make_member, capsys):
    bob, eve = make_member(tenant, "bob"), make_member(other_tenant, "eve")
    now = timezone.now()
    retention.set_retention(tenant, 30)
    convs = {}
    for name, days in [("old", 45), ("just_over", 30.01), ("just_under", 29.99), ("new", 1)]:
        convs[name] = history.create_conversation(tenant, bob)
        chat_turn(bob, convs[name], prompt_tokens=5, output_tokens=5)
        _aged(convs[name], days, now)
    empty_old = _aged(history.create_conversation(tenant, bob), 40, now)  # no messages: its creation counts
    revived = history.create_conversation(tenant, bob)
    chat_turn(bob, revived, prompt_tokens=5, output_tokens=5)
    _aged(revived, 90, now)
    chat_turn(bob, revived, prompt_tokens=5, output_tokens=5)  # started long ago, used today: kept
    no_policy = _aged(history.create_conversation(other_tenant, eve), 400, now)
    ledger_before = UsageRecord.objects.count()

    call_command("apply_retention")

    left = set(Conversation.objects.values_list("pk", flat=True))
    assert left == {convs["just_under"].pk, convs["new"].pk, revived.pk, no_policy.pk}
    assert empty_old.pk not in left
    assert "acme: deleted 3 conversation(s) older than 30 days" in capsys.readouterr().out
    assert UsageRecord.objects.count() == ledger_before  # usage outlives them
    entry = AuditLog.objects.get(action="retention.apply")
    assert entry.tenant == tenant and entry.after["deleted_conversations"] == 3
    assert AuditLog.objects.get(action="retention.run").after == {"tenants": 1, "deleted_conversations": 3}

    call_command("apply_retention")  # nothing left to delete: still audited
    assert AuditLog.objects.filter(action="retention.run").count() == 2


def test_dry_run_deletes_nothing(tenant, make_member):
    bob = make_member(tenant, "bob")
    retention.set_retention(tenant, 7)
    _aged(history.create_conversation(tenant, bob), 8, timezone.now())
    (result,) = retention.apply_retention(dry_run=True)
    assert result.num_conversations == 1 and Conversation.objects.count() == 1


def test_console_sets_the_retention_period(client, tenant, make_member):
    from tenants.models import Membership

    client.force_login(make_member(tenant, "ann", role=Membership.Role.ADMIN))
    assert client.post("/console/acme/retention/", {"retention_days": "90"}).status_code == 302
    assert tenant.retention_policy.retention_days == 90
    client.post("/console/acme/retention/", {"retention_days": "0"})  # refused
    tenant.refresh_from_db()
    assert tenant.retention_policy.retention_days == 90
    client.post("/console/acme/retention/", {"retention_days": ""})  # removed
    assert not type(tenant.retention_policy).objects.filter(tenant=tenant).exists()


def test_an_employee_exports_their_own_conversations_only(client, tenant, other_tenant, make_member):
    bob, eve = make_member(tenant, "bob"), make_member(tenant, "eve")
    services.add_member(other_tenant, bob)
    mine = [history.create_conversation(tenant, bob), history.create_conversation(other_tenant, bob)]
    chat_turn(bob, mine[0], prompt_tokens=3, output_tokens=3, content="회의 요약해 줘")
    theirs = history.create_conversation(tenant, eve)
    chat_turn(eve, theirs, prompt_tokens=3, output_tokens=3, content="eve's secret")

    client.force_login(bob)
    response = client.get("/chat/export.json")
    assert response.status_code == 200 and "attachment" in response["Content-Disposition"]
    data = json.loads(response.content)
    assert data["user"] == "bob"
    assert [c["id"] for c in data["conversations"]] == [c.pk for c in mine]
    assert [c["tenant"] for c in data["conversations"]] == ["acme", "globex"]
    assert [m["content"] for m in data["conversations"][0]["messages"]][0] == "회의 요약해 줘"
    assert "eve's secret" not in response.content.decode()
    one = client.get(f"/chat/{mine[0].pk}/export.json")
    assert one.status_code == 200 and len(json.loads(one.content)["conversations"]) == 1
    assert client.get(f"/chat/{theirs.pk}/export.json").status_code == 404
    assert client.get("/chat/999999/export.json").status_code == 404
    client.logout()
    assert client.get("/chat/export.json").status_code == 302  # to the login page


def test_an_employee_deletes_all_their_conversations_after_confirming(client, tenant, make_member):
    bob, eve = make_member(tenant, "bob"), make_member(tenant, "eve")
    for _ in range(3):
        chat_turn(bob, history.create_conversation(tenant, bob), prompt_tokens=3, output_tokens=3)
    theirs = history.create_conversation(tenant, eve)
    client.force_login(bob)
    assert "3 conversation(s)" in client.get("/chat/delete-all/").content.decode()
    assert client.post("/chat/delete-all/", {"confirm": "yes"}).status_code == 400
    assert Conversation.objects.filter(user=bob).count() == 3
    assert client.post("/chat/delete-all/", {"confirm": "DELETE"}).status_code == 302
    assert not Conversation.objects.filter(user=bob).exists()
    assert Conversation.objects.filter(pk=theirs.pk).exists()
    assert UsageRecord.objects.filter(username="bob").count() == 3
    assert AuditLog.objects.get(action="conversation.delete_all").after == {"deleted_conversations": 3}
