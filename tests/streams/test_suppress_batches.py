"""Windowed aggregations and suppress run a batch as they run record by record: the same outputs in the
same order, the same late (record, window) pairs, metrics, store entries (state_rows) and exported state,
however the input is cut, with bounded buffers that emit early or shut down, and across export/import."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_jobs.streams import BufferConfig, StreamsBuilder, StreamTask, Suppressed, TimeWindows
from spark_jobs.streams.runtime.context import TaskContext
from spark_jobs.streams.suppress import BufferFullError
from spark_jobs.streams.testing import TopologyTestDriver

TOPIC = "readings"
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _initial() -> dict:
    return {"n": 0, "total": 0}


def _adder(key, value, agg: dict) -> dict:
    return {"n": agg["n"] + 1, "total": agg["total"] + value}


def hopping_aggregate(config: BufferConfig):
    """A user aggregate over hopping windows, its final results through `config`, the raw updates too."""
    builder = StreamsBuilder()
    windows = TimeWindows.of_size_and_grace(10, 3).advance_by(5)
    aggregates = builder.stream(TOPIC).group_by_key().windowed_by(windows).aggregate(_initial, _adder)
    finals = aggregates.suppress(Suppressed.until_window_closes(config).with_name("finals"))
    finals.to_stream().to("finals")
    return builder.build()


def windowed_count(size: int, advance: int, grace: int):
    builder = StreamsBuilder()
    windows = TimeWindows.of_size_and_grace(size, grace)
    if advance != size:
        windows = windows.advance_by(advance)
    counts = builder.stream(TOPIC).group_by_key().windowed_by(windows).count()
    counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream().to("finals")
    return builder.build()


def time_limit(config: BufferConfig):
    """until_time_limit over a table of the latest reading per key."""
    builder = StreamsBuilder()
    latest = builder.stream(TOPIC).group_by_key().reduce(lambda agg, value: value)
    latest.suppress(Suppressed.until_time_limit(7, config).with_name("limit")).to_stream().to("out")
    return builder.build()


TOPOLOGIES = {
    "hopping aggregate, unbounded": lambda: hopping_aggregate(BufferConfig.unbounded()),
    "hopping aggregate, max_records shut down": lambda: hopping_aggregate(
        BufferConfig.max_records(6).shut_down_when_full()
    ),
    "hopping aggregate, max_bytes shut down": lambda: hopping_aggregate(
        BufferConfig.max_bytes(900).shut_down_when_full()
    ),
    "tumbling count": lambda: windowed_count(10, 10, 2),
    "hopping count": lambda: windowed_count(12, 4, 5),
    "time limit, max_records emit early": lambda: time_limit(BufferConfig.max_records(2)),
    "time limit, max_bytes emit early": lambda: time_limit(BufferConfig.max_bytes(120)),
    "time limit, max_records shut down": lambda: time_limit(
        BufferConfig.max_records(3).shut_down_when_full()
    ),
    "time limit, unbounded": lambda: time_limit(BufferConfig.unbounded()),
}

sensors = st.sampled_from(["a", "b", "c", "dé", "e", None])
readings = st.lists(st.tuples(sensors, st.integers(0, 9), st.integers(0, 120)), max_size=80)
cuts = st.lists(st.integers(0, 80), max_size=8)


class Run:
    """One task over the records, record by record or in batches cut at `cut_points` (an export after
    each batch, and at `moves` the task goes on as a new task imported from its exported parts)."""

    def __init__(self, topology_of, monkeypatch) -> None:
        self.topology_of = topology_of
        self.late: list = []
        late = self.late

        def count_late(context, node, rows, keys, values, timestamps, starts, ends, stream_times=None):
            late.extend(zip(keys, values, timestamps, starts or [None] * len(rows), strict=True))
            context._task.dropped_records += len(rows)

        monkeypatch.setattr(TaskContext, "count_late", count_late)

    def __call__(self, data, per_record=False, cut_points=(), moves=()) -> tuple:
        task = StreamTask(self.topology_of())
        parts: dict = {}
        bounds = sorted({0, len(data), *cut_points} & set(range(len(data) + 1)))
        outputs: list = []
        error = None
        try:
            for n, (lo, hi) in enumerate(zip(bounds, bounds[1:], strict=False)):
                chunk = data[lo:hi]
                if per_record:
                    for key, value, ts in chunk:
                        task.process(TOPIC, key, value, ts)
                else:
                    task.process_batch(TOPIC, *map(list, zip(*chunk, strict=True)))
                outputs += _records(task)
                export = task.export_state()
                parts.update(export.parts)
                for name in export.removed:
                    del parts[name]
                if n in moves:
                    task = StreamTask.import_state(self.topology_of(), parts)
        except BufferFullError as full:
            error = str(full)
            outputs += _records(task)
        state = sorted((name, repr(row)) for name, node in task.nodes.items() for row in node.state_rows())
        return outputs, error, task.metrics(), state, list(self.late)


def _records(task: StreamTask) -> list:
    return [(topic, r.key, r.value, r.timestamp) for topic, r in task.drain_output().records()]


@PROPERTY
@given(shape=st.sampled_from(sorted(TOPOLOGIES)), data=readings, cut_points=cuts, moves=cuts)
def test_batches_equal_record_by_record(shape, data, cut_points, moves) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        per_record = Run(TOPOLOGIES[shape], monkeypatch)(data, per_record=True)
    with pytest.MonkeyPatch.context() as monkeypatch:
        batched = Run(TOPOLOGIES[shape], monkeypatch)(data, cut_points=cut_points, moves=moves)
    assert batched == per_record


def test_a_buffer_that_shuts_down_forwards_what_it_evicted_before_the_error_in_a_batch_too(
    monkeypatch,
) -> None:
    # the window [95, 105) of "dé" closes at the second record; the fourth fills the buffer past its bound
    data = [("dé", 0, 100), ("a", 0, 108), ("b", 0, 105), ("c", 0, 105)]
    shape = TOPOLOGIES["hopping aggregate, max_records shut down"]
    batched = Run(shape, monkeypatch)(data)
    assert batched[1] is not None and "buffer exceeded its max capacity" in batched[1]
    assert [(topic, str(key)) for topic, key, _, _ in batched[0]] == [("finals", "[dé@95/105]")]
    assert batched == Run(shape, monkeypatch)(data, per_record=True)


UNBOUNDED_FINALS = ["hopping aggregate, unbounded", "tumbling count", "hopping count"]


@PROPERTY
@given(shape=st.sampled_from(UNBOUNDED_FINALS), data=readings, cut_points=cuts, moves=cuts)
def test_batches_put_at_once_equal_record_by_record(shape, data, cut_points, moves) -> None:
    """The same with every batch of an unbounded until_window_closes buffer (the only ones put a segment
    at a time) put a segment at a time, however short the batch."""
    from spark_jobs.streams.nodes import time_ordered_buffer

    with pytest.MonkeyPatch.context() as monkeypatch:
        per_record = Run(TOPOLOGIES[shape], monkeypatch)(data, per_record=True)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(time_ordered_buffer, "MIN_ROWS_AT_ONCE", 1)
        batched = Run(TOPOLOGIES[shape], monkeypatch)(data, cut_points=cut_points, moves=moves)
    assert batched == per_record


def test_the_test_driver_sizes_a_long_batchs_entries_as_it_sizes_them_one_by_one() -> None:
    """The test driver sizes buffers for its metrics: one record flat-mapped to 100 keys (one batch of
    100 rows into the buffer) gives the sizes of the same 100 keys from 100 records."""
    builder = StreamsBuilder()
    keys = builder.stream(TOPIC).flat_map(lambda k, v: [(f"s{i}", 1) for i in range(*v)])
    counts = keys.group_by_key().windowed_by(TimeWindows.of_size_and_grace(10, 0)).count()
    counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream().to("finals")
    topology = builder.build()

    def buffer_metrics(inputs) -> dict:
        with TopologyTestDriver(topology) as driver:
            source = driver.create_input_topic(TOPIC)
            for value in inputs:
                source.pipe_input("x", value, 5)
            return {k: v for k, v in driver.metrics().items() if k.startswith("suppression-buffer")}

    one_batch = buffer_metrics([(0, 100)])
    assert one_batch["suppression-buffer-count-current"] == 100
    assert one_batch["suppression-buffer-size-current"] > 0
    assert one_batch == buffer_metrics([(i, i + 1) for i in range(100)])


@PROPERTY
@given(shape=st.sampled_from(sorted(TOPOLOGIES)), data=readings, partitions=st.integers(2, 4))
def test_each_partition_runs_its_records_as_they_would_run_alone(shape, data, partitions) -> None:
    """Several partitions, each a task of the records whose key hashes to it: one batch per partition
    gives what the partition's records give one by one."""
    for partition in range(partitions):
        mine = [r for r in data if zlib.crc32(repr(r[0]).encode()) % partitions == partition]
        with pytest.MonkeyPatch.context() as monkeypatch:
            alone = Run(TOPOLOGIES[shape], monkeypatch)(mine, per_record=True)
        with pytest.MonkeyPatch.context() as monkeypatch:
            assert Run(TOPOLOGIES[shape], monkeypatch)(mine) == alone


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), cut=st.integers(1, 3000))
def test_large_batches_equal_record_by_record(seed, cut) -> None:
    """Thousands of records, mostly in order, some late, over many keys: in two batches or one by one."""
    import random

    rnd = random.Random(seed)
    data = []
    clock = 0
    for _ in range(3000):
        clock += rnd.randrange(3)
        data.append(
            (f"k{rnd.randrange(300)}", rnd.randrange(10), max(0, clock - rnd.choice([0, 0, 0, 9, 40])))
        )
    for shape in ("hopping aggregate, unbounded", "tumbling count", "time limit, max_records emit early"):
        with pytest.MonkeyPatch.context() as monkeypatch:
            per_record = Run(TOPOLOGIES[shape], monkeypatch)(data, per_record=True)
        with pytest.MonkeyPatch.context() as monkeypatch:
            assert Run(TOPOLOGIES[shape], monkeypatch)(data, cut_points=[cut], moves=[0]) == per_record


