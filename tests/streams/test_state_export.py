"""StreamTask.export_state() / import_state(): state exported in parts, in proportion to what changed.

Contract: for any split of the input, exporting after each piece and importing the union of every exported
part minus the removed ones gives exactly the outputs (seq included) of one uninterrupted task; so does a
copy that runs some pieces and, after others ran elsewhere, catches up with `apply_state`.
"""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_jobs.streams import (
    BufferConfig,
    JoinWindows,
    SlidingWindows,
    StreamsBuilder,
    StreamTask,
    Suppressed,
    TimeWindows,
)
from spark_jobs.streams.nodes.store_log import DELTA_RATIO, MAX_DELTAS, StoreLog
from spark_jobs.streams.runtime.part_keys import KeyListLoader

from .helpers import WorkerCopies, drain, run_task, sensor_topology
from .test_properties import PROPERTY, cuts, records, rich_topology, time_windows
from .test_snapshot import RECORDS, Stateful, processor_topology, table_topology

BUFFER = "KTABLE-SUPPRESS-0000000006"  # sensor_topology's suppress buffer: its windows keep a store log


def run_with_exports(topology, data, export_at, import_at=(), topic="readings") -> list[tuple]:
    """Feed `data` in pieces cut at `export_at`, exporting after each piece into a part store (what a
    runtime keeps); at every index of `import_at` the task is replaced by one imported from the store."""
    task = StreamTask(topology)
    store: dict[str, bytes] = dict(task.export_state().parts)  # a fresh task: every part
    outputs: list[tuple] = []
    bounds = sorted({0, len(data), *export_at, *import_at})
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        if lo in import_at:
            task = StreamTask.import_state(topology, store)
        chunk = data[lo:hi]
        task.process_batch(topic, [r[0] for r in chunk], [r[1] for r in chunk], [r[2] for r in chunk])
        outputs += drain(task)  # as a runtime does: write the output, then the state
        export = task.export_state()
        assert not set(export.parts) & set(export.removed)
        for name in export.removed:
            del store[name]  # a removed part existed at the previous export
        store.update(export.parts)
    return outputs


def run_on_copies(topology, data, cut_points, owners, topic="readings") -> list[tuple]:
    """Feed `data` in pieces cut at `cut_points`, piece i on copy `owners[i % len(owners)]` of the task (as
    Spark hands micro-batches to whichever Python worker is idle): a copy new to the task imports the store;
    a copy that ran it before applies the parts written since and the names removed since."""
    copies = WorkerCopies(topology)
    outputs: list[tuple] = []
    bounds = sorted({0, len(data), *cut_points})
    for i, (lo, hi) in enumerate(zip(bounds, bounds[1:], strict=False)):
        owner = owners[i % len(owners)]
        task = copies.task_for(owner)
        chunk = data[lo:hi]
        task.process_batch(topic, [r[0] for r in chunk], [r[1] for r in chunk], [r[2] for r in chunk])
        outputs += drain(task)
        copies.export(owner, task)
    return outputs


def sliding_topology():
    builder = StreamsBuilder()
    counts = (
        builder.stream("readings")
        .group_by_key()
        .windowed_by(SlidingWindows.of_time_difference_and_grace(6, 9))
        .count()
    )
    counts.to_stream().to("sliding")
    return builder.build()


@PROPERTY
@given(windows=time_windows(), data=records, export_points=cuts, import_points=cuts)
def test_export_and_import_at_any_points_change_no_output(windows, data, export_points, import_points):
    topology = rich_topology(windows)
    expected = run_task(topology, data, cuts=sorted(set(export_points) | set(import_points)))
    assert run_with_exports(topology, data, export_points, import_points) == expected


@PROPERTY
@given(data=records, export_points=cuts, import_points=cuts)
def test_sliding_windows_and_tables_survive_export_and_import(data, export_points, import_points):
    data = [(k, v, ts) for k, v, ts in data if ts >= 0]
    both = sorted(set(export_points) | set(import_points))
    for topology in (sliding_topology(), table_topology()):
        expected = run_task(topology, data, cuts=both)
        assert run_with_exports(topology, data, export_points, import_points) == expected


