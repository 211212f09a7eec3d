"""The windowed count + final suppress run in one vectorized pass (nodes/final_window_count.py, the rewrite
optimizer.py chooses when a task wires its nodes) gives what the two nodes give one after the other: outputs
in order, late records, buffer metrics and exported state, byte for byte."""

from __future__ import annotations

import contextlib
import pickle
from array import array

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_jobs.streams import BufferConfig, StreamsBuilder, StreamTask, Suppressed, TimeWindows
from spark_jobs.streams.nodes import final_window_count
from spark_jobs.streams.nodes.aggregations import TimeWindowAggregateNode
from spark_jobs.streams.nodes.final_window_count import FinalWindowCount, _distinct, _same_rows
from spark_jobs.streams.nodes.suppress import SuppressNode
from spark_jobs.streams.nodes.time_ordered_buffer import ENTRY_COLUMNS, TimeOrderedKeyValueBuffer, entry_rows
from spark_jobs.streams.records import Window
from spark_jobs.streams.runtime.part_keys import KeyListLoader

TOPIC = "readings"


def finals_topology(
    size: int, advance: int, grace: int, other_branch: bool = False, reads_olds: bool = False
):
    windows = TimeWindows.of_size_and_grace(size, grace)
    if advance != size:
        windows = windows.advance_by(advance)
    builder = StreamsBuilder()
    stream = builder.stream(TOPIC)
    counts = stream.group_by_key().windowed_by(windows).count()
    finals = counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()).with_name("finals"))
    finals.to_stream().map_values(lambda n: n * 10).to("finals")
    if reads_olds:  # a table grouped again reads the old values the suppress forwards: its buffer keeps them
        finals.group_by(lambda key, value: (key[0], 1)).count().to_stream().to("regrouped")
    if other_branch:  # a sibling of the count: the outputs interleave by input record (src)
        stream.map_values(lambda v: v).to("echo")
    return builder.build()


@contextlib.contextmanager
def min_rows(n: int, keys_pickled_from: int = 1):
    """The fused pass for batches of `n` rows or more, pickling a window's new keys as it appends them
    from `keys_pickled_from` keys on."""
    saved = final_window_count.MIN_ROWS, final_window_count.MIN_KEYS_PICKLED
    final_window_count.MIN_ROWS, final_window_count.MIN_KEYS_PICKLED = n, keys_pickled_from
    try:
        yield
    finally:
        final_window_count.MIN_ROWS, final_window_count.MIN_KEYS_PICKLED = saved


def decoded(parts: dict[str, bytes]) -> dict:
    """Each part as its node saved it, its keys one list: the fused pass pickles a batch's new keys for both
    stores as it appends them, so its parts may cut a window's keys into other pickled chunks than the
    nodes' (WindowRows.key_chunks), which load to the same keys; a fused aggregate pickles its values as it
    makes them, in chunks (`_unpickled`). Numpy arrays (a window store's row numbers, nodes/kv_rows.py) as
    lists, to compare."""
    return {name: _plain(_unpickled(KeyListLoader().loads(data))) for name, data in parts.items()}


def _unpickled(part):
    """A window store's delta whose aggregates were saved pickled in chunks (WindowRows.saved_columns) as
    the nodes' export saves them: each row's value, the last one the chunks and the gathered values give it
    in the order a load applies them, gathered into the column's form (one row's value in a list, more
    rows' in a tuple)."""
    if type(part) is not tuple or len(part) != 2 or type(part[0]) is not dict:
        return part
    saved, gone = part
    columns = saved.get("columns")
    if (
        type(columns) is not list
        or not columns
        or type(columns[0]) is not dict
        or "pickled" not in columns[0]
    ):
        return part
    column = saved["columns"][0]
    value_of = {}
    for at, data in column["pickled"]:
        value_of.update(zip(at, pickle.loads(data), strict=True))
    value_of.update(zip(column["rows"], column["values"], strict=True))
    values = [value_of[row] for row in saved["rows"].tolist()]
    return {**saved, "columns": [values if len(values) == 1 else tuple(values), *saved["columns"][1:]]}, gone


