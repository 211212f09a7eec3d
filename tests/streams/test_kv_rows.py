"""The row store of non-windowed aggregations (nodes/kv_rows.py): batch puts and deletes, and its export
history (one delta per export, group bases in turn, a new generation after a compaction), read back by an
import of every current part and by a copy catching up from an earlier export, equal the entries put; the
running aggregations over it, handed between worker copies, equal the nodes fed record by record."""

from __future__ import annotations

import os
import pickle
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_jobs.streams import Count, StreamsBuilder, Sum
from spark_jobs.streams.nodes import kv_rows
from spark_jobs.streams.nodes.kv_rows import GROUPS, KeyValueRows

from .helpers import (
    in_batches,
    one_by_one,
    plain_task,
    stores_of_few_rows_in_many_groups,  # noqa: F401 - a fixture, autouse
)

PROPERTY = settings(max_examples=int(os.environ.get("STREAMS_PROPERTY_EXAMPLES", "100")), deadline=None)

# str keys (saved as text while they are all str: an empty one, one with a NUL, lone surrogates) and ints
odd_str_keys = ["", "a\x00b", "\x00", "\ud800", "\ud83d\ude00", "\u00e9t\u00e9"]
keys = st.one_of(
    st.integers(0, 3 * GROUPS).map(lambda i: f"k{i}"), st.sampled_from(odd_str_keys), st.integers(0, 5)
)
entries = st.tuples(keys, st.one_of(st.none(), st.integers(-5, 5)), st.integers(0, 99))
batch = st.lists(entries, max_size=60)
step = st.one_of(batch, st.sampled_from(["export", "full export", "handoff", "delete most"]))


def put(store: KeyValueRows, records: list, model: dict) -> None:
    """A batch's last entry per key, put once per key, as the aggregation node does."""
    last = {key: (value, ts) for key, value, ts in records}
    if not last:
        return
    distinct = list(last)
    rows = store.rows_for(distinct)
    values = [value for value, _ in last.values()]
    store.put_rows(rows, values, np.array([ts for _, ts in last.values()], np.int64))
    for key, (value, ts) in last.items():
        if value is None:
            model.pop(key, None)
        else:
            model[key] = (value, ts)


def contents(store: KeyValueRows) -> dict:
    return dict(store.items())


class History:
    """The parts a runtime keeps: each export's parts stored, its removed parts deleted."""

    def __init__(self, rng) -> None:
        self.rng = rng  # the order in which a runtime hands the parts over is any
        self.parts: dict = {}
        self.written: list[set] = []
        self.names_after: list[set] = [set()]

    def export(self, store: KeyValueRows, changed_only: bool) -> None:
        parts, names = store.export_parts(changed_only)
        assert set(parts) <= set(names)
        for name in set(self.parts) - set(names):
            del self.parts[name]
        self.parts.update({name: pickle.loads(pickle.dumps(part)) for name, part in parts.items()})
        assert set(self.parts) == set(names)
        self.written.append(set(parts))
        self.names_after.append(set(self.parts))

    def shuffled(self, names) -> dict:
        names = sorted(names)
        self.rng.shuffle(names)
        return {name: self.parts[name] for name in names}

    def imported(self) -> KeyValueRows:
        store = KeyValueRows()
        store.apply_parts(self.shuffled(self.parts), [])
        return store

    def catch_up(self, store: KeyValueRows, seen: int) -> None:
        since = set().union(*self.written[seen:])
        store.apply_parts(
            self.shuffled(name for name in since if name in self.parts),
            sorted(self.names_after[seen] - set(self.parts)),
        )


@PROPERTY
@given(st.lists(step, max_size=40), st.randoms(use_true_random=False))
def test_an_import_or_a_catch_up_after_any_exports_holds_the_entries_put(steps, rng):
    with mock.patch.object(kv_rows, "MIN_DEAD_ROWS", 0):  # any store compacts once most of its rows die
        exports_and_handoffs_keep_the_entries(steps, rng)


def exports_and_handoffs_keep_the_entries(steps: list, rng) -> None:
    history = History(rng)
    model: dict = {}
    store = KeyValueRows()
    copies = {0: (KeyValueRows(), 0)}  # an older copy of the store: (store, exports it has seen)
    exports = 0
    for action in steps:
        if action == "delete most":  # every key but one
            put(store, [(key, None, 0) for key in sorted(model, key=str)[1:]], model)
        elif action in ("export", "full export"):
            history.export(store, action == "export" and exports > 0)  # a fresh task's first export is full
            exports += 1
            imported = history.imported()
            assert contents(imported) == model
            assert len(imported) == len(model)
        elif action == "handoff":
            if exports and store.parts.saved_rows == store.size and not store.dirty[: store.size].any():
                older, seen = copies[0]
                history.catch_up(older, seen)
                assert contents(older) == model
                copies[0] = (store, exports)
                store = older
        else:
            put(store, action, model)
        assert contents(store) == model
        assert all(store.get(key) == entry for key, entry in model.items())