@PROPERTY
@given(
    left=st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 9), st.integers(0, 60)), max_size=20),
    right=st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 9), st.integers(0, 60)), max_size=20),
    split=st.integers(0, 20),
)
def test_stream_and_table_joins_survive_export_and_import(left, right, split):
    def topology():
        builder = StreamsBuilder()
        lstream, rstream = builder.stream("left"), builder.stream("right")
        lstream.join(rstream, lambda a, b: (a, b), JoinWindows.of_time_difference_and_grace(5, 3)).to("ss")
        lstream.join(builder.table("table"), lambda a, b: (a, b)).to("st")
        return builder.build()

    def feed(task, lo, hi):
        pieces = {"left": left[lo:hi], "right": right[lo:hi], "table": right[lo:hi]}
        task.process_topics(
            {t: tuple(map(list, zip(*rows, strict=True))) for t, rows in pieces.items() if rows}
        )

    straight = StreamTask(topology())
    feed(straight, 0, split)
    feed(straight, split, 20)
    first = StreamTask(topology())
    feed(first, 0, split)
    before = drain(first)
    second = StreamTask.import_state(topology(), first.export_state().parts)
    feed(second, split, 20)
    assert before + drain(second) == drain(straight)


@PROPERTY
@given(
    windows=time_windows(),
    data=records,
    cut_points=cuts,
    owners=st.lists(st.integers(0, 2), min_size=1, max_size=8),
)
def test_copies_that_catch_up_with_apply_state_change_no_output(windows, data, cut_points, owners):
    expected = run_task(rich_topology(windows), data, cuts=cut_points)
    assert run_on_copies(rich_topology(windows), data, cut_points, owners) == expected
    data = [(k, v, ts) for k, v, ts in data if ts >= 0]
    for topology in (sliding_topology(), table_topology()):
        assert run_on_copies(topology, data, cut_points, owners) == run_task(topology, data, cuts=cut_points)


def test_a_user_processor_with_punctuation_catches_up_with_apply_state() -> None:
    topology = processor_topology(Stateful)
    for split in range(1, len(RECORDS)):
        cut_points = [1, split, len(RECORDS) - 1]
        assert run_on_copies(topology, RECORDS, cut_points, [0, 1, 0, 1]) == run_task(topology, RECORDS)


def test_apply_state_refuses_parts_that_do_not_continue_the_task() -> None:
    topology = sensor_topology(size=100, grace=50)
    with pytest.raises(ValueError, match="never exported"):
        StreamTask(topology).apply_state({}, [])

    def behind() -> StreamTask:  # a copy at the first export
        task = StreamTask(topology)
        task.process_batch("readings", ["a"], [1], [10])
        task.export_state()
        return task

    ahead = behind()
    ahead.process_batch("readings", ["b"], [2], [20])
    deltas = {n: d for n, d in ahead.export_state().parts.items() if n.endswith(".1")}
    assert deltas
    # a delta after one this copy never saw (the window store's key part names its first row)
    with pytest.raises(ValueError, match="in a row|keys after rows no part holds"):
        behind().apply_state({n[:-1] + "2": d for n, d in deltas.items()}, [])
    with pytest.raises(ValueError, match="without a new base"):  # a delta it never had, removed
        behind().apply_state({}, [next(iter(deltas))])


def test_user_processor_with_punctuation_survives_export_and_import() -> None:
    topology = processor_topology(Stateful)
    for split in range(1, len(RECORDS)):
        assert run_with_exports(topology, RECORDS, [split], [split]) == run_task(topology, RECORDS)


def test_an_export_holds_only_the_parts_that_changed() -> None:
    topology = sensor_topology(size=100, grace=50)
    task = StreamTask(topology)
    keys = [f"k{i}" for i in range(50)]
    task.process_batch("readings", keys, [1] * 50, list(range(50)))  # window [0, 100)
    first = task.export_state()
    assert "task" in first.parts and first.removed == []
    window_parts = [name for name in first.parts if "/0k." in name or "/0w" in name or "/0:100." in name]
    # the window store's (its keys, its new rows in one delta) and the suppress buffer's base parts for [0, 100)
    assert sorted(name.rsplit("/", 1)[1] for name in window_parts) == ["0:100.0", "0k.0", "0w.1"]
    assert task.export_state().parts.keys() <= {"task"}  # nothing processed: nothing changed

    task.process_batch("readings", ["k1"], [1], [120])  # a new window [100, 200); [0, 100) untouched
    second = task.export_state()
    assert not set(second.parts) & set(window_parts)
    assert any("/100k." in name for name in second.parts)

    task.process_batch("readings", ["k1"], [1], [400])  # [0, 100) and [100, 200) close: their parts go
    third = task.export_state()
    assert set(window_parts) <= set(third.removed)
    restored = StreamTask.import_state(topology, {**first.parts, **second.parts, **third.parts})
    for name in third.removed:
        assert name not in restored.export_state().parts