def _plain(saved):
    if type(saved) is np.ndarray:
        return saved.tolist()
    if type(saved) in (list, tuple):
        return type(saved)(map(_plain, saved))
    if type(saved) is dict:
        return {key: _plain(value) for key, value in saved.items()}
    return saved


class Pair:
    """The same topology in two tasks: one fused (every batch that qualifies), one node by node."""

    def __init__(self, topology_of, keys_pickled_from: int = 1) -> None:
        self.keys_pickled_from = keys_pickled_from
        self.topology_of = topology_of
        self.fused = StreamTask(topology_of())
        self.nodes = StreamTask(topology_of())
        self.parts: tuple[dict, dict] = ({}, {})

    def run(self, keys, timestamps, headers=None) -> tuple[list, list]:
        values = list(range(len(keys)))
        with min_rows(1, self.keys_pickled_from):
            self.fused.process_batch(TOPIC, keys, values, timestamps, headers)
        with min_rows(10**9):
            self.nodes.process_batch(TOPIC, keys, values, timestamps, headers)
        return _records(self.fused), _records(self.nodes)

    def exports(self):
        """Both tasks' state exports, each added to the parts its task's history holds."""
        exports = self.fused.export_state(), self.nodes.export_state()
        for held, export in zip(self.parts, exports, strict=True):
            held.update(export.parts)
            for name in export.removed:
                del held[name]
        return exports

    def check(self, runs, moves, batches_per_export: int = 1) -> None:
        """Each batch run by both tasks: the same outputs and metrics, and after every `batches_per_export`
        batches (and the last) the same exports; after an export whose batch's move is True, each task
        goes on from its exported parts."""
        for n, ((keys, timestamps, headers), move) in enumerate(zip(runs, moves, strict=False), 1):
            fused, nodes = self.run(keys, timestamps, headers)
            assert fused == nodes
            assert self.fused.metrics() == self.nodes.metrics()
            if n % batches_per_export and n < min(len(runs), len(moves)):
                continue
            fused_export, nodes_export = self.exports()
            assert decoded(fused_export.parts) == decoded(nodes_export.parts)
            assert fused_export.removed == nodes_export.removed
            if move:
                self.move()

    def move(self) -> None:
        """Each task goes on as a new task imported from the parts of its last export."""
        self.fused = StreamTask.import_state(self.topology_of(), self.parts[0])
        self.nodes = StreamTask.import_state(self.topology_of(), self.parts[1])


def _records(task: StreamTask) -> list:
    return [(topic, r.key, r.value, r.timestamp, r.headers) for topic, r in task.drain_output().records()]


@st.composite
def batches(draw):
    """Batches of readings from a few sensors: mostly in order, some out of order, some late; some batches
    with headers (they run node by node, and the entries they put keep their headers until put again)."""
    # some names not ASCII: their UTF-8 bytes, which the buffer's sizes count, outnumber their characters
    sensors = [f"s{i}" if i % 3 else f"sé{i}" for i in range(draw(st.integers(1, 12)))]
    clock = draw(st.integers(0, 50))
    out = []
    for _ in range(draw(st.integers(1, 6))):
        keys, timestamps = [], []
        for _ in range(draw(st.integers(0, 40))):
            clock += draw(st.integers(0, 7))
            lateness = draw(st.sampled_from([0, 0, 0, 3, 15, 60]))
            keys.append(draw(st.sampled_from(sensors)))
            timestamps.append(max(0, clock - lateness))
        headers = [{"batch": b"h"}] * len(keys) if draw(st.integers(0, 4)) == 0 else None
        out.append((keys, timestamps, headers))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.sampled_from([(10, 10, 0), (10, 10, 5), (20, 5, 4), (15, 10, 20), (30, 30, 2)]),
    runs=batches(),
    other_branch=st.booleans(),
    moves=st.lists(st.booleans(), min_size=6, max_size=6),
    keys_pickled_from=st.sampled_from([1, 3, 10**9]),  # a window's new keys pickled as appended, or not
)
def test_fused_equals_node_by_node(shape, runs, other_branch, moves, keys_pickled_from) -> None:
    size, advance, grace = shape
    Pair(lambda: finals_topology(size, advance, grace, other_branch), keys_pickled_from).check(runs, moves)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    runs=batches(),
    moves=st.lists(st.booleans(), min_size=6, max_size=6),
    keys_pickled_from=st.sampled_from([1, 3, 10**9]),
)
def test_fused_equals_node_by_node_in_a_long_window(runs, moves, keys_pickled_from) -> None:
    """Most batches fall in one window that the count holds, whose rows number the keys (_number_keys)."""
    Pair(lambda: finals_topology(1000, 1000, 100), keys_pickled_from).check(runs, moves)


