"""A run's late records in its asset events' extras and on the health page: as many as it wrote to `_late`,
by node."""

from __future__ import annotations

from pipeline_airflow import health
from pipeline_airflow.paths import JobPaths
from pipeline_airflow.reports import asset_extras

from spark_jobs.jobs import generate_events, sensor_alerts
from spark_jobs.spark.in_memory import run_directory
from spark_jobs.spark.job import JobSpec
from spark_jobs.spark.topics import LATE_TOPIC


def test_asset_extras_and_the_health_page_show_the_late_records_of_the_run(tmp_path):
    landing, output = tmp_path / "in", tmp_path / "out"
    generate_events.main(
        ["--output", str(landing), "--events", "1500", "--sensors", "8", "--files", "3"]
        + ["--late-fraction", "0.05", "--seed", "3"]
    )
    runtime = run_directory(JobSpec(sensor_alerts.JOB_MODULE, {}, 2), landing, max_files_per_trigger=1)
    runtime.summary.write(output)
    late = runtime.topic(LATE_TOPIC)
    assert len(late) > 0

    run = asset_extras(output, tmp_path / "reports")["run"]

    assert run["late"] == len(late)
    assert run["late_by_node"] == late["node"].value_counts().to_dict()
    section = health.job_section(
        "sensor_alerts", JobPaths(landing, output, tmp_path / "ckpt", tmp_path / "r")
    )
    assert f"{len(late):,} late" in section and str(output / LATE_TOPIC) in section