def test_a_buffered_window_is_saved_as_a_base_then_deltas_until_they_outgrow_it() -> None:
    topology = sensor_topology(size=1000, grace=0)
    task = StreamTask(topology)
    keys = [f"k{i}" for i in range(100)]
    task.process_batch("readings", keys, [1] * 100, [10] * 100)
    current = dict(task.export_state().parts)  # every part a runtime keeps

    def exported():
        export = task.export_state()
        current.update(export.parts)
        for name in export.removed:
            del current[name]
        return export

    def window_parts(export):  # the suppress buffer's parts of [0, 1000) -> (entries put, keys removed)
        return {
            name.rsplit("/", 1)[1]: KeyListLoader().loads(data)
            for name, data in export.parts.items()
            if name.startswith(BUFFER) and "/0:1000." in name
        }

    deltas = 5 * DELTA_RATIO  # 20 changes each: the deltas reach DELTA_RATIO x 100 entries
    for n in range(1, deltas + 1):  # a delta per batch, holding only the keys it changed
        task.process_batch("readings", keys[:20], [1] * 20, [20] * 20)
        parts = window_parts(exported())
        assert list(parts) == [f"0:1000.{n}"] and list(parts[f"0:1000.{n}"][0]["rows"]) == list(range(20))
    task.process_batch("readings", keys[:1], [1], [30])  # one change more than DELTA_RATIO x 100
    export = exported()
    parts = window_parts(export)
    assert list(parts) == ["0:1000.0"] and parts["0:1000.0"][0]["keys"] == keys  # a new base
    assert {f"{BUFFER}/0:1000.{n}" for n in range(1, deltas + 1)} <= set(export.removed)
    restored = StreamTask.import_state(topology, current)
    assert restored.nodes[BUFFER].state_parts() == task.nodes[BUFFER].state_parts()


def test_a_buffered_window_gets_a_new_base_after_max_deltas_small_ones() -> None:
    topology = sensor_topology(size=1000, grace=0)
    task = StreamTask(topology)
    task.process_batch("readings", [f"k{i}" for i in range(100)], [1] * 100, [10] * 100)
    task.export_state()
    names: list[str] = []
    for n in range(MAX_DELTAS + 1):  # one change each: far below DELTA_RATIO x 100 entries
        task.process_batch("readings", ["k1"], [1], [20 + n])
        names = [
            name.rsplit("/", 1)[1]
            for name in task.export_state().parts
            if name.startswith(BUFFER) and "/" in name
        ]
        assert names == (["0:1000.0"] if n == MAX_DELTAS else [f"0:1000.{n + 1}"])
    assert "0:1000.0" in names  # the 33rd delta would exceed MAX_DELTAS: a new base instead


def test_idle_keys_are_not_serialized_again() -> None:
    topology = sensor_topology(size=1000, grace=0)
    task = StreamTask(topology)
    task.process_batch("readings", [f"k{i}" for i in range(500)], [1] * 500, [10] * 500)
    task.process_batch("readings", [f"k{i}" for i in range(500)], [1] * 500, [1010] * 500)
    task.drain_output()
    task.export_state()
    task.process_batch("readings", ["k2"], [1], [1600])  # one key of the 500 in window [1000, 2000)
    task.drain_output()
    export = task.export_state()
    assert sum(len(data) for data in export.parts.values()) < 2000
    assert len(pickle.dumps(export)) < 3000


def test_import_refuses_another_topology_and_a_missing_task_part() -> None:
    import pytest

    task = StreamTask(sensor_topology())
    parts = task.export_state().parts
    builder = StreamsBuilder()
    builder.stream("readings").to("elsewhere")
    with pytest.raises(ValueError, match="different topology"):
        StreamTask.import_state(builder.build(), parts)
    with pytest.raises(ValueError, match="no 'task' part"):
        StreamTask.import_state(sensor_topology(), {k: v for k, v in parts.items() if k != "task"})


