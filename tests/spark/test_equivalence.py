"""The Spark job's output per partition equals the engine's own tasks' for the same records in the same order,
whatever the micro-batches and across a stop and restart from the checkpoint (docs/semantics.md section 7)."""

from __future__ import annotations

import json
import zlib

import pytest

from spark_jobs.jobs import generate_events, sensor_alerts, window_finals
from spark_jobs.spark import runtime
from spark_jobs.spark.in_memory import run_directory
from spark_jobs.spark.job import JobSpec
from tests.spark.support import (
    SENSOR_ALERTS,
    all_committed,
    committed_by_partition,
    copy_files,
    driver_rows,
    ordered_files,
    reference_rows,
    run_in_process,
)

PARTITIONS = 3
TOPICS = list(sensor_alerts.OUTPUT_TOPICS)


@pytest.fixture(scope="module")
def landing(tmp_path_factory):
    """8 files of realistic readings (late and out-of-order ones included); wall clock 3 minutes after the
    last event, so only the sensors that went silent early are reported."""
    directory = tmp_path_factory.mktemp("landing")
    generate_events.main(
        [
            "--output",
            str(directory),
            "--events",
            "2400",
            "--sensors",
            "12",
            "--files",
            "8",
            "--late-fraction",
            "0.03",
            "--seed",
            "11",
        ]
    )
    facts = json.loads((directory / "_generated.json").read_text())
    return directory, facts["last_event_ms"] + 180_000


def _assert_equal_to_tasks(output, phases):
    expected = reference_rows(SENSOR_ALERTS, {}, PARTITIONS, phases)
    actual = all_committed(output, TOPICS)
    assert set(actual) == set(expected)
    for topic in expected:
        assert actual[topic] == expected[topic], topic
    # Every topic of the job had output in this scenario: the comparison is not vacuous.
    assert set(expected) == set(TOPICS)
    return expected


@pytest.mark.spark
def test_one_file_per_micro_batch_equals_stream_tasks_and_driver(spark, landing, tmp_path):
    directory, wall_clock = landing
    summary = run_in_process(
        spark,
        directory,
        tmp_path / "out",
        tmp_path / "ckpt",
        partitions=PARTITIONS,
        max_files_per_trigger=1,
        wall_clock_ms=wall_clock,
    )
    assert len(summary.batches) == 9  # 8 files, then the wall clock
    phases = [(ordered_files(directory), wall_clock)]
    _assert_equal_to_tasks(tmp_path / "out", phases)
    expected = driver_rows(SENSOR_ALERTS, {}, PARTITIONS, phases)
    for topic in TOPICS:
        assert committed_by_partition(tmp_path / "out", topic) == expected.get(topic, {}), topic


@pytest.mark.spark
def test_a_topology_that_never_reads_values_is_shipped_none_with_the_same_output(spark, landing, tmp_path):
    """window_finals (windowed count + suppress) gets keys and timestamps alone on Spark; its output still
    equals that of tasks fed every record's real value."""
    directory, wall_clock = landing
    assert not JobSpec(window_finals.JOB_MODULE, {}, PARTITIONS).reads_input_values
    run_in_process(
        spark,
        directory,
        tmp_path / "out",
        tmp_path / "ckpt",
        module=window_finals.JOB_MODULE,
        partitions=PARTITIONS,
        max_files_per_trigger=3,
        wall_clock_ms=wall_clock,
    )
    expected = reference_rows(
        window_finals.JOB_MODULE, {}, PARTITIONS, [(ordered_files(directory), wall_clock)]
    )
    assert len(expected[window_finals.WINDOW_FINALS]) > 100
    assert all_committed(tmp_path / "out", list(window_finals.OUTPUT_TOPICS)) == expected


@pytest.mark.spark
def test_everything_in_one_micro_batch_gives_the_same_output(spark, landing, tmp_path):
    directory, wall_clock = landing
    summary = run_in_process(
        spark, directory, tmp_path / "out", tmp_path / "ckpt", partitions=PARTITIONS, wall_clock_ms=wall_clock
    )
    assert len(summary.batches) == 2
    _assert_equal_to_tasks(tmp_path / "out", [(ordered_files(directory), wall_clock)])


