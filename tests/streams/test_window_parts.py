"""A window's export history (WindowParts, nodes/time_window_store.py): its keys in parts of their own, its
rows' fields as a store of numbered rows whose groups' bases are written in turn (RowParts,
nodes/kv_rows.py), so that no export rewrites a large window whole; a copy that catches up with every
export, and an import of the current parts, hold the exporting task's state."""

from __future__ import annotations

import pickle
import random
from array import array
from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_jobs.streams import StreamsBuilder, StreamTask, TimeWindows, aggregates
from spark_jobs.streams.nodes import kv_rows
from spark_jobs.streams.nodes.kv_rows import GROUPS
from spark_jobs.streams.nodes.store_log import MAX_DELTAS
from spark_jobs.streams.nodes.time_window_store import TimeWindowStore
from spark_jobs.streams.nodes.window_rows import INT64, OBJECT, dumps_plain

from .helpers import stores_of_few_rows_in_many_groups  # noqa: F401 - a fixture, autouse

TOPIC = "readings"
WINDOW, ADVANCE, GRACE = 1000, 500, 100


def count_topology():
    windows = TimeWindows.of_size_and_grace(WINDOW, GRACE).advance_by(ADVANCE)
    builder = StreamsBuilder()
    builder.stream(TOPIC).group_by_key().windowed_by(windows).count().to_stream().to("counts")
    return builder.build()


def user_topology():
    windows = TimeWindows.of_size_and_grace(WINDOW, GRACE).advance_by(ADVANCE)
    builder = StreamsBuilder()
    builder.stream(TOPIC).group_by_key().windowed_by(windows).aggregate(
        lambda: {"n": 0, "top": None},
        lambda key, value, agg: {"n": agg["n"] + 1, "top": max(value, agg["top"] or value)},
    ).to_stream().to("stats")
    return builder.build()


def declared_topology():
    windows = TimeWindows.of_size_and_grace(WINDOW, GRACE).advance_by(ADVANCE)
    builder = StreamsBuilder()
    builder.stream(TOPIC).group_by_key().windowed_by(windows).agg(
        n=aggregates.Count(), top=aggregates.Max("v")
    ).to_stream().to("stats")
    return builder.build()


TOPOLOGIES = {"count": count_topology, "user": user_topology, "declared": declared_topology}


def values_for(shape: str, n: int, rng: random.Random) -> list:
    if shape == "declared":
        return [{"v": rng.randrange(100)} for _ in range(n)]
    return [rng.randrange(100) for _ in range(n)]


def state(task: StreamTask) -> list:
    return sorted(
        (row.store, repr(row.key), row.window_start, row.window_end, repr(row.value), row.timestamp)
        for node in task.nodes.values()
        for row in node.state_rows()
    )


@settings(max_examples=25, deadline=None)
@given(
    shape=st.sampled_from(sorted(TOPOLOGIES)),
    batches=st.lists(st.tuples(st.integers(1, 300), st.integers(1, 400)), min_size=1, max_size=45),
    seed=st.integers(0, 2**16),
    block=st.sampled_from([1, 2, 3]),
)
def test_a_copy_catching_up_and_an_import_hold_the_exported_state(shape, batches, seed, block) -> None:
    with mock.patch.object(kv_rows, "BLOCK_ROWS", block):  # the rows go to the groups `block` at a time
        copies_hold_the_exported_state(shape, batches, seed)


def copies_hold_the_exported_state(shape: str, batches: list, seed: int) -> None:
    rng = random.Random(seed)
    topology_of = TOPOLOGIES[shape]
    task, copy = StreamTask(topology_of()), None
    current: dict[str, bytes] = {}
    now = 0
    for records, keys in batches:
        timestamps = sorted(now + rng.randrange(0, 300) for _ in range(records))
        now = timestamps[-1]
        names = [f"k{rng.randrange(keys)}" for _ in range(records)]
        task.process_batch(TOPIC, names, values_for(shape, records, rng), timestamps)
        task.drain_output()
        export = task.export_state()
        current.update(export.parts)
        for name in export.removed:
            del current[name]
        if copy is None:
            copy = StreamTask.import_state(topology_of(), export.parts)
        else:
            copy.apply_state(export.parts, export.removed)
        assert state(copy) == state(task)
        assert state(StreamTask.import_state(topology_of(), current)) == state(task)