def test_the_fused_pass_runs_and_emits_in_window_and_key_order(monkeypatch) -> None:
    applied = []
    real_apply = FinalWindowCount._apply

    def counting_apply(self, plan, *batch):
        applied.append(len(plan.pairs.rec))
        return real_apply(self, plan, *batch)

    monkeypatch.setattr(FinalWindowCount, "_apply", counting_apply)
    pair = Pair(lambda: finals_topology(10, 10, 0))
    keys = ["b", "a", "c", "a", "b", "late", "z"]
    timestamps = [1, 2, 3, 11, 12, 5, 25]  # "late" (5) comes after window [0, 10) closed at 11
    fused, nodes = pair.run(keys, timestamps)
    assert applied == [6]  # every record but the late one, in one pass
    assert (
        fused
        == nodes
        == [
            ("finals", key, value, ts, None)
            for key, value, ts in [
                (("a", (0, 10)), 10, 2),  # window [0, 10) closes at 11 (grace 0): a, b, c by key
                (("b", (0, 10)), 10, 1),
                (("c", (0, 10)), 10, 3),
                (("a", (10, 20)), 10, 11),  # [10, 20) closes at 25
                (("b", (10, 20)), 10, 12),
            ]
        ]
    )
    assert pair.fused.metrics()["dropped-records-total"] == 1


@pytest.mark.parametrize(
    "keys",
    [
        ["a", None, "b", "a"],  # a null key: dropped by the count's loop
        ["a", 1, "b", "a"],  # not all strings
    ],
)
def test_batches_it_cannot_vouch_for_run_node_by_node(keys) -> None:
    pair = Pair(lambda: finals_topology(10, 10, 0))
    timestamps = [1, 2, 3, 30]
    fused, nodes = pair.run(keys, timestamps)
    assert fused == nodes
    assert pair.fused.metrics() == pair.nodes.metrics()


def test_an_entry_put_with_headers_loses_them_when_put_again_without() -> None:
    pair = Pair(lambda: finals_topology(10, 10, 0))
    pair.run(["a", "b"], [1, 2], headers=[{"trace": b"t1"}, None])  # headers: node by node
    pair.exports()
    pair.run(["a", "b", "a"], [3, 4, 5])  # fused: a's entry is put again, without headers
    fused_export, nodes_export = pair.exports()
    assert decoded(fused_export.parts) == decoded(nodes_export.parts)
    fused, nodes = pair.run(["c"], [20])  # [0, 10) closes: its entries leave, with their sizes counted
    assert fused == nodes
    assert [value for _, _, value, _, _ in fused] == [30, 20]  # a: 3 readings, b: 2
    assert pair.fused.metrics() == pair.nodes.metrics()


