"""A windowed declared aggregation + final suppress run in one pass (nodes/final_window_aggregate.py, the
rewrite optimizer.py chooses when a task wires its nodes) gives what the two nodes give one after the other
(outputs in order, late records, buffer metrics, exported state) and what the user aggregate gives."""

from __future__ import annotations

import contextlib
import pickle
import struct

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from spark_jobs.streams import (
    BufferConfig,
    StreamsBuilder,
    StreamTask,
    Suppressed,
)
from spark_jobs.streams.nodes import final_window_aggregate
from spark_jobs.streams.nodes.final_window_aggregate import FinalWindowAggregate
from spark_jobs.streams.nodes.window_rows import dumps_plain, loaded_keys
from spark_jobs.streams.optimizer import rewrites

from .test_declared_aggregations import (
    DECLARED,
    PROPERTY,
    _clean,
    _without_sizes,
    reference_aggregator,
    reference_initializer,
    time_windows,
)
from .test_final_window_count import decoded

TOPIC = "readings"


def finals_topology(windows, declared: bool = True, headers_branch: bool = False, reads_olds: bool = False):
    builder = StreamsBuilder()
    stream = builder.stream(TOPIC)
    grouped = stream.group_by_key().windowed_by(windows)
    if declared:
        table = grouped.agg(**DECLARED)
    else:
        table = grouped.aggregate(reference_initializer, reference_aggregator)
    finals = table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()).with_name("finals"))
    finals.to_stream().to("finals")
    if reads_olds:  # a table grouped again reads the old values the suppress forwards: its buffer keeps them
        finals.group_by(lambda key, value: (key[0], 1)).count().to_stream().to("regrouped")
    if headers_branch:  # a sibling of the aggregation: the outputs interleave by input record (src)
        stream.map_values(lambda v: v).to("echo")
    return builder.build()


@contextlib.contextmanager
def min_rows(n: int):
    saved = final_window_aggregate.MIN_ROWS
    final_window_aggregate.MIN_ROWS = n
    try:
        yield
    finally:
        final_window_aggregate.MIN_ROWS = saved


