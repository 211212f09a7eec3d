"""What is below a user processor (an island) runs as columns over the processor's forwards, and that
changes nothing: topologies with a user processor in front of joins, aggregations and branches, fed batches
cut anywhere (their state handed between worker copies), give exactly the output (seqs, topics, headers),
late records, state and metrics of the task run record by record on the serial path, where every forward
cascades depth first before the processor sees the next record. Each late record names the input record it
descends from (its origin).

The processors forward none, one or two records per input (one with an earlier timestamp, late for the
windows below), keep state of their own, add headers, forward to one child by name, and punctuate (stream
time) into the same nodes their records go to. A user processor below an island keeps the island on the
serial path.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from spark_jobs.streams import (
    JoinWindows,
    Processor,
    PunctuationType,
    Record,
    StreamsBuilder,
    TimeWindows,
    To,
)
from spark_jobs.streams.nodes.base import UserProcessorNode
from spark_jobs.streams.runtime.task import StreamTask

from .helpers import check_any_batching, one_by_one, plain_task, record_stream
from .helpers import in_batches as batched

READINGS, REGISTRY, VISITS = "readings", "registry", "visits"

PROPERTY = settings(
    max_examples=int(os.environ.get("STREAMS_PROPERTY_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


class Stamp(Processor):
    """Counts records per key (its own state); drops every fifth of a key, forwards the others with the
    count in the value (every seventh without a timestamp: stamped with the input record's), and every
    fourth again with an earlier timestamp. Options: `headers` (the count as headers), `named` (every third
    to one child by name), `punctuate` (a STREAM_TIME punctuator forwarding each key's count)."""

    def __init__(self, headers: bool = False, named: bool = False, punctuate: int | None = None) -> None:
        self.headers, self.named, self.punctuate = headers, named, punctuate
        self.seen: dict = {}

    def init(self, context) -> None:
        self.context = context
        if self.punctuate is not None:
            context.schedule(self.punctuate, PunctuationType.STREAM_TIME, self.flush)

    def process(self, record: Record) -> None:
        n = self.seen[record.key] = self.seen.get(record.key, 0) + 1
        if n % 5 == 0:
            return
        value = None if record.value is None else {**record.value, "n": n}
        out = Record(record.key, value, record.timestamp, {"n": n} if self.headers else None)
        if self.named and n % 3 == 0:
            children = self.context.child_names()
            self.context.forward(out, To.child(children[(n // 3) % len(children)]))
        elif n % 7 == 0:  # no timestamp: the context stamps it with the input record's
            self.context.forward(Record(record.key, value, None, out.headers))
        else:
            self.context.forward(out)
        if n % 4 == 0:
            self.context.forward(out.with_timestamp(max(0, record.timestamp - 30)))

    def flush(self, now: int) -> None:
        for key in sorted(self.seen, key=str):
            self.context.forward(Record(key, {"temperature": float(self.seen[key])}, now))


def _joined(reading, other):
    return [reading, other]


def _warm(_key, value) -> bool:
    return value is not None and value.get("temperature", 0) > 10


def enrichment():
    """The enrichment job's shape: a processor in front of a stream-table and a stream-stream join, with a
    columnar sibling under the same source."""
    builder = StreamsBuilder()
    registry = builder.table(REGISTRY)
    readings = builder.stream(READINGS)
    readings.filter(_warm).to("raw-warm")
    stamped = readings.process(Stamp)
    enriched = stamped.join(registry, _joined)
    enriched.to("enriched")
    enriched.filter(lambda k, v: v[1] is not None).to("alerts")
    visits = builder.stream(VISITS).process(Stamp)
    stamped.join(visits, _joined, JoinWindows.of_time_difference_and_grace(7, 5)).to("correlated")
    return builder.build()


def aggregation():
    """A processor forwarding to one child by name, with headers, in front of a windowed count, a running
    reduce and a sink."""
    builder = StreamsBuilder()
    stamped = builder.stream(READINGS).process(lambda: Stamp(headers=True, named=True))
    counts = stamped.group_by_key().windowed_by(TimeWindows.of_size_and_grace(20, 6)).count()
    counts.to_stream().to("counts")
    stamped.filter(lambda k, v: v is not None).to("stamped")
    stamped.map_values(lambda v: 1).group_by_key().reduce(lambda a, b: a + b).to_stream().to("totals")
    return builder.build()


def punctuating():
    """A processor whose stream-time punctuator forwards into the windowed count its records go to."""
    builder = StreamsBuilder()
    readings = builder.stream(READINGS)
    stamped = readings.process(lambda: Stamp(punctuate=10))
    stamped.group_by_key().windowed_by(TimeWindows.of_size_and_grace(20, 6)).count().to_stream().to("counts")
    stamped.to("stamped")
    readings.map_values(lambda v: v).to("raw")
    return builder.build()


def branches():
    """A processor with headers in front of branches, each aggregated or written."""
    builder = StreamsBuilder()
    stamped = builder.stream(READINGS).process(lambda: Stamp(headers=True))
    none, cold, rest = stamped.branch(
        lambda k, v: v is None, lambda k, v: v.get("temperature", 0) < 15, lambda k, v: True
    )
    none.to("tombstones")
    cold.group_by_key().windowed_by(TimeWindows.of_size_and_grace(10, 3)).count().to_stream().to("cold")
    rest.map_values(lambda v: v["n"]).to("rest")
    return builder.build()


def nested():
    """A user processor below an island: the island stays on the serial path."""
    builder = StreamsBuilder()
    stamped = builder.stream(READINGS).process(Stamp).filter(lambda k, v: k != "c").process(Stamp)
    stamped.group_by_key().windowed_by(TimeWindows.of_size_and_grace(20, 6)).count().to_stream().to("counts")
    return builder.build()


SHAPES = {
    "enrichment": enrichment,
    "aggregation": aggregation,
    "punctuating": punctuating,
    "branches": branches,
    "nested": nested,
}
TOPICS = {"enrichment": [READINGS, READINGS, REGISTRY, VISITS]}

values = st.one_of(
    st.none(),
    st.fixed_dictionaries({"temperature": st.integers(-5, 40).map(float)}),
    st.just({"humidity": 3.0}),
)


def inputs(shape: str):
    return record_stream(TOPICS.get(shape, [READINGS]), values)


def record_by_record(shape: str, records) -> tuple:
    """Every source on the serial path (each node's outputs cascading row by row), no rewrite."""
    return one_by_one(plain_task(SHAPES[shape](), serial=True), records)


def in_batches(shape: str, records, cuts, owners) -> tuple:
    """Batches cut anywhere, each run by a worker copy that catches up from the previous exports."""
    return batched(SHAPES[shape](), records, cuts, owners)


def _measure_below_islands(shape: str, monkeypatch, sizes: list) -> None:
    """From now on, `sizes` gets the size of every batch a node right below an island processes."""
    task = StreamTask(SHAPES[shape]())
    below = [c for n in task.nodes.values() if isinstance(n, UserProcessorNode) for c in n.children]
    names = {node.name for node in below}
    for cls in {type(node) for node in below}:
        process = cls.process_columns

        def measured(self, keys, *rest, _process=process):
            if self.name in names:
                sizes.append(len(keys))
            return _process(self, keys, *rest)

        monkeypatch.setattr(cls, "process_columns", measured)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_any_batching_below_a_user_processor_equals_the_serial_path_record_by_record(shape):
    check_any_batching(
        lambda records, cuts, owners: in_batches(shape, records, cuts, owners),
        lambda records: record_by_record(shape, records),
        inputs(shape),
        PROPERTY,
    )


def _fixed_input(shape: str) -> list:
    topics = TOPICS.get(shape, [READINGS])
    records = []
    for i in range(120):
        value = None if i % 17 == 5 else {"temperature": float(i % 30)}
        ts = (i if i < 60 else i + 100) if i % 11 else (max(0, i - 40) if i < 60 else 30)
        records.append((topics[(i // 7) % len(topics)], "abc"[i % 3], value, ts))
    return records


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_scenario_is_not_vacuous_and_islands_batch_only_where_allowed(shape, monkeypatch):
    """A fixed input gives every shape outputs, late records and state to compare; the nodes below an
    island see batches of many rows, except below the island with a user processor under it (serial)."""
    records = _fixed_input(shape)
    expected = record_by_record(shape, records)
    rows, late, state, _ = expected
    assert rows and state and late
    sizes: list[int] = []
    _measure_below_islands(shape, monkeypatch, sizes)
    assert in_batches(shape, records, [1, 2, 50, 51, 90], [0, 1, 0, 2]) == expected
    assert sizes
    if shape == "nested":
        assert max(sizes) == 1
    else:
        assert max(sizes) > 1


def test_forwards_to_a_named_child_reach_that_child_only():
    """The aggregation shape's named forwards: some rows reach one child and not the others, in batches
    as record by record."""
    records = [(READINGS, "a", {"temperature": 1.0}, ts) for ts in range(12)]
    rows, _, _, _ = record_by_record("aggregation", records)
    batched_rows, _, _, _ = in_batches("aggregation", records, [], [0])
    assert batched_rows == rows
    # key "a" is counted 1..12: the 3rd, 6th, 9th and 12th go to one child each, not all to the same
    named = {3, 6, 9, 12}
    stamped = {r[3]["n"] for r in rows if r[1] == "stamped"}
    assert named & stamped and named - stamped
    assert {1, 2, 4} <= stamped


def test_punctuation_forwards_reach_the_nodes_below_between_batches():
    """The punctuator's records are counted by the windowed count below the island, after every record
    up to the one at which it fell due, as record by record."""
    records = [(READINGS, "a", {"temperature": 1.0}, ts) for ts in range(0, 40, 3)]
    rows, _, _, _ = record_by_record("punctuating", records)
    assert in_batches("punctuating", records, [], [0])[0] == rows
    flushed = [r for r in rows if r[1] == "stamped" and r[3] is not None and "n" not in r[3]]
    assert flushed  # the punctuator forwarded, and the windowed count (the first child) counted each
    for row in flushed:
        before = rows[row[0] - 1]
        assert (before[1], before[2], before[4]) == ("counts", row[2], row[4])