def _reverse_buffer_rows(task: StreamTask) -> None:
    """Each of the buffer's windows reloaded with its rows in reverse order: the same entries, no longer in
    the count's rows (as no history of the two nodes leaves them), so the pass must look them up by key."""
    (suppress,) = (node for node in task.nodes.values() if isinstance(node, SuppressNode))
    buckets = suppress.buffer.buckets
    for window, rows in list(buckets.items()):
        reloaded = entry_rows(suppress.buffer.entry_columns)
        for key, fields in reversed(list(zip(rows.keys, map(rows.fields, range(len(rows))), strict=True))):
            reloaded.append(key, fields)
        reloaded.dirty[:] = bytes(len(reloaded))  # as an import leaves them
        reloaded.saved = len(reloaded)
        buckets[window] = reloaded


@pytest.mark.parametrize(
    "last_batch",
    [
        (["c", "a", "c", "d", "e"], [4, 5, 6, 7, 12]),  # two windows: keys numbered afresh; [0, 10) closes
        (["c", "a", "c", "d"], [4, 5, 6, 7]),  # one window the count holds: keys numbered by its rows
    ],
)
def test_buffer_rows_apart_from_the_count_rows_are_looked_up_by_key(last_batch) -> None:
    pair = Pair(lambda: finals_topology(10, 10, 0))
    pair.run(["a", "b", "c"], [1, 2, 3])
    pair.run(["b"], [4])  # a batch that finds the rows the same, before they are set apart
    for task in (pair.fused, pair.nodes):
        _reverse_buffer_rows(task)
    (fused_node,) = (node for node in pair.fused.nodes.values() if isinstance(node, SuppressNode))
    (count_node,) = (node for node in pair.fused.nodes.values() if isinstance(node, TimeWindowAggregateNode))
    assert not _same_rows(count_node.store.rows(0), fused_node.buffer.window_rows((0, 10)))
    fused, nodes = pair.run(*last_batch)
    assert fused == nodes
    fused_export, nodes_export = pair.exports()
    assert decoded(fused_export.parts) == decoded(nodes_export.parts)
    fused_later, nodes_later = pair.run(["f"], [12])  # [0, 10) closes at 12 (if it has not yet)
    assert fused_later == nodes_later
    assert [(key, value) for _, (key, _), value, _, _ in fused + fused_later] == [
        ("a", 20),
        ("b", 20),
        ("c", 30),
        ("d", 10),
    ]
    assert pair.fused.metrics() == pair.nodes.metrics()


def test_a_batch_in_one_window_numbers_the_keys_the_count_holds_by_their_rows() -> None:
    task = StreamTask(finals_topology(10, 10, 0))
    task.process_batch(TOPIC, ["a", "b", "c"], [0, 0, 0], [1, 2, 3])
    (count_node,) = (node for node in task.nodes.values() if isinstance(node, TimeWindowAggregateNode))
    fused = FinalWindowCount(count_node, count_node.children[0])
    rows = count_node.store.rows(0)
    index_before = dict(rows.index)
    pairs = fused._pairs(["c", "x", "a", "x", "y", "b"], [4, 5, 6, 7, 8, 9])
    assert (pairs.first_new, pairs.rows_of) == (3, 0)
    assert pairs.key.tolist() == [2, 3, 0, 3, 4, 1]  # c, a, b by row; x, y new, in order of appearance
    assert pairs.keys.tolist() == ["x", "y"]
    assert rows.index == index_before  # planning changes nothing
    two_windows = fused._pairs(["c", "x"], [4, 12])
    assert (two_windows.first_new, two_windows.rows_of) == (0, -1)
    assert two_windows.keys.tolist() == ["c", "x"]


