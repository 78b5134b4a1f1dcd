"""Reliability suite: the integration fixtures (real broker, Postgres, S3; an isolated namespace per test),
every test marked ``reliability`` (and ``integration``). The long fault-under-load tests are also ``slow``:
``make test-reliability`` runs them, ``make test`` does not."""

from __future__ import annotations

import pytest

from tests.integration.conftest import pipeline, settings, settings_factory, stack_env

__all__ = ["pipeline", "settings", "settings_factory", "stack_env"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/tests/reliability/" in str(item.fspath):
            item.add_marker(pytest.mark.reliability)
            item.add_marker(pytest.mark.integration)
