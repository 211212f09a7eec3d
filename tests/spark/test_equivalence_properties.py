"""Hypothesis: for any readings, any cut into files and micro-batches and any wall clock, Spark's output per
partition equals the TopologyTestDriver's. Few examples for Spark (seconds each), many for the in-memory twin."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_jobs.jobs import sensor_alerts
from spark_jobs.spark import task_runner
from spark_jobs.spark.in_memory import run_directory
from spark_jobs.spark.job import JobSpec
from tests.spark.support import (
    SENSOR_ALERTS,
    committed_by_partition,
    driver_rows,
    ordered_files,
    run_in_process,
)

BASE = 1_735_689_600_000  # 2025-01-01T00:00Z, on the 10-minute grid
# Small figures so that a few dozen readings close windows, cross summary boundaries and fall silent.
OPTIONS = {
    "window_size": 10_000,
    "grace": 5_000,
    "low_activity_threshold": 3,
    "summary_interval": 30_000,
    "summary_shift": 7_000,
    "silence_check_interval": 20_000,
    "silence_horizon": 25_000,
}
PARTITIONS = 2


@st.composite
def scenarios(draw):
    """Readings in arrival order (time mostly moving forward, some late), cut into files; a wall clock."""
    n = draw(st.integers(1, 60))
    steps = draw(st.lists(st.integers(-20_000, 9_000), min_size=n, max_size=n))
    sensors = draw(st.lists(st.sampled_from(["s1", "s2", "s3", "s4", "ünï"]), min_size=n, max_size=n))
    t = BASE
    records = []
    for i, (step, sensor) in enumerate(zip(steps, sensors, strict=True)):
        t = max(BASE, t + step)
        records.append({"key": sensor, "value": {"i": i}, "timestamp": t})
    cuts = sorted(draw(st.sets(st.integers(1, max(1, n - 1)), max_size=4)))
    files = [records[a:b] for a, b in zip([0, *cuts], [*cuts, n], strict=True) if records[a:b]]
    max_files = draw(st.sampled_from([1, 2, None]))
    wall_clock = draw(st.one_of(st.none(), st.integers(BASE, BASE + 400_000)))
    return files, max_files, wall_clock


def _write(directory: Path, files: list[list[dict]]) -> None:
    directory.mkdir(parents=True)
    now = time.time() - len(files)
    for i, recs in enumerate(files):
        path = directory / f"part-{i:03d}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in recs))
        os.utime(path, (now + i, now + i))


def _expected(directory: Path, wall_clock):
    return driver_rows(SENSOR_ALERTS, OPTIONS, PARTITIONS, [(ordered_files(directory), wall_clock)])


@pytest.mark.spark
@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(scenario=scenarios())
def test_spark_equals_driver_for_any_readings_and_batching(spark, scenario):
    files, max_files, wall_clock = scenario
    with tempfile.TemporaryDirectory(prefix="equiv-") as tmp:
        root = Path(tmp)
        _write(root / "in", files)
        run_in_process(
            spark,
            root / "in",
            root / "out",
            root / "ckpt",
            options=OPTIONS,
            partitions=PARTITIONS,
            max_files_per_trigger=max_files,
            wall_clock_ms=wall_clock,
        )
        expected = _expected(root / "in", wall_clock)
        for topic in sensor_alerts.OUTPUT_TOPICS:
            assert committed_by_partition(root / "out", topic) == expected.get(topic, {}), topic


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(scenario=scenarios(), process_slice=st.sampled_from([1, 2, 5, task_runner.PROCESS_SLICE]))
def test_in_memory_twin_equals_driver_for_any_readings_and_batching(scenario, process_slice):
    """Also whatever the slices a task processes a micro-batch's records in (task_runner.PROCESS_SLICE)."""
    files, max_files, wall_clock = scenario
    with (
        tempfile.TemporaryDirectory(prefix="equiv-") as tmp,
        patch.object(task_runner, "PROCESS_SLICE", process_slice),
    ):
        root = Path(tmp)
        _write(root / "in", files)
        runtime = run_directory(
            JobSpec(SENSOR_ALERTS, OPTIONS, PARTITIONS), root / "in", max_files, wall_clock
        )
        expected = _expected(root / "in", wall_clock)
        for topic in sensor_alerts.OUTPUT_TOPICS:
            frame = runtime.topic(topic)
            actual: dict[int, list[tuple]] = {}
            for row in frame.to_dict("records") if len(frame) else []:
                ws = None if row["window_start"] != row["window_start"] else int(row["window_start"])
                we = None if row["window_end"] != row["window_end"] else int(row["window_end"])
                actual.setdefault(int(row["partition"]), []).append(
                    (row["key"], row["value"], int(row["timestamp"]), ws, we)
                )
            assert actual == expected.get(topic, {}), topic
