"""Fixtures for the native deployment test (helpers in tests/deploy/support.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.deploy.support import PostgresServer, postgres_server


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server from Debian's packages on a free loopback port, with an `airflow` role and database."""
    with postgres_server() as server:
        yield server
