"""A windowed aggregate or reduce + final suppress run in one pass (nodes/final_window_user_aggregate.py, the
rewrite optimizer.py chooses when a task wires its nodes) gives what the two nodes give one after the
other: outputs in order, late records, buffer metrics and exported state; the user's functions called as
often as the node calls them."""

from __future__ import annotations

import random
from collections import Counter
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_jobs.streams import BufferConfig, StreamsBuilder, StreamTask, Suppressed, TimeWindows
from spark_jobs.streams.nodes import final_window_user_aggregate
from spark_jobs.streams.nodes.final_window_user_aggregate import FinalWindowUserAggregate
from spark_jobs.streams.nodes.suppress import SuppressNode
from spark_jobs.streams.nodes.time_ordered_buffer import OLD_COLUMN
from spark_jobs.streams.nodes.window_rows import WindowRows
from spark_jobs.streams.runtime.part_keys import KeyListLoader

from .test_final_window_count import TOPIC, Pair, batches, min_rows


def _initial() -> tuple:
    return (0, 0)


def _add(key, value, agg: tuple) -> tuple:
    """A tuple aggregate: count and sum (a tuple, which numpy would make into a row of an array)."""
    return (agg[0] + 1, agg[1] + value)


def _add_or_delete(key, value, agg: tuple) -> tuple | None:
    """Deletes the key's row (a tombstone) on every seventh value: the key's next record starts afresh."""
    return None if value % 7 == 3 else (agg[0] + 1, agg[1] + value)


def _biggest(agg: int, value: int) -> int:
    return max(agg, value)


AGGREGATIONS = {
    "aggregate": lambda windowed: windowed.aggregate(_initial, _add),
    "tombstones": lambda windowed: windowed.aggregate(_initial, _add_or_delete),
    "reduce": lambda windowed: windowed.reduce(_biggest),
}


def aggregate_topology(
    kind: str,
    size: int,
    advance: int,
    grace: int,
    other_branch: bool = False,
    calls=None,
    reads_olds: bool = False,
):
    windows = TimeWindows.of_size_and_grace(size, grace)
    if advance != size:
        windows = windows.advance_by(advance)
    builder = StreamsBuilder()
    stream = builder.stream(TOPIC)
    windowed = stream.group_by_key().windowed_by(windows)
    if calls is not None:  # counts the user's calls

        def initial():
            calls["initializer"] += 1
            return _initial()

        def add(key, value, agg):
            calls["aggregator"] += 1
            return _add_or_delete(key, value, agg)

        table = windowed.aggregate(initial, add)
    else:
        table = AGGREGATIONS[kind](windowed)
    finals = table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()).with_name("finals"))
    finals.to_stream().map_values(lambda v: (v, "final")).to("finals")
    if reads_olds:  # a table grouped again reads the old values the suppress forwards: its buffer keeps them
        finals.group_by(lambda key, value: (key[0], 1)).count().to_stream().to("regrouped")
    if other_branch:
        stream.map_values(lambda v: v).to("echo")
    return builder.build()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(sorted(AGGREGATIONS)),
    shape=st.sampled_from(
        [(10, 10, 0), (10, 10, 5), (20, 5, 4), (15, 10, 20), (30, 30, 2), (1000, 1000, 100)]
    ),
    runs=batches(),
    other_branch=st.booleans(),
    moves=st.lists(st.booleans(), min_size=6, max_size=6),
    keys_pickled_from=st.sampled_from([1, 3, 10**9]),
    reads_olds=st.booleans(),
    chunk=st.sampled_from([1, 3, 512]),
    batches_per_export=st.sampled_from([1, 1, 2, 3]),
)
def test_fused_equals_node_by_node(
    kind, shape, runs, other_branch, moves, keys_pickled_from, reads_olds, chunk, batches_per_export
) -> None:
    """`batches_per_export`: a row put by several batches before an export, by the fused pass (its values
    pickled as the fold makes them), node by node, or both (in either order), saves its last value."""
    size, advance, grace = shape
    # a fold that goes key by key pickles (and writes into the stores) what it finished every `chunk` pairs
    # or so; a fold takes the old values from the stores `chunk` rows at a time
    with (
        mock.patch.object(final_window_user_aggregate, "PICKLED_PAIRS", chunk),
        mock.patch.object(final_window_user_aggregate, "TAKEN_ROWS", chunk),
    ):
        Pair(
            lambda: aggregate_topology(kind, size, advance, grace, other_branch, reads_olds=reads_olds),
            keys_pickled_from,
        ).check(runs, moves, batches_per_export)


