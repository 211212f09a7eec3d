"""Output topics: their Parquet schema, and the conversion of a task's columnar output into Arrow tables.

Every output topic is one Parquet dataset with the columns of `TopicSchema.arrow_schema`. A job declares the
Arrow types of each topic's key and value (`TopicSchema`); an undeclared topic stores keys as strings and
values as JSON text, so any topology can run without declarations. The values of declared aggregations
(`agg(...)`, spark_jobs/streams/aggregates.py) are dicts whose Arrow type is `aggregate_struct`.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

# A key or value declared JSON is stored as its JSON text in a string column.
JSON = "json"

QUARANTINE_TOPIC = "_quarantine"

QUARANTINE_SCHEMA = pa.schema(
    [
        ("reason", pa.string()),
        ("raw", pa.string()),
        ("source_file", pa.string()),
        ("line", pa.int64()),
        # The input topic of the file (a multi-input job lands each topic in its own folder).
        ("topic", pa.string()),
    ]
)


# Every (record, window) pair a node dropped as late (spark_jobs/streams/runtime/late.py), written once.
LATE_TOPIC = "_late"

LATE_SCHEMA = pa.schema(
    [
        ("node", pa.string()),  # the node that dropped it
        ("topic", pa.string()),  # the input topic of the record it descends from (null: a punctuator's)
        ("partition", pa.int32()),
        # where that input record came from: its offset, or (records without one) its file and line
        ("offset", pa.int64()),
        ("file", pa.string()),
        ("line", pa.int64()),
        # as an undeclared output topic holds them: the key as a string, the value as JSON text
        ("key", pa.string()),
        ("value", pa.string()),
        ("timestamp", pa.int64()),
        # the window it would have belonged to (null where no window applies)
        ("window_start", pa.int64()),
        ("window_end", pa.int64()),
        # the node's observed stream time when it dropped it: the window had closed by then
        ("stream_time", pa.int64()),
    ]
)


# The runtime's own topics beside a job's: each row stands alone (no emission order, no context needed).
BUILT_IN_TOPICS = (QUARANTINE_TOPIC, LATE_TOPIC)


@dataclass(frozen=True)
class TopicSchema:
    key: pa.DataType | str = pa.string()
    value: pa.DataType | str = JSON

    def arrow_schema(self) -> pa.Schema:
        return pa.schema(
            [
                ("key", _storage_type(self.key)),
                ("value", _storage_type(self.value)),
                ("timestamp", pa.int64()),
                ("window_start", pa.int64()),
                ("window_end", pa.int64()),
                ("partition", pa.int32()),
                ("seq", pa.int64()),
            ]
        )


DEFAULT_TOPIC_SCHEMA = TopicSchema()


def aggregate_struct(declared: Mapping[str, Any]) -> pa.StructType:
    """The Arrow type of the values of `agg(**declared)`: a struct of the declared names in order, a
    count a non-null int64, the others float64 or int64 as declared, null until their group has a value."""
    fields = []
    for name, aggregate in declared.items():
        arrow_type = pa.int64() if aggregate.dtype == "int64" else pa.float64()
        fields.append(pa.field(name, arrow_type, nullable=aggregate.kind != "count"))
    return pa.struct(fields)


def _storage_type(declared: pa.DataType | str) -> pa.DataType:
    return pa.string() if declared == JSON else declared


_STR_OR_NONE = frozenset((str, type(None)))


def _column(declared: pa.DataType | str, items: list[Any], default: Any = None) -> pa.Array:
    """`default`: what json.dumps makes of a value JSON has no form for (None: such a value is an error)."""
    if declared == JSON:
        return pa.array(
            [None if x is None else json.dumps(x, sort_keys=True, default=default) for x in items],
            pa.string(),
        )
    if pa.types.is_string(declared) and not _STR_OR_NONE.issuperset(map(type, items)):
        # A topology that forwards non-string keys to a string topic still gets readable rows.
        items = [
            x if x is None or isinstance(x, str) else json.dumps(x, sort_keys=True, default=default)
            for x in items
        ]
    return pa.array(items, declared)


def topic_tables(output, partition: int, schemas: dict[str, TopicSchema]) -> dict[str, pa.Table]:
    """Split one columnar OutputBatch (the engine's drain) into one Arrow table per topic, in output order.

    Keys and values are converted per topic (each topic declares their types); the integer columns once
    for the whole batch, then taken per topic, and window bounds that are all null (no windowed key) as
    null columns without looking at each row."""
    n = len(output.topics)
    if n == 0:
        return {}
    topics = set(output.topics)
    if len(topics) == 1:
        positions = {topics.pop(): None}  # every row
    else:
        # Each row's topic numbered by Arrow (in C), then the rows of each number found by numpy.
        encoded = pa.array(output.topics, pa.string()).dictionary_encode()
        codes = encoded.indices.to_numpy()
        positions = {
            topic: np.flatnonzero(codes == code) for code, topic in enumerate(encoded.dictionary.to_pylist())
        }
    integers = {
        "timestamp": pa.array(output.timestamps, pa.int64()),
        "window_start": _window_bounds(output.window_starts),
        "window_end": _window_bounds(output.window_ends),
        "seq": pa.array(output.seqs, pa.int64()),
    }
    tables = {}
    for topic, idx in positions.items():
        schema = schemas.get(topic, DEFAULT_TOPIC_SCHEMA)
        if idx is None:
            pick, take, rows = list, (lambda column: column), n
        else:
            pick, take, rows = _picker(idx.tolist()), _taker(idx), len(idx)
        tables[topic] = pa.Table.from_arrays(
            [
                _column(schema.key, pick(output.keys)),
                _column(schema.value, pick(output.values)),
                take(integers["timestamp"]),
                take(integers["window_start"]),
                take(integers["window_end"]),
                pa.array(np.full(rows, partition, np.int32)),
                take(integers["seq"]),
            ],
            schema=schema.arrow_schema(),
        )
    return tables


def _window_bounds(items: list) -> pa.Array:
    if items.count(None) == len(items):  # identity first: one C loop over a list of None
        return pa.nulls(len(items), pa.int64())
    return pa.array(items, pa.int64())


def _taker(idx: np.ndarray):
    indices = pa.array(idx, pa.int64())
    return lambda column: column.take(indices)


def _picker(idx: list[int]):
    if len(idx) == 1:
        getter = operator.itemgetter(idx[0])
        return lambda col: [getter(col)]
    getter = operator.itemgetter(*idx)
    return lambda col: list(getter(col))


def quarantine_table(
    reasons: list[str], raws: list[str], source_files: list[str], lines: list[int], topics: list[str]
) -> pa.Table:
    return pa.Table.from_arrays(
        [
            pa.array(reasons, pa.string()),
            pa.array(raws, pa.string()),
            pa.array(source_files, pa.string()),
            pa.array(lines, pa.int64()),
            pa.array(topics, pa.string()),
        ],
        schema=QUARANTINE_SCHEMA,
    )


def late_table(records: list) -> pa.Table:
    """The late records a task drained (`StreamTask.drain_late`) as a `LATE_TOPIC` table, in order."""
    origins = [(None, None, None) if r.origin is None else r.origin for r in records]
    return pa.Table.from_arrays(
        [
            pa.array([r.node for r in records], pa.string()),
            pa.array([r.topic for r in records], pa.string()),
            pa.array([r.partition for r in records], pa.int32()),
            pa.array([o[0] for o in origins], pa.int64()),
            pa.array([o[1] for o in origins], pa.string()),
            pa.array([o[2] for o in origins], pa.int64()),
            # a late record is kept whatever its key and value hold: what JSON cannot say is kept as repr()
            _column(DEFAULT_TOPIC_SCHEMA.key, [r.key for r in records], repr),
            _column(DEFAULT_TOPIC_SCHEMA.value, [r.value for r in records], repr),
            pa.array([r.timestamp for r in records], pa.int64()),
            pa.array([r.window_start for r in records], pa.int64()),
            pa.array([r.window_end for r in records], pa.int64()),
            pa.array([r.stream_time for r in records], pa.int64()),
        ],
        schema=LATE_SCHEMA,
    )