def _bits(x):
    """`x` with every float as its bits and every numpy array as its dtype and bytes (a NaN equals a NaN of
    the same bits), for comparing outputs and saved parts."""
    if isinstance(x, float):
        return ("float", struct.pack("<d", x))
    if isinstance(x, np.ndarray):
        return ("array", x.dtype.str, x.tobytes() if x.dtype != object else _bits(x.tolist()))
    if isinstance(x, dict):
        return ("dict", [(_bits(k), _bits(v)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_bits(v) for v in x])
    return x


def _same(a, b) -> bool:
    return _bits(a) == _bits(b)


def _records(task: StreamTask) -> list:
    return [(topic, r.key, r.value, r.timestamp, r.headers) for topic, r in task.drain_output().records()]


numbers = st.one_of(
    st.integers(-5, 5),
    st.integers(2**62, 2**63 - 1),  # int64 sums wrap
    st.floats(-1e6, 1e6),
    st.sampled_from([0.1, 1e16, -1e16, -0.0, 0.0, float("nan")]),  # order-sensitive sums; NaN: no value
    st.booleans(),
    st.none(),
)
values = st.one_of(
    st.fixed_dictionaries({"v": numbers}),
    st.fixed_dictionaries({"v": numbers, "w": numbers}),
    st.none(),
    st.just("text"),
)


@st.composite
def batches(draw):
    """Batches of readings from a few sensors (some keys null or not str): mostly in order, some out of
    order, some late, of 0 to 80 records; some with headers (they run node by node)."""
    sensors = [f"s{i}" for i in range(draw(st.integers(1, 10)))] + draw(
        st.lists(st.sampled_from([None, 7, (1, 2)]), max_size=2)
    )
    clock = draw(st.integers(0, 50))
    out = []
    for _ in range(draw(st.integers(1, 6))):
        keys, vals, timestamps = [], [], []
        for _ in range(draw(st.integers(0, 80))):
            clock += draw(st.integers(0, 7))
            lateness = draw(st.sampled_from([0, 0, 0, 3, 15, 60]))
            keys.append(draw(st.sampled_from(sensors)))
            vals.append(draw(values))
            timestamps.append(max(0, clock - lateness))
        headers = [{"batch": b"h"}] * len(keys) if draw(st.integers(0, 5)) == 0 else None
        out.append((keys, vals, timestamps, headers))
    return out


class Pair:
    """The same topology in two tasks: one fused (every batch that qualifies), one node by node."""

    def __init__(self, topology_of) -> None:
        self.topology_of = topology_of
        self.fused = StreamTask(topology_of())
        self.nodes = StreamTask(topology_of())
        self.parts: tuple[dict, dict] = ({}, {})

    def check(self, runs, moves) -> None:
        """Each batch run by both tasks: the same outputs, metrics and exports; after a batch whose move is
        True, each task goes on from its exported parts."""
        for (keys, vals, timestamps, headers), move in zip(runs, moves, strict=False):
            with min_rows(1):
                self.fused.process_batch(TOPIC, keys, vals, timestamps, headers)
            with min_rows(10**9):
                self.nodes.process_batch(TOPIC, keys, vals, timestamps, headers)
            assert _same(_records(self.fused), _records(self.nodes))
            assert self.fused.metrics() == self.nodes.metrics()
            fused_export, nodes_export = self.fused.export_state(), self.nodes.export_state()
            assert _same(decoded(fused_export.parts), decoded(nodes_export.parts))
            assert fused_export.removed == nodes_export.removed
            for held, export in zip(self.parts, (fused_export, nodes_export), strict=True):
                held.update(export.parts)
                for name in export.removed:
                    del held[name]
            if move:
                self.fused = StreamTask.import_state(self.topology_of(), self.parts[0])
                self.nodes = StreamTask.import_state(self.topology_of(), self.parts[1])


@PROPERTY
@given(
    windows=time_windows(),
    runs=batches(),
    headers_branch=st.booleans(),
    moves=st.lists(st.booleans(), min_size=6, max_size=6),
    reads_olds=st.booleans(),
)
def test_fused_equals_node_by_node(windows, runs, headers_branch, moves, reads_olds) -> None:
    Pair(lambda: finals_topology(windows, headers_branch=headers_branch, reads_olds=reads_olds)).check(
        runs, moves
    )


def test_old_values_become_dicts_only_where_a_child_of_the_suppressed_table_reads_them(monkeypatch) -> None:
    """The finals go to a stream (which drops old values): the entries leaving the buffer make a dict of
    their new values only. Grouped again, the suppressed table's old values are read: made too."""
    from spark_jobs.streams import TimeWindows
    from spark_jobs.streams.nodes.window_rows import StructColumn

    made = []
    real = StructColumn.dicts

    def counting(self, at=None):
        out = real(self, at)
        made.append(len(out))
        return out

    monkeypatch.setattr(StructColumn, "dicts", counting)
    keys = ["b", "a", "c", "a", "b", "z"]
    vals = [{"v": 1}, {"v": 2.5}, {"v": 3}, {"v": 4}, {"v": 5}, {"v": 0}]
    timestamps = [1, 2, 3, 11, 12, 25]  # windows [0, 10) and [10, 20) close: 5 finals
    for reads_olds, dicts_per_final in ((False, 1), (True, 2)):
        made.clear()
        task = StreamTask(finals_topology(TimeWindows.of_size_and_grace(10, 0), reads_olds=reads_olds))
        with min_rows(1):
            task.process_batch(TOPIC, keys, vals, timestamps)
        finals = [record for record in _records(task) if record[0] == "finals"]
        assert len(finals) == 5
        assert sum(made) == dicts_per_final * len(finals)


@PROPERTY
@given(windows=time_windows(), runs=batches())
def test_fused_equals_the_user_aggregate_record_by_record(windows, runs) -> None:
    fused = StreamTask(finals_topology(windows))
    reference = StreamTask(finals_topology(windows, declared=False))
    for keys, vals, timestamps, _ in runs:
        with min_rows(1):
            fused.process_batch(TOPIC, keys, vals, timestamps)
        for record in zip(keys, vals, timestamps, strict=True):
            reference.process(TOPIC, *record)
    assert _same(_clean(_records(fused)), _clean(_records(reference)))
    assert _without_sizes(fused.metrics()) == _without_sizes(reference.metrics())


def test_the_fused_pass_runs_and_emits_the_final_values_in_window_and_key_order(monkeypatch) -> None:
    folded = []
    real = FinalWindowAggregate._put_and_evict

    def counting(self, batch, *rest):
        folded.append(len(batch.rec))
        return real(self, batch, *rest)

    monkeypatch.setattr(FinalWindowAggregate, "_put_and_evict", counting)
    from spark_jobs.streams import TimeWindows

    task = StreamTask(finals_topology(TimeWindows.of_size_and_grace(10, 0)))
    keys = ["b", "a", "c", "a", "b", "late", "z"]
    vals = [{"v": 1}, {"v": 2.5}, None, {"v": 4}, {"v": "x"}, {"v": 9}, {"v": 0}]
    timestamps = [1, 2, 3, 11, 12, 5, 25]  # "late" (5) comes after window [0, 10) closed at 11
    with min_rows(1):
        task.process_batch(TOPIC, keys, vals, timestamps)
    assert folded == [6]  # every record but the late one, in one pass
    none = {"total": None, "top": None, "low": None, "avg": None, "isum": None, "imin": None, "imax": None}
    assert [record[:4] for record in _records(task)] == [
        (
            "finals",
            ("a", (0, 10)),
            {"n": 1, **dict(total=2.5, top=2.5, low=2.5, avg=2.5), "isum": None, "imin": None, "imax": None},
            2,
        ),
        (
            "finals",
            ("b", (0, 10)),
            {"n": 1, "total": 1.0, "top": 1.0, "low": 1.0, "avg": 1.0, "isum": 1, "imin": 1, "imax": None},
            1,
        ),
        ("finals", ("c", (0, 10)), {"n": 1, **none}, 3),
        (
            "finals",
            ("a", (10, 20)),
            {"n": 1, "total": 4.0, "top": 4.0, "low": 4.0, "avg": 4.0, "isum": 4, "imin": 4, "imax": None},
            11,
        ),
        ("finals", ("b", (10, 20)), {"n": 1, **none}, 12),
    ]
    assert task.metrics()["dropped-records-total"] == 1


def test_the_optimizer_fuses_an_unbounded_final_suppress_that_is_the_only_child() -> None:
    from spark_jobs.streams import TimeWindows

    windows = TimeWindows.of_size_and_grace(10, 2)

    def fused_nodes(topology) -> list:
        task = StreamTask(topology)
        return [type(r.process_columns.__self__).__name__ for r in rewrites(task.nodes).values()]

    assert fused_nodes(finals_topology(windows)) == ["FinalWindowAggregate"]
    # the user aggregate: nodes/final_window_user_aggregate.py
    assert fused_nodes(finals_topology(windows, declared=False)) == ["FinalWindowUserAggregate"]
    builder = StreamsBuilder()
    table = builder.stream(TOPIC).group_by_key().windowed_by(windows).agg(**DECLARED)
    table.to_stream().to("updates")  # a second child: node by node
    table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream().to("finals")
    assert fused_nodes(builder.build()) == []
    builder = StreamsBuilder()
    table = builder.stream(TOPIC).group_by_key().windowed_by(windows).agg(**DECLARED)
    bounded = Suppressed.until_window_closes(BufferConfig.max_records(5).shut_down_when_full())
    table.suppress(bounded).to_stream().to("finals")
    assert fused_nodes(builder.build()) == []


def test_the_buffer_of_the_fused_pass_saves_no_keys_the_aggregation_holds() -> None:
    """The aggregation's window and the buffer's hold the same keys in the same rows: the aggregation's key
    parts carry them (pickled once, as the rows were appended), the buffer's
    parts only how many of its rows' keys are the aggregation's; an import gives both stores one list of
    key objects."""
    from spark_jobs.streams import TimeWindows

    task = StreamTask(finals_topology(TimeWindows.of_size_and_grace(10, 2)))
    parts: dict = {}
    for batch in range(3):
        keys = [f"k{i}" for i in range(100 * batch, 100 * batch + 300)]
        with min_rows(1):
            task.process_batch(TOPIC, keys, [{"v": 1}] * len(keys), [5] * len(keys))
        export = task.export_state()
        parts.update(export.parts)
        first = 0 if batch == 0 else 200 + 100 * batch  # the window's first new row
        aggregate, buffer = (
            pickle.loads(data)[0]
            for name, data in sorted(export.parts.items())
            if name.endswith((f"/0k.{first}", "/0:10.0", f"/0:10.{batch}"))
        )
        new_keys = len(loaded_keys(aggregate["keys"]))
        assert new_keys == (300 if batch == 0 else 100)
        assert (buffer["keys"], buffer["shared_keys"]) == ((), new_keys)
    # the aggregation's window saves its keys apart, each key once (nodes/time_window_store.py)
    assert pickle.loads(parts["KSTREAM-AGGREGATE-0000000001/0k.400"])[0]["keys"] == (
        dumps_plain([f"k{i}" for i in range(400, 500)]),
    )
    imported = StreamTask.import_state(finals_topology(TimeWindows.of_size_and_grace(10, 2)), parts)
    rows = [row for node in imported.nodes.values() for row in node.state_rows()]
    stored = [row.key for row in rows if row.store == "window"]
    buffered = [row.key for row in rows if row.store == "suppress_buffer"]
    assert stored == buffered == [f"k{i}" for i in range(500)]
    assert all(a is b for a, b in zip(stored, buffered, strict=True))
