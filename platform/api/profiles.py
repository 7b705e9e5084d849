"""What the API calls a `model`: one of the key's tenant's sampling profiles, or the engine's model id
(meaning the tenant's default profile). A profile name wins over the model id if they clash."""
from __future__ import annotations

from pathlib import PurePath

from django.conf import settings

from api.errors import model_not_found
from tenants import selectors
from tenants.models import SamplingProfile, Tenant


def model_id() -> str:
    """The served model's public id: PAGODA_MODEL, or the folder's name when it is a path."""
    model = settings.PAGODA_MODEL
    return PurePath(model).name if ("/" in model or "\\" in model) else model


def resolve_profile(tenant: Tenant, model: str) -> SamplingProfile:
    """The tenant's profile that `model` names. Raises a 404 ApiError for anything else, including
    another tenant's profile (which it does not reveal)."""
    profile = selectors.profile_by_name(tenant, model)
    if profile is None and model in (model_id(), settings.PAGODA_MODEL):
        profile = selectors.default_profile(tenant)
    if profile is None:
        raise model_not_found(model)
    return profile


def list_models(tenant: Tenant, max_model_len: int | None) -> list[dict]:
    """GET /v1/models: the model id first, then the tenant's profiles (default first)."""
    created = int(tenant.created_at.timestamp())
    models = [{"id": model_id(), "object": "model", "created": created, "owned_by": "pagoda",
               "max_model_len": max_model_len}]
    for profile in selectors.profiles(tenant):
        models.append({"id": profile.name, "object": "model", "created": int(profile.created_at.timestamp()),
                       "owned_by": tenant.slug, "max_model_len": max_model_len})
    return models
