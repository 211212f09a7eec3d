"""The pipeline DAG's run follows the data-quality verdict (`airflow dags test sensor_alerts_pipeline`).

The DAG runs twice (scripts/airflow_demo.sh: the Spark job, then `validate_outputs` of what it published,
then the report) in a throwaway `SPARK_JOBS_VAR`: on the job's own output, then after a broken promise
was added to the batch the second run publishes.
Minutes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.quality.support import SENSOR_ALERTS_SUITES, read_topic, write_topic

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]
JOB = "sensor_alerts"


def _env(var: Path) -> dict[str, str]:
    # Only what the demo script sets up itself: none of this test session's Airflow settings.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env["SPARK_JOBS_VAR"] = str(var)
    return env


def _generate_events(var: Path, start: str = "2025-01-01T00:00:00Z") -> None:
    subprocess.run(
        [sys.executable, "-m", "spark_jobs.jobs.generate_events", "--output", str(var / "data" / JOB / "input"),
         "--events", "1500", "--sensors", "8", "--files", "2", "--start", start],
        cwd=REPO_ROOT, env={**_env(var), "PYTHONPATH": str(REPO_ROOT)}, check=True, capture_output=True,
    )  # fmt: skip


def _run_dag(var: Path, log: Path) -> tuple[int, str]:
    """One run of the DAG; (exit code, everything it and its tasks logged)."""
    with log.open("wb") as out:
        run = subprocess.run(
            [str(REPO_ROOT / "scripts" / "airflow_demo.sh")],
            env=_env(var),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=1500,
        )
    return run.returncode, log.read_text(errors="replace")


def _run_full_validation(var: Path, log: Path) -> tuple[int, str]:
    """One run of the weekly DAG, in the state the pipeline runs left (database, connection)."""
    script = f"source {REPO_ROOT / 'scripts' / 'airflow_env.sh'} && airflow dags test {JOB}_full_validation"
    with log.open("wb") as out:
        run = subprocess.run(
            ["bash", "-c", script], env=_env(var), stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, timeout=1500,
        )  # fmt: skip
    return run.returncode, log.read_text(errors="replace")


def test_the_dag_run_succeeds_with_the_report_built_then_fails_when_validation_fails(tmp_path):
    var = tmp_path / "var"
    reports = var / "reports" / JOB
    _generate_events(var)

    code, logs = _run_dag(var, tmp_path / "first-run.log")

    assert code == 0, logs[-8000:]
    assert (reports / "data_docs" / "index.html").is_file()
    verdicts = json.loads((reports / "verdicts.json").read_text())
    assert verdicts["success"] is True
    assert [s["suite"] for s in verdicts["suites"]] == [c.suite for c in SENSOR_ALERTS_SUITES]
    for check in SENSOR_ALERTS_SUITES:
        assert f"PASSED {check.suite}: " in logs

    # Then the output breaks a promise: one window's final emitted twice, in the batch the next run
    # publishes (its wall-clock batch; the sink leaves a batch folder that exists alone). The next run's
    # job runs as usual; its validation, of what that run published, must catch it and fail the run.
    output = var / "data" / JOB / "output"
    next_batch = 1 + max(json.loads((output / "_runs" / "latest.json").read_text())["batches"])
    finals = read_topic(output, "window-finals")
    twice = finals[-1]
    bad_batch = tmp_path / "bad-batch"
    write_topic([dict(twice, seq=10**9), dict(twice, seq=10**9 + 1)], bad_batch, batches=1)
    (bad_batch / "batch_id=0").rename(output / "window-finals" / f"batch_id={next_batch}")
    _generate_events(var, start="2025-01-01T01:00:00Z")  # so that the next run has readings to publish

    code, logs = _run_dag(var, tmp_path / "second-run.log")

    assert code != 0, logs[-8000:]
    assert "FAILED window-finals: " in logs
    assert "expect_emitted_at_most_once_per_key_and_window" in logs
    assert "PASSED window-counts: " in logs
    assert next_batch in json.loads((output / "_runs" / "latest.json").read_text())["batches"]
    verdicts = json.loads((reports / "verdicts.json").read_text())
    assert verdicts["success"] is False and verdicts["run_name"] != "" and verdicts["run_name"] in logs
    assert (reports / "data_docs" / "index.html").is_file()  # the failure is there for people to see

    # The weekly DAG re-reads every batch on Spark into its own reports, and finds the same broken final,
    # without touching the context the scheduled runs keep.
    context = sorted(p.name for p in (reports / "context").rglob("*"))
    code, logs = _run_full_validation(var, tmp_path / "full-validation.log")
    assert code != 0, logs[-8000:]
    assert "FAILED window-finals: " in logs and "PASSED window-counts: " in logs
    full = json.loads((var / "reports" / f"{JOB}_full_history" / "verdicts.json").read_text())
    assert full["success"] is False and full["run_name"] in logs
    assert sorted(p.name for p in (reports / "context").rglob("*")) == context
