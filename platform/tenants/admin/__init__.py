"""Django admin for the tenants app's models. Superusers see everything; tenant admins only their tenants
(chat and api register their own models with the same scoping, tenants.admin.scoping).

Every change goes through tenants.services, so the admin writes the same audit log as scripts do.
"""
from tenants.admin import accounts, audit, profiles, prompts, tenancy  # noqa: F401  (registers)
