from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max

import engine_runtime
from tenants import audit, pin_events, pinning
from tenants.models import SystemPrompt, Tenant

MAX_PROMPT_CHARS = 200_000  # a sanity bound before tokenizing; the real limit is the model's context


def validate_system_prompt_text(text: str) -> int | None:
    """Check that `text` can be a system prompt; returns its token count (None when no engine runs to count).

    Raises ValidationError when it is empty or does not fit in the model's context with room left for
    the conversation (the message gives both numbers).
    """
    if not text or not text.strip():
        raise ValidationError({"text": "The system prompt is empty."})
    if len(text) > MAX_PROMPT_CHARS:
        raise ValidationError({"text": f"The system prompt is {len(text):,} characters; the limit is {MAX_PROMPT_CHARS:,}."})
    engine = engine_runtime.peek()
    if engine is None:
        return None
    num_tokens = pinning.count_prompt_tokens(text, engine)
    if num_tokens >= engine.max_model_len:
        raise ValidationError(
            {
                "text": (
                    f"The system prompt is {num_tokens:,} tokens, but the model {engine.model_name}'s context is "
                    f"{engine.max_model_len:,} tokens, and a prompt must leave room for the conversation."
                )
            }
        )
    return num_tokens


def _lock_tenant(tenant: Tenant) -> None:
    # Serialises version numbers and the active flag per tenant (a row lock on PostgreSQL; SQLite locks the file).
    Tenant.objects.select_for_update().filter(pk=tenant.pk).exists()


def _sync_pins_after_commit(tenant: Tenant) -> None:
    # Re-pin here, then tell the other replicas (tenants.pin_events).
    transaction.on_commit(lambda: pin_events.tenant_changed(tenant.pk, tenant.pin_key))


@transaction.atomic
def create_system_prompt(
    tenant: Tenant, text: str, *, actor=None, note: str = "", activate: bool = True
) -> SystemPrompt:
    """Save `text` as the tenant's next version; by default make it the active one (and pin it)."""
    num_tokens = validate_system_prompt_text(text)
    _lock_tenant(tenant)
    last = SystemPrompt.objects.filter(tenant=tenant).aggregate(last=Max("version"))["last"] or 0
    author = actor if getattr(actor, "is_authenticated", False) else None
    prompt = SystemPrompt.objects.create(
        tenant=tenant, version=last + 1, text=text, num_tokens=num_tokens, note=note, created_by=author
    )
    audit.record("system_prompt.create", actor=actor, instance=prompt, after=audit.snapshot(prompt))
    if activate:
        activate_system_prompt(prompt, actor=actor)
    return prompt


@transaction.atomic
def activate_system_prompt(prompt: SystemPrompt, *, actor=None) -> SystemPrompt:
    """Make `prompt` the tenant's only active version; the engine re-pins after commit.

    Re-checks the length (the model may have changed since the version was written).
    """
    num_tokens = validate_system_prompt_text(prompt.text)
    _lock_tenant(prompt.tenant)
    previous = SystemPrompt.objects.filter(tenant=prompt.tenant_id, is_active=True).exclude(pk=prompt.pk).first()
    if previous is None and prompt.is_active:
        return prompt
    if previous is not None:
        SystemPrompt.objects.filter(pk=previous.pk).update(is_active=False)
    prompt.is_active = True
    if num_tokens is not None:
        prompt.num_tokens = num_tokens
    prompt.save(update_fields=["is_active", "num_tokens"])
    audit.record(
        "system_prompt.activate",
        actor=actor,
        instance=prompt,
        before={"active_version": previous.version if previous else None},
        after={"active_version": prompt.version},
    )
    _sync_pins_after_commit(prompt.tenant)
    return prompt


def rollback_system_prompt(tenant: Tenant, version: int, *, actor=None) -> SystemPrompt:
    """Activate an earlier version again. Raises SystemPrompt.DoesNotExist for an unknown version."""
    prompt = SystemPrompt.objects.get(tenant=tenant, version=version)
    return activate_system_prompt(prompt, actor=actor)


@transaction.atomic
def deactivate_system_prompt(tenant: Tenant, *, actor=None) -> SystemPrompt | None:
    """Leave the tenant without an active prompt (and unpin it); returns the version that was active."""
    _lock_tenant(tenant)
    previous = SystemPrompt.objects.filter(tenant=tenant, is_active=True).first()
    if previous is None:
        return None
    previous.is_active = False
    previous.save(update_fields=["is_active"])
    audit.record(
        "system_prompt.deactivate",
        actor=actor,
        instance=previous,
        before={"active_version": previous.version},
        after={"active_version": None},
    )
    _sync_pins_after_commit(tenant)
    return previous