def test_a_batch_in_one_new_window_is_numbered_in_the_table_that_window_then_looks_its_keys_up_in() -> None:
    task = StreamTask(finals_topology(10, 10, 0))
    (count_node,) = (node for node in task.nodes.values() if isinstance(node, TimeWindowAggregateNode))
    fused = FinalWindowCount(count_node, count_node.children[0])
    pairs = fused._pairs(["c", "x", "c", "y"], [1, 2, 3, 4])
    assert (pairs.first_new, pairs.rows_of) == (0, -1) and pairs.new_table is not None
    assert pairs.key.tolist() == [0, 1, 0, 2] and pairs.keys.tolist() == ["c", "x", "y"]
    assert count_node.store.rows(0) is None  # planning changes nothing
    with min_rows(1):
        task.process_batch(TOPIC, ["c", "x", "c", "y"], [0, 0, 0, 0], [1, 2, 3, 4])
        rows = count_node.store.rows(0)
        assert rows.keys.tolist() == ["c", "x", "y"] and rows._table is not None and rows._table.size == 3
        task.process_batch(TOPIC, ["y", "z", "c"], [0, 0, 0], [5, 6, 7])
    assert rows.keys.tolist() == ["c", "x", "y", "z"]
    assert rows.rows_of(["z", "y", "x", "c", "w"]).tolist() == [3, 2, 1, 0, -1]
    assert list(np.frombuffer(rows.columns[0], np.int64)) == [3, 1, 2, 1]


def test_a_batch_in_two_windows_numbers_its_keys_and_each_held_window_its_new_keys_in_its_table() -> None:
    task = StreamTask(finals_topology(10, 5, 0))  # hopping: a record in two windows
    (count_node,) = (node for node in task.nodes.values() if isinstance(node, TimeWindowAggregateNode))
    fused = FinalWindowCount(count_node, count_node.children[0])
    with min_rows(1):
        task.process_batch(TOPIC, ["a", "b"], [0, 0], [6, 7])  # [0, 10) and [5, 15)
        windows = [count_node.store.rows(0), count_node.store.rows(5)]
        for rows in windows:
            rows.rows_of(["a"], 16)  # each window's key table, built
        pairs = fused._pairs(["c", "x", "a", "c"], [8, 9, 9, 9])
        assert (pairs.first_new, pairs.rows_of) == (0, -1)
        assert pairs.key.tolist() == [0, 1, 2, 0] and pairs.keys.tolist() == ["c", "x", "a"]
        task.process_batch(TOPIC, ["c", "x", "a", "c"], [0, 0, 0, 0], [8, 9, 9, 9])
    for rows in windows:  # the new keys numbered as the window looked its keys up, then appended
        assert rows.keys.tolist() == ["a", "b", "c", "x"]
        assert rows._table.size == 4 and not rows._table.pending
        assert rows.rows_of(["x", "c", "b", "a", "w"]).tolist() == [3, 2, 1, 0, -1]
        assert list(np.frombuffer(rows.columns[0], np.int64)) == [2, 1, 2, 1]


def test_new_keys_take_rows_in_order_of_their_first_record_in_the_window() -> None:
    pair = Pair(lambda: finals_topology(10, 10, 0))
    pair.run(["a", "b", "a"], [1, 11, 13])  # [0, 10) closes at 13
    # x's first record is late (dropped): in [10, 20) y comes first, so y's row is before x's
    fused, nodes = pair.run(["x", "y", "x", "a"], [2, 14, 15, 16])
    assert fused == nodes
    assert pair.fused.metrics() == pair.nodes.metrics()
    (count_node,) = (node for node in pair.fused.nodes.values() if isinstance(node, TimeWindowAggregateNode))
    assert count_node.store.rows(10).keys.tolist() == ["b", "a", "y", "x"]
    fused_export, nodes_export = pair.exports()
    assert decoded(fused_export.parts) == decoded(nodes_export.parts)


@given(
    st.lists(
        st.integers(-3, 3) | st.integers(2**40, 2**40 + 70_000) | st.integers(-(2**63), 2**63 - 1),
        min_size=1,
        max_size=60,
    )
)
def test_distinct_is_np_unique(values) -> None:
    """Counted (values within a span of a few times their number) or sorted (the others): np.unique's."""
    array = np.array(values, np.int64)
    got = _distinct(array)
    expected = np.unique(array, return_index=True, return_inverse=True, return_counts=True)
    assert len(got) == len(expected)
    for got_column, want in zip(got, expected, strict=True):
        assert got_column.tolist() == want.tolist()


