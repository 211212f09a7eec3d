"""The exactly-once Parquet sink without Spark: staging, publishing, replays, readers."""

from __future__ import annotations

import datetime
import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_jobs.spark import sink
from spark_jobs.spark.topics import LATE_SCHEMA, LATE_TOPIC, QUARANTINE_TOPIC, TopicSchema, late_table
from spark_jobs.streams.runtime.late import LateRecord

SCHEMA = TopicSchema(pa.string(), pa.int64())
DECLARED = {"counts": SCHEMA, "alerts": SCHEMA}


def _chunk(partition: int, seqs: list[int]) -> pa.Table:
    n = len(seqs)
    return pa.Table.from_arrays(
        [
            pa.array([f"k{s}" for s in seqs]),
            pa.array(seqs, pa.int64()),
            pa.array(seqs, pa.int64()),
            pa.array([None] * n, pa.int64()),
            pa.array([None] * n, pa.int64()),
            pa.array([partition] * n, pa.int32()),
            pa.array(seqs, pa.int64()),
        ],
        schema=SCHEMA.arrow_schema(),
    )


def _stage(
    output, batch_id: int, tables: dict[int, pa.Table], alerts: dict[int, pa.Table] | None = None
) -> dict[str, list[str]]:
    """A micro-batch as the runtime runs it: staging emptied, then each task (partition) stages its own
    tables (`counts`, and `alerts` where given); the driver's view of the files by topic."""
    sink.prepare_batch(output, batch_id)
    staged: dict[str, list[str]] = {}
    for partition, table in tables.items():
        topics = {"counts": table}
        if alerts and partition in alerts:
            topics["alerts"] = alerts[partition]
        for topic, file, rows, payload in sink.stage_partition_output(output, partition, topics):
            assert rows == topics[topic].num_rows and payload is None
            staged.setdefault(topic, []).append(file)
    return {topic: sorted(files) for topic, files in staged.items()}


def test_a_batch_is_published_per_topic_and_readable_by_pandas_and_pyarrow(tmp_path):
    staged = _stage(tmp_path, 0, {0: _chunk(0, [0, 1]), 1: _chunk(1, [0])}, alerts={0: _chunk(0, [])})
    assert list(staged) == ["counts"]  # a table without rows stages no file
    published = sink.commit_batch(tmp_path, 0, staged, DECLARED)
    assert published == [LATE_TOPIC, QUARANTINE_TOPIC, "alerts", "counts"]
    assert pq.read_schema(next((tmp_path / LATE_TOPIC).rglob("*.parquet"))).equals(LATE_SCHEMA)
    frame = pd.read_parquet(tmp_path / "counts")
    assert sorted(zip(frame["partition"], frame["seq"], strict=False)) == [(0, 0), (0, 1), (1, 0)]
    assert len(pd.read_parquet(tmp_path / "alerts")) == 0  # declared topic: readable, with its schema
    assert list(pd.read_parquet(tmp_path / QUARANTINE_TOPIC).columns[:4]) == [
        "reason",
        "raw",
        "source_file",
        "line",
    ]
    assert not any((tmp_path / sink.STAGING_DIR).iterdir())  # the batch's staging and the tasks' are gone


def test_replayed_batch_is_not_published_twice(tmp_path):
    sink.commit_batch(tmp_path, 0, _stage(tmp_path, 0, {0: _chunk(0, [0, 1])}), DECLARED)
    # The same batch again (a replay after a crash between publishing and Spark's commit).
    assert sink.commit_batch(tmp_path, 0, _stage(tmp_path, 0, {0: _chunk(0, [0, 1])}), DECLARED) == []
    sink.commit_batch(tmp_path, 1, _stage(tmp_path, 1, {0: _chunk(0, [2])}), DECLARED)
    frame = sink.read_topic(tmp_path, "counts")
    assert frame["seq"].tolist() == [0, 1, 2]
    assert frame["batch_id"].tolist() == [0, 0, 1]


def test_replay_completes_a_batch_whose_publishing_was_interrupted(tmp_path):
    staged = _stage(tmp_path, 0, {0: _chunk(0, [0])})
    staged["alerts"] = staged.pop("counts")  # pretend: one topic of two published before the crash
    sink.commit_batch(tmp_path, 0, staged, {"alerts": SCHEMA})
    assert sink.committed_batch_ids(tmp_path, "counts") == []
    sink.commit_batch(tmp_path, 0, _stage(tmp_path, 0, {0: _chunk(0, [0])}), DECLARED)
    assert sink.committed_batch_ids(tmp_path, "counts") == [0]
    assert len(sink.read_topic(tmp_path, "alerts")) == 1  # kept: not re-published


