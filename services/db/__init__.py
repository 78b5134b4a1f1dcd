"""Postgres access: pool, migrations, and the transaction helpers the stages share."""
