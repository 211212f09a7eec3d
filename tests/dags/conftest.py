"""Fixtures for tests that need Airflow's metadata database (marked `airflow`) or its UI."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.browser import standalone_airflow


@pytest.fixture(scope="session")
def airflow_db() -> None:
    """This session's metadata database (in the throwaway AIRFLOW_HOME of tests/conftest.py), migrated."""
    migrate = subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        env=os.environ.copy(),
        capture_output=True,
        text=True,
    )
    if migrate.returncode != 0:
        pytest.fail(f"airflow db migrate failed:\n{migrate.stdout[-3000:]}\n{migrate.stderr[-3000:]}")


@pytest.fixture
def airflow_ui(tmp_path):
    """A standalone Airflow started by the project's script (tests.browser.AirflowUI)."""
    with standalone_airflow(tmp_path) as ui:
        yield ui