def test_keys_of_other_types_the_count_holds_are_numbered_by_their_rows(monkeypatch) -> None:
    applied = []
    real_apply = FinalWindowCount._apply
    monkeypatch.setattr(
        FinalWindowCount,
        "_apply",
        lambda self, plan, *batch: applied.append(plan) or real_apply(self, plan, *batch),
    )
    pair = Pair(lambda: finals_topology(10, 10, 0))
    pair.run([1, "a", 2], [1, 2, 3])  # not all strings: node by node, and the window holds rows for 1 and 2
    # one window the count holds; 1 and 2 are found there (True is 1), "b" is new
    batch = ([True, "b", 2, "a", 1], [4, 5, 6, 7, 8])
    (count_node,) = (node for node in pair.fused.nodes.values() if isinstance(node, TimeWindowAggregateNode))
    pairs = FinalWindowCount(count_node, count_node.children[0])._pairs(*batch)
    assert (pairs.first_new, pairs.keys.tolist()) == (3, ["b"])
    fused, nodes = pair.run(*batch)
    assert len(applied) == 1  # the fused pass ran it
    assert fused == nodes
    assert pair.fused.metrics() == pair.nodes.metrics()
    fused_export, nodes_export = pair.exports()
    assert decoded(fused_export.parts) == decoded(nodes_export.parts)
    fused, nodes = pair.run(["c"], [12])  # [0, 10) closes
    assert fused == nodes
    # the rows keep the objects of their first records: 1 (not True), 2, "a", "b"
    assert sorted((repr(key), value) for _, (key, _), value, _, _ in fused) == [
        ("'a'", 20),
        ("'b'", 10),
        ("1", 30),
        ("2", 20),
    ]


@pytest.mark.parametrize("reads_olds", [False, True], ids=["finals to a stream", "finals grouped again"])
def test_the_buffer_of_a_count_saves_its_values_as_int64_arrays(reads_olds) -> None:
    """old and prior values are the count's ints: saved as arrays, not an object per value; the new values
    are the count's own, left out of the buffer's saved form and read back from the count's store on import
    (as are the sizes, all 0); the old values only where a child of the suppressed table reads them;
    the fused pass and the nodes put the same values there (a batch with headers runs node by node)."""
    pair = Pair(lambda: finals_topology(10, 10, 0, reads_olds=reads_olds))
    pair.run(["a", "b", "a"], [1, 2, 3])
    pair.run(["b", "c"], [4, 5], headers=[{"h": b"1"}, None])
    for task in (pair.fused, pair.nodes):
        (suppress,) = (node for node in task.nodes.values() if isinstance(node, SuppressNode))
        export = task.export_state()
        (saved,) = (
            KeyListLoader().loads(data)[0]
            for name, data in export.parts.items()
            if name.startswith(f"{suppress.name}/")
        )
        if reads_olds:
            ts, old, hdr, base, prior = saved["columns"]  # no sizes: an unbounded buffer's are 0
            assert list(old) == [1, 1, 0]
        else:
            ts, hdr, base, prior = saved["columns"]  # nor old values: nothing reads them
        assert [type(column) for column in (ts, base, prior)] == [array] * 3
        # the keys are the count's, row for row: left out, read from the count's window on import
        assert (saved["keys"], saved["shared_keys"]) == ((), 3)
        # a value that every row holds is saved once
        assert (list(prior), list(hdr)) == ([0], [None, {"h": b"1"}, None])
        restored = StreamTask.import_state(task.topology, export.parts)  # the first export: every part
        (restored_suppress,) = (n for n in restored.nodes.values() if isinstance(n, SuppressNode))
        restored_columns = restored_suppress.buffer.window_rows(Window(0, 10)).columns
        assert (list(restored_columns[1]), list(restored_columns[2])) == ([0, 0, 0], [2, 2, 1])
        assert (list(restored_columns[4]), list(restored_columns[6])) == ([None, {"h": b"1"}, None], [0] * 3)
        assert restored_suppress.buffer.window_rows(Window(0, 10)).keys.tolist() == ["a", "b", "c"]


