"""`airflow dags test sensor_enrichment_pipeline` on local Spark: the three-input job from its DAG (one input
folder per topic under the DAG's input folder), its validation with the hand-written KIP-259 rules, and
its Data Docs.

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

from spark_jobs.jobs import sensor_enrichment as job
from spark_jobs.quality.validate import validate_output
from tests.quality.support import copy_output, read_topic, rewrite_topic

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_one_dag_run_of_the_join_job_leaves_checked_outputs_and_data_docs(spark, tmp_path):
    var = tmp_path / "var"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env["SPARK_JOBS_VAR"] = str(var)
    input_dir = var / "data" / "sensor_enrichment" / "input"
    subprocess.run(
        [sys.executable, "-m", "spark_jobs.jobs.generate_enrichment", "--output", str(input_dir),
         "--events", "3000", "--sensors", "10", "--files", "3"],
        cwd=REPO_ROOT, env={**env, "PYTHONPATH": str(REPO_ROOT)}, check=True, capture_output=True,
    )  # fmt: skip
    script = (
        f"source {REPO_ROOT / 'scripts' / 'airflow_env.sh'} && "
        'airflow db migrate > "$AIRFLOW_HOME/db-migrate.log" 2>&1 && '
        f"python {REPO_ROOT / 'scripts' / 'define_spark_connection.py'} && "
        "airflow dags test sensor_enrichment_pipeline"
    )
    log = tmp_path / "airflow.log"
    with log.open("wb") as out:
        run = subprocess.run(
            ["bash", "-c", script], env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            timeout=1500,
        )  # fmt: skip
    text = log.read_text(errors="replace")
    assert run.returncode == 0, f"the DAG run failed:\n{text[-8000:]}"
    assert "DagRun Finished: dag_id=sensor_enrichment_pipeline" in text and "state=success" in text

    output = var / "data" / "sensor_enrichment" / "output"
    enriched = pd.read_parquet(output / job.ENRICHED)
    correlated = pd.read_parquet(output / job.MAINTENANCE_READINGS)
    assert len(enriched) > 0 and len(correlated) > 0
    assert (enriched.timestamp == enriched.value.map(lambda v: v["reading_time"])).all()
    later = correlated.value.map(lambda v: max(v["reading_time"], v["maintenance_time"]))
    assert (correlated.timestamp == later).all()
    reports = var / "reports" / "sensor_enrichment"
    verdicts = json.loads((reports / "verdicts.json").read_text())
    assert verdicts["success"] and {s["suite"] for s in verdicts["suites"]} >= set(job.OUTPUT_TOPICS)
    assert (reports / "data_docs" / "index.html").is_file()

    # Then the joins' KIP-259 timestamps are broken in a copy: its suites must fail on them.
    broken = copy_output(output, tmp_path / "broken")
    enriched_rows = read_topic(broken, job.ENRICHED)
    enriched_rows[0] = dict(enriched_rows[0], timestamp=enriched_rows[0]["timestamp"] + 1)
    rewrite_topic(broken, job.ENRICHED, enriched_rows)
    correlated_rows = read_topic(broken, job.MAINTENANCE_READINGS)
    first = correlated_rows[0]
    earlier = min(first["value"]["reading_time"], first["value"]["maintenance_time"]) - 1
    correlated_rows[0] = dict(first, timestamp=earlier)
    rewrite_topic(broken, job.MAINTENANCE_READINGS, correlated_rows)
    verdicts = {v.suite: v for v in validate_output(spark, broken, tmp_path / "broken-reports", batches=None)}
    assert not verdicts[job.ENRICHED].success
    assert any("expect_column_pair_values_to_be_equal" in f for f in verdicts[job.ENRICHED].failures)
    assert not verdicts[job.MAINTENANCE_READINGS].success
    assert any(
        "expect_column_pair_values_a_to_be_greater_than_b" in f
        for f in verdicts[job.MAINTENANCE_READINGS].failures
    )
