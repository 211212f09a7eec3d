"""Fixtures shared by every test package.

One local SparkSession per test session: starting a JVM costs seconds, so tests share it and must not
stop it. Tests that need a session of their own (a cluster, a crashing job) start a subprocess instead.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

# Python workers must run the interpreter of this venv, and Spark must not look for a network address.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

# Airflow reads its configuration once, when first imported: before any test imports it, point it at a
# throwaway home for this session (never ~/airflow nor var/airflow) and at this repository's DAGs and
# plugins. The plugins folder goes on sys.path as Airflow puts it there, for tests that import
# `pipeline_airflow` before Airflow.
AIRFLOW_TEST_HOME = Path(tempfile.mkdtemp(prefix="spark-jobs-airflow-home-"))
atexit.register(shutil.rmtree, AIRFLOW_TEST_HOME, ignore_errors=True)
os.environ["AIRFLOW_HOME"] = str(AIRFLOW_TEST_HOME)
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO_ROOT / "dags")
os.environ["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(REPO_ROOT / "plugins")
os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{AIRFLOW_TEST_HOME / 'airflow.db'}"
if str(REPO_ROOT / "plugins") not in sys.path:
    sys.path.append(str(REPO_ROOT / "plugins"))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """The test session's local SparkSession: 2 cores, small shuffles, no UI (jobs have theirs)."""
    from spark_jobs.spark.session import local_spark_session, stop_session

    session = local_spark_session(
        app_name="spark-jobs-tests",
        master="local[2]",
        warehouse_dir=str(tmp_path_factory.mktemp("spark-warehouse")),
        extra_conf={"spark.ui.enabled": "false"},
    )
    yield session
    stop_session(session)
