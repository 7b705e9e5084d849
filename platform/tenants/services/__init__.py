"""Every write the platform makes (HackSoft style): validate, save, audit, and tell the engine.

Views, admin and commands call these; none of them saves a model directly. `actor` is the user who
asked (None for scripts); each change writes an AuditLog entry.
"""
from tenants.services.api_keys import create_api_key, hash_api_key, revoke_api_key, touch_api_key, update_api_key
from tenants.services.profiles import (
    PRESETS,
    create_builtin_profiles,
    delete_profile,
    save_profile,
    set_default_profile,
)
from tenants.services.prompts import (
    activate_system_prompt,
    create_system_prompt,
    deactivate_system_prompt,
    rollback_system_prompt,
    validate_system_prompt_text,
)
from tenants.services.tenancy import add_member, create_tenant, delete_tenant, remove_member, update_tenant
from tenants.services.usage import record_api_usage

__all__ = [
    "PRESETS",
    "activate_system_prompt",
    "add_member",
    "create_api_key",
    "create_builtin_profiles",
    "create_system_prompt",
    "create_tenant",
    "deactivate_system_prompt",
    "delete_tenant",
    "delete_profile",
    "hash_api_key",
    "record_api_usage",
    "remove_member",
    "revoke_api_key",
    "rollback_system_prompt",
    "save_profile",
    "set_default_profile",
    "touch_api_key",
    "update_api_key",
    "update_tenant",
    "validate_system_prompt_text",
]
