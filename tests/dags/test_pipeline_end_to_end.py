"""`airflow dags test sensor_alerts_pipeline` on local Spark, as `make demo` runs it (scripts/airflow_demo.sh),
with DAG params other than the defaults, as a run triggered from the UI form would carry them.

Minutes: two spark-submits (the job, then its validation) under Airflow's task runner.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]
TOPICS = ("window-counts", "window-finals", "low-activity-alerts", "summaries", "silent-sensors")
# The DAG's default schedule, every 10 minutes at +2: the wall clock the job is given is on this grid.
INTERVAL_MS, SHIFT_MS = 600_000, 120_000
PARAMS = {"window_size": 300_000, "grace": 60_000}


def test_one_dag_run_leaves_the_job_outputs_checked_and_reported(tmp_path):
    var = tmp_path / "var"
    # Only what the script sets up itself: none of this test session's Airflow settings.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env["SPARK_JOBS_VAR"] = str(var)
    env["PIPELINE_CONF"] = json.dumps(PARAMS)
    input_dir = var / "data" / "sensor_alerts" / "input"
    subprocess.run(
        [sys.executable, "-m", "spark_jobs.jobs.generate_events", "--output", str(input_dir),
         "--events", "3000", "--sensors", "10", "--files", "3"],
        cwd=REPO_ROOT, env={**env, "PYTHONPATH": str(REPO_ROOT)}, check=True, capture_output=True,
    )  # fmt: skip

    log = tmp_path / "airflow_demo.log"
    with log.open("wb") as out:
        demo = subprocess.run(
            [str(REPO_ROOT / "scripts" / "airflow_demo.sh")],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=1500,
        )
    assert demo.returncode == 0, f"the DAG run failed:\n{log.read_text(errors='replace')[-8000:]}"

    output = var / "data" / "sensor_alerts" / "output"
    topics = {topic: pd.read_parquet(output / topic) for topic in TOPICS}
    assert len(topics["window-counts"]) > 0
    # The params reached the job (its windows) and the job record that validation read.
    counts = topics["window-counts"]
    assert set(counts["window_end"] - counts["window_start"]) == {PARAMS["window_size"]}
    recorded = json.loads((output / "_job.json").read_text())["options"]
    assert {k: recorded[k] for k in PARAMS} == PARAMS
    verdicts = json.loads((var / "reports" / "sensor_alerts" / "verdicts.json").read_text())
    assert verdicts["success"] and {s["suite"] for s in verdicts["suites"]} >= set(TOPICS)
    # Silent sensors are found by WALL_CLOCK_TIME punctuation, stamped with the wall clock: the end of
    # the run's data interval, which the aligned timetable put on its grid.
    stamps = topics["silent-sensors"]["timestamp"]
    assert len(stamps) > 0 and set(stamps % INTERVAL_MS) == {SHIFT_MS}
    assert any((var / "checkpoints" / "sensor_alerts").iterdir())
    assert (var / "reports" / "sensor_alerts" / "data_docs" / "index.html").is_file()
    assert "DagRun Finished: dag_id=sensor_alerts_pipeline" in log.read_text(errors="replace")
