"""The governance app's tables."""
from governance.models.budgets import Budget, BudgetReservation
from governance.models.ledger import UsageRecord
from governance.models.retention import RetentionPolicy

__all__ = ["Budget", "BudgetReservation", "RetentionPolicy", "UsageRecord"]
