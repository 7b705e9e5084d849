from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    """Budgets, the usage ledger, retention and employees' own data (see the package docstring)."""

    name = "governance"
    verbose_name = "Governance: budgets, usage ledger, retention"
