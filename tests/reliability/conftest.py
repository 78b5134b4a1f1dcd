"""Reliability suite (marker ``reliability``): fuzzing of the doors, schemathesis, the ACL probe.

Tests here that need the stack reuse the integration fixtures (isolated namespace per test); the pure
ones (envelope contract) run without it. The long budgets are marked ``slow`` too.
"""

from __future__ import annotations

import pytest

from tests.integration.conftest import pipeline, settings, settings_factory, stack_env  # noqa: F401  (fixtures)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/tests/reliability/" in str(item.fspath):
            item.add_marker(pytest.mark.reliability)
