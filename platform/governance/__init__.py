"""Governance: what a tenant's people may spend and keep.

- ledger: one append-only UsageRecord per chat reply and per /v1 call; it outlives conversations,
  keys and users (plain ids and names, no foreign keys), and every usage figure is read from it.
- budgets: token budgets per tenant or per employee, per day or month, reserved atomically before a
  turn or call starts (QuotaExceeded), released when its ledger row is written.
- retention: a retention period per tenant, applied by `manage.py apply_retention` (a systemd timer).
- personal_data: an employee's export of all their conversations, and erasing them all.
"""
