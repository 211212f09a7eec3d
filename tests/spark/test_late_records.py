"""`<output>/_late`: every record the sensor alerts job drops as late is written once, with where it came
from; as many rows as the run summary's `dropped_late`, the same rows whatever the micro-batching."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from spark_jobs.jobs import generate_events, sensor_alerts
from spark_jobs.spark import sink
from spark_jobs.spark.in_memory import run_directory
from spark_jobs.spark.job import JobSpec
from spark_jobs.spark.topics import LATE_SCHEMA, LATE_TOPIC
from spark_jobs.streams import TopologyTestDriver
from tests.spark.support import ordered_files, partition_records, run_in_process

PARTITIONS = 3
COLUMNS = LATE_SCHEMA.names


@pytest.fixture(scope="module")
def landing(tmp_path_factory):
    directory = tmp_path_factory.mktemp("landing")
    generate_events.main(
        ["--output", str(directory), "--events", "3000", "--sensors", "12", "--files", "6"]
        + ["--late-fraction", "0.03", "--seed", "23"]
    )
    return directory


def late_rows(output: Path, batches: list[int] | None = None) -> list[tuple]:
    """The committed late rows (of `batches` only, if given), sorted."""
    rows = []
    for batch_id in sink.committed_batch_ids(output, LATE_TOPIC):
        if batches is None or batch_id in batches:
            table = pq.read_table(sink.batch_dir(output, LATE_TOPIC, batch_id))
            assert table.schema.equals(LATE_SCHEMA), table.schema
            rows += [tuple(r[c] for c in COLUMNS) for r in table.to_pylist()]
    return sorted(rows, key=repr)


def in_memory_late_rows(runtime) -> list[tuple]:
    frame = runtime.topic(LATE_TOPIC)
    return sorted(
        (
            tuple(None if v != v else v for v in row)
            for row in frame[COLUMNS].astype(object).itertuples(index=False)
        ),
        key=repr,
    )


def _driver_late(landing: Path) -> list[tuple]:
    """(key, timestamp, window_start) of the late records of one test driver per partition, fed by
    reading the files with json, not the runtime's code."""
    out = []
    records = partition_records(ordered_files(landing), PARTITIONS)
    for p in range(PARTITIONS):
        with TopologyTestDriver(sensor_alerts.build_topology(), partition=p) as driver:
            topic = driver.create_input_topic(sensor_alerts.INPUT_TOPIC)
            for key, value, ts in records[p]:
                topic.pipe_input(key, value, ts)
            out += [(r.key, r.timestamp, r.window_start) for r in driver.read_late_records()]
    return sorted(out)


def test_in_memory_late_rows_point_at_their_lines_and_equal_dropped_late(landing):
    spec = JobSpec(sensor_alerts.JOB_MODULE, {}, PARTITIONS)
    one_by_one = run_directory(spec, landing, max_files_per_trigger=1)
    at_once = run_directory(spec, landing)
    rows = in_memory_late_rows(one_by_one)
    assert rows, "the generated data must have late records"
    assert rows == in_memory_late_rows(at_once)
    assert one_by_one.summary.to_dict()["records"]["dropped_late"] == len(rows)
    assert at_once.summary.to_dict()["records"]["dropped_late"] == len(rows)
    assert sorted((r[6], r[8], r[9]) for r in rows) == _driver_late(landing)
    lines = {path: Path(path).read_text().splitlines() for path in ordered_files(landing)}
    grace = spec.effective_options()["grace"]
    for row in rows:
        late = dict(zip(COLUMNS, row, strict=True))
        assert late["topic"] == sensor_alerts.INPUT_TOPIC and late["offset"] is None
        record = json.loads(lines[late["file"]][late["line"] - 1])
        assert (record["key"], record["timestamp"]) == (late["key"], late["timestamp"])
        assert late["window_start"] <= late["timestamp"] < late["window_end"]
        assert late["window_end"] + grace <= late["stream_time"]


@pytest.mark.spark
def test_spark_writes_each_late_record_once_whatever_the_batching(spark, landing, tmp_path):
    spec = JobSpec(sensor_alerts.JOB_MODULE, {}, PARTITIONS)
    expected = in_memory_late_rows(run_directory(spec, landing))
    for name, max_files in (("one", 1), ("all", None)):
        output = tmp_path / name / "out"
        summary = run_in_process(
            spark,
            landing,
            output,
            tmp_path / name / "ckpt",
            partitions=PARTITIONS,
            max_files_per_trigger=max_files,
        )
        assert late_rows(output) == expected, name
        assert summary.to_dict()["records"]["dropped_late"] == len(expected), name
        # readable from the first batch on, as the quarantine; then a batch only where it has rows
        written = sink.committed_batch_ids(output, LATE_TOPIC)
        assert written[0] == min(summary.batches) and set(written) <= set(summary.batches), name
