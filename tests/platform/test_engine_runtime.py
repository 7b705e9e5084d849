"""The start-up path with a fake engine (no model): started once, hooks run, reasons reported, clean stop."""
import importlib
import sys
import threading

import pytest

import engine_runtime
from engine_runtime import runtime
from tenants import pinning, services


def test_engine_starts_once_even_if_asked_twice(fake_engine_factory):
    engine_runtime.start()
    engine_runtime.start()
    first = engine_runtime.get_engine()
    assert engine_runtime.get_engine() is first
    assert len(fake_engine_factory) == 1 and engine_runtime.status()["num_starts"] == 1


def test_concurrent_starts_build_one_engine(fake_engine_factory):
    threads = [threading.Thread(target=engine_runtime.start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert engine_runtime.wait_ready(5)
    assert len(fake_engine_factory) == 1


def test_background_start_then_wait(fake_engine_factory):
    engine_runtime.start(background=True)
    engine_runtime.start(background=True)
    assert engine_runtime.wait_ready(10)
    assert engine_runtime.peek() is fake_engine_factory[0] and len(fake_engine_factory) == 1


async def test_aget_engine_starts_lazily_off_the_event_loop(fake_engine_factory):
    assert engine_runtime.peek() is None
    engine = await engine_runtime.aget_engine()
    assert engine is fake_engine_factory[0]


def test_off_means_never(settings, fake_engine_factory):
    settings.PAGODA_ENGINE = "off"
    engine_runtime.start()
    with pytest.raises(engine_runtime.EngineUnavailable, match="switched off"):
        engine_runtime.get_engine()
    assert fake_engine_factory == [] and engine_runtime.status()["state"] == "off"


def test_failed_start_is_reported(monkeypatch, fake_engine_factory):
    def broken():
        raise RuntimeError("no weights")

    monkeypatch.setattr(runtime, "_build_engine", broken)
    with pytest.raises(engine_runtime.EngineUnavailable, match="no weights"):
        engine_runtime.get_engine()
    assert engine_runtime.status()["state"] == "failed"


def test_dead_loop_is_reported(fake_engine_factory):
    engine = engine_runtime.get_engine()
    engine.alive, engine.error = False, "crashed"
    with pytest.raises(engine_runtime.EngineUnavailable, match="crashed"):
        engine_runtime.get_engine()
    assert engine_runtime.status()["state"] == "dead"


def test_shutdown_is_idempotent_and_allows_a_restart(fake_engine_factory):
    first = engine_runtime.get_engine()
    engine_runtime.shutdown()
    engine_runtime.shutdown()
    assert first.num_shutdowns == 1 and engine_runtime.peek() is None
    assert engine_runtime.get_engine() is not first


@pytest.mark.django_db
def test_active_prompts_are_pinned_at_start(fake_engine_factory, tenant, other_tenant):
    services.create_system_prompt(tenant, "be kind")
    services.create_system_prompt(other_tenant, "be brief")
    services.deactivate_system_prompt(other_tenant)
    assert pinning.pin_all_active_prompts in runtime._startup_hooks  # registered by TenantsConfig.ready
    engine = engine_runtime.get_engine()
    assert set(engine.pins()) == {"tenant:acme"}
    assert tenant.system_prompts.get(is_active=True).num_tokens == 5  # counted at start, stored


@pytest.mark.django_db
def test_pin_on_activate_and_unpin_on_deactivate(fake_engine_factory, tenant, django_capture_on_commit_callbacks):
    engine = engine_runtime.get_engine()
    with django_capture_on_commit_callbacks(execute=True):
        services.create_system_prompt(tenant, "one two")
    assert engine.pins()["tenant:acme"].num_prompt_tokens == 5
    with django_capture_on_commit_callbacks(execute=True):
        services.create_system_prompt(tenant, "one two three four")
    assert engine.pins()["tenant:acme"].num_prompt_tokens == 7  # replaced, not added
    with django_capture_on_commit_callbacks(execute=True):
        services.deactivate_system_prompt(tenant)
    assert engine.pins() == {}


@pytest.mark.django_db
def test_prompt_longer_than_context_is_refused(fake_engine_factory, tenant):
    from django.core.exceptions import ValidationError

    engine_runtime.get_engine()  # max_model_len 64 words
    with pytest.raises(ValidationError) as info:
        services.create_system_prompt(tenant, "word " * 70)
    message = info.value.message_dict["text"][0]
    assert "73 tokens" in message and "64 tokens" in message
    assert not tenant.system_prompts.exists()


@pytest.mark.django_db
def test_reconcile_picks_up_changes_made_elsewhere(fake_engine_factory, tenant):
    engine = engine_runtime.get_engine()
    services.create_system_prompt(tenant, "made by a script")  # no on_commit: as if another process
    assert engine.pins() == {}
    pinning.reconcile(engine)
    assert set(engine.pins()) == {"tenant:acme"}
    services.deactivate_system_prompt(tenant)
    pinning.reconcile(engine)
    assert engine.pins() == {}


def test_asgi_module_starts_the_engine_in_the_background(settings, fake_engine_factory):
    settings.PAGODA_ENGINE = "on"
    sys.modules.pop("pagoda.asgi", None)
    asgi = importlib.import_module("pagoda.asgi")
    assert engine_runtime.wait_ready(10)
    assert len(fake_engine_factory) == 1
    importlib.reload(asgi)  # loading the module again must not build a second engine
    assert len(fake_engine_factory) == 1
    assert callable(asgi.application)
