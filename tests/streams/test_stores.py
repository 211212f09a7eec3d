"""The stores of tables, aggregations, sessions, sliding windows and joins (nodes/kv_store.py,
nodes/window_stores.py): a batch gives what record-by-record processing gives, an export writes what
changed and no more, and export -> import (or a chain of exports caught up by a copy) reproduces the
state exactly."""

from __future__ import annotations

import gc
import pickle
from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_jobs.streams import (
    JoinWindows,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    StreamTask,
)
from spark_jobs.streams.nodes import kv_rows, window_stores
from spark_jobs.streams.nodes.key_table import KeyNumbers
from spark_jobs.streams.nodes.kv_rows import loaded_row_keys
from spark_jobs.streams.nodes.kv_store import KeyValueStore, TimestampedKeyValueStore
from spark_jobs.streams.nodes.window_stores import JoinWindowStore, Partners, SessionStore, join_records
from spark_jobs.streams.runtime.part_keys import KeyListLoader
from spark_jobs.streams.runtime.task import OutputBatch

from .helpers import (
    WorkerCopies,
    drain,
    stores_of_few_rows_in_many_groups,  # noqa: F401 - a fixture, autouse
)
from .test_properties import PROPERTY

# -- topologies ---------------------------------------------------------------------------------------------


def tables():
    """Table source with tombstones, a grouped table count (subtract then add), a non-windowed aggregate
    whose null result deletes its entry."""
    builder = StreamsBuilder()
    table = builder.table("a")
    table.group_by(lambda k, v: (v % 3, k)).count().to_stream().to("per-group")
    (
        builder.stream("b")
        .group_by_key()
        .aggregate(lambda: 0, lambda k, v, agg: None if v < 0 else agg + v)
        .to_stream()
        .to("sums")
    )
    return builder.build()


def sessions():
    """A session count, and a session sum (a merger) of another stream with other windows."""
    builder = StreamsBuilder()
    windows = SessionWindows.of_inactivity_gap_and_grace(5, 4)
    builder.stream("a").group_by_key().windowed_by(windows).count().to_stream().to("counts")
    (
        builder.stream("b")
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(3, 0))
        .aggregate(lambda: 0, lambda k, v, agg: agg + (v or 0), lambda k, x, y: x + y)
        .to_stream()
        .to("sums")
    )
    return builder.build()


def sliding():
    """A sliding sum (null values reach the aggregator), and a sliding count of another stream."""
    builder = StreamsBuilder()
    (
        builder.stream("a")
        .group_by_key()
        .windowed_by(SlidingWindows.of_time_difference_and_grace(6, 5))
        .aggregate(lambda: 0, lambda k, v, agg: agg + (v or 0))
        .to_stream()
        .to("sums")
    )
    windows = SlidingWindows.of_time_difference_and_grace(3, 0)
    builder.stream("b").group_by_key().windowed_by(windows).count().to_stream().to("counts")
    return builder.build()


def stream_table_join():
    builder = StreamsBuilder()
    table = builder.table("b")
    stream = builder.stream("a")
    stream.join(table, lambda s, t: (s, t)).to("inner")
    stream.left_join(table, lambda s, t: (s, t)).to("left")
    return builder.build()


def stream_stream_join(mode):
    def build():
        builder = StreamsBuilder()
        left, right = builder.stream("a"), builder.stream("b")
        windows = JoinWindows.of_time_difference_and_grace(4, 3)
        getattr(left, mode)(right, lambda x, y: (x, y), windows).to("joined")
        return builder.build()

    return build


TOPOLOGIES = {
    "tables": tables,
    "sessions": sessions,
    "sliding": sliding,
    "stream-table join": stream_table_join,
    "inner join": stream_stream_join("join"),
    "left join": stream_stream_join("left_join"),
    "outer join": stream_stream_join("outer_join"),
}

# Records `(topic, key, value, timestamp)`: few keys and a null one, null values (tombstones), negative
# values (deletes of the aggregate), timestamps out of order across a small range (late records).
feeds = st.lists(
    st.tuples(
        st.sampled_from("aab"),
        st.sampled_from(["k1", "k2", "k3", "k4", None]),
        st.one_of(st.none(), st.integers(-2, 9)),
        st.integers(0, 60),
    ),
    max_size=60,
)
cut_points = st.lists(st.integers(0, 60), max_size=8)


# -- runners ------------------------------------------------------------------------------------------------