def test_a_buffer_holding_entries_in_list_columns_cannot_switch_to_int64_columns() -> None:
    buffer = TimeOrderedKeyValueBuffer(window_close=True)
    buffer.open_window(Window(0, 10))
    with pytest.raises(RuntimeError, match="must be set before the buffer holds entries"):
        buffer.hold_counts()
    assert buffer.entry_columns == ENTRY_COLUMNS


@pytest.mark.parametrize("with_table", [True, False], ids=["key table", "no pandas: the index"])
def test_a_long_window_numbers_its_keys_with_or_without_a_key_table(monkeypatch, with_table) -> None:
    from spark_jobs.streams.nodes import window_rows

    if not with_table:
        monkeypatch.setattr(window_rows.KeyTable, "new", staticmethod(lambda size_hint: None))
    pair = Pair(lambda: finals_topology(1000, 1000, 100))
    pair.check([(["a", "b", "c", "a"], [1, 2, 3, 4], None)], [True])  # goes on from its parts
    pair.check([(["c", "x", "a", "y", "x", "w"], [5, 6, 7, 8, 9, 10], None)], [False])
    (count_node,) = (node for node in pair.fused.nodes.values() if isinstance(node, TimeWindowAggregateNode))
    rows = count_node.store.rows(0)
    assert type(rows._table) is (window_rows.KeyTable if with_table else bool)
    # then [0, 1000) closes
    pair.check([(["y", "z", "b"], [11, 12, 13], None), (["q"], [1200], None)], [False, False])


def test_composite_keys_in_a_window_of_str_keys_run_node_by_node() -> None:
    pair = Pair(lambda: finals_topology(1000, 1000, 100))
    pair.check([(["a", "b", "a"], [1, 2, 3], None)], [False])  # the window's keys: str, in a key table
    # tuples of one length, which np.array would make into a two-dimensional array
    pair.check([([("a", 1), ("b", 2), ("a", 1)], [4, 5, 6], None), (["q"], [1200], None)], [False, False])


def test_the_optimizer_rewrites_an_unbounded_final_count_and_aggregate() -> None:
    from spark_jobs.streams.optimizer import rewrites

    task = StreamTask(finals_topology(10, 10, 0))
    (count_node,) = (node for node in task.nodes.values() if isinstance(node, TimeWindowAggregateNode))
    chosen = rewrites(task.nodes)
    assert list(chosen) == [count_node.name]
    assert chosen[count_node.name].output is count_node.children[0]
    builder = StreamsBuilder()
    counts = builder.stream(TOPIC).group_by_key().windowed_by(TimeWindows.of_size_and_grace(10, 0)).count()
    bounded = BufferConfig.max_records(5).shut_down_when_full()
    counts.suppress(Suppressed.until_window_closes(bounded)).to_stream().to("finals")
    aggregate = builder.stream("other").group_by_key().windowed_by(TimeWindows.of_size_and_grace(10, 0))
    aggregate.aggregate(lambda: 0, lambda k, v, agg: agg + 1).suppress(
        Suppressed.until_window_closes(BufferConfig.unbounded())
    ).to_stream().to("sums")
    task = StreamTask(builder.build())
    (aggregate_node,) = (
        node
        for node in task.nodes.values()
        if isinstance(node, TimeWindowAggregateNode) and node.aggregation.kind == "aggregate"
    )
    assert list(rewrites(task.nodes)) == [
        aggregate_node.name
    ]  # the aggregate's (final_window_user_aggregate)