def test_a_turn_of_bases_spreads_over_the_exports_and_the_deltas_before_the_oldest_base_go():
    store = KeyValueRows(counts=True)
    all_keys = [f"k{i}" for i in range(100 * GROUPS)]
    rows = store.rows_for(all_keys)
    store.put_rows(rows, np.ones(len(rows), np.int64), np.zeros(len(rows), np.int64))
    parts, names = store.export_parts(False)
    assert list(parts) == names == ["kv.1"]  # every row new: one delta of them all, in row order
    assert parts["kv.1"][0]["rows"].tolist() == list(range(len(all_keys)))
    bases_per_export = []
    for export in range(2, 60):
        changed = rows[export % 10 :: 10]  # a tenth of the keys per export
        store.put_rows(
            changed, np.full(len(changed), export, np.int64), np.full(len(changed), export, np.int64)
        )
        parts, names = store.export_parts(True)
        assert f"kv.{export}" in parts
        bases = [name for name in parts if not name.startswith("kv.")]
        bases_per_export.append(len(bases))
        # the delta holds the rows changed but those of the groups based with it
        based = [int(name[len("kv") : -len(".0")]) for name in bases]
        delta_rows = parts[f"kv.{export}"][0]["rows"]
        assert sorted(delta_rows.tolist()) == sorted(
            row for row in changed.tolist() if row % GROUPS not in based
        )
        deltas = sorted(int(name.split(".")[1]) for name in names if name.startswith("kv."))
        oldest_base = min(store.parts.base_at[:GROUPS])
        assert deltas == [n for n in range(1, export + 1) if n > oldest_base]
    # a tenth of the store changes per export: a turn over the groups takes DELTA_RATIO * 10 exports, a few
    # groups each
    assert max(bases_per_export) <= 3
    assert sum(bases_per_export) >= GROUPS


def in_blocks(store: KeyValueRows) -> KeyValueRows:
    """The store with an export history whose rows go to the groups in blocks (RowParts' `in_blocks`)."""
    store.parts = kv_rows.RowParts(store.parts.prefix, in_blocks=True)
    return store