def pieces(feed, cuts):
    """The feed cut at `cuts` and wherever the topic changes: batches of one topic, in order."""
    changes = (i for i in range(1, len(feed)) if feed[i][0] != feed[i - 1][0])
    bounds = sorted({0, len(feed), *(c for c in cuts if c < len(feed)), *changes})
    return [feed[lo:hi] for lo, hi in zip(bounds, bounds[1:], strict=False) if hi > lo]


def feed_piece(task, piece):
    task.process_batch(piece[0][0], [r[1] for r in piece], [r[2] for r in piece], [r[3] for r in piece])


def state_of(task):
    """Every entry of the task's stores (`Node.state_rows`), in a canonical order; each node's kept size
    (`Node.state_size`) agrees with them."""
    assert_sizes_agree(task)
    return sorted(((name, *row) for name, node in task.nodes.items() for row in node.state_rows()), key=repr)


def assert_sizes_agree(task):
    """Each node's `state_size()` is `(rows, distinct windows (StateRow.window))` of its `state_rows()`."""
    for name, node in task.nodes.items():
        rows = list(node.state_rows())
        windows = {r.window for r in rows if r.window is not None}
        assert node.state_size() == (len(rows), len(windows)), name


def run_record_by_record(topology, feed, partition=0):
    task = StreamTask(topology, partition)
    for topic, key, value, ts in feed:
        task.process(topic, key, value, ts)
    return drain(task), task.metrics()["dropped-records-total"], state_of(task)


def run_batched(topology, feed, cuts, partition=0):
    task = StreamTask(topology, partition)
    for piece in pieces(feed, cuts):
        feed_piece(task, piece)
    return drain(task), task.metrics()["dropped-records-total"], state_of(task)


def run_exporting(topology, feed, cuts, owners, partition=0):
    """Each piece on copy `owners[i % len(owners)]` of the task, exporting after each into a part store:
    a copy new to the task imports the store, one that ran it before catches up with the parts written
    since (StreamTask.apply_state)."""
    copies = WorkerCopies(topology, partition)
    outputs: list[tuple] = []
    task = None
    for i, piece in enumerate(pieces(feed, cuts)):
        owner = owners[i % len(owners)]
        task = copies.task_for(owner)
        feed_piece(task, piece)
        assert_sizes_agree(task)  # a copy caught up or imported counts its stores' entries anew
        outputs += drain(task)
        copies.export(owner, task)
    if task is None:
        task = StreamTask(topology, partition)
    imported = StreamTask.import_state(topology, copies.store) if copies.store else task
    assert state_of(imported) == state_of(task)
    return outputs, task.metrics()["dropped-records-total"], state_of(task)


def by_partition(feed, partitions):
    """The feed split as a producer partitions by key (null keys to partition 0)."""
    split = [[] for _ in range(partitions)]
    for record in feed:
        split[0 if record[1] is None else int(record[1][1:]) % partitions].append(record)
    return list(enumerate(split))


# -- batch = record by record ---------------------------------------------------------------------------------


@PROPERTY
@pytest.mark.parametrize("name", list(TOPOLOGIES))
@given(feed=feeds, cuts=cut_points, partitions=st.integers(1, 3))
def test_batches_give_what_record_by_record_processing_gives(name, feed, cuts, partitions):
    topology = TOPOLOGIES[name]()
    for partition, records in by_partition(feed, partitions):
        expected = run_record_by_record(topology, records, partition)
        assert run_batched(topology, records, cuts, partition) == expected
        assert run_batched(topology, records, [], partition) == expected  # one batch per topic run


@PROPERTY
@pytest.mark.parametrize("name", list(TOPOLOGIES))
@given(feed=feeds, cuts=cut_points, owners=st.lists(st.integers(0, 2), min_size=1, max_size=6))
def test_exports_imports_and_catch_ups_reproduce_the_state(name, feed, cuts, owners):
    topology = TOPOLOGIES[name]()
    expected = run_batched(topology, feed, cuts)
    with mock.patch.object(kv_rows, "MIN_DEAD_ROWS", 0):  # the stores of rows compact at every chance
        assert run_exporting(topology, feed, cuts, owners) == expected
    assert run_exporting(topology, feed, cuts, [0]) == expected  # one task: changed-only exports


