"""How the DAGs run this project's Spark jobs: which master, which environment, which code.

One variable chooses the cluster: `SPARK_MASTER` (`local[*]` when unset, `spark://host:7077` for a
standalone cluster). It defines the Airflow connection `spark_pipeline` unless
`AIRFLOW_CONN_SPARK_PIPELINE` is set explicitly, and it is passed on to the job so that the job's own
session settings agree with spark-submit's `--master`.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from pipeline_airflow.paths import spark_jobs_package_dir

SPARK_CONN_ID = "spark_pipeline"
DEFAULT_MASTER = "local[*]"


def spark_master() -> str:
    return os.environ.get("SPARK_MASTER") or DEFAULT_MASTER


def spark_connection_id() -> str:
    """The pipeline's Spark connection, defined from the environment unless the user defined it."""
    os.environ.setdefault(
        f"AIRFLOW_CONN_{SPARK_CONN_ID.upper()}", json.dumps({"conn_type": "spark", "host": spark_master()})
    )
    return SPARK_CONN_ID


def spark_job_env() -> dict[str, str]:
    """What spark-submit's driver and Python workers need on top of the worker's environment."""
    project_root = str(spark_jobs_package_dir().parent)
    python_path = os.pathsep.join(p for p in (project_root, os.environ.get("PYTHONPATH")) if p)
    env = {
        "PYTHONPATH": python_path,
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON") or sys.executable,
        "PYSPARK_DRIVER_PYTHON": os.environ.get("PYSPARK_DRIVER_PYTHON") or sys.executable,
        "SPARK_MASTER": spark_master(),
    }
    if spark_master().startswith("local") and not os.environ.get("SPARK_LOCAL_IP"):
        env["SPARK_LOCAL_IP"] = "127.0.0.1"  # executors of a cluster must reach the driver: not there
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
        kwargs.setdefault("conn_id", spark_connection_id())
        kwargs.setdefault("env_vars", spark_job_env())
        super().__init__(application=str(spark_jobs_package_dir() / script), **kwargs)
