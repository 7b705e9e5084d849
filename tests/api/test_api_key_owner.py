"""API keys owned by an employee (ApiKey.owner), in-process with the fake engine: the owner's budgets
count the key's calls (429 insufficient_quota before a call starts once spent), the ledger names the
owner, a key without an owner counts against tenant budgets only, and the key stops working when its
owner is deactivated or leaves the tenant. The burst test is in tests/governance/test_budgets_live.py."""
import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from api import services as api_services
from api.models import ApiKey
from governance import budgets
from governance import services as governance
from governance.models import Budget, UsageRecord
from tenants import services

CHAT = {"model": "terse", "messages": [{"role": "user", "content": "Hi"}]}


@pytest.fixture
def bob(tenant, make_user):
    user = make_user("bob")
    services.add_member(tenant, user)
    return user


def test_an_owned_keys_calls_count_against_the_owners_budget(api, tenant, bob, fake_engine):
    owned, owned_plaintext = api_services.create_api_key(tenant, "bob's notebook", owner=bob)
    _, tenant_plaintext = api_services.create_api_key(tenant, "wiki bot")
    first = api.post("chat/completions", CHAT, owned_plaintext)
    assert first.status_code == 200
    spent = first.json()["usage"]["total_tokens"]
    row = UsageRecord.objects.get(api_key_id=owned.pk)
    assert (row.user_id, row.username, row.source) == (bob.pk, "bob", "api")
    governance.set_budget(tenant, scope=Budget.Scope.MEMBER, period="day", source="api", max_tokens=spent)
    refused = api.post("chat/completions", CHAT, owned_plaintext)
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == "insufficient_quota" and "Your daily API budget" in error["message"]
    assert "resets at" in error["message"]
    assert api.post("chat/completions", CHAT, tenant_plaintext).status_code == 200  # the tenant's key: no owner


def test_an_all_sources_employee_budget_adds_chat_and_owned_keys(tenant, bob):
    key, _ = api_services.create_api_key(tenant, "bob's key", owner=bob)
    tenant_key, _ = api_services.create_api_key(tenant, "wiki bot")
    budget = governance.set_budget(tenant, scope=Budget.Scope.USER, user=bob, period="month", source="all",
                                   max_tokens=100)
    UsageRecord.objects.create(source="chat", tenant_id=tenant.pk, tenant_slug="acme", user_id=bob.pk,
                               username="bob", status="complete", num_prompt_tokens=60)  # a chat reply
    assert budgets.reserve_api(key, "a1", 30) is None  # 60 of 100 spent: let in
    assert budgets.reserve_chat(bob, tenant, "c1", 20).num_used_tokens == 90  # let in, warned
    assert budgets.status(budget, bob.pk).num_used_tokens == 110
    with pytest.raises(budgets.QuotaExceeded, match="Your monthly budget of 100 tokens"):
        budgets.reserve_api(key, "a2", 1)
    assert budgets.reserve_api(tenant_key, "t1", 5) is None  # not bob's


def test_the_key_stops_when_its_owner_is_offboarded(api, tenant, bob, fake_engine):
    _, plaintext = api_services.create_api_key(tenant, "bob's key", owner=bob)
    assert api.get("models", plaintext).status_code == 200
    bob.is_active = False
    bob.save()
    response = api.get("models", plaintext)
    assert response.status_code == 403 and response.json()["error"]["code"] == "api_key_owner_inactive"
    bob.is_active = True
    bob.save()
    assert api.get("models", plaintext).status_code == 200
    services.remove_member(bob.memberships.get(tenant=tenant))
    assert api.post("chat/completions", CHAT, plaintext).json()["error"]["code"] == "api_key_owner_inactive"


def test_the_owner_must_be_a_member_of_the_keys_tenant(tenant, other_tenant, bob, make_user):
    with pytest.raises(ValidationError, match="not a member of globex"):
        api_services.create_api_key(other_tenant, "stolen", owner=bob)
    key, _ = api_services.create_api_key(tenant, "tool")
    with pytest.raises(ValidationError):
        api_services.update_api_key(key, owner=make_user("eve"))
    api_services.update_api_key(key, owner=bob)
    assert ApiKey.objects.get(pk=key.pk).owner == bob


def test_create_api_key_names_an_owner(tenant, bob, capsys):
    call_command("create_api_key", "acme", "bob's laptop", "--owner", "bob")
    assert ApiKey.objects.get(name="bob's laptop").owner == bob
    with pytest.raises(CommandError, match="No user"):
        call_command("create_api_key", "acme", "x", "--owner", "nobody")


def test_the_admin_sets_an_owner_among_the_tenants_members(tenant, other_tenant, bob, make_user):
    from django.test import Client

    admin = make_user("ann")
    services.add_member(tenant, admin, role="admin")
    outsider = make_user("otto")
    services.add_member(other_tenant, outsider)
    client = Client()
    client.force_login(admin)
    page = client.get("/admin/api/apikey/add/").content.decode()
    assert f'value="{bob.pk}"' in page and "otto" not in page
    form = {"tenant": tenant.pk, "name": "bob's key", "owner": bob.pk, "rpm_limit": "", "tpm_limit": ""}
    assert client.post("/admin/api/apikey/add/", form).status_code == 302
    assert ApiKey.objects.get(name="bob's key").owner == bob
    refused = client.post("/admin/api/apikey/add/", {**form, "name": "otto's", "owner": outsider.pk})
    assert refused.status_code == 200 and not ApiKey.objects.filter(name="otto's").exists()
    root = make_user("root")
    root.is_superuser = root.is_staff = True
    root.save()
    client.force_login(root)
    refused = client.post("/admin/api/apikey/add/", {**form, "name": "otto's", "owner": outsider.pk})
    assert "otto is not a member of acme" in refused.content.decode()
