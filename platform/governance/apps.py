from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    """Budgets, the usage ledger, retention and employees' own data (see the package docstring)."""

    name = "governance"
    verbose_name = "Governance: budgets, usage ledger, retention"

    def ready(self) -> None:
        from governance.models import Budget
        from pagoda import ttl_cache

        ttl_cache.clear_on_change(Budget)  # a new budget applies to this process's next API call
