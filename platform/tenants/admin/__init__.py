"""Django admin for the platform's models. Superusers see everything; tenant admins only their tenants.

Every change goes through tenants.services, so the admin writes the same audit log as scripts do.
"""
from tenants.admin import api_keys, audit, profiles, prompts, tenancy, usage  # noqa: F401  (registers)
