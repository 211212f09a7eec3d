"""A hopping-window user aggregate under a final suppress (bench/jobs/hopping_stats.py) on Spark, in
micro-batches long enough for the fused pass (nodes/final_window_user_aggregate.py), equals the
TopologyTestDriver playing each partition record by record."""

from __future__ import annotations

import pytest

from bench.jobs import hopping_stats
from spark_jobs.jobs import generate_events
from tests.spark.support import committed_by_partition, driver_rows, ordered_files, run_in_process

JOB = "bench.jobs.hopping_stats"
PARTITIONS = 2
# small windows, so that the readings close many of them within and between micro-batches
OPTIONS = {"window_size": 60_000, "advance": 20_000, "grace": 10_000}


@pytest.mark.spark
def test_the_spark_output_equals_the_driver_record_by_record(spark, tmp_path) -> None:
    generate_events.main(
        ["--output", str(tmp_path / "input"), "--events", "6000", "--sensors", "12", "--files", "3",
         "--late-fraction", "0.05", "--seed", "5"]
    )  # fmt: skip
    run_in_process(
        spark, tmp_path / "input", tmp_path / "output", tmp_path / "checkpoint", module=JOB, options=OPTIONS,
        partitions=PARTITIONS, max_files_per_trigger=1,
    )  # fmt: skip
    expected = driver_rows(JOB, OPTIONS, PARTITIONS, [(ordered_files(tmp_path / "input"), None)])
    actual = committed_by_partition(tmp_path / "output", hopping_stats.WINDOW_STATS)
    assert sum(map(len, actual.values())) > 50
    assert actual == expected[hopping_stats.WINDOW_STATS]
