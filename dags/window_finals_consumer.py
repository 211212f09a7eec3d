"""An example downstream DAG: runs whenever sensor alerts publish new window finals (their Asset), and
reads exactly the batches that run published, as the asset event's extras name them."""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG, task
from pipeline_airflow.paths import JobPaths
from pipeline_airflow.pipeline import topic_asset

OUTPUT = JobPaths.for_job("sensor_alerts").output
WINDOW_FINALS = topic_asset("sensor_alerts", OUTPUT, "window-finals")

with DAG(
    dag_id="window_finals_consumer",
    description="Reads the window finals each validated sensor-alerts run published",
    doc_md=__doc__,
    schedule=[WINDOW_FINALS],
    start_date=dt.datetime(2025, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    tags=["example", "assets"],
):

    @task
    def read_new_finals(*, triggering_asset_events=None) -> dict:
        from pipeline_airflow.reports import read_published_batches

        return read_published_batches(OUTPUT / "window-finals", triggering_asset_events[WINDOW_FINALS])

    read_new_finals()
