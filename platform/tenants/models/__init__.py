"""All of the platform's tables. Writes go through tenants.services, reads through tenants.selectors."""
from tenants.models.api_keys import ApiKey
from tenants.models.audit import AuditLog
from tenants.models.conversations import Conversation, Message
from tenants.models.profiles import SamplingProfile
from tenants.models.prompts import SystemPrompt
from tenants.models.tenancy import Membership, Tenant
from tenants.models.usage import ApiUsage

__all__ = [
    "ApiKey",
    "ApiUsage",
    "AuditLog",
    "Conversation",
    "Membership",
    "Message",
    "SamplingProfile",
    "SystemPrompt",
    "Tenant",
]
