"""`Authorization: Bearer <key>` for /v1: the key's hash is looked up; 401 unknown, 403 revoked (or its
tenant deactivated, or its owner deactivated or gone from the tenant).

A known key (with its tenant) is kept per process for PAGODA_API_CACHE_SECONDS (pagoda.ttl_cache):
a call in steady state is authenticated without a database round trip. Revoking the key or
deactivating its tenant or its owner (or removing the owner from the tenant) in this process clears
the cache at once; in another process it takes effect within that bound.
"""
from __future__ import annotations

from django.http import HttpRequest
from ninja.security import HttpBearer

from api import selectors, services
from api.errors import ApiError
from api.models import ApiKey
from pagoda.db import db_call
from pagoda.ttl_cache import TTLCache, missing
from tenants.models import Membership

# hashed key -> (ApiKey with tenant and owner, whether its owner may use it); unknown keys are not kept
_KEYS = TTLCache("api keys")


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, message, code="invalid_api_key")


def _load_key(hashed: str) -> tuple[ApiKey, bool] | None:
    key = selectors.api_key_by_hash(hashed)
    return None if key is None else (key, key.owner_id is None or _owner_may_use(key))


def _refusal(key: ApiKey, owner_ok: bool) -> ApiError | None:
    if key.is_revoked:
        return ApiError(403, "This API key has been revoked.", type="permission_error", code="api_key_revoked")
    if not key.tenant.is_active:
        return ApiError(403, "This API key's tenant is deactivated.", type="permission_error",
                        code="tenant_inactive")
    if not owner_ok:  # an employee's key ends with their access: offboarding reaches the API too
        return ApiError(403, "This API key's owner is deactivated or no longer a member of its tenant.",
                        type="permission_error", code="api_key_owner_inactive")
    return None


async def authenticate_key(plaintext: str, endpoint: str) -> ApiKey:
    """The active key for a presented plaintext (tenant loaded); records its use. Raises 401 / 403.

    A refused known key is recorded as a usage row (status 403): admins see who still uses it.
    """
    hashed = services.hash_api_key(plaintext)
    entry = _KEYS.get(hashed)
    if missing(entry):
        generation = _KEYS.generation()
        entry = await db_call(_load_key)(hashed)
        if entry is not None:
            _KEYS.put(hashed, entry, generation)
    if entry is None:
        raise _unauthorized("Incorrect API key provided.")
    key, owner_ok = entry
    error = _refusal(key, owner_ok)
    if error is not None:
        await db_call(services.record_api_usage)(key, endpoint=endpoint, status_code=error.status,
                                                 error_code=error.code)
        raise error
    if services.needs_touch(key):  # at most once a minute per key and process
        await db_call(services.touch_api_key)(key)
    return key


def _owner_may_use(key: ApiKey) -> bool:
    return key.owner.is_active and Membership.objects.filter(tenant_id=key.tenant_id, user_id=key.owner_id).exists()


def endpoint_of(path: str) -> str:
    """The usage name of an API path: /v1/chat/completions -> chat.completions, /v1/models/x -> models,
    /tokenize -> tokenize."""
    parts = [p for p in path.split("/") if p]
    parts = parts[1:] if parts[:1] == ["v1"] else parts  # /tokenize is also served at the root
    return ".".join(parts[:2]) if parts[:1] == ["chat"] else (parts[0] if parts else "")


class ApiKeyAuth(HttpBearer):
    """django-ninja auth (so the OpenAPI schema declares bearer auth); sets request.auth to the ApiKey."""

    async def __call__(self, request: HttpRequest) -> ApiKey:
        header = request.headers.get(self.header, "")
        scheme, _, token = header.partition(" ")
        if not header:
            raise _unauthorized("You didn't provide an API key: send it as `Authorization: Bearer <key>`.")
        if scheme.lower() != "bearer" or not token.strip():
            raise _unauthorized("Send the API key as `Authorization: Bearer <key>`.")
        return await self.authenticate(request, token.strip())

    async def authenticate(self, request: HttpRequest, token: str) -> ApiKey:
        return await authenticate_key(token, endpoint_of(request.path))
