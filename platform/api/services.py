"""The api app's writes: API keys (created, changed and revoked with an audit entry) and one usage row per
authenticated /v1 call. The admin, the console and `manage.py create_api_key` call these; nothing saves
an ApiKey or ApiUsage row directly."""
import hashlib
import secrets
from datetime import timedelta

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from api.models import ApiKey, ApiUsage
from tenants import audit
from tenants.models import Membership, SamplingProfile, Tenant

KEY_PREFIX = "pgd-"  # makes leaked keys easy to grep for
# Keys end in ".<tenant slug>": a load balancer routes a key's calls to its tenant's replica without a
# database (deploy/nginx/pagoda.conf). "." is in neither the random part's alphabet nor a slug's.
TENANT_SEPARATOR = "."
_PREFIX_CHARS = 12
_TOUCH_EVERY = timedelta(seconds=60)  # last_used_at precision: at most one write per key a minute


def hash_api_key(plaintext: str) -> str:
    """SHA-256 hex of a key. Keys are 256 random bits, so a plain hash (no salt, no KDF) is enough."""
    return hashlib.sha256(plaintext.encode()).hexdigest()


@transaction.atomic
def create_api_key(
    tenant: Tenant, name: str, *, actor=None, rpm_limit: int | None = None, tpm_limit: int | None = None,
    owner=None,
) -> tuple[ApiKey, str]:
    """A new key for `tenant`: pgd-<43 random characters>.<tenant slug>; `owner` (a member of the
    tenant) makes it that employee's key (ApiKey.owner). Raises ValidationError on bad input.

    Returns (row, plaintext); the plaintext is not stored and cannot be shown again. Only its hash is
    looked up, so the format is a hint for routing and for people, not something a check relies on.
    """
    plaintext = KEY_PREFIX + secrets.token_urlsafe(32) + TENANT_SEPARATOR + tenant.slug
    key = ApiKey(
        tenant=tenant,
        name=name,
        prefix=plaintext[:_PREFIX_CHARS],
        hashed_key=hash_api_key(plaintext),
        rpm_limit=rpm_limit,
        tpm_limit=tpm_limit,
        created_by=actor if getattr(actor, "is_authenticated", False) else None,
        owner=owner,
    )
    _check_owner(key)
    key.full_clean()
    key.save()
    audit.record("api_key.create", actor=actor, instance=key, after=audit.snapshot(key))
    return key, plaintext


def _check_owner(key: ApiKey) -> None:
    if key.owner_id is not None and not Membership.objects.filter(tenant_id=key.tenant_id, user_id=key.owner_id).exists():
        raise ValidationError({"owner": f"{key.owner.get_username()} is not a member of {key.tenant.slug}."})


@transaction.atomic
def revoke_api_key(key: ApiKey, *, actor=None) -> ApiKey:
    """Revoke a key (idempotent). Revoked keys stay listed, with when they were revoked."""
    if key.revoked_at is None:
        before = audit.snapshot(key)
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        audit.record("api_key.revoke", actor=actor, instance=key, before=before, after=audit.snapshot(key))
    return key


def touch_api_key(key: ApiKey) -> None:
    """Record that the key was just used (at most one write a minute per key; not audited)."""
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at >= _TOUCH_EVERY:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now


@transaction.atomic
def update_api_key(key: ApiKey, *, actor=None, name: str | None = None, rpm_limit=..., tpm_limit=...,
                   owner=...) -> ApiKey:
    """Rename a key, change its limits or its owner (pass None to remove a limit or the owner; leave it
    out to keep it)."""
    before = audit.snapshot(ApiKey.objects.get(pk=key.pk))
    if name is not None:
        key.name = name
    if rpm_limit is not ...:
        key.rpm_limit = rpm_limit
    if tpm_limit is not ...:
        key.tpm_limit = tpm_limit
    if owner is not ...:
        key.owner = owner
    _check_owner(key)
    key.full_clean()
    key.save(update_fields=["name", "rpm_limit", "tpm_limit", "owner"])
    after = audit.snapshot(key)
    if before != after:
        audit.record("api_key.update", actor=actor, instance=key, before=before, after=after)
    return key



def record_api_usage(
    key: ApiKey,
    *,
    endpoint: str,
    status_code: int,
    model: str = "",
    profile: SamplingProfile | None = None,
    request_id: str = "",
    stream: bool = False,
    error_code: str = "",
    finish_reason: str = "",
    num_prompt_tokens: int = 0,
    num_cached_tokens: int = 0,
    num_output_tokens: int = 0,
    latency_ms: int | None = None,
    time_to_first_token_ms: int | None = None,
) -> ApiUsage:
    """Store one call of `key` (its tenant is the key's). Not audited: usage is data, not a change."""
    return ApiUsage.objects.create(
        tenant_id=key.tenant_id,
        api_key=key,
        profile=profile,
        endpoint=endpoint,
        model=model[:100],
        request_id=request_id[:64],
        stream=stream,
        status_code=status_code,
        error_code=error_code[:64],
        finish_reason=finish_reason or "",
        num_prompt_tokens=num_prompt_tokens,
        num_cached_tokens=num_cached_tokens,
        num_output_tokens=num_output_tokens,
        latency_ms=latency_ms,
        time_to_first_token_ms=time_to_first_token_ms,
    )
