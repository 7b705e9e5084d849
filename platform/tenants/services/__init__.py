"""The tenants app's writes (HackSoft style): validate, save, audit, and tell the engine.

Views, admin and commands call these; none of them saves a model directly (chat.history and api.services do the same for their tables). `actor` is the user who
asked (None for scripts); each change writes an AuditLog entry.
"""
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
from tenants.services.tenancy import (
    add_member,
    create_tenant,
    delete_tenant,
    remove_member,
    rename_tenant,
    update_tenant,
)

__all__ = [
    "PRESETS",
    "activate_system_prompt",
    "add_member",
    "create_builtin_profiles",
    "create_system_prompt",
    "create_tenant",
    "deactivate_system_prompt",
    "delete_tenant",
    "delete_profile",
    "remove_member",
    "rename_tenant",
    "rollback_system_prompt",
    "save_profile",
    "set_default_profile",
    "update_tenant",
    "validate_system_prompt_text",
]