@PROPERTY
@pytest.mark.parametrize("held_rows", [0, 2])
@given(feed=feeds, cuts=cut_points, owners=st.lists(st.integers(0, 2), min_size=1, max_size=6))
def test_a_session_store_holding_single_sessions_in_its_rows_gives_what_tuples_give(
    held_rows, feed, cuts, owners
):
    """A session store of HELD_ROWS rows or more holds a key's single session in its row's fields, not in a
    tuple: from the first row, or once the store grows past two rows, batches, records one by one, exports,
    imports, catch-ups and compactions give the output and state of a store that keeps tuples."""
    topology = sessions()
    expected = run_batched(topology, feed, cuts)
    with mock.patch.object(window_stores, "HELD_ROWS", held_rows):
        assert run_batched(topology, feed, cuts) == expected
        assert run_record_by_record(topology, feed) == expected
        with mock.patch.object(kv_rows, "MIN_DEAD_ROWS", 0):  # the stores of rows compact at every chance
            assert run_exporting(topology, feed, cuts, owners) == expected


def test_a_session_aggregates_output_takes_the_keys_and_windows_it_gives_with_its_windowed_keys() -> None:
    """A session aggregate gives the task its output keys' keys, window starts and ends, which the drained
    output takes as its columns: the columns that splitting each windowed key gives, retractions too."""
    task = StreamTask(sessions())
    keys = ["x", "y", "x", "y", "x", None, "z"]
    task.process_batch("a", keys, [1, 2, 3, 4, 5, 6, 7], [0, 1, 10, 3, 5, 6, 30])
    columns = task._pending_output()
    assert [keys is columns[1] for keys, _ in task.key_splits] == [True]  # the list drained
    assert None in columns[2]  # merged sessions retracted
    split = OutputBatch.from_columns(columns, 0)
    drained = task.drain_output()
    assert (drained.keys, drained.window_starts, drained.window_ends) == (
        split.keys,
        split.window_starts,
        split.window_ends,
    )
    assert drained.records() == split.records()


def test_a_batch_of_a_stream_table_join_runs_as_a_batch_unless_the_table_changes_with_it() -> None:
    """The join looks the batch up in the table at once where the table cannot change during the batch
    (another source feeds it); a table fed by the same source keeps the join record by record."""
    task = StreamTask(stream_table_join())
    assert task._columnar["a"] is not None
    builder = StreamsBuilder()
    stream = builder.stream("a")
    table = stream.group_by_key().reduce(lambda old, new: new)
    stream.join(table, lambda s, t: (s, t)).to("joined")
    same_source = builder.build()
    assert StreamTask(same_source)._columnar["a"] is None
    feed = [("a", "k1", 1, 1), ("a", "k1", 2, 2), ("a", "k2", 3, 3), ("a", "k1", 4, 4)]
    assert run_batched(same_source, feed, []) == run_record_by_record(same_source, feed)
    joined = [row[3] for row in run_batched(same_source, feed, [])[0]]
    assert joined == [(1, 1), (2, 2), (3, 3), (4, 4)]  # each record sees the table it just updated


def test_a_self_join_runs_record_by_record() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("a")
    stream.join(stream, lambda x, y: (x, y), JoinWindows.of_time_difference_and_grace(4, 0)).to("joined")
    topology = builder.build()
    assert StreamTask(topology)._columnar["a"] is None
    feed = [("a", "k1", 1, 1), ("a", "k1", 2, 2), ("a", "k1", 3, 9)]
    assert run_batched(topology, feed, []) == run_record_by_record(topology, feed)


# -- exports write what changed ---------------------------------------------------------------------------------


def exported_entries(export, node_prefix):
    """Entries written (put, or removed) in the parts of nodes named `node_prefix*` (a part of changed rows
    names them by row)."""
    count = 0
    for name, data in export.parts.items():
        if name.startswith(node_prefix) and "/" in name and not name.endswith("/"):
            saved, removed = KeyListLoader().loads(data)
            count += len(saved["rows"] if "rows" in saved else loaded_row_keys(saved, name)) + len(removed)
    return count


def test_an_export_writes_the_entries_a_batch_changed_not_the_store() -> None:
    builder = StreamsBuilder()
    builder.stream("a").group_by_key().count().to_stream().to("counts")
    builder.table("t").to_stream().to("changes")
    builder.stream("s").group_by_key().windowed_by(
        SessionWindows.of_inactivity_gap_and_grace(1000, 0)
    ).count().to_stream().to("sessions")
    topology = builder.build()
    task = StreamTask(topology)
    n, k = 5000, 7
    keys = [f"key-{i}" for i in range(n)]
    for topic in "ats":
        task.process_batch(topic, keys, [1] * n, [10] * n)
    drain(task)  # as a runtime does: the output, then the state (its "task" part keeps undrained output)
    first = task.export_state()
    assert exported_entries(first, "KSTREAM-AGGREGATE") == 2 * n  # the count's and the sessions' bases
    assert exported_entries(first, "KTABLE-SOURCE") == n
    touched = keys[100 : 100 + k]
    task.process_batch("a", touched * 3, [1] * 3 * k, [20] * 3 * k)
    task.process_batch("t", touched[:3], [None] * 3, [20] * 3)  # tombstones: removed keys
    task.process_batch("t", touched[3:], [5] * (k - 3), [20] * (k - 3))
    task.process_batch("s", touched, [1] * k, [30] * k)
    drain(task)
    second = task.export_state()
    assert exported_entries(second, "KSTREAM-AGGREGATE") == 2 * k
    assert exported_entries(second, "KTABLE-SOURCE") == k
    assert sum(map(len, second.parts.values())) < 200 * 3 * k
    assert task.export_state().parts.keys() <= {"task"}  # nothing changed: nothing but the clocks


