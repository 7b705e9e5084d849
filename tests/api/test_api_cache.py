"""What an API call reads from this process's caches (pagoda.ttl_cache): keys, profiles, system
prompts, whether a tenant has API budgets. A change made in this process takes effect on the next
call; one made behind its back (another process: here a queryset update, which sends no signal)
takes effect once the entry is PAGODA_API_CACHE_SECONDS old."""
import pytest
from django.utils import timezone

from api import auth
from api import services as api_services
from api.models import ApiKey
from governance import services as governance_services
from governance.models import Budget
from pagoda import ttl_cache
from tenants import services
from tenants.models import SamplingProfile, Tenant

CHAT = {"model": "terse", "messages": [{"role": "user", "content": "Hi"}]}


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# --- the cache itself ---
def test_entries_expire_after_their_ttl():
    clock = Clock()
    cache = ttl_cache.TTLCache("test", ttl=5.0, clock=clock)
    cache.put("a", 1, cache.generation())
    clock.now += 4.9
    assert cache.get("a") == 1
    clock.now += 0.2
    assert ttl_cache.missing(cache.get("a"))
    assert cache.load("a", lambda: 2) == 2 and cache.get("a") == 2


def test_a_load_that_began_before_a_clear_is_not_stored():
    cache = ttl_cache.TTLCache("test", ttl=5.0)
    generation = cache.generation()  # a reader starts loading ...
    ttl_cache.clear_all()  # ... a change is saved meanwhile ...
    cache.put("a", "stale", generation)  # ... and the reader's (older) value must not stick
    assert ttl_cache.missing(cache.get("a"))


def test_a_zero_ttl_keeps_nothing(settings):
    settings.PAGODA_API_CACHE_SECONDS = 0
    cache = ttl_cache.TTLCache("test")
    cache.put("a", 1, cache.generation())
    assert ttl_cache.missing(cache.get("a"))


def test_the_oldest_entries_go_first_when_full():
    cache = ttl_cache.TTLCache("test", ttl=5.0, max_entries=10)
    for i in range(11):
        cache.put(i, i, cache.generation())
    assert ttl_cache.missing(cache.get(0)) and cache.get(10) == 10


# --- keys ---
def test_a_key_revoked_here_is_refused_at_once(api, tenant, make_key, fake_engine):
    key, plaintext = make_key(tenant)
    assert api.post("chat/completions", CHAT, plaintext).status_code == 200
    api_services.revoke_api_key(key)
    refused = api.post("chat/completions", CHAT, plaintext)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "api_key_revoked"


def test_a_tenant_deactivated_here_is_refused_at_once(api, tenant, make_key, fake_engine):
    plaintext = make_key(tenant)[1]
    assert api.post("chat/completions", CHAT, plaintext).status_code == 200
    services.update_tenant(tenant, is_active=False)
    refused = api.post("chat/completions", CHAT, plaintext)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "tenant_inactive"


@pytest.mark.parametrize("change", ["revoke", "deactivate"])
def test_a_change_behind_the_process_back_is_seen_within_the_bound(api, tenant, make_key, fake_engine, settings,
                                                                   monkeypatch, change):
    settings.PAGODA_API_CACHE_SECONDS = 5
    clock = Clock()
    monkeypatch.setattr(auth._KEYS, "clock", clock)
    key, plaintext = make_key(tenant)
    assert api.post("chat/completions", CHAT, plaintext).status_code == 200  # the key is now cached
    if change == "revoke":  # as another process does it: no signal reaches this one
        ApiKey.objects.filter(pk=key.pk).update(revoked_at=timezone.now())
    else:
        Tenant.objects.filter(pk=tenant.pk).update(is_active=False)
    clock.now += 4.0
    assert api.post("chat/completions", CHAT, plaintext).status_code == 200  # within the bound: still served
    clock.now += 1.0
    assert api.post("chat/completions", CHAT, plaintext).status_code == 403  # past it: refused


def test_without_caching_every_call_reads_the_key(api, tenant, make_key, fake_engine, settings):
    settings.PAGODA_API_CACHE_SECONDS = 0
    key, plaintext = make_key(tenant)
    assert api.post("chat/completions", CHAT, plaintext).status_code == 200
    ApiKey.objects.filter(pk=key.pk).update(revoked_at=timezone.now())
    assert api.post("chat/completions", CHAT, plaintext).status_code == 403


# --- profiles, system prompts, budgets ---
def test_a_changed_profile_applies_to_the_next_call(api, tenant, key, fake_engine):
    api.post("chat/completions", CHAT, key)
    profile = SamplingProfile.objects.get(tenant=tenant, name="terse")
    profile.max_tokens = 3
    services.save_profile(profile)
    api.post("chat/completions", CHAT, key)
    assert [r["params"].max_tokens for r in fake_engine.requests] == [5, 3]


def test_a_new_or_removed_system_prompt_applies_to_the_next_call(api, tenant, key, fake_engine):
    api.post("chat/completions", CHAT, key)
    services.create_system_prompt(tenant, "Be brief.")
    api.post("chat/completions", CHAT, key)
    services.deactivate_system_prompt(tenant)
    api.post("chat/completions", CHAT, key)
    texts = [fake_engine.tokenizer.decode(r["prompt_token_ids"]) for r in fake_engine.requests]
    assert ["Be brief." in t for t in texts] == [False, True, False]


def test_a_budget_set_here_applies_to_the_next_call(api, tenant, key, fake_engine):
    assert api.post("chat/completions", CHAT, key).status_code == 200  # no budget: nothing reserved
    governance_services.set_budget(tenant, period=Budget.Period.DAY, source=Budget.Source.API, max_tokens=1)
    refused = api.post("chat/completions", CHAT, key)  # the first call's tokens spent it
    assert refused.status_code == 429


# --- a database outage ---
@pytest.mark.django_db
def test_a_usage_row_lost_to_the_database_empties_the_cache(monkeypatch):
    """Calls served from the cache during an outage would lose their usage rows: the first row that
    cannot be written empties every cache, so the next call reads the database (and gets its 503)."""
    import asyncio

    from django.db import OperationalError

    from api.calls import ApiCall

    tenant = Tenant.objects.create(slug="outage", name="Outage")
    key, _ = api_services.create_api_key(tenant, "bot")
    cache = ttl_cache.TTLCache("test", ttl=60.0)
    cache.put("a", 1, cache.generation())

    def database_gone(*args, **kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(api_services, "record_api_usage", database_gone)
    asyncio.run(ApiCall(key=key, endpoint="chat", model="chat")._write())
    assert ttl_cache.missing(cache.get("a"))
    # a bad query is a bug, not an outage: it leaves the cache alone
    cache.put("a", 1, cache.generation())
    monkeypatch.setattr(api_services, "record_api_usage", lambda *a, **k: 1 / 0)
    asyncio.run(ApiCall(key=key, endpoint="chat", model="chat")._write())
    assert cache.get("a") == 1
