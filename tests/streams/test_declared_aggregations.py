"""Declared aggregations (`agg(...)`) against the user-function aggregate they stand for, on random inputs."""

from __future__ import annotations

import math
import os
import struct

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from spark_jobs.streams import (
    BufferConfig,
    Count,
    Max,
    Mean,
    Min,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    Sum,
    Suppressed,
    TimeWindows,
    TopologyTestDriver,
)
from spark_jobs.streams.nodes import declared_aggregations
from spark_jobs.streams.nodes.declared_aggregations import SegmentedFold, segmented_accumulate
from spark_jobs.streams.records import make_windowed
from spark_jobs.streams.runtime.context import TaskContext
from spark_jobs.streams.runtime.task import StreamTask

from .helpers import drain, pipe_all, read, run_task

PROPERTY = settings(
    max_examples=int(os.environ.get("STREAMS_PROPERTY_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

DECLARED = {
    "n": Count(),
    "total": Sum("v"),
    "top": Max("v"),
    "low": Min("v"),
    "avg": Mean("v"),
    "isum": Sum("v", dtype="int64"),
    "imin": Min("v", dtype="int64"),
    "imax": Max("w", dtype="int64"),
}


def _float_of(value, field):
    """The reference reading of a float64 field (aggregates.py): a number, not a bool, not NaN."""
    x = value.get(field) if isinstance(value, dict) else None
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        try:
            f = float(x)
        except OverflowError:
            return None
        return None if math.isnan(f) else f
    return None


def _int_of(value, field):
    x = value.get(field) if isinstance(value, dict) else None
    if isinstance(x, int) and not isinstance(x, bool) and -(2**63) <= x < 2**63:
        return x
    return None


def _wrap(x: int) -> int:
    return (x + 2**63) % 2**64 - 2**63


def reference_initializer():
    return {name: None for name in DECLARED} | {"n": 0, "_values": 0, "_sum": None, "_ints": 0}


def reference_aggregator(key, value, agg):
    """What DECLARED computes, written as a user aggregate, one record at a time."""
    agg = dict(agg)
    agg["n"] += 1
    f = _float_of(value, "v")
    if f is not None:
        agg["total"] = f if agg["total"] is None else agg["total"] + f
        # of equal values (0.0 and -0.0) the later one (aggregates.py)
        agg["top"] = f if agg["top"] is None or not agg["top"] > f else agg["top"]
        agg["low"] = f if agg["low"] is None or not agg["low"] < f else agg["low"]
        agg["_values"] += 1
        agg["_sum"] = f if agg["_sum"] is None else agg["_sum"] + f
        agg["avg"] = agg["_sum"] / agg["_values"]
    i = _int_of(value, "v")
    if i is not None:
        agg["isum"] = i if agg["isum"] is None else _wrap(agg["isum"] + i)
        agg["imin"] = i if agg["imin"] is None else min(agg["imin"], i)
    w = _int_of(value, "w")
    if w is not None:
        agg["imax"] = w if agg["imax"] is None else max(agg["imax"], w)
    return agg


def reference_merger(key, agg1, agg2):
    """Two sessions' reference aggregates as one (agg1 the earlier fold, agg2 folded into it)."""
    merged = dict(agg1)
    for name in ("n", "_values", "_ints"):
        merged[name] = agg1[name] + agg2[name]

    def combine(name, fold):
        a, b = agg1[name], agg2[name]
        merged[name] = a if b is None else b if a is None else fold(a, b)

    combine("total", lambda a, b: a + b)
    combine("_sum", lambda a, b: a + b)
    combine("top", lambda a, b: a if a > b else b)
    combine("low", lambda a, b: a if a < b else b)
    combine("isum", lambda a, b: _wrap(a + b))
    combine("imin", lambda a, b: a if a < b else b)
    combine("imax", lambda a, b: a if a > b else b)
    merged["avg"] = None if merged["_sum"] is None else merged["_sum"] / merged["_values"]
    return merged


def _public(value):
    """A reference aggregate without its helper fields."""
    if not isinstance(value, dict):
        return value
    return {k: v for k, v in value.items() if not k.startswith("_")}


def topology(declared: bool, windows=None, suppress: bool = False):
    builder = StreamsBuilder()
    grouped = builder.stream("readings").group_by_key()
    if windows is not None:
        grouped = grouped.windowed_by(windows)
    if declared:
        table = grouped.agg(**DECLARED)
    elif isinstance(windows, SessionWindows):
        table = grouped.aggregate(reference_initializer, reference_aggregator, reference_merger)
    else:
        table = grouped.aggregate(reference_initializer, reference_aggregator)
    table.to_stream().to("updates")
    if suppress:
        table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream().to("finals")
    return builder.build()


def _clean(rows):
    return [tuple(_public(x) for x in row) for row in rows]


numbers = st.one_of(
    st.integers(-5, 5),
    st.integers(2**62, 2**63 - 1),  # int64 sums wrap
    st.integers(2**63, 2**64),  # beyond int64: a float64 value only
    st.floats(allow_nan=True, allow_infinity=False, width=64),
    st.sampled_from([0.1, 1e16, -1e16, 1.0, -0.0, 0.0]),  # order-sensitive float sums
    st.booleans(),
    st.none(),
    st.text(max_size=2),
)
values = st.one_of(
    st.fixed_dictionaries({"v": numbers}),
    st.fixed_dictionaries({"v": numbers, "w": numbers}),
    st.fixed_dictionaries({"w": numbers}),
    st.none(),
    st.integers(),
    st.just("text"),
)
keys = st.one_of(st.sampled_from(["a", "b", "c", "é"]), st.none(), st.sampled_from([7, (1, 2)]))
records = st.lists(st.tuples(keys, values, st.integers(0, 400)), max_size=60)
cuts = st.lists(st.integers(0, 60), max_size=6)


@st.composite
def time_windows(draw) -> TimeWindows:
    size = draw(st.integers(1, 60))
    windows = TimeWindows.of_size_and_grace(size, draw(st.integers(0, 40)))
    return windows.advance_by(draw(st.integers(1, size))) if draw(st.booleans()) else windows


def _outputs_and_drops(topo, data, cut_points=(), per_record=False):
    task = StreamTask(topo)
    bounds = sorted(set([0, len(data), *cut_points]) & set(range(len(data) + 1)))
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        chunk = data[lo:hi]
        if per_record:
            for key, value, ts in chunk:
                task.process("readings", key, value, ts)
        else:
            task.process_batch(
                "readings", [r[0] for r in chunk], [r[1] for r in chunk], [r[2] for r in chunk]
            )
    return _clean(drain(task)), task.metrics()


def _without_sizes(metrics: dict) -> dict:
    return {name: value for name, value in metrics.items() if "buffer-size" not in name}


def _bits(x):
    """`x` with every float as its bits (-0.0 is not 0.0, a NaN equals a NaN of the same bits)."""
    if isinstance(x, float):
        return ("float", struct.pack("<d", x))
    if isinstance(x, dict):
        return ("dict", [(k, _bits(v)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_bits(v) for v in x])
    return x


def _same(a, b) -> bool:
    """Equal, floats compared bit for bit."""
    return _bits(a) == _bits(b)


@PROPERTY
@given(windows=time_windows(), data=records, cut_points=cuts, suppress=st.booleans())
def test_windowed_agg_equals_the_user_aggregate(windows, data, cut_points, suppress) -> None:
    declared = _outputs_and_drops(topology(True, windows, suppress), data, cut_points)
    expected = _outputs_and_drops(topology(False, windows, suppress), data, per_record=True)
    assert _same(declared[0], expected[0])
    # dropped records (late pairs, null keys) and the buffer's counts; its bytes differ, as the reference
    # aggregate holds helper fields
    assert _without_sizes(declared[1]) == _without_sizes(expected[1])


@PROPERTY
@given(data=records, cut_points=cuts)
def test_agg_without_windows_equals_the_user_aggregate(data, cut_points) -> None:
    declared = _outputs_and_drops(topology(True), data, cut_points)
    expected = _outputs_and_drops(topology(False), data, per_record=True)
    assert _same(declared, expected)


@PROPERTY
@given(
    gap=st.integers(1, 50),
    grace=st.integers(0, 40),
    data=records,
    cut_points=cuts,
    snapshot_points=cuts,
    suppress=st.booleans(),
)
def test_session_agg_equals_the_user_aggregate(
    gap, grace, data, cut_points, snapshot_points, suppress
) -> None:
    """Session windows merge: the declarations run as a user aggregate with a merger."""
    windows = SessionWindows.of_inactivity_gap_and_grace(gap, grace)
    topo = topology(True, windows, suppress)
    declared = _clean(run_task(topo, data, cuts=cut_points, snapshot_at=snapshot_points))
    expected = _outputs_and_drops(topology(False, windows, suppress), data, per_record=True)
    assert _same(declared, expected[0])


@PROPERTY
@given(windows=time_windows(), data=records, cut_points=cuts, snapshot_points=cuts)
def test_snapshot_and_restore_change_no_output(windows, data, cut_points, snapshot_points) -> None:
    topo = topology(True, windows, suppress=True)
    expected = run_task(topo, data, cuts=cut_points)
    assert run_task(topo, data, cuts=cut_points, snapshot_at=snapshot_points) == expected


def _exported_run(topo, data, cut_points, import_at, catch_up: bool):
    """Run in batches, exporting after each; at `import_at` go on with a task imported from every part
    exported so far (or a copy that caught up from the exports since its own last one)."""
    task = StreamTask(topo)
    every_part: dict[str, bytes] = {}
    outputs = []
    bounds = sorted(set([0, len(data), *cut_points, *import_at]) & set(range(len(data) + 1)))
    shadow = None
    since: tuple[dict, set] = ({}, set())
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        if lo in import_at:
            if catch_up and shadow is not None:
                shadow.apply_state(since[0], since[1])
                task = shadow
            else:
                task = StreamTask.import_state(topo, every_part)
            shadow = StreamTask.import_state(topo, every_part)
            since = ({}, set())
        chunk = data[lo:hi]
        task.process_batch("readings", [r[0] for r in chunk], [r[1] for r in chunk], [r[2] for r in chunk])
        outputs += drain(task)  # as the runtime does: an export holds the output not yet drained
        export = task.export_state()
        every_part.update(export.parts)
        for name in export.removed:
            every_part.pop(name, None)
        since[0].update(export.parts)
        for name in export.removed:
            since[0].pop(name, None)
            since[1].add(name)
    return outputs + drain(task)


@PROPERTY
@given(
    windows=time_windows(),
    data=records,
    cut_points=cuts,
    import_at=st.lists(st.integers(1, 60), max_size=3),
    catch_up=st.booleans(),
)
# a session store's group based before a copy's import, then given a delta and removed by another copy:
# the copy catches up over the delta it never saw
@example(
    windows=TimeWindows.of_size_and_grace(1, 0),
    data=[
        ("a", None, 0),
        ("a", {"v": 0, "w": 0}, 0),
        ("a", {"v": 0}, 0),
        ("a", {"v": 0}, 0),
        ("b", {"v": 0}, 317),
        ("é", None, 1),
        (None, {"v": 9_223_372_036_854_775_808}, 3),
        ("é", {"v": 0}, 61),
    ],
    cut_points=[5],
    import_at=[3, 7],
    catch_up=True,
)
def test_state_export_import_and_catch_up_change_no_output(
    windows, data, cut_points, import_at, catch_up
) -> None:
    sessions = SessionWindows.of_inactivity_gap_and_grace(windows.size, windows.grace)
    for topo in (topology(True, windows, suppress=True), topology(True), topology(True, sessions)):
        expected = run_task(topo, data, cuts=cut_points)
        assert _exported_run(topo, data, cut_points, import_at, catch_up) == expected


@pytest.mark.parametrize("renumber", [False, True])
def test_large_batches_with_many_keys_equal_the_user_aggregate(renumber, monkeypatch) -> None:
    """Batches over several windows and thousands of keys (the KeyTable, the keys numbered across windows
    and the multi-row segments); `renumber`: the node's key numbers found stale at every batch, so every
    window's rows are numbered afresh."""
    import random

    if renumber:
        monkeypatch.setattr(declared_aggregations.KeyNumbers, "STALE_FACTOR", 0)
        monkeypatch.setattr(declared_aggregations.KeyNumbers, "MIN_STALE", 0)

    rng = random.Random(5)
    data = []
    for i in range(6000):
        key = f"k{rng.randrange(3000)}" if rng.random() < 0.9 else f"hot{rng.randrange(3)}"
        value = {
            "v": rng.choice([rng.random() * 1e6, rng.randrange(-100, 100), None]),
            "w": rng.randrange(50),
        }
        data.append((key, value, max(0, i * 5 + rng.randrange(-400, 50))))
    windows = TimeWindows.of_size_and_grace(600, 100).advance_by(200)
    for topo_pair in (
        (topology(True, windows, True), topology(False, windows, True)),
        (topology(True), topology(False)),
    ):
        declared = _outputs_and_drops(topo_pair[0], data, [1, 2500, 2600, 5000])
        expected = _outputs_and_drops(topo_pair[1], data, [3000])
        assert _same(declared[0], expected[0])
        assert _without_sizes(declared[1]) == _without_sizes(expected[1])


def test_timestamps_near_the_int64_limit_equal_the_user_aggregate() -> None:
    """Window ends beyond int64 never close: no overflow in the batch arithmetic."""
    top = 2**63 - 1
    windows = TimeWindows.of_size_and_grace(1000, 500).advance_by(250)
    data = [
        ("a", {"v": 1}, top - 10),
        ("b", {"v": 2}, top),
        ("a", {"v": 3}, top - 5000),
        ("a", {"v": 4}, top - 600),
    ]
    declared = _outputs_and_drops(topology(True, windows, True), data, [2])
    expected = _outputs_and_drops(topology(False, windows, True), data, per_record=True)
    assert _same(declared[0], expected[0]) and len(declared[0]) > 4
    assert _without_sizes(declared[1]) == _without_sizes(expected[1])


def test_the_test_driver_sees_the_same_records() -> None:
    windows = TimeWindows.of_size_and_grace(10, 5).advance_by(5)
    data = [("a", {"v": 1.5}, 3), ("a", {"v": 2}, 7), ("b", {"x": 1}, 8), ("a", None, 30), ("a", {"v": 9}, 4)]
    results = []
    for declared in (True, False):
        with TopologyTestDriver(topology(declared, windows)) as driver:
            pipe_all(driver, "readings", data)
            results.append([[k, _public(v), t] for k, v, t in read(driver, "updates", stringify_keys=True)])
    assert results[0] == results[1]
    assert results[0][1] == [
        "[a@0/10]",
        {"n": 2, "total": 3.5, "top": 2.0, "low": 1.5, "avg": 1.75, "isum": 2, "imin": 2, "imax": None},
        7,
    ]


def test_state_rows_hold_each_window_and_key() -> None:
    windows = TimeWindows.of_size_and_grace(10, 100).advance_by(5)
    task = StreamTask(topology(True, windows))
    task.process_batch("readings", ["a", "b", "a"], [{"v": 1}, {"v": 2.5}, {"v": 3}], [1, 6, 7])
    node = next(n for n in task.nodes.values() if hasattr(n, "layout"))
    rows = sorted(
        (r.key, r.window_start, r.window_end, r.value["n"], r.value["total"], r.timestamp)
        for r in node.state_rows()
    )
    assert rows == [
        ("a", 0, 10, 2, 4.0, 7),
        ("a", 5, 15, 1, 3.0, 7),
        ("b", 0, 10, 1, 2.5, 6),
        ("b", 5, 15, 1, 2.5, 6),
    ]
    assert {r.store for r in node.state_rows()} == {"window"}
    value, timestamp = node.get(make_windowed("a", 5, 15))
    assert (value["n"], value["top"], value["avg"], timestamp) == (1, 3.0, 3.0, 7)
    assert node.get(make_windowed("c", 5, 15)) is None


def test_late_pairs_are_dropped_and_reported_to_the_task(monkeypatch) -> None:
    windows = TimeWindows.of_size_and_grace(10, 0).advance_by(5)
    task = StreamTask(topology(True, windows))
    late: list = []
    original = TaskContext.count_late

    def spy(context, node_name, rows, keys, values, timestamps, starts, ends, stream_times):
        late.append((list(rows), list(keys), list(timestamps), list(starts), list(ends), list(stream_times)))
        original(context, node_name, rows, keys, values, timestamps, starts, ends, stream_times)

    monkeypatch.setattr(TaskContext, "count_late", spy)
    task.process_batch(
        "readings", ["a", None, "b", "a"], [{"v": 1}, {"v": 1}, {"v": 1}, {"v": 1}], [20, 0, 9, 15]
    )
    # at time 20, b at 9: windows [0,10) and [5,15) closed; a at 15: [10,20) closed, [15,25) open
    assert late == [([2, 2, 3], ["b", "b", "a"], [9, 9, 15], [0, 5, 10], [10, 15, 20], [20, 20, 20])]
    assert [(r.origin, r.window_start) for r in task.drain_late()] == [(None, 0), (None, 5), (None, 10)]
    assert task.metrics()["dropped-records-total"] == 4  # the null key too


def test_agg_refuses_what_it_cannot_compute() -> None:
    grouped = StreamsBuilder().stream("readings").group_by_key()
    with pytest.raises(ValueError, match="at least one"):
        grouped.agg()
    with pytest.raises(ValueError, match="not a declaration"):
        grouped.agg(n=len)
    with pytest.raises(ValueError, match="TimeWindows"):
        grouped.windowed_by(SlidingWindows.of_time_difference_with_no_grace(5)).agg(n=Count())
    with pytest.raises(ValueError, match="dtype"):
        Sum("v", dtype="int32")
    with pytest.raises(ValueError, match="field"):
        Max("")


def test_an_import_into_other_declarations_is_refused() -> None:
    windows = TimeWindows.of_size_with_no_grace(10)
    task = StreamTask(topology(True, windows))
    task.process_batch("readings", ["a"], [{"v": 1}], [1])
    parts = task.export_state().parts
    builder = StreamsBuilder()
    builder.stream("readings").group_by_key().windowed_by(windows).agg(n=Count()).to_stream().to("updates")
    with pytest.raises(ValueError, match="start from an empty state"):
        StreamTask.import_state(builder.build(), parts)


@given(
    segments=st.lists(
        st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=40),
        min_size=1,
        max_size=30,
    )
)
@PROPERTY
def test_segmented_sums_are_the_loops_sums_bit_for_bit(segments) -> None:
    import numpy as np

    values = np.array([x for s in segments for x in s], np.float64)
    sizes = np.array([len(s) for s in segments], np.int64)
    initial = np.array([-0.0] * len(segments))
    got = segmented_accumulate(np.add, values, sizes, initial).tolist()
    expected = []
    for segment in segments:
        total = -0.0
        for x in segment:
            total += x
            expected.append(total)
    assert _same(got, expected)


@given(
    segments=st.lists(
        st.lists(st.floats(allow_nan=False), min_size=1, max_size=40),
        min_size=1,
        max_size=30,
    ),
    initial=st.floats(allow_nan=False),
)
@PROPERTY
def test_segmented_folds_are_the_loops_folds_and_their_last_but_one(segments, initial) -> None:
    import numpy as np

    values = np.array([x for s in segments for x in s], np.float64)
    sizes = np.array([len(s) for s in segments], np.int64)
    for ufunc in (np.add, np.maximum, np.minimum):
        final, before, _ = SegmentedFold(sizes).fold(ufunc, values, np.full(len(sizes), initial), False)
        finals, befores = [], []
        for segment in segments:
            total = previous = np.float64(initial)
            with np.errstate(invalid="ignore", over="ignore"):  # inf + -inf is NaN there too
                for x in segment:
                    previous, total = total, ufunc(total, x)
            finals.append(float(total))
            befores.append(float(previous))
        assert _same(final.tolist(), finals) and _same(before.tolist(), befores)


key_pools = st.one_of(
    st.lists(st.text(max_size=3), min_size=1, max_size=12, unique=True),
    st.lists(st.one_of(st.integers(0, 3), st.booleans(), st.floats(0, 3), st.text(max_size=1)), min_size=1),
)


@given(data=st.data(), pool=key_pools, stores=st.integers(1, 4))
@PROPERTY
def test_both_ways_of_grouping_pairs_give_the_same_groups_and_rows(data, pool, stores) -> None:
    """group_pairs numbers the batch's keys first, or looks each pair's key up in its store, by the stores'
    sizes: the groups, their keys (the very objects) and the rows the stores give new keys are the same."""
    import numpy as np

    layout = declared_aggregations.AggregateLayout(DECLARED)
    held = [data.draw(st.lists(st.sampled_from(pool), unique_by=hash)) for _ in range(stores)]
    keys = data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=40))
    pair_store = data.draw(st.lists(st.integers(0, stores - 1), min_size=len(keys), max_size=len(keys)))
    pair_store += list(range(stores))  # every store has pairs
    rec = np.array(list(range(len(keys))) + [0] * stores, np.int64)
    order = np.lexsort((pair_store, rec))  # pairs by record, then store
    rec, store_of_pair = rec[order], np.array(pair_store, np.int64)[order]

    def stores_holding():
        made = [declared_aggregations.AggregateRows(layout) for _ in range(stores)]
        for store, its_keys in zip(made, held, strict=True):
            if its_keys:
                store.rows_for(declared_aggregations.object_array(its_keys), False)
        return made

    by_rows = stores_holding()
    grouped = declared_aggregations.group_pairs(keys, rec, store_of_pair, by_rows, by_rows=True)
    by_numbers = stores_holding()
    numbered = declared_aggregations.group_pairs(keys, rec, store_of_pair, by_numbers, by_rows=False)
    # by rows, the keys numbered across the stores (a node's KeyNumbers, which numbers the stores' rows
    # before the batch as it first meets them), over two batches: the second batch's keys, and the rows
    # the first one appended, numbered as they come
    by_key_numbers = stores_holding()
    key_numbers = declared_aggregations.KeyNumbers()
    across = declared_aggregations.group_pairs(
        keys, rec, store_of_pair, by_key_numbers, by_rows=True, numbers=key_numbers
    )
    for name in ("order", "sizes", "rows", "store_of_group"):
        assert np.array_equal(getattr(grouped, name), getattr(numbered, name)), name
        assert np.array_equal(getattr(grouped, name), getattr(across, name)), name
    assert grouped.store_groups == numbered.store_groups == across.store_groups
    assert list(map(id, grouped.keys)) == list(map(id, numbered.keys)) == list(map(id, across.keys))
    assert [list(map(id, s.keys)) for s in by_rows] == [list(map(id, s.keys)) for s in by_numbers]
    assert [list(map(id, s.keys)) for s in by_rows] == [list(map(id, s.keys)) for s in by_key_numbers]
    second = data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=40))
    again = np.repeat(np.arange(len(second)), stores)  # every record in every store
    store_again = np.tile(np.arange(stores), len(second))
    plain = declared_aggregations.group_pairs(second, again, store_again, by_rows, by_rows=True)
    across = declared_aggregations.group_pairs(
        second, again, store_again, by_key_numbers, by_rows=True, numbers=key_numbers
    )
    for name in ("order", "sizes", "rows", "store_of_group"):
        assert np.array_equal(getattr(plain, name), getattr(across, name)), name
    assert list(map(id, plain.keys)) == list(map(id, across.keys))
    assert [list(map(id, s.keys)) for s in by_rows] == [list(map(id, s.keys)) for s in by_key_numbers]


