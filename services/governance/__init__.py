"""Governance on the runtime floor: budgets and spend, retention and legal holds, audits, permission
history and the admin health report. SQL and pure helpers only; routes live in ``services/api/admin.py``."""
