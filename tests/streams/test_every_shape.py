"""Every shape a user writes runs the same whatever the batching: the task fed batches cut anywhere (and
its state exported and imported between batches, as Spark's workers hand it on) gives exactly the output,
late records (with their input records), state and metrics of the plain nodes fed one record at a time, with no optimizer rewrite.

Shapes (the topologies the benchmarks run, with small windows): the windowed count under a final suppress,
hopping windows with a user aggregate and with declared aggregations under a final suppress, a running
count, aggregate, reduce and declared aggregations (tables), a re-grouped table's count and aggregate,
session windows, a stream-table join and a stream-stream join. Records have out-of-order
and late timestamps, null keys, null values (tombstones for the aggregations, no reading for the user
aggregate) and values without the aggregated field.
"""

from __future__ import annotations

import os
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.jobs import hopping_builtin, hopping_stats, running_count, session_count
from spark_jobs.jobs import window_finals
from spark_jobs.streams import Count, JoinWindows, Max, SessionWindows, StreamsBuilder, Sum
from spark_jobs.streams.nodes import window_stores
from spark_jobs.streams.nodes.aggregations import SessionWindowAggregateNode
from spark_jobs.streams.nodes.key_table import KeyNumbers

from .helpers import WorkerCopies, check_any_batching, observed, one_by_one, plain_task, record_stream
from .helpers import in_batches as batched

READINGS = "sensor-readings"
REGISTRY = "sensor-registry"
VISITS = "visits"