@PROPERTY
@given(
    bound=st.sampled_from(
        [1, 2, 1 << 16, (1 << 16) + 1, 1 << 20, 1 << 32, (1 << 32) + 1, 1 << 40, (1 << 62) // 60, 1 << 62]
    ),
    fractions=st.lists(st.floats(0, 1, exclude_max=True), max_size=60),
)
def test_the_sort_of_group_codes_is_numpys_stable_sort(bound, fractions) -> None:
    """stable_order sorts codes below 2**32 by two 16-bit radix passes, wider ones with their positions
    as low digits where that fits an int64: numpy's stable order, ties in input order (codes drawn from few
    values near the 16-bit boundaries and the bound, so that ties and carries occur)."""
    import numpy as np

    edges = [0, 1, (1 << 16) - 1, 1 << 16, (1 << 16) + 1, bound - 1]
    pool = sorted({min(max(edge, 0), bound - 1) for edge in edges})
    codes = np.array([pool[int(f * len(pool))] for f in fractions], np.int64)
    got = declared_aggregations.stable_order(codes, bound)
    assert np.array_equal(got, np.argsort(codes, kind="stable"))


@PROPERTY
@given(bound=st.sampled_from([1, 3, 1 << 16, (1 << 16) + 5, 1 << 20]), data=st.data())
def test_first_appearances_are_numpys_unique_indices_in_order_of_appearance(bound, data) -> None:
    """first_appearances gives, per distinct code, the position where it first appears, ascending: what
    np.unique's indices are once sorted (codes drawn among a few values, so that repeats occur)."""
    import numpy as np

    pool = data.draw(st.lists(st.integers(0, bound - 1), min_size=1, max_size=5))
    codes = np.array(data.draw(st.lists(st.sampled_from(pool), max_size=40)), np.int64)
    got = declared_aggregations.first_appearances(codes, bound)
    assert got.tolist() == sorted(np.unique(codes, return_index=True)[1].tolist())


@PROPERTY
@given(
    windows=time_windows(),
    timestamps=st.lists(st.integers(0, 10**6), max_size=30),
    observed=st.integers(-1, 10**6),
)
def test_window_pairs_of_a_batch_are_windows_for_each_record(windows, timestamps, observed) -> None:
    import numpy as np

    ts = np.array(timestamps, np.int64)
    running = np.maximum(np.maximum.accumulate(ts), observed) if len(ts) else ts
    rec, start, open_ = windows.pairs(ts, running)
    expected = [
        (i, s, s + windows.size + windows.grace > int(running[i]))
        for i, t in enumerate(timestamps)
        for s, _ in windows.windows_for(t)
    ]
    assert list(zip(rec.tolist(), start.tolist(), open_.tolist(), strict=True)) == expected