def test_a_large_window_is_based_a_few_groups_at_a_time_and_its_keys_saved_once() -> None:
    task = StreamTask(count_topology())
    rng = random.Random(3)
    keys = [f"sensor-{i:05d}" for i in range(50_000)]
    current: dict[str, bytes] = {}
    rows = 0  # the window's rows: its keys so far
    seen: set[str] = set()
    for batch in range(2 * MAX_DELTAS + 3):
        batch_keys = rng.sample(keys, 2000)
        task.process_batch(TOPIC, batch_keys, [0] * 2000, [1] * 2000)  # windows [0, 1000) and [-500, 500)
        export = task.export_state()
        current.update(export.parts)
        for name in export.removed:
            del current[name]
        new_rows = len(set(batch_keys) - seen)
        seen.update(batch_keys)
        parts = {name.split("/", 1)[1]: data for name, data in export.parts.items() if "/" in name}
        bases = [name for name in parts if name.startswith("0w") and name.endswith(".0")]
        key_parts = {
            name: pickle.loads(data)[0]["keys"] for name, data in parts.items() if name.startswith("0k")
        }
        if batch:  # the window's bases spread over the exports, none rewrites it whole
            assert len(bases) < GROUPS // 2
        # the keys of the rows new to the window, once each, a key part of their own; every MAX_DELTAS
        # exports the key parts kept are merged into one (their pickled chunks, as they were)
        expected = {f"0k.{rows}": new_rows} if batch % MAX_DELTAS or not batch else {"0k.0": rows + new_rows}
        assert {
            name: sum(len(pickle.loads(chunk)) for chunk in chunks) for name, chunks in key_parts.items()
        } == (expected)
        rows += new_rows
        assert sum(1 for name in current if "/0k." in name) <= MAX_DELTAS
    assert state(StreamTask.import_state(count_topology(), current)) == state(task)


def test_a_closed_window_leaves_the_copy_that_catches_up() -> None:
    task = StreamTask(count_topology())
    task.process_batch(TOPIC, ["a", "b"], [0, 0], [10, 20])
    copy = StreamTask.import_state(count_topology(), task.export_state().parts)
    task.process_batch(TOPIC, ["a"], [0], [5000])  # closes the windows at 0 and -500
    export = task.export_state()
    assert any("/0k." in name for name in export.removed)
    copy.apply_state(export.parts, export.removed)
    assert state(copy) == state(task)
    (store,) = (node.store for node in copy.nodes.values() if hasattr(node, "store"))
    assert 0 not in store._rows


def put(store: TimeWindowStore, rows: list, values: list, pickled: bool, new_keys: tuple = ()) -> None:
    """Put `values` into the rows of the window at 0 (its last rows new, of `new_keys`), given pickled
    already in one chunk where `pickled` (as the fused user aggregate gives them)."""
    held = len(rows) - len(new_keys)
    store.put_batch(
        0,
        np.array(rows[:held], np.int64),
        [values[:held], np.zeros(held, np.int64)],
        list(new_keys),
        [values[held:], np.zeros(len(new_keys), np.int64)],
        None,
        [(array(INT64, rows), dumps_plain(values))] if pickled else None,
    )


def exported(store: TimeWindowStore, parts: dict) -> tuple[dict, list]:
    """The export's parts (through pickle, as the runtime stores them) and the parts it removed, `parts`
    kept up to date."""
    export_parts, names = store.export_parts(True)
    removed = [name for name in parts if name not in names]
    written = pickle.loads(pickle.dumps(export_parts))
    parts.update(written)
    for name in removed:
        del parts[name]
    return written, removed