PROPERTY = settings(
    max_examples=int(os.environ.get("STREAMS_PROPERTY_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def stream_table_join():
    builder = StreamsBuilder()
    registry = builder.table(REGISTRY)
    builder.stream(READINGS).join(registry, lambda reading, sensor: [reading, sensor]).to("enriched")
    return builder.build()


def stream_stream_join(outer: bool = False):
    builder = StreamsBuilder()
    visits = builder.stream(VISITS)
    windows = JoinWindows.of_time_difference_and_grace(7, 5)
    readings = builder.stream(READINGS)
    join = readings.outer_join if outer else readings.join
    join(visits, lambda reading, visit: [reading, visit], windows).to("correlated")
    return builder.build()


def running_aggregate():
    """A user aggregate without windows whose result is None (a tombstone: the key's entry goes, its next
    record starts from the initializer) for a reading of humidity."""

    def add(key, value, agg):
        return None if "humidity" in value else [agg[0] + 1, agg[1] + value["temperature"]]

    builder = StreamsBuilder()
    builder.stream(READINGS).group_by_key().aggregate(lambda: [0, 0.0], add).to_stream().to("totals")
    return builder.build()


def running_reduce():
    """A reduce without windows, None (a tombstone) when the sum reaches 50."""

    def reduce(agg, value):
        total = agg.get("temperature", 0.0) + value.get("temperature", 1.0)
        return None if total >= 50 else {"temperature": total}

    builder = StreamsBuilder()
    builder.stream(READINGS).group_by_key().reduce(reduce).to_stream().to("sums")
    return builder.build()


def running_declared():
    builder = StreamsBuilder()
    grouped = builder.stream(READINGS).group_by_key()
    grouped.agg(n=Count(), total=Sum("temperature"), top=Max("temperature")).to_stream().to("stats")
    return builder.build()


def regrouped(key, value):
    return ("c" if key == "c" else "ab", value)


def table_count():
    """A table's rows re-grouped and counted: each update subtracts the row's old value, then adds the new."""
    builder = StreamsBuilder()
    builder.table(READINGS).group_by(regrouped).count().to_stream().to("counts")
    return builder.build()


def table_aggregate():
    """A re-grouped table's sum whose subtractor gives None (the group's entry goes) at 0 or below."""

    def add(key, value, agg):
        return agg + value.get("temperature", 1.0)

    def subtract(key, value, agg):
        rest = agg - value.get("temperature", 1.0)
        return None if rest <= 0 else rest

    builder = StreamsBuilder()
    builder.table(READINGS).group_by(regrouped).aggregate(lambda: 0.0, add, subtract).to_stream().to("sums")
    return builder.build()


def session_aggregate():
    """Session windows with a user aggregate and merger: the temperatures of a session, in the order merged
    (a None value counts as none)."""

    def add(key, value, agg):
        return [*agg, None if value is None else value.get("temperature")]

    builder = StreamsBuilder()
    windows = SessionWindows.of_inactivity_gap_and_grace(5, 4)
    grouped = builder.stream(READINGS).group_by_key().windowed_by(windows)
    grouped.aggregate(list, add, lambda key, a, b: a + b).to_stream().to("temperatures")
    return builder.build()


def session_reduce():
    """Session windows with a reduce (its merger folds the sessions' values with the reducer; a None value
    reaches it as the other aggregations' do)."""

    def reduce(agg, value):
        return {"temperature": agg.get("temperature", 0.0) + (value or {}).get("temperature", 1.0)}

    builder = StreamsBuilder()
    windows = SessionWindows.of_inactivity_gap_and_grace(3, 0)
    builder.stream(READINGS).group_by_key().windowed_by(windows).reduce(reduce).to_stream().to("sums")
    return builder.build()


SHAPES = {
    "count": lambda: window_finals.build_topology(window_size=20, grace=6),
    "hopping_user": lambda: hopping_stats.build_topology(window_size=20, advance=5, grace=6),
    "hopping_builtin": lambda: hopping_builtin.build_topology(window_size=20, advance=5, grace=6),
    "running_count": running_count.build_topology,
    "running_aggregate": running_aggregate,
    "running_reduce": running_reduce,
    "running_declared": running_declared,
    "table_count": table_count,
    "table_aggregate": table_aggregate,
    "session_count": lambda: session_count.build_topology(gap=7, grace=6),
    "session_aggregate": session_aggregate,
    "session_reduce": session_reduce,
    "stream_table_join": stream_table_join,
    "stream_stream_join": stream_stream_join,
}
TOPICS = {"stream_table_join": [READINGS, REGISTRY], "stream_stream_join": [READINGS, VISITS]}

values = st.one_of(
    st.none(),
    st.fixed_dictionaries({"temperature": st.integers(-5, 40).map(float)}),
    st.just({"humidity": 3.0}),
)
timestamps = st.integers(0, 300)


def inputs(shape: str):
    return record_stream(TOPICS.get(shape, [READINGS]), values)


def record_by_record(shape: str, records) -> tuple:
    """The plain nodes, one record at a time, no rewrite."""
    return one_by_one(plain_task(SHAPES[shape]()), records)


def in_batches(shape: str, records, cuts, owners) -> tuple:
    """The task as the runtime drives it: batches cut anywhere, state handed between worker copies."""
    return batched(SHAPES[shape](), records, cuts, owners)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_any_batching_with_state_handed_between_workers_equals_the_plain_nodes_record_by_record(shape):
    check_any_batching(
        lambda records, cuts, owners: in_batches(shape, records, cuts, owners),
        lambda records: record_by_record(shape, records),
        inputs(shape),
        PROPERTY,
    )


@pytest.mark.parametrize("outer", [False, True], ids=["inner", "outer"])
def test_a_stream_stream_join_whose_stores_index_every_batch_in_sorted_columns_equals_the_plain_nodes(outer):
    """The join stores' sorted columns (for large batches) taking every batch of as many records as
    they hold or more (the dicts the others), compacted as soon as a record expires, in any batching, give
    what the plain nodes give record by record with their dicts."""
    records_of = inputs("stream_stream_join")

    def sorted_columns(records, cuts, owners):
        with (
            mock.patch.object(window_stores, "SORTED_MIN", 0),
            mock.patch.object(window_stores, "SORTED_SHARE", 1),
            mock.patch.object(window_stores, "MIN_EXPIRED", 0),
            mock.patch.object(KeyNumbers, "MIN_STALE", 0),
            mock.patch.object(window_stores, "FRESH_RUN", 2),
            mock.patch.object(window_stores, "JOINED_KEYS_MIN", 2),
            mock.patch.object(window_stores, "SEQ_ARRAY_MIN", 2),
        ):
            return batched(stream_stream_join(outer), records, cuts, owners)

    check_any_batching(
        sorted_columns,
        lambda records: one_by_one(plain_task(stream_stream_join(outer)), records),
        records_of,
        PROPERTY,
    )


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_scenario_is_not_vacuous(shape):
    """A fixed input with late records and tombstones gives every shape outputs and state to compare."""
    records = []
    for i in range(120):
        topic = TOPICS.get(shape, [READINGS])[i % len(TOPICS.get(shape, [READINGS]))]
        value = None if i % 17 == 5 else {"temperature": float(i % 7)}
        # a pause in the middle ends every session; some records arrive long after their window or session
        ts = (i if i < 60 else i + 100) if i % 11 else (max(0, i - 40) if i < 60 else 30)
        records.append((topic, "abc"[i % 3], value, ts))
    rows, late, state, metrics = record_by_record(shape, records)
    assert rows and state
    if (
        not shape.startswith(("running", "table")) and shape != "stream_table_join"
    ):  # neither has windows to be late for
        assert late
    assert in_batches(shape, records, [1, 2, 50, 51, 90], [0, 1, 0, 2]) == (rows, late, state, metrics)


def kafka_session_counts(records, gap: int, grace: int) -> tuple[list, list]:
    """Kafka's session window count, written plainly for one record at a time: per key its sessions, sorted by
    (end, start); the sessions within `gap` of a record merge with it (tombstones for the absorbed ones, in
    store order, stamped with their ends, unless the record's window is its own timestamp alone); a merged
    session ending before observed time - gap - grace is late, as is a result the store's retention (gap +
    grace behind its clock, the max session end put) has passed. Output rows (key, start, end, count,
    timestamp) and the origins of the late records."""
    sessions: dict = {}
    observed = store_time = -1
    rows, late = [], []
    for origin, (_, key, _, ts) in enumerate(records):
        if key is None:
            continue
        observed = max(observed, ts)
        live = sorted(
            (s for s in sessions.get(key, []) if s[1] > store_time - gap - grace), key=lambda s: (s[1], s[0])
        )
        merged = [s for s in live if s[1] >= ts - gap and s[0] <= ts + gap]
        start, end = min([ts] + [s[0] for s in merged]), max([ts] + [s[1] for s in merged])
        count = sum(s[2] for s in merged) + 1
        sessions[key] = live
        if end < observed - gap - grace:
            late.append(origin)
            continue
        if (start, end) != (ts, ts):
            for s in merged:
                live.remove(s)
                rows.append((key, s[0], s[1], None, s[1]))
        store_time = max(store_time, end)
        if end <= store_time - gap - grace:
            late.append(origin)
        else:
            live[:] = [s for s in live if (s[0], s[1]) != (start, end)] + [(start, end, count)]
        rows.append((key, start, end, count, end))
    return rows, late


@pytest.mark.parametrize("gap, grace", [(7, 6), (3, 0), (1, 20)])
def test_session_counts_in_any_batching_are_kafkas_merges_tombstones_and_late_records(gap, grace):
    """Batches cut anywhere, on worker copies taking turns (sessions merging across the cuts, records late
    beyond grace, tombstones), give what the plain per-record rule gives."""
    topology = lambda: session_count.build_topology(gap=gap, grace=grace)  # noqa: E731

    def outcome(records, cuts, owners):
        rows, late, _, _ = batched(topology(), records, cuts, owners)
        return (
            [(r[2], r[5], r[6], r[3], r[4]) for r in rows],
            sorted(entry[2] for entry in late),
        )

    check_any_batching(
        outcome,
        lambda records: kafka_session_counts(records, gap, grace),
        inputs("session_count"),
        PROPERTY,
    )


@PROPERTY
@given(
    records=inputs("session_count"),
    cuts=st.lists(st.integers(0, 80), max_size=6),
    owners=st.lists(st.integers(0, 2), min_size=1, max_size=4),
)
def test_session_state_size_is_what_its_rows_list_after_every_batch_and_catch_up(records, cuts, owners):
    """The session store's counts (sessions, distinct windows) follow merges, expiry and imports."""
    copies = WorkerCopies(session_aggregate())
    bounds = sorted({0, len(records), *(c for c in cuts if c <= len(records))})
    for i, (lo, hi) in enumerate(zip(bounds, bounds[1:], strict=False)):
        owner = owners[i % len(owners)]
        task = copies.task_for(owner)
        (node,) = [n for n in task.nodes.values() if isinstance(n, SessionWindowAggregateNode)]
        assert node.state_size() == counted_rows(node)
        run = records[lo:hi]
        task.process_batch(READINGS, [r[1] for r in run], [r[2] for r in run], [r[3] for r in run])
        observed(task)
        assert node.state_size() == counted_rows(node)
        copies.export(owner, task)


def counted_rows(node) -> tuple[int, int]:
    rows = list(node.state_rows())
    return len(rows), len({r.window for r in rows})  # a session is its own window
