"""The start-up path and pinning against the real engine (SmolLM2 on the CPU, loaded once per session)."""
import asyncio

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

import engine_runtime
from tenants import pinning, selectors, services


def test_engine_is_started_once_even_if_asked_twice(engine):
    num_starts = engine_runtime.status()["num_starts"]
    engine_runtime.start()
    engine_runtime.start(background=True)
    assert engine_runtime.get_engine() is engine
    assert engine_runtime.status()["num_starts"] == num_starts
    assert engine_runtime.status()["state"] == "ready" and engine.is_alive()


def test_active_prompts_pinned_by_the_startup_hook(engine, tenant, other_tenant):
    services.create_system_prompt(tenant, "You are Acme's assistant. " * 4)
    services.create_system_prompt(other_tenant, "You are Globex's assistant.")
    services.deactivate_system_prompt(other_tenant)
    pinning.pin_all_active_prompts(engine)  # what engine_runtime runs after building an engine
    pins = engine.pins()
    assert "tenant:acme" in pins and "tenant:globex" not in pins
    prompt = selectors.active_system_prompt(tenant)
    assert pins["tenant:acme"].num_prompt_tokens == prompt.num_tokens == len(engine.encode_system_prefix(prompt.text))
    assert pins["tenant:acme"].tenant == "acme"


def test_pin_on_activate_repin_on_replace_unpin_on_deactivate(engine, tenant, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        v1 = services.create_system_prompt(tenant, "Answer in English. " * 5)
    assert v1.num_tokens == len(engine.encode_system_prefix(v1.text))
    assert engine.pins()["tenant:acme"].num_prompt_tokens == v1.num_tokens

    with django_capture_on_commit_callbacks(execute=True):
        v2 = services.create_system_prompt(tenant, "한국어로 답하세요. " * 10)
    assert engine.pins()["tenant:acme"].num_prompt_tokens == v2.num_tokens != v1.num_tokens
    assert [k for k in engine.pins() if k.startswith("tenant:")] == ["tenant:acme"]

    with django_capture_on_commit_callbacks(execute=True):
        services.rollback_system_prompt(tenant, 1)
    assert engine.pins()["tenant:acme"].num_prompt_tokens == v1.num_tokens

    with django_capture_on_commit_callbacks(execute=True):
        services.deactivate_system_prompt(tenant)
    assert "tenant:acme" not in engine.pins()
    assert pinning.pin_status(tenant)["pinned"] is False


def test_prompt_longer_than_the_context_is_refused_with_the_reason(engine, tenant):
    text = "word " * (engine.max_model_len + 100)
    with pytest.raises(ValidationError) as info:
        services.create_system_prompt(tenant, text)
    message = info.value.message_dict["text"][0]
    assert f"{engine.max_model_len:,} tokens" in message and "context" in message
    assert not tenant.system_prompts.exists()


def test_pin_over_the_cap_is_reported_not_raised(engine, tenant, django_capture_on_commit_callbacks):
    stats = engine.stats()
    # More blocks than the pin cap allows (a fifth of the cache), but within the context length.
    num_words = min(engine.max_model_len - 200, stats["num_blocks_total"] * stats.get("block_size", 16) // 4)
    with django_capture_on_commit_callbacks(execute=True):
        prompt = services.create_system_prompt(tenant, "word " * num_words)
    assert prompt.is_active
    status = pinning.pin_status(tenant)
    assert status["pinned"] is False and "PinCapacityError" in status["error"]


def test_pinned_prefix_is_hit_by_a_chat_request_of_the_same_tenant(engine, tenant, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        prompt = services.create_system_prompt(tenant, "You are a terse assistant for Acme employees. " * 3)
    pinned = engine.pins()["tenant:acme"]
    params = selectors.default_profile(tenant).to_sampling_params(max_tokens=2, temperature=0.0)
    token_ids = engine.encode_chat([{"role": "system", "content": prompt.text}, {"role": "user", "content": "Hi"}])

    async def run() -> list:
        return [out async for out in engine.generate("test-hit", token_ids, params, tenant=tenant.engine_key)]

    outputs = asyncio.run(run())
    assert outputs[-1].finished and outputs[-1].num_cached_tokens >= pinned.num_tokens > 0


def test_profile_validation_uses_the_engines_sampling_params(engine, tenant):
    profile = selectors.profile_by_name(tenant, "coding")
    params = profile.to_sampling_params()
    assert (params.temperature, params.top_p, params.max_tokens) == (0.1, 0.9, 2048)
    with pytest.raises(ValueError, match="top_p"):
        profile.to_sampling_params(top_p=2.0)


def test_console_shows_pin_status_and_live_engine_numbers(engine, client, tenant, tenant_admin,
                                                          django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        services.create_system_prompt(tenant, "You are Acme's helpful assistant. " * 4)
    client.force_login(tenant_admin)
    html = client.get(reverse("console:tenant", args=[tenant.slug])).content.decode()
    assert "pinned (" in html and "KV blocks" in html
    data = client.get(reverse("console:tenant_engine", args=[tenant.slug])).json()
    assert data["engine"]["alive"] and data["stats"]["num_blocks_pinned"] >= data["pin"]["num_blocks"] > 0
    assert data["tenant"]["num_blocks_pinned"] == data["pin"]["num_blocks"]
    assert data["pins"] == {}  # other tenants' pin keys are not shown


def test_console_shows_each_tenants_prefix_cache_hit_rate(engine, client, tenant, other_tenant, tenant_admin,
                                                          superuser, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        prompt = services.create_system_prompt(tenant, "You answer Acme's questions in one line. " * 3)
    params = selectors.default_profile(tenant).to_sampling_params(max_tokens=2, temperature=0.0)
    token_ids = engine.encode_chat([{"role": "system", "content": prompt.text}, {"role": "user", "content": "Hi"}])

    async def run(request_id: str, key: str) -> list:
        return [out async for out in engine.generate(request_id, token_ids, params, tenant=key)]

    hit = asyncio.run(run("rate-acme", tenant.engine_key))[-1]
    asyncio.run(run("rate-globex", other_tenant.engine_key))  # same tokens, another tenant: its own cache
    client.force_login(tenant_admin)
    mine = client.get(reverse("console:tenant_engine", args=[tenant.slug])).json()["tenant"]
    assert mine["prefix_cache_hits"] >= hit.num_cached_tokens > 0
    assert mine["prefix_cache_hit_rate"] == pytest.approx(mine["prefix_cache_hits"] / mine["prefix_cache_queries"])
    assert 'data-field="tenant_hit_rate"' in client.get(reverse("console:tenant", args=[tenant.slug])).content.decode()

    client.force_login(superuser)
    rates = engine.stats()["per_tenant"]
    html = client.get(reverse("console:index")).content.decode()
    for t in (tenant, other_tenant):
        row = rates[t.engine_key]
        percent = round(100 * row["prefix_cache_hits"] / row["prefix_cache_queries"])
        cell = html[html.index(f'data-hit-rate="{t.slug}"'):]
        assert cell.split(">", 1)[1].startswith(f"{percent}%"), (t.slug, cell[:120])
