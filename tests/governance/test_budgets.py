"""Budgets: which apply, spend = ledger + live reservations, refusal once spent (saying when it resets),
the 80% warning, and the console/CLI that set them. The burst tests against live servers are in
test_budgets_live.py."""
import datetime

import pytest
from chat import history
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.utils import timezone

from governance import budgets, services
from governance.models import Budget, BudgetReservation, UsageRecord
from governance.periods import period_bounds
from governance_testing import chat_turn
from api import services as api_services
from tenants.models import AuditLog, Membership


def test_a_spent_member_budget_refuses_with_the_reset_time(tenant, make_member):
    bob, carol = make_member(tenant, "bob"), make_member(tenant, "carol")
    services.set_budget(tenant, scope=Budget.Scope.MEMBER, period="day", source="chat", max_tokens=100)
    conversation = history.create_conversation(tenant, bob)
    assert budgets.reserve_chat(bob, tenant, "r1", 50) is None
    chat_turn(bob, conversation, prompt_tokens=60, output_tokens=30)  # its own request id: r1 stays reserved
    with pytest.raises(budgets.QuotaExceeded) as refused:
        budgets.reserve_chat(bob, tenant, "r2", 10)  # 90 used + 50 reserved
    _, midnight = period_bounds("day")
    assert refused.value.resets_at == midnight
    assert "daily chat budget of 100 tokens is used up" in refused.value.message
    assert midnight.strftime("%Y-%m-%d %H:%M") in refused.value.message
    assert budgets.reserve_chat(carol, tenant, "r3", 10) is None  # each employee on their own
    budgets.release("r1")
    warning = budgets.reserve_chat(bob, tenant, "r4", 10)  # 90 of 100: let in, with the warning
    assert warning is not None and warning.num_used_tokens == 90
    assert budgets.warning_fields(warning)["message"].endswith(f"resets at {warning.resets_text()}.")


def test_one_employees_budget_replaces_the_each_employee_one(tenant, make_member):
    bob = make_member(tenant, "bob")
    services.set_budget(tenant, scope=Budget.Scope.MEMBER, period="day", source="chat", max_tokens=10)
    services.set_budget(tenant, scope=Budget.Scope.USER, user=bob, period="day", source="chat", max_tokens=1000)
    chat_turn(bob, history.create_conversation(tenant, bob), prompt_tokens=20, output_tokens=0)
    assert budgets.reserve_chat(bob, tenant, "r1", 5) is None


def test_tenant_budgets_count_chat_and_api_as_set(tenant, make_member):
    bob = make_member(tenant, "bob")
    key, _ = api_services.create_api_key(tenant, "tool")
    services.set_budget(tenant, period="month", source="api", max_tokens=50)
    chat_turn(bob, history.create_conversation(tenant, bob), prompt_tokens=500, output_tokens=0)
    assert budgets.reserve_api(key, "a1", 10) is None  # chat does not count against an API budget
    services.set_budget(tenant, period="month", source="all", max_tokens=400)
    with pytest.raises(budgets.QuotaExceeded, match="monthly budget of 400"):
        budgets.reserve_api(key, "a2", 10)
    with pytest.raises(budgets.QuotaExceeded):
        budgets.reserve_chat(bob, tenant, "c1", 10)


def test_spend_counts_this_period_and_live_reservations_only(tenant, make_member, settings):
    bob = make_member(tenant, "bob")
    budget = services.set_budget(tenant, period="day", source="chat", max_tokens=100)
    chat_turn(bob, history.create_conversation(tenant, bob), prompt_tokens=40, output_tokens=0)
    UsageRecord.objects.update(created_at=timezone.now() - datetime.timedelta(days=2))  # an earlier day
    budgets.reserve_chat(bob, tenant, "live", 30)
    settings.PAGODA_CHAT_STALE_REPLY_SECONDS = 60
    BudgetReservation.objects.create(tenant_id=tenant.pk, user_id=bob.pk, source="chat", request_id="dead",
                                     num_tokens=500, created_at=timezone.now() - datetime.timedelta(minutes=5))
    assert budgets.status(budget).num_used_tokens == 30


def test_spend_is_read_in_one_statement(tenant, make_member, django_assert_num_queries):
    """The ledger and the reservations are summed in one snapshot: read in two statements, a request
    finishing between them (ledger row written, reservation deleted, one transaction) counted in neither,
    and a PostgreSQL burst let one request more in than the budget allowed."""
    bob = make_member(tenant, "bob")
    budget = services.set_budget(tenant, period="day", source="chat", max_tokens=100)
    chat_turn(bob, history.create_conversation(tenant, bob), prompt_tokens=40, output_tokens=5)
    budgets.reserve_chat(bob, tenant, "live", 30)
    with django_assert_num_queries(1):
        assert budgets.status(budget).num_used_tokens == 75


def test_budget_settings_are_validated_and_audited(tenant, other_tenant, make_member):
    bob = make_member(tenant, "bob")
    outsider = make_member(other_tenant, "eve")
    with pytest.raises(ValidationError):
        services.set_budget(tenant, scope=Budget.Scope.USER, user=outsider, period="day", max_tokens=5)
    with pytest.raises(ValidationError):  # a one-employee budget names its employee
        services.set_budget(tenant, scope=Budget.Scope.USER, user=None, period="day", source="api", max_tokens=5)
    budget = services.set_budget(tenant, scope=Budget.Scope.USER, user=bob, period="day", source="chat", max_tokens=5)
    services.set_budget(tenant, scope=Budget.Scope.USER, user=bob, period="day", source="chat", max_tokens=7)
    assert Budget.objects.get(pk=budget.pk).max_tokens == 7 and Budget.objects.count() == 1
    assert list(AuditLog.objects.filter(tenant=tenant, action="budget.set").values_list("after__max_tokens", flat=True)
                .order_by("id")) == [5, 7]


def test_set_budget_command(tenant, make_member, capsys):
    make_member(tenant, "bob")
    call_command("set_budget", tenant="acme", period="day", tokens=500, source="chat", each_member=True)
    call_command("set_budget", tenant="acme", period="month", tokens=9000, user="bob", source="chat")
    assert set(Budget.objects.values_list("scope", "max_tokens")) == {("member", 500), ("user", 9000)}
    call_command("set_budget", tenant="acme", period="day", source="chat", each_member=True, remove=True)
    assert Budget.objects.count() == 1


def test_console_budgets_page_sets_budgets_and_shows_spend(client, tenant, other_tenant, make_member):
    admin = make_member(tenant, "ann", role=Membership.Role.ADMIN)
    bob = make_member(tenant, "bob")
    chat_turn(bob, history.create_conversation(tenant, bob), prompt_tokens=30, output_tokens=12)
    client.force_login(admin)
    response = client.post("/console/acme/budgets/", {"scope": "member", "period": "day", "source": "chat",
                                                      "max_tokens": "50"})
    assert response.status_code == 302
    page = client.get("/console/acme/budgets/").content.decode()
    assert "42" in page and "84%" in page  # bob's 42 of 50
    assert client.get("/console/acme/").status_code == 200
    bad = client.post("/console/acme/budgets/", {"scope": "user", "period": "day", "source": "chat",
                                                 "max_tokens": "50"})
    assert bad.status_code == 400  # no employee picked
    assert client.get("/console/globex/budgets/").status_code == 404
    client.force_login(bob)
    assert client.get("/console/acme/budgets/").status_code == 404
