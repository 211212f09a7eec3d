"""What travels through Spark between the stages of a job: chunks of records, not single records.

Stage 1 (before the shuffle, one whole file per call) turns a landing file into *input chunks*: for each
partition of the file, its valid records in file order, encoded as one binary cell (msgpack of the key
table, the key codes, timestamps and line steps as little-endian integer bytes, and the values as one JSON
array; or pickle when values are already decoded; compressed with LZ4), plus one chunk of quarantined
records for the pseudo-partition -1; a wall-clock marker file becomes one chunk per partition. Values
travel only when the topology reads them (`Topology.reads_values`): a windowed count gets keys and
timestamps alone, as Spark prunes a column no expression uses (records are validated all the same). The
shuffle groups chunks by partition; stage 2 (the stateful task) orders them and runs the engine; its
output is one *output chunk* per (partition, topic): an Arrow IPC table, plus one metrics chunk. Chunks
keep Spark's per-row overhead out of the per-record path.

The order of a partition's records in a micro-batch: data before wall-clock markers; chunks by (file
modification time, file path, first line), i.e. the order in which Spark's file source admits files; then,
if records carry offsets, a stable sort by offset (records without one first). Each input topic of a
multi-input job is ordered so on its own; `task_runner` merges the topics by Kafka's record selection.

Where each record came from (`RecordOrigins`: its offset, or its file and line) is worked out only for
the records asked about (the late ones, which are rare): a chunk carries its lines as steps from its first
line, decoded when one of its records is asked about.
"""

from __future__ import annotations

import json
import pickle
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

from spark_jobs.spark.landing import LandingFile, PartitionRecords, decode_json, gather

# Chunk size bounds the size of one binary cell (and so of one Arrow batch handed to pandas).
CHUNK_RECORDS = 20_000

KIND_DATA = 0
KIND_WALL_CLOCK = 1
KIND_QUARANTINE = 2
# A multi-input job's "this task has read this file of this topic" (sent to every partition, records or not):
# how a task knows whether an empty input still has landed, unread files (task_runner's record selection).
KIND_FILE_SEEN = 3

# The group that carries quarantined records to the sink: it never touches task state.
QUARANTINE_PARTITION = -1

# task_group: the key Spark groups by (see runtime.balanced_task_groups); partition: the task's partition.
# Also the parsing stage's output schema in the query plan (runtime.spark_schema).
INPUT_CHUNK_ARROW = pa.schema(
    [
        ("task_group", pa.int32()),
        ("partition", pa.int32()),
        ("kind", pa.int32()),
        ("file_mtime", pa.int64()),
        ("file_path", pa.string()),
        ("first_line", pa.int64()),
        ("records", pa.int64()),
        ("payload", pa.binary()),
        ("topic", pa.string()),
    ]
)

# The topic of a task's metrics row in its output manifest (sink.MANIFEST_ARROW).
METRICS_TOPIC = "_metrics"


@dataclass
class InputChunk:
    partition: int
    kind: int
    file_mtime: int
    file_path: str
    first_line: int
    records: int
    payload: bytes
    # The input topic of a data, file-seen or quarantine chunk ("" for wall-clock markers).
    topic: str = ""


# A data chunk's payload starts with its encoding: JSON values still as JSON text (the bulk path) travel
# in msgpack (key table, key codes, timestamps, values as one JSON array); decoded values (Parquet, line
# by line) in pickle.
_JSON_VALUES = b"J"
_PYTHON_VALUES = b"P"

# After its encoding's mark, a data chunk's body travels compressed (LZ4 frame, after its size in 8 bytes):
# between the stages the JVM copies each chunk's bytes several times (out of the Arrow batch into a row,
# through the shuffle, into the sort before the stateful stage, into the Arrow batch to Python), and the
# bulk path's bodies (JSON values, timestamps, keys) shrink several times over, for little CPU beside their
# encoding. A smaller body also keeps a chunk under half a G1 region (512 KB under a heap of less than
# 2 GB): a larger byte array is a humongous object, allocated apart, and its allocation can start a
# concurrent collection cycle.
_BODY_CODEC = "lz4"