def test_a_stream_table_join_does_not_export_the_table_it_reads() -> None:
    topology = stream_table_join()
    task = StreamTask(topology)
    keys = [f"key-{i}" for i in range(3000)]
    task.process_batch("b", keys, list(range(3000)), [0] * 3000)
    task.export_state()
    task.process_batch("a", keys * 2, [1] * 6000, [5] * 6000)
    assert len(drain(task)) == 12000
    assert task.export_state().parts.keys() <= {"task"}


def test_a_stream_stream_join_exports_the_records_of_the_batch() -> None:
    topology = stream_stream_join("outer_join")()
    task = StreamTask(topology)
    keys = [f"key-{i}" for i in range(2000)]
    task.process_batch("a", keys, [1] * 2000, [10] * 2000)
    task.process_batch("b", keys, [1] * 2000, [11] * 2000)
    task.export_state()
    task.process_batch("a", keys[:5], [2] * 5, [12] * 5)
    drain(task)
    export = task.export_state()
    assert exported_entries(export, "KSTREAM-JOIN") <= 5 + 5  # the 5 keys' records, and their partners'
    assert sum(map(len, export.parts.values())) < 5000


@pytest.mark.parametrize(
    "values",
    [[3, 0, -7], [True, 2, False], [1.5, 2, 3], [2**70, 1, 2], ["a", None, (1, 2)]],
    ids=["ints", "bools among ints", "floats", "beyond int64", "objects"],
)
def test_a_timestamped_store_loads_its_values_as_they_were_put(values) -> None:
    store = TimestampedKeyValueStore("t")
    store.put_batch({f"k{i}": (value, 10 + i) for i, value in enumerate(values)})
    parts, _ = store.export_parts(changed_only=False)
    loaded = TimestampedKeyValueStore("t")
    loaded.apply_parts(round_trip(parts), [])
    assert loaded.entries == store.entries
    assert {key: type(entry[0]) for key, entry in loaded.entries.items()} == {
        f"k{i}": type(value) for i, value in enumerate(values)
    }


def test_a_join_store_exports_the_records_put_not_the_lists_of_their_keys() -> None:
    """k records put to keys that hold many records each: the export writes those k records only."""
    store = JoinWindowStore("left", retention=100)
    keys = [f"key-{i}" for i in range(50)]
    for round_ in range(10):
        store.put_batch(keys, [round_] * 50, [round_] * 50, list(range(round_ * 50, round_ * 50 + 50)))
    store.export_parts(changed_only=False)
    store.put_batch(keys[:3], ["x"] * 3, [20, 21, 22], [900, 901, 902])
    parts, _ = store.export_parts(changed_only=True)
    written = [
        (key, ts, seq, value)
        for saved, _ in parts.values()
        for key, ts, seq, value in zip(saved["keys"], *saved["columns"], strict=True)
    ]
    assert written == [("key-0", 20, 900, "x"), ("key-1", 21, 901, "x"), ("key-2", 22, 902, "x")]
    assert store.export_parts(changed_only=True)[0] == {}