@pytest.mark.parametrize("kind", ["aggregate", "tombstones"])
@pytest.mark.parametrize("chunk", [1, 3, 512])
def test_a_fold_by_key_over_held_rows_gives_the_nodes_results(kind, chunk) -> None:
    """Batches of many keys with a record each in hopping windows (the groups outnumber the records: the
    fold goes key by key), their rows held from the batches before, in another order: the fold takes the
    old aggregates from both stores and writes the new ones into their rows as it goes, `chunk` rows and
    pairs at a time (a tombstone's batch gives the rows back before the nodes replay it), and the outputs,
    metrics and exports are the nodes', an import between batches included."""
    placed = []
    place = WindowRows.place
    rng = random.Random(chunk)
    keys = [f"k{i}" for i in range(60)]
    runs = [(rng.sample(keys, len(keys)), [20 + n] * len(keys), None) for n in range(4)]
    with (
        mock.patch.object(final_window_user_aggregate, "PICKLED_PAIRS", chunk),
        mock.patch.object(final_window_user_aggregate, "TAKEN_ROWS", chunk),
        mock.patch.object(WindowRows, "place", lambda rows, *a: placed.append(1) or place(rows, *a)),
    ):
        Pair(lambda: aggregate_topology(kind, 20, 5, 4)).check(runs, [False, True, False, False])
    assert placed or kind == "tombstones"  # the fold wrote into held rows


def test_a_buffer_keeps_old_values_only_where_a_child_of_the_suppressed_table_reads_them() -> None:
    """The finals go to a stream (which drops old values): the buffer neither saves nor forwards them.
    Grouped again, the suppressed table's old values are read: saved, loaded and forwarded."""
    for reads_olds in (False, True):
        pair = Pair(
            lambda reads_olds=reads_olds: aggregate_topology("aggregate", 10, 5, 0, reads_olds=reads_olds)
        )
        pair.check([(["a", "b", "a", "c"], [1, 2, 3, 4], None), (["b", "a"], [30, 31], None)], [True, True])
        for task in (pair.fused, pair.nodes):
            (suppress,) = (n for n in task.nodes.values() if isinstance(n, SuppressNode))
            assert suppress.buffer.keeps_olds is reads_olds
            assert (
                OLD_COLUMN in suppress.buffer.unsaved_columns
            ) is True  # not a column: apart, or not at all
        saved = [
            KeyListLoader().loads(data)[0]
            for name, data in pair.parts[0].items()
            if name.startswith("finals/") and "." in name
        ]
        assert saved and all(("olds" in part) is reads_olds for part in saved)


def test_the_optimizer_rewrites_an_unbounded_final_aggregate() -> None:
    from spark_jobs.streams.optimizer import rewrites

    chosen = rewrites(StreamTask(aggregate_topology("aggregate", 10, 5, 0)).nodes)
    assert len(chosen) == 1
    (rewrite,) = chosen.values()
    assert isinstance(rewrite.process_columns.__self__, FinalWindowUserAggregate)


