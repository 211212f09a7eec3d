"""Wall-clock ticks for continuous jobs: a record of every aligned boundary, as Airflow saw it."""

from __future__ import annotations

import datetime as dt
import os

from airflow.sdk import DAG, task
from pipeline_airflow.paths import var_dir
from pipeline_airflow.sensors import WallClockPunctuationSensor

INTERVAL = dt.timedelta(seconds=int(os.environ.get("WALL_CLOCK_TICK_INTERVAL_SECONDS", "60")))
SHIFT = dt.timedelta(seconds=int(os.environ.get("WALL_CLOCK_TICK_SHIFT_SECONDS", "0")))
TICKS_FILE = var_dir() / "data" / "wall_clock_ticks" / "ticks.jsonl"

DOC = f"""
### Wall-clock ticks

A continuous job (`--trigger continuous`) punctuates on the system clock, best effort. This DAG
runs back to back (`@continuous`); each run waits in the triggerer, holding no worker slot, for the
next boundary `k × {INTERVAL} + {SHIFT}` since the epoch (the grid of the engine's WALL_CLOCK_TIME
punctuation) and appends the tick to `{TICKS_FILE}`: the boundary, when Airflow recorded it, and
how late that was.

Interval and shift: `WALL_CLOCK_TICK_INTERVAL_SECONDS`, `WALL_CLOCK_TICK_SHIFT_SECONDS`.
"""

with DAG(
    dag_id="wall_clock_ticks",
    description="Records each aligned wall-clock boundary, for continuous jobs",
    doc_md=DOC,
    schedule="@continuous",
    start_date=dt.datetime(2025, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    max_active_runs=1,
    tags=["wall-clock", "streaming"],
) as dag:
    wait_for_boundary = WallClockPunctuationSensor(
        task_id="wait_for_boundary",
        interval=INTERVAL,
        shift=SHIFT,
        deferrable=True,
    )

    @task
    def record_tick(boundary: dict) -> dict:
        from pipeline_airflow.ticks import append_tick

        return append_tick(TICKS_FILE, boundary)

    record_tick(wait_for_boundary.output)
