from django.apps import AppConfig


class TenantsConfig(AppConfig):
    name = "tenants"
    verbose_name = "Tenants"

    def ready(self) -> None:
        # At every engine start-up, pin the active system prompts of all tenants.
        import engine_runtime

        from tenants import accounts  # noqa: F401 (receivers: deactivation ends sessions; account audit)
        from tenants import authentication  # noqa: F401 (receivers: the audit of logins and logouts)
        from pagoda import ttl_cache
        from tenants import pinning
        from django.contrib.auth import get_user_model

        from tenants.models import Membership, SamplingProfile, SystemPrompt, Tenant

        engine_runtime.add_startup_hook(pinning.pin_all_active_prompts)
        # What API calls read from this process's caches (a deactivated tenant or key owner, an owner
        # removed from the tenant, a changed profile or prompt).
        ttl_cache.clear_on_change(Tenant, SamplingProfile, SystemPrompt, Membership, get_user_model())
