"""Chunks between the stages: what a task gets back is the file's records, in the documented order."""

from __future__ import annotations

import io
import json

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_jobs.spark.landing import partition_for_key, read_landing_file
from spark_jobs.spark.transport import (
    CHUNK_RECORDS,
    KIND_DATA,
    ChunkedColumn,
    data_chunks,
    ordered_input,
    unpack_body,
    wall_clock_chunks,
)


def _file(records: list[dict]) -> bytes:
    return ("\n".join(json.dumps(r) for r in records) + "\n").encode()


def _partition(chunks, partition):
    return [c for c in chunks if c.partition == partition]


def test_a_clean_file_comes_back_in_file_order_across_chunks():
    n = CHUNK_RECORDS * 2 + 7  # three chunks for the one partition
    records = [{"key": f"k{i % 3}", "value": {"i": i}, "timestamp": 10**6 - i} for i in range(n)]
    chunks = data_chunks(read_landing_file("/in/a.jsonl", _file(records), 1), file_mtime=1)
    assert [c.records for c in chunks] == [CHUNK_RECORDS, CHUNK_RECORDS, 7]
    got = ordered_input(list(reversed(chunks)))  # the shuffle may deliver them in any order
    assert list(got.keys) == [r["key"] for r in records]
    assert list(got.values) == [r["value"] for r in records]
    assert list(got.timestamps) == [r["timestamp"] for r in records]
    assert len({id(k) for k in got.keys}) == 3  # one string object per distinct key
    # a slice across chunks is made of Python objects, as the engine takes a batch
    piece = slice(CHUNK_RECORDS - 2, CHUNK_RECORDS + 2)
    assert got.timestamps[piece] == [r["timestamp"] for r in records[piece]]
    assert {type(t) for t in got.timestamps[piece]} == {int} and {type(k) for k in got.keys[piece]} == {str}


def test_a_chunk_carries_the_keys_of_its_own_partition_only():
    # With many keys, a table of the whole file's keys in every chunk made each task decode every
    # partition's keys: the table must hold exactly the distinct keys of the chunk's partition.
    records = [{"key": f"sensor-{i % 997}", "timestamp": 1000 + i} for i in range(5000)]
    parsed = read_landing_file("/in/a.jsonl", _file(records), 4)
    chunks = data_chunks(parsed, file_mtime=1, with_values=False)
    assert {c.partition for c in chunks} == {0, 1, 2, 3}
    for chunk in chunks:
        key_table, key_codes, timestamps, _, _ = msgspec.msgpack.decode(unpack_body(chunk.payload)[1])
        own = [r for r in records if partition_for_key(r["key"], 4) == chunk.partition]
        assert sorted(key_table) == sorted({r["key"] for r in own})
        # codes travel as little-endian integers of the width the table needs, timestamps as int64
        assert [key_table[c] for c in np.frombuffer(key_codes, "<u2" if len(key_table) > 256 else "<u1")] == [
            r["key"] for r in own
        ]
        assert np.frombuffer(timestamps, "<i8").tolist() == [r["timestamp"] for r in own]
    assert sum(len(ordered_input(_partition(chunks, p)).keys) for p in range(4)) == len(records)


def test_a_partition_cut_into_chunks_gives_each_chunk_only_its_own_records_keys():
    # The partition's whole key table in every chunk had the task decode most of its keys once per chunk.
    n = CHUNK_RECORDS + 500
    records = [{"key": f"sensor-{(i * 7919) % 30_000}", "timestamp": 1000 + i} for i in range(n)]
    chunks = data_chunks(read_landing_file("/in/a.jsonl", _file(records), 1), file_mtime=1, with_values=False)
    assert [c.records for c in chunks] == [CHUNK_RECORDS, 500]
    start = 0
    for chunk in chunks:
        key_table, key_codes, _, _, _ = msgspec.msgpack.decode(unpack_body(chunk.payload)[1])
        own = [r["key"] for r in records[start : start + chunk.records]]
        assert sorted(key_table) == sorted(set(own))
        width = len(key_codes) // chunk.records
        assert [key_table[c] for c in np.frombuffer(key_codes, {1: "<u1", 2: "<u2", 4: "<i4"}[width])] == own
        start += chunk.records
    got = ordered_input(chunks)
    assert list(got.keys) == [r["key"] for r in records]
    assert len({id(k) for k in got.keys}) == len(set(got.keys))  # one string object per distinct key