@pytest.mark.parametrize(
    ("keys", "str_keys", "as_text"),
    [
        (["a", "b", "a"], True, True),
        (["a", "b\x00c", "a"], True, False),  # a key holding the separator: saved as a list
        ([1, "b", 1], False, False),
    ],
    ids=["str keys", "a key holding NUL", "not all str"],
)
def test_a_join_store_saves_str_keys_as_one_text_and_loads_either_form(keys, str_keys, as_text) -> None:
    store = JoinWindowStore("left", retention=100)
    store.put_batch(keys, ["x", "y", "z"], [1, 2, 3], [0, 1, 2], str_keys)
    first, _ = store.export_parts(changed_only=False)
    store.put_batch(keys[1:2], ["w"], [4], [3], str_keys)
    delta, _ = store.export_parts(changed_only=True)
    assert ["key_text" in saved for saved, _ in [*first.values(), *delta.values()]] == [as_text, as_text]
    loaded = JoinWindowStore("left", retention=100)
    loaded.store_time = store.store_time
    loaded.apply_parts(round_trip(first), [])
    loaded.apply_parts(round_trip(delta), [])
    assert list(loaded.items()) == list(store.items())
    assert [type(key) for key, _, _ in loaded.items()] == [type(key) for key, _, _ in store.items()]
    snapshot = JoinWindowStore("left", retention=100)
    snapshot.store_time = store.store_time
    snapshot.apply_parts(round_trip(store.state_parts()), [])
    assert list(snapshot.items()) == list(store.items())


def test_a_join_store_base_of_parts_in_either_key_form_loads_as_its_records() -> None:
    """A segment written in parts whose keys were saved as one text and as a list (a key holding NUL, a key
    not a str): a new base of it, and a snapshot with records not exported yet, load as the store's
    records."""
    store = JoinWindowStore("left", retention=100)
    store.put_batch(["a", "b", "a"], ["x", "y", "z"], [1, 2, 3], [0, 1, 2], True)
    store.export_parts(changed_only=False)
    store.put_batch(["b\x00c", "a"], ["w", "v"], [4, 5], [3, 4], True)
    store.export_parts(changed_only=True)
    store.put_batch([7, "b"], ["u", "t"], [6, 7], [5, 6], False)
    store.export_parts(changed_only=True)
    store.put_batch(["b", "d"], ["s", "r"], [8, 9], [7, 8], True)  # not exported: the snapshot's
    snapshot = JoinWindowStore("left", retention=100)
    snapshot.store_time = store.store_time
    snapshot.apply_parts(round_trip(store.state_parts()), [])
    assert list(snapshot.items()) == list(store.items())
    base, _ = store.export_parts(changed_only=False)
    assert len(base) == 1 and "keys" in next(iter(base.values()))[0]
    loaded = JoinWindowStore("left", retention=100)
    loaded.store_time = store.store_time
    loaded.apply_parts(round_trip(base), [])
    assert list(loaded.items()) == list(store.items())
    assert [key for key, _, _ in loaded.items()] == ["a", "a", "a", "b", "b", "b", "b\x00c", 7, "d"]


def test_a_join_store_holds_its_records_out_of_the_cyclic_collectors_reach() -> None:
    """The values of a large batch's records, once indexed (into the sorted columns) and exported (into
    their segment), are held by no container the cyclic collector visits after each micro-batch."""
    n = window_stores.SORTED_MIN
    store = JoinWindowStore("left", retention=n)
    keys = [f"key-{i}" for i in range(n)]
    values = [{"v": i} for i in range(n)]
    store.put_batch(keys, values, list(range(n)), list(range(n)), True, store.numbers_for(keys)[0])
    store.fetch_batch(keys[:1], [0], 0, 0)  # indexes the batch
    store.export_parts(changed_only=True)
    del keys  # the caller's lists
    holders = gc.get_referrers(values[0])
    assert holders == [values]
    assert store._sorted.size == n and len(list(store.items())) == n


def test_a_session_store_holds_its_keys_out_of_the_cyclic_collectors_reach() -> None:
    """The keys of a session store's rows, as it grows and once exported, are held by no container the
    cyclic collector visits after each micro-batch (nor is its index of str keys)."""
    task = StreamTask(sessions())
    keys = [f"key-{i}" for i in range(1200)]
    for first in range(0, len(keys), 300):
        task.process_batch("a", keys[first : first + 300], [1] * 300, [0] * 300)
        task.drain_output()
        task.export_state()
    (node,) = [node for node in task.nodes.values() if getattr(node, "store", None) and node.store.rows.size]
    assert node.store.rows.size == len(keys)
    assert gc.get_referrers(keys[0]) == [keys]  # the caller's list