def test_late_pairs_are_kept_with_their_windows(monkeypatch) -> None:
    run = Run(lambda: hopping_aggregate(BufferConfig.unbounded()), monkeypatch)
    outputs, error, metrics, _, late = run(
        [("a", 1, 1), ("a", 2, 20), ("b", 3, 12), ("b", 4, 3), ("c", 5, 4)], cut_points=[2]
    )
    # observed time 20: windows closing at end + grace (3) <= 20 are [0, 10), [5, 15); 12 is in [5, 15)
    # (closed) and [10, 20) (open); 3 and 4 only in [0, 10); a null key would be dropped, not late
    assert late == [("b", 3, 12, 5), ("b", 4, 3, 0), ("c", 5, 4, 0)]
    assert metrics["dropped-records-total"] == 3
    assert error is None
    # at 20 [0, 10) leaves the buffer (a's reading at 1 is in no other window)
    assert [(key.key, key.window.start, value) for _, key, value, _ in outputs] == [
        ("a", 0, {"n": 1, "total": 1})
    ]


def test_state_rows_list_every_entry_of_both_stores() -> None:
    task = StreamTask(hopping_aggregate(BufferConfig.unbounded()))
    task.process_batch(TOPIC, ["a", "b", "a"], [1, 2, 3], [1, 6, 7])
    rows = {name: sorted(node.state_rows()) for name, node in task.nodes.items()}
    (window_rows,) = (r for r in rows.values() if r and r[0].store == "window")
    assert [(r.key, r.window_start, r.window_end, r.value, r.timestamp) for r in window_rows] == [
        ("a", 0, 10, {"n": 2, "total": 4}, 7),
        ("a", 5, 15, {"n": 1, "total": 3}, 7),
        ("b", 0, 10, {"n": 1, "total": 2}, 6),
        ("b", 5, 15, {"n": 1, "total": 2}, 6),
    ]
    buffered = rows["finals"]
    assert {r.store for r in buffered} == {"suppress_buffer"}
    assert sorted((r.key, r.window_start, r.value, r.timestamp) for r in buffered) == [
        (r.key, r.window_start, r.value, r.timestamp) for r in window_rows
    ]
    for name, node in task.nodes.items():  # the sizes the nodes keep agree with their rows
        windows = {r.window for r in rows[name] if r.window is not None}
        assert node.state_size() == (len(rows[name]), len(windows))
    limit = StreamTask(time_limit(BufferConfig.max_records(5)))
    limit.process_batch(TOPIC, ["a", "b"], [1, 2], [1, 2])
    assert sorted(limit.nodes["limit"].state_rows()) == [
        ("suppress_buffer", "a", None, None, 1, 1),
        ("suppress_buffer", "b", None, None, 2, 2),
    ]


def test_an_unbounded_buffer_serializes_no_value(monkeypatch) -> None:
    """Sizes are for a byte bound: an unbounded or max_records buffer never serializes a value."""
    from spark_jobs.streams.nodes import time_ordered_buffer

    def no_sizes(value):
        raise AssertionError("a value was serialized")

    monkeypatch.setattr(time_ordered_buffer, "value_size", no_sizes)
    for topology in (
        hopping_aggregate(BufferConfig.unbounded()),
        hopping_aggregate(BufferConfig.max_records(100).shut_down_when_full()),
        time_limit(BufferConfig.max_records(1)),
    ):
        task = StreamTask(topology)
        task.process_batch(TOPIC, ["a", "b", "a", "c"], [1, 2, 3, 4], [1, 6, 30, 31])
        assert task.drain_output().records()