def test_files_go_by_modification_time_then_path_and_wall_clocks_come_last():
    a = data_chunks(read_landing_file("/in/b.jsonl", _file([{"key": "x", "timestamp": 1}]), 1), 20)
    b = data_chunks(read_landing_file("/in/a.jsonl", _file([{"key": "y", "timestamp": 2}]), 1), 20)
    c = data_chunks(read_landing_file("/in/z.jsonl", _file([{"key": "z", "timestamp": 3}]), 1), 10)
    markers = wall_clock_chunks({0: [99]}, "/ckpt/control/m", 5)
    got = ordered_input(markers + a + b + c)
    assert list(got.keys) == ["z", "y", "x"]
    assert got.wall_clocks == [99]


def test_explicit_offsets_order_a_partition_and_records_without_one_go_first():
    first = [
        {"key": "a", "timestamp": 1, "partition": 0, "offset": 7},
        {"key": "b", "timestamp": 2, "partition": 0, "offset": 3},
    ]
    second = [{"key": "c", "timestamp": 3}, {"key": "d", "timestamp": 4, "partition": 0, "offset": 5}]
    chunks = data_chunks(read_landing_file("/in/1.jsonl", _file(first), 1), 1) + data_chunks(
        read_landing_file("/in/2.jsonl", _file(second), 1), 2
    )
    assert {c.kind for c in chunks} == {KIND_DATA}
    got = ordered_input(_partition(chunks, 0))
    assert list(got.keys) == ["c", "b", "d", "a"]
    assert list(got.timestamps) == [3, 2, 4, 1]
    # where each came from, as the late records say: the offset, else the file and line
    origins = got.origins_of("", "")
    assert [origins[i] for i in range(4)] == [
        (None, "/in/2.jsonl", 1),
        (3, None, None),
        (5, None, None),
        (7, None, None),
    ]