def test_a_join_store_segment_past_the_retention_loses_its_parts_and_a_load_leaves_its_records_out() -> None:
    store = JoinWindowStore("left", retention=80)  # segments of 10
    store.put_batch(["a", "b"], [1, 2], [5, 15], [0, 1])
    assert sorted(store.entries) == ["a", "b"]  # indexed by key (as a fetch needs them)
    _, names = store.export_parts(changed_only=False)
    assert sorted(names) == ["left0.0", "left1.0"]
    store.put_batch(["c"], [3], [96], [2])  # the clock at 96: segment 0 (times up to 9) expired
    assert sorted(store.entries) == ["b", "c"]  # "a", put in segment 0, leaves memory
    parts, names = store.export_parts(changed_only=True)
    assert sorted(names) == ["left1.0", "left9.0"] and list(parts) == ["left9.0"]
    store.put_batch(["c"], [4], [101], [3])  # segment 1 expired too: "b" (15), put in it, leaves memory
    _, names = store.export_parts(changed_only=True)
    assert sorted(names) == ["left10.0", "left9.0"]
    assert sorted(store.entries) == ["c"]
    loaded = JoinWindowStore("left", retention=80)
    loaded.store_time = store.store_time
    loaded.apply_parts(round_trip(store.state_parts()), [])
    assert list(loaded.items()) == list(store.items()) == [("c", 96, 3), ("c", 101, 4)]
    assert sorted(loaded.entries) == ["c"]


def test_a_join_store_refuses_more_keys_than_its_sort_key_holds_at_its_retention() -> None:
    """Key numbers times the store's time width must fit in int64: past that, an error, not wrong matches."""
    store = JoinWindowStore("left", retention=1 << 58)
    with mock.patch.object(window_stores, "SORTED_MIN", 0), pytest.raises(OverflowError):
        store.numbers_for(["a", "b"])


def test_a_join_store_fetch_merges_its_sorted_columns_and_its_dict_in_time_and_seq_order() -> None:
    with (
        mock.patch.object(window_stores, "SORTED_MIN", 4),
        mock.patch.object(window_stores, "SORTED_SHARE", 1),
    ):
        store = JoinWindowStore("left", retention=100)
        store.put_batch(
            ["a", "b", "a", "a"], ["a10", "b11", "a30", "a50"], [10, 11, 30, 50], [0, 1, 2, 3], True
        )
        store.fetch_batch(["a"], [0], 0, 0)  # indexes the batch of 4: into the sorted columns
        store.put_batch(["a", "a"], ["a20", "a30'"], [20, 30], [4, 5], True)  # indexed into the dict
        found = store.fetch_batch(["b", "a", "c"], [11, 30, 30], 20, 20)
        assert store._sorted.size == 4 and list(store._entries) == ["a"]
    assert found == Partners(
        [0, 1, 1, 1, 1, 1],
        [11, 10, 20, 30, 30, 50],
        [1, 0, 4, 2, 5, 3],
        ["b11", "a10", "a20", "a30", "a30'", "a50"],
    )


@PROPERTY
@given(
    st.lists(
        st.tuples(
            st.lists(st.tuples(st.sampled_from("abcd"), st.integers(0, 40)), max_size=8), st.booleans()
        ),
        max_size=12,
    ),
    st.integers(10, 60),
    st.sampled_from([0, window_stores.SORTED_MIN]),
)
def test_a_join_store_fetches_every_live_record_and_holds_about_a_retention(
    batches, retention, sorted_min
) -> None:
    """Batches of puts with a clock that moves on (each batch a step later, records up to 40 late), some
    followed by a fetch of every key: a fetch finds exactly the live records put, and whether fetched or
    not, the store indexes no record older than its retention and a segment before its expiry limit, and
    keeps no batch all of whose records were a segment past that limit; in its sorted columns, no more
    records a segment past that limit than others. Where SORTED_MIN is 0, the columns take every
    batch of as many records as they hold or more (their values in an array per batch, joined past three),
    the dict the others: a fetch merges both. Batches of three records or more with some expired keep their
    seqs in an array, smaller ones in a list."""
    with (
        mock.patch.object(window_stores, "SORTED_MIN", sorted_min),
        mock.patch.object(window_stores, "SORTED_SHARE", 1),
        mock.patch.object(window_stores, "MIN_EXPIRED", 0),
        mock.patch.object(KeyNumbers, "MIN_STALE", 0),
        mock.patch.object(window_stores, "FRESH_RUN", 2),
        mock.patch.object(window_stores, "JOINED_KEYS_MIN", 2),
        mock.patch.object(window_stores, "SEQ_ARRAY_MIN", 3),
        mock.patch.object(window_stores, "MAX_VALUE_ARRAYS", 3),
    ):
        _check_join_store_fetches(batches, retention)


