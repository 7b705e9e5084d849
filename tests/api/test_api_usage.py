"""Usage rows of /v1 calls, what the console shows of them, and keys stored only as hashes."""
import datetime
import hashlib

from django.apps import apps
from django.urls import reverse
from django.utils import timezone

from api import selectors as api_selectors
from api import services as api_services
from api.models import ApiKey, ApiUsage
from chat import history
from governance import ledger
from governance.models import UsageRecord
from tenants import services
from tenants.models import Membership

CHAT = {"model": "terse", "messages": [{"role": "user", "content": "Hi"}]}


def test_every_call_is_a_usage_row(api, tenant, make_key, fake_engine):
    key, plaintext = make_key(tenant, "wiki bot")
    fake_engine.num_cached_tokens = 7
    body = api.post("chat/completions", CHAT, plaintext).json()
    api.post("chat/completions", {**CHAT, "model": "nope"}, plaintext)
    api.get("models", plaintext)
    ok, missing, models = ApiUsage.objects.order_by("id")
    assert (ok.tenant, ok.api_key, ok.profile.name, ok.endpoint, ok.model, ok.request_id) == (
        tenant, key, "terse", "chat.completions", "terse", body["id"])
    assert (ok.status_code, ok.finish_reason, ok.stream) == (200, "length", False)
    assert (ok.num_prompt_tokens, ok.num_cached_tokens, ok.num_output_tokens) == (
        body["usage"]["prompt_tokens"], 7, body["usage"]["completion_tokens"])
    assert ok.latency_ms is not None and ok.time_to_first_token_ms is not None
    assert (missing.status_code, missing.error_code, missing.num_prompt_tokens) == (404, "model_not_found", 0)
    assert (models.endpoint, models.status_code) == ("models", 200)
    recorded = UsageRecord.objects.filter(source="api").order_by("id")  # the ledger has the calls that ran a profile
    assert [(r.request_id, r.status_code, r.num_total_tokens) for r in recorded][:2] == [
        (ok.request_id, 200, ok.num_total_tokens), (missing.request_id, 404, 0)]


def test_plaintext_keys_are_never_stored(api, tenant, make_key, fake_engine):
    key, plaintext = make_key(tenant)
    api.post("chat/completions", CHAT, plaintext)
    api_services.revoke_api_key(key)
    api.post("chat/completions", CHAT, plaintext)
    assert ApiKey.objects.get(pk=key.pk).hashed_key == hashlib.sha256(plaintext.encode()).hexdigest()
    secret_part = plaintext[len(key.prefix):]  # the prefix is shown in lists on purpose
    for model in apps.get_models():
        for row in model.objects.all():
            for field in model._meta.concrete_fields:
                assert secret_part not in str(getattr(row, field.attname)), (model, field.name)


def _usage(tenant, key, **fields):
    """An ApiUsage row and its ledger row, as api.calls.ApiCall writes them (the console reads the ledger)."""
    usage = api_services.record_api_usage(key, endpoint="chat.completions", status_code=fields.pop("status_code", 200),
                                          **fields)
    ledger.record_api_call(usage, key)
    return usage


def test_usage_overview_adds_api_calls_to_chat_replies(tenant, other_tenant, make_key, make_user):
    key = make_key(tenant, "bot")[0]
    _usage(tenant, key, num_prompt_tokens=10, num_cached_tokens=4, num_output_tokens=5, latency_ms=100)
    _usage(tenant, key, status_code=429)
    old = _usage(tenant, key, num_prompt_tokens=100, num_output_tokens=1)
    ApiUsage.objects.filter(pk=old.pk).update(created_at=timezone.now() - datetime.timedelta(days=1))
    _usage(other_tenant, make_key(other_tenant)[0], num_prompt_tokens=1000)
    member = make_user("bob")
    services.add_member(tenant, member)
    conversation = history.create_conversation(tenant, member)
    reply = history.create_pending_reply(conversation, profile=None, system_prompt=None)
    history.finish_reply(reply, content="x", status="complete", num_prompt_tokens=20, num_output_tokens=3)

    api_days = api_selectors.api_usage_by_day(tenant, days=2)
    assert api_days[-1] | {"day": None} == {"day": None, "num_requests": 2, "num_errors": 1, "prompt_tokens": 10,
                                            "cached_tokens": 4, "output_tokens": 5, "total_tokens": 15}
    assert api_days[0]["total_tokens"] == 101
    (by_key,) = api_selectors.api_usage_by_key(tenant, days=2)
    assert (by_key["key"], by_key["num_requests"], by_key["num_errors"], by_key["total_tokens"]) == (key, 3, 1, 116)


def test_console_shows_api_usage(client, tenant, make_key, make_user):
    key = make_key(tenant, "wiki bot")[0]
    _usage(tenant, key, num_prompt_tokens=1234, num_output_tokens=1, latency_ms=50)
    admin = make_user("ann")
    services.add_member(tenant, admin, role=Membership.Role.ADMIN)
    client.force_login(admin)
    page = client.get(reverse("console:tenant", args=[tenant.slug])).content.decode()
    assert "API requests" in page and "API usage by key" in page and "wiki bot" in page and "1,235" in page