def test_aggregates_pickled_as_they_were_put_load_with_every_later_put_of_their_rows() -> None:
    """A put may give a window's aggregates pickled already (the fused user aggregate pickles them as its
    fold makes them): the export saves those chunks as they are, and the values of rows put otherwise
    since, or before, as it gathers them; a copy that catches up, and an import, hold each row's last value,
    whatever the order of the puts."""
    store, copy, parts = TimeWindowStore(10, (OBJECT, INT64)), TimeWindowStore(10, (OBJECT, INT64)), {}
    put(store, [0, 1, 2], [{"a": 1}, {"b": 1}, {"c": 1}], True, ["a", "b", "c"])
    copy.apply_parts(*exported(store, parts))
    put(store, [2], [{"c": 2}], False)  # put, then pickled: the later value
    put(store, [0, 1, 2], [{"a": 2}, {"b": 2}, {"c": 3}], True)
    put(store, [1], [{"b": 3}], False)  # pickled, then put
    put(store, [0], [{"a": 3}], True)  # pickled twice: the later chunk
    snapshot = store.state_parts()  # a snapshot leaves the next export as it was
    assert store.rows(0).changes() == 3
    written, removed = exported(store, parts)
    deltas = [saved for name, (saved, _) in written.items() if name.startswith("0w.")]
    assert [type(delta["columns"][0]) for delta in deltas] == [dict]  # the chunks, and what was gathered
    copy.apply_parts(written, removed)
    expected = [{"a": 3}, {"b": 3}, {"c": 3}]
    assert copy.rows(0).columns[0] == store.rows(0).columns[0] == expected
    imported = TimeWindowStore(10, (OBJECT, INT64))
    imported.apply_parts(dict(parts), [])
    assert imported.rows(0).columns[0] == expected
    from_snapshot = TimeWindowStore(10, (OBJECT, INT64))
    from_snapshot.apply_parts(pickle.loads(pickle.dumps(snapshot)), [])
    assert from_snapshot.rows(0).columns[0] == expected
    for n in range(10):  # puts without an export keep chunks of at most about twice the rows
        put(store, [0, 1, 2], [{"a": n}, {"b": n}, {"c": n}], True)
        assert store.rows(0).pickled_rows <= 2 * 3 + 3
    copy.apply_parts(*exported(store, parts))
    assert copy.rows(0).columns[0] == [{"a": 9}, {"b": 9}, {"c": 9}]


def test_a_window_grown_into_more_groups_writes_every_row_in_one_delta_and_its_old_bases_go() -> None:
    """A window whose rows grow into more groups (groups of one row here) writes one delta of every row,
    its aggregates the chunks pickled as they were put and the others gathered, the rows not put since too;
    its bases go, and a copy that catches up with the export exports the same parts as the window's own
    store from then on."""
    store, copy, parts = TimeWindowStore(10, (OBJECT, INT64)), TimeWindowStore(10, (OBJECT, INT64)), {}
    put(store, [0, 1, 2], [{"a": 0}, {"b": 0}, {"c": 0}], True, ("a", "b", "c"))
    copy.apply_parts(*exported(store, parts))
    for n in range(1, 5):  # every row put again, not pickled: the bases of its two groups in turn
        put(store, [0, 1, 2], [{"a": n}, {"b": n}, {"c": n}], False)
        copy.apply_parts(*exported(store, parts))
    assert {"0w0.0", "0w1.0"} <= set(parts)
    put(store, [0, 3, 4], [{"a": 5}, {"d": 5}, {"e": 5}], True, ("d", "e"))  # 5 rows: 4 groups
    written, removed = exported(store, parts)
    (delta_name,) = (name for name in written if name.startswith("0w"))
    delta = written[delta_name][0]
    assert delta["from"] == 0 and delta["rows"].tolist() == [0, 1, 2, 3, 4]
    pickled = delta["columns"][0]
    assert [list(at) for at, _ in pickled["pickled"]] == [[0, 3, 4]] and list(pickled["rows"]) == [1, 2]
    assert {"0w0.0", "0w1.0"} <= set(removed)
    assert [name for name in parts if name.startswith("0w")] == [delta_name]  # no base, no older delta
    expected = [{"a": 5}, {"b": 4}, {"c": 4}, {"d": 5}, {"e": 5}]
    assert store.rows(0).columns[0] == expected
    imported = TimeWindowStore(10, (OBJECT, INT64))
    imported.apply_parts(dict(parts), [])
    assert imported.rows(0).columns[0] == expected
    copy.apply_parts(written, removed)
    assert copy.rows(0).columns[0] == expected
    for n in range(6, 14):  # the bases in turn again, in the new groups, alike from both
        put(store, [1, 2, 3], [{"b": n}, {"c": n}, {"d": n}], n % 2 == 0)
        put(copy, [1, 2, 3], [{"b": n}, {"c": n}, {"d": n}], n % 2 == 0)
        store_parts, names = store.export_parts(True)
        copy_parts, copy_names = copy.export_parts(True)
        assert names == copy_names and list(store_parts) == list(copy_parts)
    assert any(name.startswith("0w") and name.endswith(".0") for name in names)
    assert copy.rows(0).columns[0] == store.rows(0).columns[0]