def test_staged_but_uncommitted_files_are_invisible_to_readers(tmp_path):
    sink.commit_batch(tmp_path, 0, _stage(tmp_path, 0, {0: _chunk(0, [0])}), DECLARED)
    _stage(tmp_path, 1, {0: _chunk(0, [1, 2, 3])})  # a crash here: staged, never committed
    assert len(pd.read_parquet(tmp_path / "counts")) == 1
    assert len(sink.read_topic(tmp_path, "counts")) == 1


def test_prepare_batch_discards_what_a_crashed_attempt_staged(tmp_path):
    _stage(tmp_path, 3, {0: _chunk(0, [0])})
    assert any(sink.tasks_dir(tmp_path).rglob("*.parquet"))
    # a crash while publishing: a topic's files moved to the batch's ready area, not yet renamed into place
    ready = sink.staging_dir(tmp_path, 3) / "_ready" / "counts"
    ready.mkdir(parents=True)
    (ready / "part-00000.parquet").write_bytes(b"half-published")
    staging = sink.prepare_batch(tmp_path, 3)
    assert list(staging.iterdir()) == []
    assert not sink.tasks_dir(tmp_path).exists()  # the tasks' files of the crashed attempt too


@pytest.mark.spark
def test_spark_reader_sees_committed_batches_only(spark, tmp_path):
    sink.commit_batch(tmp_path, 0, _stage(tmp_path, 0, {0: _chunk(0, [0, 1])}), DECLARED)
    _stage(tmp_path, 1, {0: _chunk(0, [2])})
    rows = spark.read.parquet(str(tmp_path / "counts")).select("seq", "batch_id").collect()
    assert sorted((r.seq, r.batch_id) for r in rows) == [(0, 0), (1, 0)]


def test_output_folder_belongs_to_one_checkpoint(tmp_path):
    assert sink.claim_output(tmp_path / "out", "ckpt-a") == "ckpt-a"
    assert sink.claim_output(tmp_path / "out", "ckpt-a") == "ckpt-a"
    assert sink.claim_output(tmp_path / "out", "ckpt-b") == "ckpt-a"
    # Published batches without an owner (written by hand or by an older version): nobody may claim it.
    sink.commit_batch(tmp_path / "old", 0, _stage(tmp_path / "old", 0, {0: _chunk(0, [0])}), DECLARED)
    assert sink.claim_output(tmp_path / "old", "ckpt-c") == "unknown"


def test_late_values_json_cannot_say_are_kept_as_their_repr():
    when = datetime.datetime(2026, 1, 2, 3, 4, 5)
    table = late_table(
        [
            LateRecord("count", "readings", 0, (7, None, None), "k", {"at": when}, 10, 0, 60, 200),
            LateRecord("count", "readings", 0, (None, "in/a.json", 3), ("a", 1), {"n": 1}, 11, 0, 60, 200),
        ]
    )
    assert table.schema == LATE_SCHEMA
    assert table.column("value").to_pylist() == [json.dumps({"at": repr(when)}), '{"n": 1}']
    assert table.column("key").to_pylist() == ["k", '["a", 1]']
    assert table.column("offset").to_pylist() == [7, None]
    assert table.column("line").to_pylist() == [None, 3]


def test_staged_files_dictionary_encode_all_but_the_int64_columns(tmp_path):
    """Names and measures repeat, so they are dictionary-encoded; int64 columns (timestamps, sequence
    numbers, times in values) are mostly distinct per row and stay plain; the rows read back the same."""
    value = pa.struct([("site", pa.string()), ("temperature", pa.float64()), ("reading_time", pa.int64())])
    schema = TopicSchema(pa.string(), value).arrow_schema()
    rows = 5000
    table = pa.Table.from_arrays(
        [
            pa.array([f"k{i % 7}" for i in range(rows)]),
            pa.array(
                [{"site": f"s{i % 3}", "temperature": i % 11 / 2, "reading_time": i} for i in range(rows)],
                value,
            ),
            pa.array(range(rows), pa.int64()),
            pa.array([None] * rows, pa.int64()),
            pa.array([None] * rows, pa.int64()),
            pa.array([2] * rows, pa.int32()),
            pa.array(range(rows), pa.int64()),
        ],
        schema=schema,
    )
    ((_, path, count, _),) = sink.stage_partition_output(tmp_path, 2, {"enriched": table})
    assert count == rows and pq.read_table(path).equals(table)
    row_group = pq.ParquetFile(path).metadata.row_group(0)
    dictionary = {
        row_group.column(i).path_in_schema
        for i in range(row_group.num_columns)
        if any("DICTIONARY" in e for e in row_group.column(i).encodings)
    }
    assert dictionary == {"key", "value.site", "value.temperature", "partition"}
