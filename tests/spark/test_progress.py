"""Progress while a job runs: one log line per micro-batch, kept in the run summary too."""

from __future__ import annotations

import json
import logging

import pytest

from spark_jobs.jobs import generate_events
from spark_jobs.spark.progress import BatchProgressLogger
from tests.spark.support import run_in_process

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("listener_hears", [True, False], ids=["listener", "listener-silent"])
def test_each_micro_batch_logs_one_progress_line_and_the_summary_keeps_them(
    spark, tmp_path, caplog, monkeypatch, listener_hears
):
    """Once per batch, whether the listener or the runtime's look at the ended query reports it first
    (the listener hears of batches asynchronously: the last one's may come after the query ended)."""
    if not listener_hears:
        monkeypatch.setattr(BatchProgressLogger, "onQueryProgress", lambda self, event: None)
    generate_events.main(
        ["--output", str(tmp_path / "in"), "--events", "3000", "--sensors", "5", "--files", "3"]
    )
    with caplog.at_level(logging.INFO, logger="spark_jobs.progress"):
        summary = run_in_process(
            spark, tmp_path / "in", tmp_path / "out", tmp_path / "ckpt", max_files_per_trigger=1, partitions=2
        )
    lines = [r.getMessage() for r in caplog.records if r.name == "spark_jobs.progress"]
    progress = summary.to_dict()["progress"]
    assert [p["batch"] for p in progress] == sorted(summary.batches) == [0, 1, 2]
    assert [p["files"] for p in progress] == [1, 1, 1]  # one landing file per trigger
    assert sum(p["records"] for p in progress) == summary.processed == 3000
    assert all(p["duration_ms"] > 0 and p["records_per_s"] > 0 and p["state_rows"] > 0 for p in progress)
    assert len(lines) == 3 and lines[0].startswith("batch 0: 1 files, ")
    written = json.loads((tmp_path / "out" / "_runs" / "latest.json").read_text())
    assert written["progress"] == progress
