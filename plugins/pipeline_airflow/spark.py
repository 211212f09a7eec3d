"""How the DAGs run this project's Spark jobs: which connection, which environment, which code.

The Spark cluster is an ordinary Airflow connection, `spark_pipeline` (type spark, host = the master URL:
`local[*]`, `spark://host:7077`, ...). Users define and edit it where they define connections: Admin >
Connections, `airflow connections`, or `AIRFLOW_CONN_SPARK_PIPELINE` (which wins over the database).
`scripts/define_spark_connection.py` adds it from `SPARK_MASTER` when it does not exist yet (run by
`make demo`, `make airflow` and the Docker stack's init); nothing defines it at import. A task that finds
no such connection fails and says how to define it.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from pipeline_airflow.paths import spark_jobs_package_dir

SPARK_CONN_ID = "spark_pipeline"
DEFAULT_MASTER = "local[*]"


def spark_connection_id() -> str:
    return SPARK_CONN_ID


def connection_for_master(master: str) -> dict[str, str]:
    """The connection `define_spark_connection.py` adds (Airflow's JSON connection format)."""
    return {
        "conn_type": "spark",
        "host": master,
        "description": "Where the spark_jobs pipelines run (spark-submit --master)",
    }


def resolved_master(conn_id: str = SPARK_CONN_ID) -> str:
    """The master URL of the connection, as the Spark provider reads it; a clear error when it is missing
    (the provider alone would fall back to yarn)."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    try:
        SparkSubmitHook.get_connection(conn_id)
    except Exception as error:
        raise LookupError(
            f"no Airflow connection {conn_id!r}: define it (type spark, host = the master, e.g. local[*] or "
            f"spark://host:7077) in Admin > Connections, with `airflow connections add {conn_id} "
            f"--conn-type spark --conn-host 'local[*]'`, with AIRFLOW_CONN_{conn_id.upper()}, or run "
            f"scripts/define_spark_connection.py ({type(error).__name__}: {error})"
        ) from error
    return SparkSubmitHook(conn_id=conn_id)._resolve_connection()["master"]


def spark_job_env() -> dict[str, str]:
    """What spark-submit's driver and Python workers need on top of the worker's environment."""
    project_root = str(spark_jobs_package_dir().parent)
    python_path = os.pathsep.join(p for p in (project_root, os.environ.get("PYTHONPATH")) if p)
    return {
        "PYTHONPATH": python_path,
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON") or sys.executable,
        "PYSPARK_DRIVER_PYTHON": os.environ.get("PYSPARK_DRIVER_PYTHON") or sys.executable,
    }


def master_env(master: str) -> dict[str, str]:
    """What depends on the master, decided when the task runs: a local driver binds to the loopback
    address (executors of a cluster must reach the driver, so not there). SPARK_MASTER repeats the
    connection's master so that the job's environment agrees with spark-submit's --master instead of
    carrying the worker's own (the Docker stack sets one); the job's session keeps --master either way."""
    env = {"SPARK_MASTER": master}
    if master.startswith("local") and not os.environ.get("SPARK_LOCAL_IP"):
        env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return env


class SparkJobSubmitOperator(SparkSubmitOperator):
    """`spark-submit <spark_jobs>/<script> ARGS` on the pipeline's connection and environment.

    :param script: path of the job inside the `spark_jobs` package, e.g. `jobs/sensor_alerts.py`, or an
        absolute path (a job module of one's own).
    Every other argument is SparkSubmitOperator's (`application_args` is templated).

    No `--py-files`: the jobs put this checkout on their Python workers' path themselves
    (`spark_jobs.spark.runtime`), so a cluster's workers need the repository at the same path, as the
    Docker deployment provides; a zip would also hide the files beside the package (`expectations/`).
    """

    def __init__(self, *, script: str, **kwargs: Any) -> None:
        kwargs.setdefault("conn_id", SPARK_CONN_ID)
        kwargs.setdefault("env_vars", spark_job_env())
        super().__init__(application=str(spark_jobs_package_dir() / script), **kwargs)

    def execute(self, context: Any) -> Any:
        self.env_vars = {**master_env(resolved_master(self._conn_id)), **(self.env_vars or {})}
        return super().execute(context)