def _pack_body(mark: bytes, body: bytes) -> bytes:
    return b"".join(
        (mark, len(body).to_bytes(8, "little"), pa.compress(body, codec=_BODY_CODEC, asbytes=True))
    )


def unpack_body(payload: bytes) -> tuple[bytes, bytes]:
    """(encoding mark, body) of a data chunk's payload."""
    size = int.from_bytes(payload[1:9], "little")
    return payload[:1], pa.decompress(memoryview(payload)[9:], size, codec=_BODY_CODEC, asbytes=True)


def _dump(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def _data_payload(recs: PartitionRecords, start: int, end: int, with_values: bool) -> bytes:
    if recs.values is None and with_values:
        raise ValueError("records read without their values (keep_values=False) cannot be sent with them")
    if recs.values_json is not None or recs.values is None:
        # Keys as codes into the partition's key table: a key is sent once per chunk, and the task gets one
        # string object per distinct key (hashed once, however many records carry it). Codes (in the
        # fewest bytes the table needs) and timestamps as little-endian integers: no Python object per
        # record on either side.
        values_json = b"[" + b",".join(recs.values_json[start:end]) + b"]" if with_values else None
        steps = np.diff(np.asarray(recs._lines[start:end], np.int64))  # lines after the chunk's first
        key_table, key_codes = _chunk_keys(recs, start, end)
        columns = (
            key_table,
            key_codes.astype(_code_type(len(key_table))).tobytes(),
            recs.timestamp_array()[start:end].astype("<i8", copy=False).tobytes(),
            values_json,
            steps.astype(_code_type(int(steps.max(initial=0)) + 1)).tobytes(),
        )
        return _pack_body(_JSON_VALUES, msgspec.msgpack.encode(columns))
    columns = (
        recs.keys[start:end],
        recs.values[start:end] if with_values else None,
        recs.timestamps[start:end],
        recs.offsets[start:end],
        recs.lines[start:end],
    )
    return _pack_body(_PYTHON_VALUES, _dump(columns))


def _chunk_keys(recs: PartitionRecords, start: int, end: int) -> tuple[list[str], np.ndarray]:
    """The distinct keys of a partition's records [start, end) and each record's code into them. A
    partition cut into several chunks gives each chunk its own records' keys, not the partition's whole
    table: with many keys, most of the table is in every chunk, and the task would decode each of those
    keys (and make it one object with its equals) once per chunk."""
    codes = recs.key_codes[start:end]
    if start == 0 and end == len(recs):
        return recs.key_table, codes
    used = np.zeros(len(recs.key_table), np.bool_)
    used[codes] = True
    renumbered = np.cumsum(used, dtype=np.int32) - 1  # a used key's place among the used ones
    return gather(recs.key_table, np.flatnonzero(used)), renumbered[codes]


# A chunk's key codes take 1, 2 or 4 bytes each, as its key table needs; the width is bytes / records (a
# data chunk is never empty).
_CODE_TYPES = {1: "<u1", 2: "<u2", 4: "<i4"}


def _code_type(table_size: int) -> str:
    return "<u1" if table_size <= 1 << 8 else "<u2" if table_size <= 1 << 16 else "<i4"


def _load_data_payload(
    payload: bytes, same_keys: dict
) -> tuple[int, Any, Any, Any, list | None, bytes | list]:
    """(records, keys, values, timestamps, offsets, lines) of a data chunk, its columns as `ChunkedColumn`
    pieces: keys a list, or (the chunk's key table, each record's code into it); values a list, the JSON
    text of an array of them (the bulk path) or None (not sent: each None); timestamps a list or an int64
    array. Offsets None: the chunk has none; lines: the steps from the chunk's first line (bytes,
    `_code_type` wide each), or a list. Equal keys of the bulk path become one string object (`same_keys`:
    every key seen so far, by itself)."""
    mark, body = unpack_body(payload)
    if mark == _JSON_VALUES:
        key_table, key_codes, timestamps, values_json, steps = msgspec.msgpack.decode(body)
        key_table = list(map(same_keys.setdefault, key_table, key_table))
        timestamps = np.frombuffer(timestamps, "<i8")
        codes = np.frombuffer(key_codes, _CODE_TYPES[len(key_codes) // len(timestamps)])
        # the values stay JSON text until the task takes them
        return len(timestamps), (key_table, codes), values_json, timestamps, None, steps  # no offsets
    keys, values, timestamps, offsets, lines = pickle.loads(body)
    return len(keys), keys, values, timestamps, offsets, lines


def data_chunks(
    parsed: LandingFile,
    file_mtime: int,
    with_values: bool = True,
    topic: str = "",
    seen_by_partitions: int | None = None,
) -> list[InputChunk]:
    """The chunks of one parsed landing file of `topic`: valid records per partition, then its quarantine.
    Without values (`with_values=False`, for a topology that never reads them) the task gets None for each.
    `seen_by_partitions=N` (multi-input jobs) adds a file-seen chunk for each of the N partitions."""
    chunks = [
        InputChunk(partition, KIND_FILE_SEEN, file_mtime, parsed.path, 0, 0, b"", topic)
        for partition in range(seen_by_partitions or 0)
    ]
    for partition, recs in sorted(parsed.by_partition.items()):
        for start in range(0, len(recs), CHUNK_RECORDS):
            end = min(start + CHUNK_RECORDS, len(recs))
            chunks.append(
                InputChunk(
                    partition,
                    KIND_DATA,
                    file_mtime,
                    parsed.path,
                    recs.first_line(start),
                    end - start,
                    _data_payload(recs, start, end, with_values),
                    topic,
                )
            )
    q = parsed.quarantined
    for start in range(0, len(q), CHUNK_RECORDS):
        end = start + CHUNK_RECORDS
        payload = _dump((q.lines[start:end], q.reasons[start:end], q.raws[start:end]))
        chunks.append(
            InputChunk(
                QUARANTINE_PARTITION,
                KIND_QUARANTINE,
                file_mtime,
                parsed.path,
                q.lines[start],
                len(q.lines[start:end]),
                payload,
                topic,
            )
        )
    return chunks


def wall_clock_chunks(markers: dict[int, list[int]], file_path: str, file_mtime: int) -> list[InputChunk]:
    return [
        InputChunk(partition, KIND_WALL_CLOCK, file_mtime, file_path, 0, len(values), _dump(values))
        for partition, values in sorted(markers.items())
    ]


def chunks_to_arrow(chunks: list[InputChunk], task_groups: dict[int, int]) -> pa.RecordBatch:
    """Chunks as rows; `task_groups` maps a partition to the key Spark groups it by (default: itself)."""
    return pa.RecordBatch.from_arrays(
        [
            pa.array([task_groups.get(c.partition, c.partition) for c in chunks], pa.int32()),
            pa.array([c.partition for c in chunks], pa.int32()),
            pa.array([c.kind for c in chunks], pa.int32()),
            pa.array([c.file_mtime for c in chunks], pa.int64()),
            pa.array([c.file_path for c in chunks], pa.string()),
            pa.array([c.first_line for c in chunks], pa.int64()),
            pa.array([c.records for c in chunks], pa.int64()),
            pa.array([c.payload for c in chunks], pa.binary()),
            pa.array([c.topic for c in chunks], pa.string()),
        ],
        schema=INPUT_CHUNK_ARROW,
    )


def _arrival_order(chunks: list[InputChunk]) -> list[InputChunk]:
    return sorted(chunks, key=lambda c: (c.file_mtime, c.file_path, c.first_line))


TopicColumns = tuple[list, list, list]  # keys, values, timestamps

Origin = tuple  # (offset, file, line): the offset when the record has one, else its file and line


class _ChunkLines:
    """Where the records of one data chunk came from: its file and lines (its records' own offsets first,
    where they have one). The steps of the bulk path are decoded when a record is first asked about."""

    __slots__ = ("file", "first_line", "lines", "offsets", "records")

    def __init__(
        self, file: str, first_line: int, lines: bytes | list, offsets: list | None, records: int
    ) -> None:
        self.file = file
        self.first_line = first_line
        # steps after the first line (bytes; each record's line as an array once decoded), or each record's
        # line (a list)
        self.lines = lines
        self.offsets = offsets
        self.records = records

    def __getitem__(self, i: int) -> Origin:
        if self.offsets is not None and self.offsets[i] is not None:
            return (self.offsets[i], None, None)
        lines = self.lines
        if isinstance(lines, list):
            return (None, self.file, lines[i])
        if isinstance(lines, bytes):
            # each record's line, as an array: a chunk's records are many, and few are asked about
            width = len(lines) // max(1, self.records - 1)
            steps = np.frombuffer(lines, _CODE_TYPES[width]) if lines else np.empty(0, np.int64)
            lines = self.lines = np.concatenate(([0], np.cumsum(steps, dtype=np.int64))) + self.first_line
        return (None, self.file, int(lines[i]))


class RecordOrigins:
    """Where each record of a column came from, as `StreamTask.process_batch(origins=...)` reads it: only
    for the records asked about. Pieces of chunks, in order; slicing and `+` keep them as pieces."""

    __slots__ = ("pieces", "ends")

    def __init__(self, pieces: list[tuple[object, int, int]] | None = None) -> None:
        self.pieces = pieces or []  # (source, lo, hi): source[lo:hi], source[i] an Origin
        self.ends: list[int] = []
        total = 0
        for _, lo, hi in self.pieces:
            total += hi - lo
            self.ends.append(total)

    def __len__(self) -> int:
        return self.ends[-1] if self.ends else 0

    def __getitem__(self, i):
        if isinstance(i, slice):
            return self._slice(*i.indices(len(self))[:2])
        p = bisect_right(self.ends, i)
        source, lo, _ = self.pieces[p]
        return source[lo + i - (self.ends[p - 1] if p else 0)]

    def _slice(self, start: int, stop: int) -> RecordOrigins:
        pieces, at = [], 0
        for source, lo, hi in self.pieces:
            a, b = max(start - at, 0), min(stop - at, hi - lo)
            if a < b:
                pieces.append((source, lo + a, lo + b))
            at += hi - lo
        return RecordOrigins(pieces)

    @classmethod
    def unknown(cls, n: int) -> RecordOrigins:
        """`n` records from nowhere known (None each)."""
        return cls([(_Unknown(), 0, n)]) if n else cls()

    def __add__(self, other: RecordOrigins) -> RecordOrigins:
        return RecordOrigins(self.pieces + other.pieces)

    def __getstate__(self):
        return self.pieces

    def __setstate__(self, pieces) -> None:
        self.__init__(pieces)


class _Unknown:
    __slots__ = ()

    def __getitem__(self, i: int) -> None:
        return None


class _Reordered:
    """Origins in another order (records sorted by offset): item i is `origins[order[i]]`."""

    __slots__ = ("origins", "order")

    def __init__(self, origins: RecordOrigins, order: list[int]) -> None:
        self.origins = origins
        self.order = order

    def __getitem__(self, i: int) -> Origin:
        return self.origins[self.order[i]]


@dataclass
class OrderedInput:
    """One partition's input of one micro-batch, in processing order.

    The records of a single topic (`topic`, "" if not said: the job's one input) are in keys/values/
    timestamps; when the batch has records of several topics, they are in `topics`, each in its own
    order. `files_seen`: per topic, the last landing file (mtime, path) the batch brought to this task."""

    # ChunkedColumn: made lists a slice at a time
    keys: list[str] | ChunkedColumn
    values: list[Any] | ChunkedColumn
    timestamps: list[int] | ChunkedColumn
    wall_clocks: list[int]
    topic: str = ""
    topics: dict[str, TopicColumns] = field(default_factory=dict)
    files_seen: dict[str, tuple[int, str]] = field(default_factory=dict)
    # per topic, where its records came from (`RecordOrigins`, for the late ones); the single topic's
    # records under its own name, "" if not said
    origins: dict[str, RecordOrigins] = field(default_factory=dict)

    def origins_of(self, topic: str, default_topic: str) -> RecordOrigins | None:
        """Where the records of `topic` (as `by_topic` names it) came from; None: not known."""
        found = self.origins.get(topic)
        if found is None and topic == default_topic and not self.topics:
            found = self.origins.get(self.topic)
        return found

    @property
    def records(self) -> int:
        return len(self.keys) + sum(len(columns[0]) for columns in self.topics.values())

    def by_topic(self, default_topic: str) -> dict[str, TopicColumns]:
        """Records per topic (`default_topic` names the records of an unnamed single topic)."""
        out = dict(self.topics)
        if self.keys:
            out[self.topic or default_topic] = (self.keys, self.values, self.timestamps)
        return out


class ChunkedColumn:
    """A column of a partition's records kept as its chunks brought it, made a list a slice at a time: a
    task processes its input a slice at a time (task_runner), so it holds the objects of a slice's keys,
    values and timestamps (a list entry each, a Python int of 32 bytes each timestamp, a dict each value),
    not of a whole micro-batch's. A chunk's piece is a list, or a compact form: (a key table, each record's
    code into it), an int64 array, None (each record's None), or the JSON text of an array, which is
    decoded a chunk at a time (the chunk decoded last is kept: consecutive slices share a chunk)."""

    __slots__ = ("pieces", "ends", "_decoded_at", "_decoded")

    def __init__(self) -> None:
        self.pieces: list = []
        self.ends: list[int] = []
        self._decoded_at = -1
        self._decoded: list = []

    def add(self, piece, count: int) -> None:
        """`count` records more, as `piece`."""
        if count:
            self.pieces.append(piece)
            self.ends.append((self.ends[-1] if self.ends else 0) + count)

    def __len__(self) -> int:
        return self.ends[-1] if self.ends else 0

    def _take(self, p: int, start: int, stop: int) -> list:
        """Records [start, stop) of piece p, as a list."""
        piece = self.pieces[p]
        if type(piece) is list:
            return piece[start:stop]
        if type(piece) is tuple:
            table, codes = piece
            return gather(table, codes[start:stop])
        if type(piece) is np.ndarray:
            return piece[start:stop].tolist()
        if piece is None:
            return [None] * (stop - start)
        if self._decoded_at != p:
            self._decoded, self._decoded_at = decode_json(piece), p
        return self._decoded[start:stop]

    def __getitem__(self, index):
        if not isinstance(index, slice):
            index = range(len(self))[index]
            p = bisect_right(self.ends, index)
            at = index - (self.ends[p - 1] if p else 0)
            return self._take(p, at, at + 1)[0]
        start, stop, step = index.indices(len(self))
        if step != 1:
            return list(self)[index]
        out: list = []
        p = bisect_right(self.ends, start)
        while start < stop:
            first = self.ends[p - 1] if p else 0
            taken = self._take(p, start - first, min(stop, self.ends[p]) - first)
            out += taken
            start += len(taken)
            p += 1
        return out

    def __iter__(self):
        first = 0
        for p, end in enumerate(self.ends):
            yield from self._take(p, 0, end - first)
            first = end


def _topic_columns(
    chunks: list[InputChunk], same_keys: dict
) -> tuple[list | ChunkedColumn, list | ChunkedColumn, list | ChunkedColumn, RecordOrigins]:
    """One topic's data chunks (keys, values, timestamps as `ChunkedColumn`s), in arrival order, then
    stably by offset if records carry any (then as lists); and where each record came from."""
    keys, values, timestamps = ChunkedColumn(), ChunkedColumn(), ChunkedColumn()
    offset_runs: list[tuple[int, list]] = []  # (index of the chunk's first record, its offsets)
    pieces = []
    for chunk in _arrival_order(chunks):
        n, k, v, t, o, lines = _load_data_payload(chunk.payload, same_keys)
        if o is not None and o.count(None) < len(o):
            offset_runs.append((len(keys), o))
        pieces.append((_ChunkLines(chunk.file_path, chunk.first_line, lines, o, n), 0, n))
        keys.add(k, n)
        values.add(v, n)
        timestamps.add(t, n)
    origins = RecordOrigins(pieces)
    if offset_runs:
        offsets: list[int | None] = [None] * len(keys)
        for start, run in offset_runs:
            offsets[start : start + len(run)] = run
        order = sorted(range(len(keys)), key=lambda i: -1 if offsets[i] is None else offsets[i])
        keys, values, timestamps = (
            [column[i] for i in order] for column in (list(keys), list(values), list(timestamps))
        )
        origins = RecordOrigins([(_Reordered(origins, order), 0, len(order))])
    return keys, values, timestamps, origins


def ordered_input(chunks: list[InputChunk]) -> OrderedInput:
    """Decode and order a partition's data, file-seen and wall-clock chunks (see the module docstring)."""
    by_topic: dict[str, list[InputChunk]] = {}
    files_seen: dict[str, tuple[int, str]] = {}
    wall_clock_chunks_: list[InputChunk] = []
    for chunk in chunks:
        if chunk.kind == KIND_DATA:
            by_topic.setdefault(chunk.topic, []).append(chunk)
        elif chunk.kind == KIND_FILE_SEEN:
            seen = (chunk.file_mtime, chunk.file_path)
            if chunk.topic not in files_seen or seen > files_seen[chunk.topic]:
                files_seen[chunk.topic] = seen
        elif chunk.kind == KIND_WALL_CLOCK:
            wall_clock_chunks_.append(chunk)
    wall_clocks: list[int] = []
    for chunk in _arrival_order(wall_clock_chunks_):
        wall_clocks += pickle.loads(chunk.payload)
    same_keys: dict[str, str] = {}
    if len(by_topic) == 1:
        ((topic, topic_chunks),) = by_topic.items()
        keys, values, timestamps, origins = _topic_columns(topic_chunks, same_keys)
        return OrderedInput(
            keys, values, timestamps, wall_clocks, topic, files_seen=files_seen, origins={topic: origins}
        )
    topics, origins = {}, {}
    for topic, topic_chunks in by_topic.items():
        *topics[topic], origins[topic] = _topic_columns(topic_chunks, same_keys)
        topics[topic] = tuple(topics[topic])
    return OrderedInput([], [], [], wall_clocks, topics=topics, files_seen=files_seen, origins=origins)


def quarantined_rows(
    chunks: list[InputChunk],
) -> tuple[list[str], list[str], list[str], list[int], list[str]]:
    """(reasons, raws, source_files, lines, topics) of quarantine chunks, in arrival order."""
    reasons: list[str] = []
    raws: list[str] = []
    files: list[str] = []
    lines: list[int] = []
    topics: list[str] = []
    for chunk in _arrival_order(chunks):
        ls, rs, raw = pickle.loads(chunk.payload)
        reasons += rs
        raws += raw
        files += [chunk.file_path] * len(ls)
        lines += ls
        topics += [chunk.topic] * len(ls)
    return reasons, raws, files, lines, topics


def metrics_payload(metrics: dict) -> bytes:
    return json.dumps(metrics, sort_keys=True).encode("utf-8")