def test_the_functions_are_called_as_often_as_the_node_calls_them(monkeypatch) -> None:
    """Once per (record, window) pair for the aggregator, once per missing row for the initializer, a
    tombstone's batch included (its results replayed through the node, not computed again)."""
    passes = []
    real_apply, real_replayed = FinalWindowUserAggregate._apply, FinalWindowUserAggregate._replayed
    monkeypatch.setattr(
        FinalWindowUserAggregate, "_apply", lambda self, *a: passes.append("fused") or real_apply(self, *a)
    )
    monkeypatch.setattr(
        FinalWindowUserAggregate,
        "_replayed",
        lambda self, *a: passes.append("replayed") or real_replayed(self, *a),
    )
    fused_calls: Counter = Counter()
    node_calls: Counter = Counter()
    pair = Pair(lambda: aggregate_topology("tombstones", 20, 5, 4))
    pair.fused = StreamTask(aggregate_topology("tombstones", 20, 5, 4, calls=fused_calls))
    pair.nodes = StreamTask(aggregate_topology("tombstones", 20, 5, 4, calls=node_calls))
    keys = ["a", "b", "a", "c", "a", "b", "a", "a", "c", "b"] * 3
    fused, nodes = pair.run(keys, list(range(0, 60, 2)))  # values 0..29: tombstones at 3, 10, 17, 24
    assert passes == ["replayed"]
    assert fused == nodes
    assert fused_calls == node_calls
    # timestamps 0..58 by 2 in windows of 20 advancing by 5: 1 window each for 0..4, 2 for 5..9, 3 for
    # 10..14, 4 from 15 on
    assert node_calls["aggregator"] == 3 * 1 + 2 * 2 + 3 * 3 + 22 * 4
    fused, nodes = pair.run(keys[:3], [60, 61, 62])  # values 0, 1, 2: no tombstone
    assert passes == ["replayed", "fused"]
    assert fused == nodes
    assert fused_calls == node_calls
    assert pair.fused.metrics() == pair.nodes.metrics()


def _logged_topology(log: dict, size: int, advance: int, grace: int):
    """The tombstones' aggregate whose functions log, per key, every aggregate the aggregator is given and
    the value with it, and count the initializer's calls."""

    def initial():
        log["initializer"] = log.get("initializer", 0) + 1
        return _initial()

    def add(key, value, agg):
        log.setdefault(key, []).append((value, agg))
        return _add_or_delete(key, value, agg)

    windows = TimeWindows.of_size_and_grace(size, grace)
    if advance != size:
        windows = windows.advance_by(advance)
    builder = StreamsBuilder()
    table = builder.stream(TOPIC).group_by_key().windowed_by(windows).aggregate(initial, add)
    table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream().to("finals")
    return builder.build()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=st.sampled_from([(10, 10, 0), (20, 5, 4), (15, 10, 20)]), runs=batches())
def test_each_key_sees_the_nodes_calls_in_their_order(shape, runs) -> None:
    """The fused fold calls the user's functions group by group in the node's order of each group's pairs
    (the initializer of new groups first): several keys' and windows' groups interleaved, tombstones in
    some, each key's aggregator is given the same values and aggregates, in the same order, as the node
    gives it, and the initializer is called as often."""
    size, advance, grace = shape
    fused_log: dict = {}
    node_log: dict = {}
    pair = Pair(lambda: aggregate_topology("tombstones", size, advance, grace))
    pair.fused = StreamTask(_logged_topology(fused_log, size, advance, grace))
    pair.nodes = StreamTask(_logged_topology(node_log, size, advance, grace))
    for keys, timestamps, headers in runs:
        fused, nodes = pair.run(keys, timestamps, headers)
        assert fused == nodes
        assert fused_log == node_log


