"""Writing the usage ledger: one UsageRecord per chat reply and per /v1 call, never changed after.

The chat flow calls record_chat_reply where it saves a reply (chat.services.finish_turn), the API
calls record_api_call with the ApiUsage row it just wrote (api.calls.ApiCall). Each write also
releases the request's budget reservation, in the same transaction, so the spend a budget sees moves
from reserved to used without a gap. Writing a request's row again (a save retried) changes nothing.
"""
from __future__ import annotations

from django.db import IntegrityError, transaction

from governance.models import BudgetReservation, UsageRecord


def _append(request_id: str, **fields) -> UsageRecord | None:
    """The new row, or None when `request_id` already has one."""
    try:
        with transaction.atomic():
            record = UsageRecord.objects.create(request_id=request_id[:64], **fields)
            if request_id:
                BudgetReservation.objects.filter(request_id=request_id[:64]).delete()
            return record
    except IntegrityError:
        if request_id and UsageRecord.objects.filter(request_id=request_id[:64]).exists():
            return None
        raise


def record_chat_reply(reply, *, status: str, finish_reason: str, num_prompt_tokens: int, num_cached_tokens: int,
                      num_output_tokens: int, time_to_first_token_ms: int | None, duration_ms: int | None
                      ) -> UsageRecord | None:
    """The ledger row of a chat reply: `reply` is its tenants Message as begun (conversation and
    profile loaded), the rest what the reply became. Works when the conversation is already gone."""
    conversation = reply.conversation
    tenant, user = conversation.tenant, conversation.user
    return _append(
        reply.request_id,
        source=UsageRecord.Source.CHAT,
        tenant_id=tenant.pk,
        tenant_slug=tenant.slug,
        user_id=user.pk,
        username=user.get_username(),
        profile_name=reply.profile.name if reply.profile_id and reply.profile else "",
        endpoint="chat",
        conversation_id=conversation.pk,
        message_id=reply.pk,
        status=status,
        finish_reason=finish_reason,
        num_prompt_tokens=num_prompt_tokens,
        num_cached_tokens=num_cached_tokens,
        num_output_tokens=num_output_tokens,
        time_to_first_token_ms=time_to_first_token_ms,
        duration_ms=duration_ms,
    )


def record_api_call(usage, key) -> UsageRecord | None:
    """The ledger row of a /v1 call, copied from its ApiUsage row (`usage`) and its key; a key's owner
    is the row's employee (their budgets count it)."""
    tenant, owner = key.tenant, key.owner if key.owner_id else None
    return _append(
        usage.request_id,
        source=UsageRecord.Source.API,
        tenant_id=tenant.pk,
        tenant_slug=tenant.slug,
        user_id=owner.pk if owner else None,
        username=owner.get_username() if owner else "",
        api_key_id=key.pk,
        api_key_name=key.name,
        profile_name=usage.profile.name if usage.profile_id and usage.profile else "",
        endpoint=usage.endpoint,
        status=_api_status(usage.status_code),
        status_code=usage.status_code,
        error_code=usage.error_code,
        finish_reason=usage.finish_reason,
        num_prompt_tokens=usage.num_prompt_tokens,
        num_cached_tokens=usage.num_cached_tokens,
        num_output_tokens=usage.num_output_tokens,
        time_to_first_token_ms=usage.time_to_first_token_ms,
        duration_ms=usage.latency_ms,
    )


def _api_status(status_code: int) -> str:
    if status_code == 499:  # the client left mid-answer: what it got was spent
        return "stopped"
    return "complete" if status_code < 400 else "error"
