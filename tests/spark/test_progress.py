"""Progress while a job runs: one log line per micro-batch, kept in the run summary too."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest

from spark_jobs.jobs import generate_events
from spark_jobs.spark import progress
from spark_jobs.spark.progress import BatchProgressLogger
from spark_jobs.spark.summary import RunSummary
from tests.spark.support import run_in_process


def batch(batch_id: int):
    """A `StreamingQueryProgress` as far as the logger reads one."""
    return SimpleNamespace(
        batchId=batch_id,
        durationMs={"triggerExecution": 100 + batch_id},
        sources=[SimpleNamespace(numInputRows=1)],
        stateOperators=[SimpleNamespace(numRowsTotal=3, memoryUsedBytes=1000)],
    )


class QueryProgress:
    """What a `StreamingQuery` says of its progress: the last batch, and the recent ones (Spark keeps 100)."""

    def __init__(self):
        self.batches = []
        self.recent_reads = 0  # the look a poll takes only when it may have missed batches

    def finish(self, *batch_ids: int) -> None:
        self.batches += [batch(b) for b in batch_ids]

    @property
    def lastProgress(self):  # noqa: N802 (Spark's name)
        return self.batches[-1] if self.batches else None

    @property
    def recentProgress(self):  # noqa: N802
        self.recent_reads += 1
        return self.batches[-100:]


def test_a_poll_reports_every_batch_that_ended_since_the_last_one_once_and_in_order():
    summary = RunSummary(job="j", trigger="t", partitions=1)
    summary.processed_by_batch[7] = 214  # what the sink folded in from batch 7's task metrics
    logger, query = BatchProgressLogger(summary), QueryProgress()
    logger.poll(query)  # no batch yet
    query.finish(7)  # a restarted checkpoint's first batch is not 0
    logger.poll(query)
    logger.poll(query)
    assert query.recent_reads == 1  # the first batch seen: any before it may be new too
    query.finish(8)
    logger.poll(query)
    assert query.recent_reads == 1  # the next batch, alone: the last progress is enough
    query.finish(9, 10, 11)  # three batches between two polls
    logger.poll(query)
    logger.poll(query)
    assert query.recent_reads == 2
    assert [line["batch"] for line in summary.progress] == [7, 8, 9, 10, 11]
    assert summary.batch_durations_ms == {b: 100 + b for b in range(7, 12)}
    assert summary.progress[0] == {
        "batch": 7,
        "files": 1,
        "records": 214,
        "records_per_s": 2000,
        "duration_ms": 107,
        "state_rows": 3,
        "state_bytes": 1000,
    }


@pytest.mark.spark
@pytest.mark.parametrize("poll_s", [0.05, 600.0], ids=["polled-while-running", "reported-at-the-end"])
def test_each_micro_batch_logs_one_progress_line_and_the_summary_keeps_them(
    spark, tmp_path, caplog, monkeypatch, poll_s
):
    """Once per batch, whether a poll while the query runs or the look at the ended query reports it."""
    monkeypatch.setattr(progress, "POLL_S", poll_s)
    generate_events.main(
        ["--output", str(tmp_path / "in"), "--events", "3000", "--sensors", "5", "--files", "3"]
    )
    with caplog.at_level(logging.INFO, logger="spark_jobs.progress"):
        summary = run_in_process(
            spark, tmp_path / "in", tmp_path / "out", tmp_path / "ckpt", max_files_per_trigger=1, partitions=2
        )
    lines = [r.getMessage() for r in caplog.records if r.name == "spark_jobs.progress"]
    progress_lines = summary.to_dict()["progress"]
    assert [p["batch"] for p in progress_lines] == sorted(summary.batches) == [0, 1, 2]
    assert [p["files"] for p in progress_lines] == [1, 1, 1]  # one landing file per trigger
    assert sum(p["records"] for p in progress_lines) == summary.processed == 3000
    assert all(
        p["duration_ms"] > 0 and p["records_per_s"] > 0 and p["state_rows"] > 0 for p in progress_lines
    )
    assert len(lines) == 3 and lines[0].startswith("batch 0: 1 files, ")
    written = json.loads((tmp_path / "out" / "_runs" / "latest.json").read_text())
    assert written["progress"] == progress_lines