def _check_join_store_fetches(batches, retention) -> None:
    store = JoinWindowStore("left", retention=retention)
    put: list[tuple[str, int, int]] = []  # (key, timestamp, seq) of every record put
    seq = 0
    for step, (batch, fetch) in enumerate(batches):
        keys = [key for key, _ in batch]
        stamps = [max(0, step * 25 - late) for _, late in batch]
        seqs = list(range(seq, seq + len(batch)))
        seq += len(batch)
        expired = set(store.put_batch(keys, list(seqs), stamps, seqs, True))
        put += [
            (k, t, n) for i, (k, t, n) in enumerate(zip(keys, stamps, seqs, strict=True)) if i not in expired
        ]
        limit = store.store_time - retention
        # what memory holds: the records indexed by key, the batches put since the last fetch
        indexed = [ts for rows in store._entries.values() for ts, _, _ in join_records(rows)]
        assert min(indexed, default=limit + 1) > limit - retention - store.interval
        assert all(latest > limit - store.interval for latest, *_ in store._unindexed)
        # the sorted columns are compacted where need be at each batch they take and each segment the
        # clock expires, so the records a segment past the limit are no more than the others
        in_columns = store._sorted.ts[: store._sorted.size]
        assert np.count_nonzero(in_columns <= limit - store.interval) <= np.count_nonzero(
            in_columns > limit - store.interval
        )
        if fetch:
            for key in "abcd":
                live = [(t, n, n) for k, t, n in sorted(put, key=lambda r: r[1:]) if k == key and t > limit]
                found = store.fetch_batch([key], [0], 0, 10**6)
                assert list(zip(found.stamps, found.seqs, found.values, strict=True)) == live
                assert found.probes == [0] * len(live)


# -- the key-value store --------------------------------------------------------------------------------------


class ShiftedGroups(KeyValueStore):
    """A store whose keys land in other groups, as in a process whose str hashes differ."""

    hash_shift = 5


def round_trip(parts):
    return {name: KeyListLoader().loads(pickle.dumps(part, protocol=5)) for name, part in parts.items()}


operations = st.lists(
    st.tuples(
        st.sampled_from(["put", "delete", "batch", "export"]), st.lists(st.integers(0, 40), max_size=12)
    ),
    max_size=30,
)


@PROPERTY
@given(first=operations, second=operations)
def test_a_key_value_store_caught_up_by_changed_only_exports_equals_its_source(first, second):
    """A writer's exports, applied one by one to a copy, give the writer's entries; a second writer that
    imported the parts (another process: other groups for keys it saves anew) continues the same history,
    which the copy keeps catching up with."""
    stored: dict[str, tuple] = {}  # the current parts, as a runtime keeps them
    names_seen: set[str] = set()  # the copy's: the current part names when it last caught up

    def export(store, copy, changed_only=True):
        parts, names = store.export_parts(changed_only)
        parts = round_trip(parts)
        removed = sorted(set(stored) - set(names))
        for name in removed:
            del stored[name]
        stored.update(parts)
        copy.apply_parts(parts, sorted(names_seen - set(names)))
        names_seen.clear()
        names_seen.update(names)
        assert copy.entries == store.entries

    def run(store, ops, copy):
        for n, (op, keys) in enumerate(ops):
            if op == "put":
                for key in keys:
                    store.put(f"k{key}", (key, n))
            elif op == "delete":
                for key in keys:
                    store.delete(f"k{key}")
            elif op == "batch":  # None deletes; a later pair of a key wins
                store.put_batch([(f"k{key}", None if key % 4 == 0 else (key, n)) for key in keys])
            else:
                export(store, copy)
        export(store, copy)

    writer, copy = KeyValueStore(), KeyValueStore()
    export(writer, copy, changed_only=False)
    run(writer, first, copy)
    second_writer = ShiftedGroups()
    second_writer.apply_parts(dict(stored), [])  # an import: every current part
    assert second_writer.entries == writer.entries
    run(second_writer, second, copy)
    third = KeyValueStore()
    third.apply_parts(dict(stored), [])
    assert third.entries == second_writer.entries


def test_a_state_of_an_earlier_layout_is_refused_with_what_to_do() -> None:
    topology = tables()
    task = StreamTask(topology)
    task.process_batch("a", ["k1"], [1], [1])
    parts = dict(task.export_state().parts)
    state = pickle.loads(parts["task"])
    del state["layout"]
    with pytest.raises(ValueError, match="layout before 3.*delete the checkpoint"):
        StreamTask.import_state(topology, {**parts, "task": pickle.dumps(state)})
    with pytest.raises(ValueError, match="earlier state layout: delete the checkpoint"):
        StreamTask.restore(topology, b"STK1" + task.snapshot()[4:])