def test_a_group_s_rows_come_in_blocks_its_base_holds_them_in_row_order_and_the_delta_leaves_them_out():
    """Rows in blocks go to the groups in turn a block at a time: row r to group (r // block) % groups. A
    base holds its group's rows in row order, a delta leaves out the rows of the groups based with it, and an
    import of the parts holds every entry."""
    block, groups = 3, 4
    with mock.patch.object(kv_rows, "BLOCK_ROWS", block), mock.patch.object(kv_rows, "MIN_GROUP_ROWS", 5):
        store, model = in_blocks(KeyValueRows()), {}
        history = History(np.random.default_rng(3))
        size = 2 * groups * 5 - 3  # 4 groups of 5 rows or more (group_count); the last block short
        put(store, [(f"k{i}", i, i) for i in range(size)], model)
        history.export(store, False)
        assert store.parts.groups == groups
        bases = 0
        for n in range(1, 40):
            changed = range(n % 5, size, 5)
            put(store, [(f"k{i}", i * n, n) for i in changed], model)
            parts, _ = store.export_parts(True)
            history.parts.update(parts)
            based = {int(name[2:-2]) for name in parts if name.endswith(".0")}
            bases += len(based)
            for group in based:
                saved = parts[f"kv{group}.0"][0]
                assert saved["block"] == block and saved["groups"] == groups
                in_group = [i for i in range(size) if (i // block) % groups == group]
                assert kv_rows.loaded_row_keys(saved, "") == [f"k{i}" for i in in_group]
                assert saved["columns"][0].tolist() == [model[f"k{i}"][0] for i in in_group]
            delta = parts.get(f"kv.{n + 1}")
            if delta is not None:
                assert delta[0]["rows"].tolist() == [i for i in changed if (i // block) % groups not in based]
        assert bases > groups  # a turn over the groups and more
        history.export(store, True)
        imported = in_blocks(KeyValueRows())
        imported.apply_parts(history.shuffled(history.parts), [])
        assert contents(imported) == model


def test_a_base_of_rows_in_other_blocks_is_refused():
    with mock.patch.object(kv_rows, "BLOCK_ROWS", 2):
        store = in_blocks(KeyValueRows())
    put(store, [(f"k{i}", i, i) for i in range(10)], {})
    parts = store.parts.state_parts(store)
    with pytest.raises(ValueError, match="blocks of"):
        KeyValueRows().apply_parts(parts, [])


def test_an_export_compacts_the_rows_once_most_are_dead_and_a_lagging_copy_catches_up_with_the_new_rows():
    store = KeyValueRows()
    history = History(np.random.default_rng(0))
    all_keys = [f"k{i}" for i in range(3 * kv_rows.MIN_DEAD_ROWS)]
    put(store, [(key, i, i) for i, key in enumerate(all_keys)], {})
    history.export(store, False)
    lagging = history.imported()
    # two thirds deleted: dead rows outnumber the live ones, and MIN_DEAD_ROWS
    gone = all_keys[::3] + all_keys[1::3]
    put(store, [(key, None, 0) for key in gone], {})
    history.export(store, True)
    put(store, [("new", -1, 7)], {})
    history.export(store, True)
    kept = {key: (i, i) for i, key in enumerate(all_keys) if i % 3 == 2} | {"new": (-1, 7)}
    assert store.size == len(kept) and store.parts.generation == 1
    assert store.keys[:2].tolist() == ["k2", "k5"]  # the live rows, numbered again in order
    assert contents(history.imported()) == kept
    history.catch_up(lagging, 1)  # a copy that saw only the first export, of the earlier generation
    assert lagging.size == len(kept) and lagging.parts.generation == 1 and contents(lagging) == kept
    assert all(lagging.get(key) is None for key in gone[:10])
    # the new generation's parts: one delta of every row, then deltas and bases in turn again
    assert all(part["generation"] == 1 for part, _ in history.parts.values())
    older = {name: part for name, part in history.parts.items()}
    first = next(iter(older))
    older[first] = ({**older[first][0], "generation": 0}, [])
    with pytest.raises(ValueError, match="generations \\[0, 1\\]"):
        KeyValueRows().apply_parts(older, [])


class Name(str):
    """A str subclass: a key the store must give back as it was put."""


def test_str_keys_are_saved_as_text_unless_one_holds_a_nul_and_every_key_comes_back_as_it_was_put():
    history = History(np.random.default_rng(1))
    model: dict = {}
    store = KeyValueRows()
    put(store, [(f"k{i}", i, i) for i in range(3 * GROUPS)] + [("", 1, 1), ("\ud800", 2, 2)], model)
    history.export(store, False)
    assert all("key_text" in part and "keys" not in part for part, _ in history.parts.values())
    put(store, [("a\x00b", 3, 3)], model)  # text joined by NUL would split this key: its part keeps a list
    put(store, [("new", 4, 4)], model)
    history.export(store, True)
    assert history.parts["kv.2"][0]["keys"] == ["a\x00b", "new"]
    assert contents(history.imported()) == model
    put(store, [("x", 6, 6), ("y", 6, 6)], model)  # joined as they are appended, in two batches
    put(store, [("z", 7, 7), ("x", 8, 8)], model)
    assert store.appended_key_text(slice(store.parts.saved_rows, store.size)) == "x\x00y\x00z"
    history.export(store, True)
    assert history.parts["kv.3"][0]["key_text"] == "x\x00y\x00z"
    assert contents(history.imported()) == model
    put(store, [(Name("named"), 5, 5)], model)  # not a str exactly: the store's keys are lists from now on
    history.export(store, True)
    assert history.parts["kv.4"][0]["keys"] == ["named"]
    imported = history.imported()
    assert contents(imported) == model and type(imported.keys[imported.size - 1]) is Name


def test_the_first_export_of_a_store_s_rows_writes_them_all_in_one_delta_in_row_order_and_no_base():
    store = KeyValueRows(counts=True)
    store.export_parts(False)  # a fresh task's first export: no rows
    rows = store.rows_for([f"k{i}" for i in range(4 * GROUPS)])
    store.put_rows(rows, np.ones(len(rows), np.int64), np.zeros(len(rows), np.int64))
    parts, names = store.export_parts(True)
    assert list(parts) == names == ["kv.2"]
    assert parts["kv.2"][0]["rows"].tolist() == list(range(4 * GROUPS))
    assert parts["kv.2"][0]["key_count"] == 4 * GROUPS


def test_a_small_store_has_one_group_and_a_growing_one_writes_its_rows_again_in_one_delta_and_no_base():
    """A store that grows into more groups writes what a new store writes: one delta of every row, from
    row 0 with every key, and no base (the old bases name the old groups: they go); its bases then follow in
    turn. A copy that catches up forgets the removed bases, so that its own later exports name the parts
    the exporting copy's name."""
    store, model = KeyValueRows(), {}
    history = History(np.random.default_rng(1))
    lagging = KeyValueRows()
    with mock.patch.object(kv_rows, "MIN_GROUP_ROWS", 8):
        put(store, [(f"k{i}", i, i) for i in range(10)], model)
        history.export(store, False)
        assert sorted(history.parts) == ["kv.1"]  # every row new: one delta
        lagging.apply_parts(history.parts, [])  # a copy that then lags behind
        for n in range(2, 2 + kv_rows.DELTA_RATIO):  # every row changed DELTA_RATIO times: a turn of bases
            put(store, [(f"k{i}", -i * n, i) for i in range(10)], model)
            history.export(store, True)
        assert sorted(history.parts) == ["kv0.0"]  # a group for fewer than 2 * 8 rows
        assert history.parts["kv0.0"][0]["groups"] == 1
        based = history.imported()  # a copy that holds the base
        seen = len(history.written)
        put(store, [(f"k{i}", i, i) for i in range(5, 40)], model)  # 40 rows: groups of 8 rows or more
        history.export(store, True)
        assert sorted(history.written[-1]) == sorted(history.parts) == ["kv.6"]
        delta = history.parts["kv.6"][0]
        assert delta["from"] == 0 and delta["rows"].tolist() == list(range(40))
        assert delta["key_text"].split("\x00") == [f"k{i}" for i in range(40)]
        assert store.parts.groups == 4 and not any(store.parts.base_at) and store.parts.deltas == {6}
        assert contents(history.imported()) == model
        history.catch_up(based, seen)  # the rows it holds written again, the base gone
        history.catch_up(lagging, 1)
        for copy in (based, lagging):
            assert contents(copy) == model and all(copy.get(key) == entry for key, entry in model.items())
            assert copy.keys[: copy.size].tolist() == store.keys[: store.size].tolist()
            assert copy.parts.groups == 4 and not any(copy.parts.base_at) and copy.parts.deltas == {6}
        # the bases in turn, alike from the exporting copy and from a copy that caught up
        for n in range(7, 7 + 2 * kv_rows.DELTA_RATIO):
            changes = [(f"k{i}", n, n) for i in range(0, 40, 3)]
            put(store, changes, model)
            put(based, changes, {})
            parts, names = store.export_parts(True)
            copy_parts, copy_names = based.export_parts(True)
            assert names == copy_names and list(parts) == list(copy_parts)
        assert sum(name.endswith(".0") for name in names) >= 2  # bases written since, in the new groups
        assert {saved["groups"] for name, (saved, _) in parts.items() if name.endswith(".0")} <= {4}
    assert contents(based) == contents(store) == model


def test_a_store_with_few_dead_rows_keeps_them():
    store = KeyValueRows()
    put(store, [(f"k{i}", i, 0) for i in range(kv_rows.MIN_DEAD_ROWS)], {})
    put(store, [(f"k{i}", None, 0) for i in range(kv_rows.MIN_DEAD_ROWS)], {})
    store.export_parts(False)
    assert store.size == kv_rows.MIN_DEAD_ROWS and store.parts.generation == 0 and len(store) == 0


def running(kind: str):
    builder = StreamsBuilder()
    grouped = builder.stream("readings").group_by_key()
    if kind == "declared":
        table = grouped.agg(n=Count(), total=Sum("temperature"))
    elif kind == "aggregate":  # None (a tombstone) at every fifth reading of a key
        table = grouped.aggregate(lambda: 0, lambda key, value, agg: None if agg == 4 else agg + 1)
    else:
        table = grouped.count()
    table.to_stream().to("out")
    return builder.build()


@pytest.mark.parametrize("kind", ["count", "aggregate", "declared"])
def test_a_running_aggregation_over_many_keys_handed_between_workers_equals_the_nodes_record_by_record(kind):
    """More keys than groups of rows, batches with a key many times, null values, the state handed between
    worker copies: the row store's exports, imports and catch-ups keep every key's entry."""
    records = [
        (
            "readings",
            f"k{(i * 7) % (5 * GROUPS)}" if i % 3 else "hot",
            None if i % 17 == 0 else {"temperature": float(i % 13)},
            i // 3,
        )
        for i in range(2000)
    ]
    cuts = [150, 151, 600, 900, 1300, 1700]
    owners = [0, 1, 0, 2, 1, 2, 0]
    expected = one_by_one(plain_task(running(kind)), records)
    assert len(expected[2]) > 2 * GROUPS  # the state: an entry per key
    assert in_batches(running(kind), records, cuts, owners) == expected


def test_a_none_key_has_no_row_and_a_key_the_table_cannot_hold_moves_the_store_to_a_dict():
    store = KeyValueRows()
    assert store.rows_for(["a", "b", "a"]).tolist() == [0, 1, 0]  # str keys: through the KeyTable
    nan = float("nan")  # a key the table would take for a null; a dict finds it by identity
    assert store.rows_for([None, "b", nan, nan, 5, "c"]).tolist() == [-1, 1, 2, 2, 3, 4]
    assert store.rows_for(["c", nan, None, 5, "d"]).tolist() == [4, 2, -1, 3, 5]
    assert store.keys[: store.size].tolist() == ["a", "b", nan, 5, "c", "d"]


def test_a_nan_key_in_a_batch_without_a_none_key_moves_the_store_to_a_dict_too():
    store = KeyValueRows()
    assert store.rows_for(["a", "b", "a"]).tolist() == [0, 1, 0]
    nan = float("nan")  # numbered by the table as any key where no None key asks it to check for nulls
    assert store.rows_for(["b", nan, "c", nan]).tolist() == [1, 2, 3, 2]
    assert not store.str_keys()
    assert store.rows_for(["c", nan, "d"]).tolist() == [3, 2, 4]
    assert store.keys[: store.size].tolist() == ["a", "b", nan, "c", "d"]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(
                st.sampled_from(["a", "b", "c", "d", 7, None]),
                st.one_of(st.none(), st.integers(0, 3)),
                st.integers(0, 9),
            ),
            min_size=1,
            max_size=12,
        ),
        max_size=5,
    ),
    st.lists(st.sampled_from(["a", "b", "c", "d", "e", 7, None]), max_size=8),
    st.sampled_from([0, kv_rows.FEW_KEYS]),
)
def test_changes_put_in_record_order_and_the_values_read_back_are_a_dicts_record_by_record(
    batches, probe, few_keys
):
    """A table's batch: each record's old value is what its key held before it (an earlier record of the
    batch, or the store), a None value deletes, a None key is dropped, and the values read back by a batch
    are the last ones put (and whether every key has one); both key by key (a batch under FEW_KEYS) and by batch (FEW_KEYS 0)."""
    with mock.patch.object(kv_rows, "FEW_KEYS", few_keys):
        _check_changes_against_a_dict(batches, probe)


def _check_changes_against_a_dict(batches, probe):
    store, plain = KeyValueRows(), {}
    for batch in batches:
        keys, values, stamps = (list(column) for column in zip(*batch, strict=True))
        expected_olds = []
        kept = [i for i, key in enumerate(keys) if key is not None]
        for key, value, stamp in batch:
            if key is None:
                continue
            expected_olds.append(plain[key][0] if key in plain else None)
            if value is None:
                plain.pop(key, None)
            else:
                plain[key] = (value, stamp)
        assert store.put_changes(keys, values, stamps) == (
            expected_olds,
            None if len(kept) == len(keys) else kept,
        )
        assert dict(store.items()) == plain
        assert len(store) == len(plain)
    assert store.get_values(probe) == (
        [plain[key][0] if key in plain else None for key in probe],
        all(key in plain for key in probe),
    )


def test_a_new_store_s_first_delta_saves_its_keys_joined_as_they_were_appended():
    store = KeyValueRows(counts=True)
    store.export_parts(False)  # a fresh task's first export: no rows
    keys = [f"k{i}" for i in range(5 * GROUPS + 3)]
    n = len(keys)
    for batch in (keys[: n // 2], keys[n // 2 :]):
        rows = store.rows_for(batch)
        store.put_rows(rows, np.ones(len(rows), np.int64), np.zeros(len(rows), np.int64))
    assert store.appended_key_text(slice(0, n)) == "\x00".join(keys)
    assert store.appended_key_text(slice(0, n, kv_rows.group_count(n))) is None  # a base's: joined then
    parts, _ = store.export_parts(True)  # every row new: one delta
    assert parts["kv.2"][0]["key_text"] == "\x00".join(keys)
    assert store.appended_key_text(slice(0, n)) is None  # not kept past the export
    more = store.rows_for(["x", "k1", "y"])  # appended after an export: the delta's keys
    store.put_rows(more, np.ones(3, np.int64), np.zeros(3, np.int64))
    assert store.appended_key_text(slice(n, n + 2)) == "x\x00y"
