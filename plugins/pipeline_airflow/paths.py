"""Where the pipeline's code and data are; no Airflow import, so scripts can ask cheaply.

Data lives under `SPARK_JOBS_VAR` (the repository's `var/` by default) in the layout the Docker
deployment mounts: `data/`, `checkpoints/`, `reports/`.

    python -c 'from pipeline_airflow.paths import JobPaths; print(JobPaths.for_job("sensor_alerts").input)'
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path


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

    @property
    def full_reports(self) -> Path:
        """The weekly full-history validation's reports, beside the runs' (`<reports>_full_history`): it
        keeps its own context, so it never overwrites what the next scheduled validation reads."""
        return self.reports.with_name(f"{self.reports.name}_full_history")

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
