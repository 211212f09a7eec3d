"""Exactly once under SIGKILL: the job (a subprocess, with its JVM) is killed at random points while it runs,
restarted each time from its checkpoint, and in the end its outputs equal an uninterrupted run's: no
duplicate, no lost row. Readers never see a partial batch in between."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from spark_jobs.jobs import generate_events, sensor_alerts
from spark_jobs.spark import sink
from spark_jobs.spark.in_memory import run_directory
from spark_jobs.spark.job import JobSpec
from tests.spark.support import committed_rows, job_command, job_env, ordered_files, reference_rows
from tests.spark.test_late_records import in_memory_late_rows, late_rows

PARTITIONS = 3
KILLS = 3


def _committed_batches(output: Path) -> int:
    return len(sink.committed_batch_ids(output, "window-counts"))


def _assert_no_partial_batch_visible(output: Path) -> None:
    for topic in sensor_alerts.OUTPUT_TOPICS:
        for batch_id in sink.committed_batch_ids(output, topic):
            pq.read_table(sink.batch_dir(output, topic, batch_id))  # every published file is whole


def _run_until_killed(cmd, output: Path, rng: random.Random, log) -> bool:
    """Start the job; once it has made progress (a batch staged or published), wait a random moment and
    SIGKILL its whole process group. Returns False if the job finished before it could be killed."""
    process = subprocess.Popen(cmd, env=job_env(), stdout=log, stderr=log, start_new_session=True)
    start_batches = _committed_batches(output)
    staging = output / sink.STAGING_DIR
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if process.poll() is not None:
                return False
            staged = staging.is_dir() and any(staging.iterdir())
            if staged or _committed_batches(output) > start_batches:
                break
            time.sleep(0.05)
        time.sleep(rng.uniform(0, 2.0))
        if process.poll() is not None:
            return False
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return True
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.mark.spark
@pytest.mark.slow
def test_sigkill_at_random_points_then_restart_gives_exactly_the_uninterrupted_output(tmp_path):
    landing = tmp_path / "in"
    generate_events.main(
        [
            "--output",
            str(landing),
            "--events",
            "3000",
            "--sensors",
            "15",
            "--files",
            "10",
            "--late-fraction",
            "0.02",
            "--seed",
            "5",
        ]
    )
    wall_clock = json.loads((landing / "_generated.json").read_text())["last_event_ms"] + 180_000
    output, checkpoint = tmp_path / "out", tmp_path / "ckpt"
    cmd = job_command(
        landing,
        output,
        checkpoint,
        "--partitions",
        str(PARTITIONS),
        "--max-files-per-trigger",
        "1",
        "--wall-clock",
        str(wall_clock),
    )
    rng = random.Random(int(os.environ.get("CRASH_SEED", "20250101")))
    kills = 0
    with open(tmp_path / "job.log", "wb") as log:
        while kills < KILLS and _run_until_killed(cmd, output, rng, log):
            kills += 1
            _assert_no_partial_batch_visible(output)
        final = subprocess.run(cmd, env=job_env(), stdout=subprocess.PIPE, stderr=log, timeout=600)
    assert final.returncode == 0, (tmp_path / "job.log").read_text()[-3000:]
    assert kills == KILLS, "the job finished before it could be killed often enough: make the input larger"

    expected = reference_rows(
        sensor_alerts.JOB_MODULE, {}, PARTITIONS, [(ordered_files(landing), wall_clock)]
    )
    assert set(expected) == set(sensor_alerts.OUTPUT_TOPICS)
    for topic in sensor_alerts.OUTPUT_TOPICS:
        actual = committed_rows(output, topic)
        keys = [(row[5], row[6]) for row in actual]
        assert len(keys) == len(set(keys)), f"duplicate rows in {topic}"
        assert actual == expected[topic], topic
    # Every batch of the offset log was published once; the wall clock reached every task.
    summary = json.loads(final.stdout[final.stdout.index(b"{") :])
    assert summary["wall_clock_by_partition"] == {str(p): wall_clock for p in range(PARTITIONS)}
    assert not any((output / sink.STAGING_DIR).iterdir())
    # Each late record written once, as an uninterrupted run writes them; the final run's batches hold
    # as many as its summary says it dropped.
    uninterrupted = run_directory(JobSpec(sensor_alerts.JOB_MODULE, {}, PARTITIONS), landing, 1, wall_clock)
    late = late_rows(output)
    assert late and late == in_memory_late_rows(uninterrupted)
    assert len(late_rows(output, summary["batches"])) == summary["records"]["dropped_late"]
