"""The sensor-alerts pipeline: one exactly-once Spark run per aligned interval, then its data quality."""

from __future__ import annotations

import datetime as dt
import os

from airflow.sdk import DAG, task
from pipeline_airflow.paths import JobPaths
from pipeline_airflow.spark import SparkJobSubmitOperator
from pipeline_airflow.timetables import AlignedIntervalTimetable

INTERVAL = dt.timedelta(minutes=int(os.environ.get("SENSOR_ALERTS_INTERVAL_MINUTES", "10")))
SHIFT = dt.timedelta(minutes=int(os.environ.get("SENSOR_ALERTS_SHIFT_MINUTES", "2")))
PATHS = JobPaths.for_job("sensor_alerts")

# Templated by SparkSubmitOperator. The wall clock is the end of the run's data interval: an aligned
# boundary, in ISO 8601 (`ts` writes the "T" that str() of a datetime would not). A run triggered without
# a logical date (allowed by Airflow 3's REST API) has no data interval: it takes the moment it was asked
# for, which the run keeps, so clearing and re-running it reproduces the same wall clock.
JOB_ARGS = [
    "--input", str(PATHS.input),
    "--output", str(PATHS.output),
    "--checkpoint", str(PATHS.checkpoint),
    "--trigger", "available-now",
    "--wall-clock", "{{ (data_interval_end or dag_run.run_after) | ts }}",
]  # fmt: skip
VALIDATION_ARGS = [
    "--output", str(PATHS.output),
    "--reports", str(PATHS.reports),
    "--run-name", "{{ run_id }}",
]  # fmt: skip

DOC = f"""
### Sensor alerts

Every **{INTERVAL}** at **+{SHIFT}** past the epoch-aligned boundary (the same grid as the engine's
WALL_CLOCK_TIME punctuation), this DAG

1. **run_sensor_alerts**: runs `spark_jobs/jobs/sensor_alerts.py` once over everything that arrived
   in the input folder (`--trigger available-now`), with the run's wall clock given as data
   (`--wall-clock` = the end of the data interval), so a re-run reproduces every punctuation;
2. **validate_outputs**: checks every output topic with Great Expectations; the run fails when a
   suite fails;
3. **report_outputs**: records the row count of each topic and where the Data Docs are, whatever
   the verdict.

The streaming checkpoint keeps the job exactly-once, so a failed Spark task is retried as is.
With `catchup=False` a paused DAG resumes with one run for the latest complete interval: missed
intervals collapse, as missed punctuations do.

| | |
|---|---|
| input | `{PATHS.input}` |
| output | `{PATHS.output}` |
| checkpoint | `{PATHS.checkpoint}` |
| reports | `{PATHS.reports}` |

The interval and shift are `SENSOR_ALERTS_INTERVAL_MINUTES` and `SENSOR_ALERTS_SHIFT_MINUTES`; the
Spark master is `SPARK_MASTER` (`local[*]` when unset).
"""

with DAG(
    dag_id="sensor_alerts_pipeline",
    description="Sensor alerts on Spark at aligned intervals, validated with Great Expectations",
    doc_md=DOC,
    schedule=AlignedIntervalTimetable(INTERVAL, SHIFT),
    start_date=dt.datetime(2025, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    max_active_runs=1,  # one checkpoint: two runs at once would fight over it
    tags=["spark", "streaming", "data-quality"],
) as dag:
    run_sensor_alerts = SparkJobSubmitOperator(
        task_id="run_sensor_alerts",
        name="sensor_alerts",
        script="jobs/sensor_alerts.py",
        application_args=JOB_ARGS,
        # Safe to retry: the checkpoint makes a second attempt commit each batch exactly once.
        retries=2,
        retry_delay=dt.timedelta(minutes=1),
    )

    validate_outputs = SparkJobSubmitOperator(
        task_id="validate_outputs",
        name="validate_sensor_alerts",
        script="quality/validate.py",
        application_args=VALIDATION_ARGS,
        # A failed suite is a verdict on the data: retrying cannot change it.
        retries=0,
    )

    @task
    def report_outputs() -> dict:
        from pipeline_airflow.reports import summarize_outputs

        return summarize_outputs(PATHS.output, PATHS.reports)

    # A teardown runs whatever the verdict and does not decide the run's state: validate_outputs does.
    run_sensor_alerts >> validate_outputs >> report_outputs().as_teardown()