def test_each_record_knows_its_file_and_line_across_chunks_partitions_and_slices():
    n = CHUNK_RECORDS + 500
    lines = [json.dumps({"key": f"k{i % 5}", "timestamp": i}) if i % 7 else "" for i in range(n)]
    content = ("\n".join(lines) + "\n").encode()  # blank lines are not records, yet count as lines
    for partitions in (1, 3):
        chunks = data_chunks(read_landing_file("/in/a.jsonl", content, partitions), file_mtime=1)
        for partition in range(partitions):
            got = ordered_input(_partition(chunks, partition))
            origins = got.origins_of("", "")
            assert len(origins) == len(got.keys)
            for i in [0, 1, len(got.keys) // 2, len(got.keys) - 1]:
                offset, file, line = origins[i]
                assert (offset, file) == (None, "/in/a.jsonl")
                assert json.loads(lines[line - 1]) == {"key": got.keys[i], "timestamp": got.timestamps[i]}
            tail = origins[7:] + origins[:7]
            assert tail[len(origins) - 7] == origins[0] and tail[0] == origins[7]


def _parquet(records: list[dict]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(records), sink)
    return sink.getvalue()


def test_without_values_a_task_gets_none_for_each_and_everything_else_unchanged():
    # epoch-millisecond timestamps and values of the sensor readings' size: values are most of a chunk
    records = [
        {"key": f"k{i % 4}", "value": {"temperature": 20.5 + i, "i": i}, "timestamp": 1_735_689_600_000 + i}
        for i in range(50)
    ]
    for name, content in (("/in/a.jsonl", _file(records)), ("/in/a.parquet", _parquet(records))):
        parsed = read_landing_file(name, content, 1)
        full = ordered_input(data_chunks(parsed, 1))
        bare = ordered_input(data_chunks(parsed, 1, with_values=False))
        assert list(full.values) == [r["value"] for r in records], name
        assert list(bare.values) == [None] * len(records), name
        assert (list(bare.keys), list(bare.timestamps)) == (list(full.keys), list(full.timestamps)), name
        bare_bytes = sum(len(c.payload) for c in data_chunks(parsed, 1, with_values=False))
        assert bare_bytes < sum(len(c.payload) for c in data_chunks(parsed, 1)) / 2, name


def test_a_chunk_travels_compressed_and_comes_back_whole():
    # Sensor readings: the same few keys, close timestamps, values of one shape. The JVM copies a chunk's
    # bytes several times between the stages: its body travels compressed, a fraction of its size.
    records = [
        {
            "key": f"sensor-{i % 50}",
            "value": {"temperature": round(20 + (i % 97) / 10, 2)},
            "timestamp": 1_735_689_600_000 + i,
        }
        for i in range(CHUNK_RECORDS)
    ]
    for name, content in (("/in/a.jsonl", _file(records)), ("/in/a.parquet", _parquet(records))):
        (chunk,) = data_chunks(read_landing_file(name, content, 1), 1)
        _, body = unpack_body(chunk.payload)
        assert len(chunk.payload) < len(body) / 2, name
        got = ordered_input([chunk])
        assert (list(got.keys), list(got.values), list(got.timestamps)) == (
            [r["key"] for r in records],
            [r["value"] for r in records],
            [r["timestamp"] for r in records],
        ), name


def test_a_file_read_without_its_values_sends_none_and_refuses_to_send_values():
    records = [{"key": f"k{i % 4}", "value": {"i": i}, "timestamp": 1000 + i} for i in range(30)]
    full = ordered_input(data_chunks(read_landing_file("/in/a.jsonl", _file(records), 2), 1))
    bare_file = read_landing_file("/in/a.jsonl", _file(records), 2, keep_values=False)
    bare = ordered_input(data_chunks(bare_file, 1, with_values=False))
    assert list(bare.values) == [None] * len(records)
    assert (list(bare.keys), list(bare.timestamps)) == (list(full.keys), list(full.timestamps))
    # values the file was read without cannot be sent: an error, never None in place of a value
    with pytest.raises(ValueError, match="keep_values=False"):
        data_chunks(bare_file, 1, with_values=True)


def _piece(form: int, n: int, size: int) -> tuple[object, list]:
    """A chunk's piece of a column in one of its forms, and the list it stands for."""
    if form == 0:
        piece = [{"v": n, "i": i} for i in range(size)]
        return piece, piece
    if form == 1:
        piece = [{"v": n, "i": i} for i in range(size)]
        return json.dumps(piece).encode(), piece
    if form == 2:
        table, codes = [f"k{n}-{j}" for j in range(3)], np.arange(size, dtype=np.uint8) % 3
        return (table, codes), [table[c] for c in codes]
    if form == 3:
        timestamps = np.arange(size, dtype=np.int64) + 10**12 * n
        return timestamps, [10**12 * n + i for i in range(size)]
    return None, [None] * size


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 5)), min_size=1, max_size=6),
    st.integers(0, 30),
    st.integers(0, 30),
)
def test_a_chunked_column_slices_like_the_list_it_stands_for(pieces, start, stop):
    """A column kept as its chunks' pieces (lists, JSON text, key tables with codes, int64 arrays, None
    each) gives, sliced or indexed or iterated, what the list it stands for gives, as Python objects."""
    column, expected = ChunkedColumn(), []
    for n, (form, size) in enumerate(pieces):
        piece, items = _piece(form, n, size)
        column.add(piece, size)
        expected += items
    assert len(column) == len(expected) and list(column) == expected
    assert column[start:stop] == expected[start:stop]
    assert column[start:] == expected[start:] and column[:stop] == expected[:stop]
    assert all(type(a) is type(b) for a, b in zip(column[start:stop], expected[start:stop], strict=True))
    if expected:
        assert column[start % len(expected)] == expected[start % len(expected)]
        assert column[-1] == expected[-1]
