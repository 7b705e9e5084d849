"""Django admin for the tenants app's models (chat and api register their own, with the same scoping). Superusers see everything; tenant admins only their tenants.

Every change goes through tenants.services, so the admin writes the same audit log as scripts do.
"""
from tenants.admin import audit, profiles, prompts, tenancy  # noqa: F401  (registers)
