"""`Authorization: Bearer <key>` for /v1: the key's hash is looked up; 401 unknown, 403 revoked (or its
tenant deactivated, or its owner deactivated or gone from the tenant)."""
from __future__ import annotations

from django.http import HttpRequest
from ninja.security import HttpBearer

from api import selectors, services
from api.errors import ApiError
from api.models import ApiKey
from pagoda.db import db_call
from tenants.models import Membership


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, message, code="invalid_api_key")


def authenticate_key(plaintext: str, endpoint: str) -> ApiKey:
    """The active key for a presented plaintext (tenant loaded); records its use. Raises 401 / 403.

    A refused known key is recorded as a usage row (status 403): admins see who still uses it.
    """
    key = selectors.api_key_by_plaintext(plaintext)
    if key is None:
        raise _unauthorized("Incorrect API key provided.")
    error = None
    if key.is_revoked:
        error = ApiError(403, "This API key has been revoked.", type="permission_error", code="api_key_revoked")
    elif not key.tenant.is_active:
        error = ApiError(403, "This API key's tenant is deactivated.", type="permission_error",
                         code="tenant_inactive")
    elif key.owner_id is not None and not _owner_may_use(key):
        # an employee's key ends with their access: offboarding reaches the API too
        error = ApiError(403, "This API key's owner is deactivated or no longer a member of its tenant.",
                         type="permission_error", code="api_key_owner_inactive")
    if error is not None:
        services.record_api_usage(key, endpoint=endpoint, status_code=error.status, error_code=error.code)
        raise error
    services.touch_api_key(key)
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
        return await db_call(authenticate_key)(token, endpoint_of(request.path))
