"""The suites against the real sensor-alerts job: its output passes, corrupted copies of it fail.

Generates events (with late and bad records), runs the job once with `--trigger available-now`, figures
other than its defaults, and a wall clock past the last event (so silent sensors are found), then
validates with no figures on its command line: through `spark-submit`
as the DAG does, through `python -m` on a corrupted copy, and in-process for each broken promise.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark_jobs.quality.validate import validate_output
from spark_jobs.spark.job import recorded_job
from tests.quality.support import (
    CORRUPTIONS,
    SENSOR_ALERTS_SUITES,
    copy_output,
    failing_rows,
    read_topic,
    stored_results,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]
# The job runs with other figures than its defaults; validation, given none, must use the recorded ones.
NON_DEFAULT_FIGURES = ["--window-size", "3min", "--grace", "1min", "--low-activity-threshold", "6"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_GATEWAY")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return env


def _run(args: list[str], timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=REPO_ROOT, env=_env(), capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def real_output(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("sensor-alerts")
    generate = _run(
        [sys.executable, "-m", "spark_jobs.jobs.generate_events", "--output", str(work / "input"),
         "--events", "1500", "--sensors", "10", "--files", "3", "--bad-fraction", "0.02",
         "--late-fraction", "0.02"],
    )  # fmt: skip
    assert generate.returncode == 0, generate.stderr[-3000:]
    job = _run(
        [sys.executable, "-m", "spark_jobs.jobs.sensor_alerts", "--input", str(work / "input"),
         "--output", str(work / "output"), "--checkpoint", str(work / "checkpoint"),
         "--trigger", "available-now", "--wall-clock", "2025-01-01T02:00:00Z", "--master", "local[2]",
         *NON_DEFAULT_FIGURES],
    )  # fmt: skip
    assert job.returncode == 0, job.stderr[-5000:]
    output = work / "output"
    for check in SENSOR_ALERTS_SUITES:  # every promise is checked on real rows, not on an empty topic
        assert read_topic(output, check.topic), f"the job wrote no {check.topic}"
    return output


def test_spark_submit_validates_the_real_output_and_every_suite_passes(real_output, tmp_path):
    spark_submit = Path(sys.executable).parent / "spark-submit"
    reports = tmp_path / "reports"
    run = _run(
        [str(spark_submit), "--master", "local[2]", str(REPO_ROOT / "spark_jobs" / "quality" / "validate.py"),
         "--output", str(real_output), "--reports", str(reports)],
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr[-5000:]
    lines = [line for line in run.stdout.splitlines() if line.startswith(("PASSED", "FAILED"))]
    assert [line.split(":")[0] for line in lines] == [f"PASSED {c.suite}" for c in SENSOR_ALERTS_SUITES]
    assert (reports / "data_docs" / "index.html").is_file()
    recorded = recorded_job(real_output).options
    assert (recorded["window_size"], recorded["grace"], recorded["low_activity_threshold"]) == (
        180_000,
        60_000,
        6,
    )


def test_the_command_line_exits_non_zero_on_a_corrupted_copy(real_output, tmp_path):
    output = copy_output(real_output, tmp_path / "output")
    CORRUPTIONS["a window emitted twice"].break_output(output)
    run = _run(
        [sys.executable, "-m", "spark_jobs.quality.validate", "--output", str(output),
         "--reports", str(tmp_path / "reports"), "--suite", "window-finals", "--suite", "summaries"],
    )  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr[-3000:]
    assert "FAILED window-finals: " in run.stdout
    assert "expect_emitted_at_most_once_per_key_and_window (2 unexpected rows)" in run.stdout
    assert "PASSED summaries: " in run.stdout and "window-counts" not in run.stdout


@pytest.mark.parametrize("broken_promise", list(CORRUPTIONS))
def test_a_corrupted_copy_of_the_real_output_fails_and_shows_the_row(
    spark, real_output, tmp_path, broken_promise
):
    corruption = CORRUPTIONS[broken_promise]
    output = copy_output(real_output, tmp_path / "output")
    broken_row = corruption.break_output(output)
    reports = tmp_path / "reports"

    [verdict] = validate_output(spark, output, reports, only=[corruption.suite])

    assert not verdict.success, verdict.line()
    assert any(f.startswith(corruption.rule) for f in verdict.failures), verdict.line()
    [result] = stored_results(reports, corruption.suite)
    shown = {tuple(row.get(c) for c in corruption.columns) for row in failing_rows(result, corruption.rule)}
    assert tuple(broken_row[c] for c in corruption.columns) in shown
