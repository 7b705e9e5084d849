import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from tenants import selectors, services
from tenants.models import SamplingProfile


def test_new_tenant_gets_builtin_presets_with_chat_default(tenant):
    profiles = {p.name: p for p in selectors.profiles(tenant)}
    assert set(profiles) == {"chat", "coding"}
    coding, chat = profiles["coding"], profiles["chat"]
    assert (coding.temperature, coding.top_p, coding.repetition_penalty, coding.max_tokens) == (0.1, 0.9, 1.05, 2048)
    assert (chat.temperature, chat.top_p, chat.max_tokens) == (0.7, 0.95, 1024)
    assert chat.is_builtin and coding.is_builtin
    assert selectors.default_profile(tenant) == chat


def test_presets_are_per_tenant(tenant, other_tenant):
    assert SamplingProfile.objects.filter(name="coding").count() == 2
    assert selectors.profile_by_name(other_tenant, "coding").tenant == other_tenant


def test_making_a_profile_default_moves_the_flag(tenant):
    coding = selectors.profile_by_name(tenant, "coding")
    services.set_default_profile(coding)
    assert list(SamplingProfile.objects.filter(tenant=tenant, is_default=True)) == [coding]


def test_new_profile_saved_and_default_cannot_be_deleted(tenant):
    profile = services.save_profile(SamplingProfile(tenant=tenant, name="creative", temperature=1.2, top_k=40))
    assert profile.pk and not profile.is_default
    services.delete_profile(profile)
    with pytest.raises(ValidationError, match="default"):
        services.delete_profile(selectors.default_profile(tenant))


def test_duplicate_profile_name_rejected(tenant):
    with pytest.raises(ValidationError):
        services.save_profile(SamplingProfile(tenant=tenant, name="chat"))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("temperature", -0.1),
        ("top_p", 0.0),
        ("top_p", 1.5),
        ("top_k", -2),
        ("min_p", 1.5),
        ("repetition_penalty", 0.0),
        ("presence_penalty", 2.5),
        ("frequency_penalty", -3.0),
        ("max_tokens", 0),
        ("n", 0),
        ("logprobs", 21),
        ("stop", "not a list"),
        ("stop", ["ok", ""]),
        ("stop_token_ids", [1, -5]),
    ],
)
def test_out_of_range_profile_is_refused_naming_the_field(tenant, field, value):
    profile = SamplingProfile(tenant=tenant, name="bad", **{field: value})
    with pytest.raises(ValidationError) as info:
        services.save_profile(profile)
    assert field in info.value.message_dict
    assert not SamplingProfile.objects.filter(name="bad").exists()


def test_min_tokens_above_max_tokens_is_refused(tenant):
    with pytest.raises(ValidationError) as info:
        services.save_profile(SamplingProfile(tenant=tenant, name="bad", max_tokens=10, min_tokens=11))
    assert "min_tokens" in str(info.value)


def test_database_refuses_out_of_range_even_past_validation(tenant):
    with pytest.raises(IntegrityError), transaction.atomic():
        SamplingProfile.objects.create(tenant=tenant, name="raw", temperature=-1.0)


def test_database_refuses_two_defaults(tenant):
    with pytest.raises(IntegrityError), transaction.atomic():
        SamplingProfile.objects.create(tenant=tenant, name="second", is_default=True)


def test_sampling_kwargs_cover_every_field(tenant):
    kwargs = selectors.profile_by_name(tenant, "coding").sampling_kwargs()
    assert kwargs["temperature"] == 0.1 and kwargs["stop"] is None and kwargs["stop_token_ids"] is None
    assert set(kwargs) == {
        "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty",
        "max_tokens", "min_tokens", "stop", "stop_token_ids", "ignore_eos", "seed", "n", "logprobs",
    }