def test_a_session_store_numbers_a_batchs_new_keys_as_its_records_come_in_time() -> None:
    """A batch's keys are looked up at once and the keys new to the store get rows before the merge, in the
    order record by record gives them: a key whose records are all late gets no row, a key first seen late
    gets its row at its first record in time; a key that is not a str (an int) moves the store from its key
    table to a dict, with the same rows."""
    builder = StreamsBuilder()
    windows = SessionWindows.of_inactivity_gap_and_grace(5, 0)
    builder.stream("s").group_by_key().windowed_by(windows).count().to_stream().to("sessions")
    topology = builder.build()
    filler = [(f"f{i}", 100 + i) for i in range(kv_rows.FEW_KEYS + 8)]  # a batch looked up at once
    first = [*filler, ("late only", 10), ("late first", 20), ("late first", 150), (None, 151), ("x", 152)]
    second = [(f"f{i}", 160 + i) for i in range(len(filler))]
    second += [(7, 200), ("y", 201), (None, 1), ("late first", 30), ("late first", 199), ("late only", 40)]

    def run(batches: list) -> tuple:
        task = StreamTask(topology)
        outputs: list = []
        for batch in batches:
            task.process_batch("s", [key for key, _ in batch], [1] * len(batch), [ts for _, ts in batch])
            outputs += drain(task)
        (node,) = [
            node for node in task.nodes.values() if isinstance(getattr(node, "store", None), SessionStore)
        ]
        rows = node.store.rows
        return outputs, task.metrics()["dropped-records-total"], rows.keys[: rows.size].tolist()

    batched = run([first, second])
    assert batched == run([[record] for record in first + second])
    keys = batched[2]
    assert "late only" not in keys and keys[len(filler) :] == ["late first", "x", 7, "y"]


def test_a_session_store_drops_the_rows_of_keys_whose_sessions_all_expired() -> None:
    """Keys whose sessions all expired leave dead rows; once those outnumber the live ones an export
    compacts them away, and sessions keep merging and expiring on the copies that import or catch up."""
    builder = StreamsBuilder()
    windows = SessionWindows.of_inactivity_gap_and_grace(10, 0)
    builder.stream("s").group_by_key().windowed_by(windows).count().to_stream().to("sessions")
    topology = builder.build()
    n = 2 * kv_rows.MIN_DEAD_ROWS
    gone, staying = [f"k{i}" for i in range(n)], [f"s{i}" for i in range(n // 4)]
    feed = [("s", key, 1, 0) for key in gone + staying]
    feed += [("s", key, 1, 1000) for key in staying]  # expires every session of `gone`
    feed += [("s", key, 1, 1005) for key in staying[::2] + gone[:10]]  # merges, and keys back again
    feed += [("s", "clock", 1, 1012)]  # expires the sessions of ts 1000 that did not merge
    cuts = [n, n + n // 4, len(feed) - 20, len(feed) - 1]
    expected = run_batched(topology, feed, cuts)
    copies = WorkerCopies(topology)
    outputs: list = []
    for owner, piece in zip([0, 1, 1, 1, 1], pieces(feed, cuts), strict=True):  # 1 runs on after compacting
        task = copies.task_for(owner)
        feed_piece(task, piece)
        outputs += drain(task)
        copies.export(owner, task)
    assert (outputs, task.metrics()["dropped-records-total"], state_of(task)) == expected
    (node,) = [node for node in task.nodes.values() if isinstance(getattr(node, "store", None), SessionStore)]
    rows = node.store.rows
    assert rows.parts.generation == 1  # one compaction: the rows of `gone` after the session at 1000
    # the live keys' rows, and the keys of rows added since; no row of a key that did not come back
    assert rows.size < len(staying) + 20 and rows.row_of("k11") is None and rows.row_of("k3") is not None
    imported = StreamTask.import_state(topology, copies.store)
    assert state_of(imported) == state_of(task)


@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c", None, 4]), st.one_of(st.none(), st.integers(0, 5))),
        min_size=1,
        max_size=80,
    ),
    st.lists(st.integers(1, 80), max_size=4),
)
def test_a_tables_changes_in_batches_of_any_size_equal_its_records_one_by_one(records, cuts):
    """Batches of a few records go key by key, larger ones through the store's batch look-up and puts: the
    same changes (new and old values), drops and state either way."""
    builder = StreamsBuilder()
    builder.table("t").to_stream().map_values(lambda value: value).to("changes")
    topology = builder.build()
    feed = [("t", key, value, i) for i, (key, value) in enumerate(records)]
    assert run_batched(topology, feed, sorted(cuts)) == run_record_by_record(topology, feed)