@pytest.mark.spark
def test_a_partition_input_in_many_arrow_batches_gives_the_same_output(spark, landing, tmp_path, monkeypatch):
    """The stateful stage's input, and a task's state read whole, come in Arrow batches of at most
    `ARROW_BATCH_BYTES`: with a bound below one chunk, each of a partition's input chunks comes in a batch
    of its own, and a task reads them all, in order, as one micro-batch's input; the wall clock's micro-batch
    reads each task's state one entry a batch."""
    monkeypatch.setattr(runtime, "ARROW_BATCH_BYTES", 1)
    directory, wall_clock = landing
    summary = run_in_process(
        spark, directory, tmp_path / "out", tmp_path / "ckpt", partitions=PARTITIONS, wall_clock_ms=wall_clock
    )
    assert len(summary.batches) == 2 and summary.read == 2400
    _assert_equal_to_tasks(tmp_path / "out", [(ordered_files(directory), wall_clock)])


@pytest.mark.spark
def test_stop_and_restart_from_the_checkpoint_mid_stream(spark, landing, tmp_path):
    directory, wall_clock = landing
    files = ordered_files(directory)
    first_clock = wall_clock - 40 * 60_000
    inbox = tmp_path / "inbox"
    copy_files(files[:3], inbox)
    first = run_in_process(
        spark,
        inbox,
        tmp_path / "out",
        tmp_path / "ckpt",
        partitions=PARTITIONS,
        max_files_per_trigger=2,
        wall_clock_ms=first_clock,
    )
    copy_files(files[3:], inbox)
    second = run_in_process(
        spark,
        inbox,
        tmp_path / "out",
        tmp_path / "ckpt",
        partitions=PARTITIONS,
        max_files_per_trigger=2,
        wall_clock_ms=wall_clock,
    )
    assert first.batches == [0, 1, 2] and second.batches == [3, 4, 5, 6]
    assert first.read + second.read == 2400
    _assert_equal_to_tasks(tmp_path / "out", [(files[:3], first_clock), (files[3:], wall_clock)])


def test_in_memory_runtime_equals_stream_tasks(landing):
    """The Spark-free twin of the pipeline (same parsing, ordering and task code) gives the same rows."""
    directory, wall_clock = landing
    runtime = run_directory(JobSpec(SENSOR_ALERTS, {}, PARTITIONS), directory, 3, wall_clock)
    expected = reference_rows(SENSOR_ALERTS, {}, PARTITIONS, [(ordered_files(directory), wall_clock)])
    for topic, rows in expected.items():
        frame = runtime.topic(topic)
        actual = [tuple(r) for r in frame[["partition", "seq"]].itertuples(index=False)]
        assert actual == [(r[5], r[6]) for r in rows], topic
    assert runtime.summary.read == 2400 and runtime.summary.late > 0


@pytest.mark.spark
def test_wall_clock_reaches_every_task_also_without_input(spark, tmp_path):
    """Scheduled runs: the run's wall clock is applied to partitions 0..N-1, those without any input too."""
    landing = tmp_path / "in"
    landing.mkdir()
    (landing / "one-sensor.jsonl").write_text('{"key": "only", "value": null, "timestamp": 1735689600000}\n')
    summary = run_in_process(
        spark, landing, tmp_path / "out", tmp_path / "ckpt", partitions=4, wall_clock_ms=1735690000000
    )
    assert summary.wall_clock == {p: 1735690000000 for p in range(4)}
    assert summary.processed == 1
    # The one sensor is 400 s old at that wall clock: reported by its own task, once.
    alerts = committed_by_partition(tmp_path / "out", "silent-sensors")
    assert [(p, [r[0] for r in rows]) for p, rows in alerts.items()] == [(zlib.crc32(b"only") % 4, ["only"])]
