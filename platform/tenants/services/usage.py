"""Writing API usage: one ApiUsage row per authenticated /v1 call (the api app calls this, never .create)."""
from tenants.models import ApiKey, ApiUsage, SamplingProfile


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
