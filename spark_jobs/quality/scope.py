"""What a validation run reads: the batches one job run published, plus a small context kept from earlier.

A scheduled run validates what it published (its batch ids, from `<output>/_runs/latest.json`), so its
cost follows the run's size, not the history's. Rules that span batches (a key's timestamps never going
back, a window emitted once, a final being one of its window's updates, no update after a window closed)
also need some earlier rows; validation keeps exactly those, per topic, in `<reports>/context/<topic>/`:

- the last row of each key (per-key order rules);
- the row with the largest timestamp of each task (rules on a task's time);
- every row of a window still within reach: `window_end + reach > the task's time`, where `reach` is the
  largest window size + grace of the job (a window out of reach gets no more rows).

Context rows carry `_context = true`: rules see them but never report them (they were validated by an
earlier run). The context grows with the number of keys and open windows, not with history. `--full`
validates every batch ever published and rebuilds the context from it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from spark_jobs.quality.expectations import CONTEXT_COLUMN
from spark_jobs.spark.summary import RUNS_DIR
from spark_jobs.spark.topics import BUILT_IN_TOPICS
from spark_jobs.streams.guarantees import SuppressedFinals, WindowedUpdates, topic_promises

CONTEXT_DIR = "context"
BATCH_COLUMN = "batch_id"


def latest_run_batches(output: Path) -> list[int] | None:
    """The batch ids the latest run published; None when no run summary exists (validate everything)."""
    latest = Path(output) / RUNS_DIR / "latest.json"
    if not latest.is_file():
        return None
    return sorted(int(b) for b in json.loads(latest.read_text()).get("batches", []))


def context_reach(spec: Any) -> int:
    """How far behind a task's time a window can still get rows: the largest window size + grace."""
    reach = 0
    for promises in topic_promises(spec.topology()).values():
        for promise in promises:
            if isinstance(promise, WindowedUpdates | SuppressedFinals):
                reach = max(reach, promise.size + promise.grace)
    return reach


def scoped_frame(spark, frame, topic: str, reports: Path, batches: list[int] | None):
    """(rows to validate with the context they need, this run's rows alone)."""
    from pyspark.sql import functions as F

    if batches is None:
        new = frame
    else:
        new = frame.where(F.col(BATCH_COLUMN).isin(batches)) if batches else frame.limit(0)
    new = new.withColumn(CONTEXT_COLUMN, F.lit(False))
    kept = context_path(reports, topic)
    if batches is None or topic in BUILT_IN_TOPICS or not kept.is_dir():
        return new, new
    context = spark.read.parquet(str(kept)).withColumn(CONTEXT_COLUMN, F.lit(True))
    return new.unionByName(context, allowMissingColumns=True), new


def keep_context(spark, frame, topic: str, reports: Path, reach_ms: int) -> int:
    """Write the context the next run needs from `frame` (this run's rows and the previous context);
    returns its number of rows. The quarantine and the late records need none: their rules look at one row at a time."""
    if topic in BUILT_IN_TOPICS:
        return 0
    view = f"context_source_{abs(hash(topic))}"
    frame.drop(CONTEXT_COLUMN).createOrReplaceTempView(view)
    try:
        kept = spark.sql(
            "SELECT * EXCEPT (key_rank, task_rank, task_time) FROM (SELECT *, "
            "ROW_NUMBER() OVER (PARTITION BY `key` ORDER BY `partition` DESC, `seq` DESC) AS key_rank, "
            "ROW_NUMBER() OVER (PARTITION BY `partition` ORDER BY `timestamp` DESC, `seq` DESC) AS task_rank, "
            f"MAX(`timestamp`) OVER (PARTITION BY `partition`) AS task_time FROM `{view}`) "
            "WHERE key_rank = 1 OR task_rank = 1 "
            f"OR (`window_end` IS NOT NULL AND `window_end` + {int(reach_ms)} > task_time)"
        )
        target = context_path(reports, topic)
        staging = target.with_name(f"{target.name}.staging")  # Spark ignores paths starting with "."
        shutil.rmtree(staging, ignore_errors=True)
        kept.write.parquet(str(staging))
        rows = spark.read.parquet(str(staging)).count()
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
        return rows
    finally:
        spark.catalog.dropTempView(view)


def context_path(reports: Path, topic: str) -> Path:
    return Path(reports) / CONTEXT_DIR / topic