def test_snapshot_still_works_after_exports() -> None:
    topology = sensor_topology(size=10, grace=0)
    data = [("a", 1, 1), ("b", 1, 5), ("a", 1, 12), ("b", 1, 30)]
    task = StreamTask(topology)
    task.process_batch("readings", ["a", "b"], [1, 1], [1, 5])
    task.export_state()
    first = drain(task)
    restored = StreamTask.restore(topology, task.snapshot())
    restored.process_batch("readings", ["a", "b"], [1, 1], [12, 30])
    assert first + drain(restored) == run_task(topology, data)


@pytest.mark.parametrize(
    "cuts",
    [[300, 350, 400, 450, 500, 600, 650, 700, 800], [300, 500, 600, 850]],
    ids=["batches small against the store", "large batches"],
)
def test_deleted_and_evicted_entries_do_not_come_back_after_import(cuts) -> None:
    """A windowed aggregate that turns null deletes its entry (Kafka's store); suppress evicts entries by
    time and by capacity. Exports between batches must carry these removals, or an import brings the entry
    back: a deleted aggregate would restart from its old value, an evicted entry would be emitted again."""
    builder = StreamsBuilder()
    sums = (
        builder.stream("readings")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(100, 50))
        .aggregate(lambda: 0, lambda key, value, agg: None if value < 0 else agg + value)
    )
    sums.to_stream().to("sums")
    limited = Suppressed.until_time_limit(15, BufferConfig.unbounded().max_records(40).emit_early_when_full())
    sums.suppress(limited).to_stream().to("limited")
    sums.suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream().to("finals")
    topology = builder.build()
    keys = [f"k{i}" for i in range(300)]
    data = [(key, 1, 10) for key in keys]  # every key in window [0, 100)
    data += [(key, -1, 20) for key in keys[::3]]  # a third of them deleted
    data += [(key, 2, 45) for key in keys[1::3]]
    data += [(key, 5, 40) for key in keys[::3]]  # the deleted ones aggregated again from the initializer
    data += [(key, 1, 160) for key in keys[:50]]  # window [0, 100) closes at 150: its finals go out
    data += [(key, 1, 170) for key in keys[::7]]
    expected = run_task(topology, data, cuts=cuts)
    assert {"sums", "limited", "finals"} <= {row[1] for row in expected}
    assert run_with_exports(topology, data, cuts, import_at=cuts) == expected
    assert run_on_copies(topology, data, cuts, owners=[0, 1, 0, 2, 1]) == expected  # deltas of dead rows


def test_a_copy_drops_a_group_rebased_or_gone_since_it_last_saw_it() -> None:
    """StoreLog.catch_up: a group the writer re-based (a new base replaces the deltas) is dropped and
    loaded from the new base, so that keys removed meanwhile do not linger; a group whose parts all went
    is dropped; a group with only new deltas is not."""
    groups = {"g": {"a": 1, "b": 2}, "h": {"x": 1}, "i": {"y": 1}}

    def save(group, put):
        entries = groups[group] if put is None else put
        return list(entries), list(entries.values())

    writer, copy = StoreLog(), StoreLog()
    for group, entries in groups.items():
        writer.puts(group).update(entries)
    parts, _ = writer.export(groups, False, str, save)
    copy.catch_up(parts, [], str)
    del groups["g"]["b"]
    writer.remove("g", "b")
    for key in "cdefg":  # more changes than DELTA_RATIO times the group's entries: a new base
        writer.puts("g")[key] = 3
        if key != "c":
            writer.remove("g", key)
    groups["g"]["c"] = 3
    groups["i"]["z"] = 2
    writer.puts("i")["z"] = 2
    del groups["h"]
    since, names = writer.export(groups, True, str, save)
    assert sorted(since) == ["g.0", "i.1"] and sorted(names) == ["g.0", "i.0", "i.1"]
    dropped, steps = copy.catch_up(since, ["h.0"], str)
    assert sorted(dropped) == ["g", "h"]
    assert sorted((group, keys) for group, (keys, _), _ in steps) == [("g", ["a", "c"]), ("i", ["z"])]
