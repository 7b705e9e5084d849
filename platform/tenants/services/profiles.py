from django.core.exceptions import ValidationError
from django.db import transaction

from tenants import audit
from tenants.models import SamplingProfile, Tenant

# The built-in presets every new tenant gets; "chat" is its default.
PRESETS: dict[str, dict] = {
    "chat": {
        "description": "Conversational answers",
        "temperature": 0.7,
        "top_p": 0.95,
        "max_tokens": 1024,
    },
    "coding": {
        "description": "Precise, low-temperature answers for code",
        "temperature": 0.1,
        "top_p": 0.9,
        "repetition_penalty": 1.05,
        "max_tokens": 2048,
    },
}
DEFAULT_PRESET = "chat"


def create_builtin_profiles(tenant: Tenant) -> list[SamplingProfile]:
    """Create the PRESETS for a tenant (skipping names it already has); the first tenant default is "chat"."""
    has_default = SamplingProfile.objects.filter(tenant=tenant, is_default=True).exists()
    created = []
    for name, fields in PRESETS.items():
        if SamplingProfile.objects.filter(tenant=tenant, name=name).exists():
            continue
        profile = SamplingProfile(
            tenant=tenant, name=name, is_builtin=True, is_default=(name == DEFAULT_PRESET and not has_default), **fields
        )
        profile.full_clean()
        profile.save()
        created.append(profile)
    return created


@transaction.atomic
def save_profile(profile: SamplingProfile, *, actor=None) -> SamplingProfile:
    """Create or update a profile after full validation (fields, engine's SamplingParams, constraints).

    Marking it default takes the flag from the tenant's previous default; a tenant's first profile is
    its default. Raises ValidationError naming the bad field.
    """
    is_new = profile.pk is None
    before = None if is_new else audit.snapshot(SamplingProfile.objects.get(pk=profile.pk))
    others = SamplingProfile.objects.filter(tenant=profile.tenant_id).exclude(pk=profile.pk)
    if not others.filter(is_default=True).exists():
        profile.is_default = True
    profile.full_clean()  # the one-default rule is not validated there; it is kept here:
    if profile.is_default:
        others.filter(is_default=True).update(is_default=False)
    profile.save()
    after = audit.snapshot(profile)
    if before != after:
        action = "sampling_profile.create" if is_new else "sampling_profile.update"
        audit.record(action, actor=actor, instance=profile, before=before, after=after)
    return profile


def set_default_profile(profile: SamplingProfile, *, actor=None) -> SamplingProfile:
    profile.is_default = True
    return save_profile(profile, actor=actor)


@transaction.atomic
def delete_profile(profile: SamplingProfile, *, actor=None) -> None:
    """Delete a profile; the tenant's default cannot be deleted (make another one default first)."""
    if profile.is_default:
        raise ValidationError("The default profile cannot be deleted; make another profile the default first.")
    audit.record("sampling_profile.delete", actor=actor, instance=profile, before=audit.snapshot(profile))
    profile.delete()
