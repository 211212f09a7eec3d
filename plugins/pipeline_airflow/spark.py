"""How the DAGs run this project's Spark jobs: where things are, which master, which environment.

One variable chooses the cluster: `SPARK_MASTER` (`local[*]` when unset, `spark://host:7077` for a
standalone cluster). It defines the Airflow connection `spark_pipeline` unless
`AIRFLOW_CONN_SPARK_PIPELINE` is set explicitly, and it is passed on to the job so that the job's own
session settings agree with spark-submit's `--master`.

Data lives under `SPARK_JOBS_VAR` (the repository's `var/` by default) in the layout the Docker
deployment mounts: `data/`, `checkpoints/`, `reports/`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

SPARK_CONN_ID = "spark_pipeline"
DEFAULT_MASTER = "local[*]"


def spark_jobs_package_dir() -> Path:
    """The `spark_jobs` package the DAGs run: a checkout on PYTHONPATH or an installed copy."""
    spec = importlib.util.find_spec("spark_jobs")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(
            "spark_jobs is not importable: put the repository root on PYTHONPATH "
            "(source scripts/airflow_env.sh) or pip install the repository"
        )
    return Path(spec.origin).resolve().parent


def var_dir() -> Path:
    default = spark_jobs_package_dir().parent / "var"
    return Path(os.environ.get("SPARK_JOBS_VAR") or default)


@dataclass(frozen=True)
class JobPaths:
    """A streaming job's stable folders: the checkpoint must outlive every run for exactly-once."""

    input: Path
    output: Path
    checkpoint: Path
    reports: Path

    @classmethod
    def for_job(cls, job: str) -> JobPaths:
        """`<VAR>/data/<job>/{input,output}`, `<VAR>/checkpoints/<job>`, `<VAR>/reports/<job>`;
        each can be overridden by `<JOB>_INPUT`, `<JOB>_OUTPUT`, `<JOB>_CHECKPOINT`, `<JOB>_REPORTS`."""
        root = var_dir()
        defaults = {
            "input": root / "data" / job / "input",
            "output": root / "data" / job / "output",
            "checkpoint": root / "checkpoints" / job,
            "reports": root / "reports" / job,
        }
        return cls(
            **{
                name: Path(os.environ.get(f"{job.upper()}_{name.upper()}") or default)
                for name, default in defaults.items()
            }
        )


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


def package_spark_jobs(target: Path) -> Path:
    """Zip the `spark_jobs` package for `--py-files`, so a cluster's executors import the same code."""
    package = spark_jobs_package_dir()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(package.rglob("*.py")):
            archive.write(path, path.relative_to(package.parent).as_posix())
    partial.replace(target)  # atomic: a concurrent run never ships a half-written zip
    return target


class SparkJobSubmitOperator(SparkSubmitOperator):
    """`spark-submit <spark_jobs>/<script> ARGS` on the pipeline's connection, with the package shipped.

    :param script: path of the job inside the `spark_jobs` package, e.g. `jobs/sensor_alerts.py`.
    Every other argument is SparkSubmitOperator's (`application_args` is templated).
    """

    def __init__(self, *, script: str, **kwargs: Any) -> None:
        self.py_files_zip = var_dir() / "build" / "spark_jobs.zip"
        kwargs.setdefault("conn_id", spark_connection_id())
        kwargs.setdefault("env_vars", spark_job_env())
        kwargs.setdefault("py_files", str(self.py_files_zip))
        super().__init__(application=str(spark_jobs_package_dir() / script), **kwargs)

    def execute(self, context: Any) -> None:
        package_spark_jobs(self.py_files_zip)
        return super().execute(context)