def test_a_buffer_saves_the_keys_of_its_rows_that_are_not_the_aggregations() -> None:
    """A tombstone kills the key's row in the aggregation's window and its next record gets a new row there,
    while the buffer keeps the key's entry: from then on a new buffer row's key is not the aggregation's
    in that row, and the buffer's part saves it; an import restores both stores' rows."""
    task = StreamTask(aggregate_topology("tombstones", 1000, 1000, 100))
    (suppress,) = (node for node in task.nodes.values() if isinstance(node, SuppressNode))
    parts: dict = {}
    saved_keys = []
    for keys, values in [(["a", "b"], [1, 1]), (["a", "a"], [3, 1]), (["c"], [1])]:  # 3: a tombstone
        task.process_batch(TOPIC, keys, values, [1] * len(keys))
        export = task.export_state()
        parts.update(export.parts)
        ((name, data),) = ((n, d) for n, d in export.parts.items() if n.startswith(f"{suppress.name}/"))
        saved = KeyListLoader().loads(data)[0]
        saved_keys.append((saved["keys"], saved.get("shared_keys")))
    assert saved_keys == [((), 2), ((), 0), (["c"], None)]
    windows = (
        task.nodes[suppress.parent_name].store.rows(0).keys.tolist(),
        suppress.buffer.window_rows((0, 1000)).keys.tolist(),
    )
    assert windows == (["a", "b", "a", "c"], ["a", "b", "c"])
    restored = StreamTask.import_state(task.topology, parts)
    (restored_suppress,) = (node for node in restored.nodes.values() if isinstance(node, SuppressNode))
    assert restored_suppress.buffer.window_rows((0, 1000)).keys.tolist() == ["a", "b", "c"]
    rows = [[repr(row) for node in t.nodes.values() for row in node.state_rows()] for t in (restored, task)]
    assert rows[0] == rows[1]


def test_the_fold_pickles_its_aggregates_only_once_the_store_is_exported() -> None:
    """A task that never exports (a test driver, an engine run without `export_state`) makes no chunks of
    pickled aggregates: nothing would save them. From the store's first export on, a fold that goes key by
    key pickles what it finishes, and the next export saves those chunks as they are."""
    task = StreamTask(aggregate_topology("aggregate", 20, 5, 100))  # a record in 4 windows: the fold by key
    (suppress,) = (node for node in task.nodes.values() if isinstance(node, SuppressNode))
    store = task.nodes[suppress.parent_name].store
    keys = [f"k{i}" for i in range(50)]

    def run(timestamp: int) -> list:
        """The batch run (fused), then per window its chunks of pickled aggregates."""
        with min_rows(1):
            task.process_batch(TOPIC, keys, list(range(len(keys))), [timestamp] * len(keys))
        return [store.rows(start).pickled_values for start in (85, 90, 95, 100)]

    assert not store.exported
    assert run(100) == [[]] * 4 and run(101) == [[]] * 4
    task.export_state()
    assert store.exported
    assert all(run(102))
    deltas = [
        KeyListLoader().loads(data)[0]
        for name, data in task.export_state().parts.items()
        if "w." in name.rpartition("/")[2]
    ]
    assert len(deltas) == 4 and all("pickled" in delta["columns"][0] for delta in deltas)


def test_a_task_imported_from_its_parts_pickles_from_its_first_batch() -> None:
    """The Spark runtime reads a task's state from its parts at every micro-batch (unless a worker keeps the
    task live) and exports after the batch: a store whose state came from parts is in an export history,
    and its first batch's fold pickles what it finishes for that export."""
    topology = aggregate_topology("aggregate", 20, 5, 100)
    keys = [f"k{i}" for i in range(50)]
    task = StreamTask(topology)
    task.process_batch(TOPIC, keys, list(range(len(keys))), [100] * len(keys))
    imported = StreamTask.import_state(topology, task.export_state().parts)
    (suppress,) = (node for node in imported.nodes.values() if isinstance(node, SuppressNode))
    store = imported.nodes[suppress.parent_name].store
    assert store.exported
    with min_rows(1):
        imported.process_batch(TOPIC, keys, list(range(len(keys))), [101] * len(keys))
    assert all(store.rows(start).pickled_values for start in (85, 90, 95, 100))
