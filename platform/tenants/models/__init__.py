"""The tenants app's tables: tenants, members, prompts, profiles, audit. Writes go through tenants.services,
reads through tenants.selectors; chat and api own their own tables."""
from tenants.models.audit import AuditLog
from tenants.models.profiles import SamplingProfile
from tenants.models.prompts import SystemPrompt
from tenants.models.tenancy import Membership, Tenant

__all__ = [
    "AuditLog",
    "Membership",
    "SamplingProfile",
    "SystemPrompt",
    "Tenant",
]
