"""WindowRows: a window's entries in rows, saved as the rows changed since the last export.

Contract: a copy that loads the base, then every delta in order, holds the same live entries as the store
that wrote them, numbered alike (so the next delta applies), whatever mix of new keys, updates, dead rows
and keys coming back the exports cut.
"""

from __future__ import annotations

import pickle
from array import array

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_jobs.streams.nodes.window_rows import (
    INT64,
    OBJECT,
    StructFields,
    WindowRows,
    dumps_plain,
    loaded_keys,
)

from .test_properties import PROPERTY

KINDS = (OBJECT, INT64)  # as the time-window aggregate: aggregate (None: dead), max timestamp
# the same, then a fixed column (set when a row is appended: the first timestamp)
LAYOUTS = {"changing": (KINDS, 0), "fixed": ((OBJECT, INT64, INT64), 1)}


def put(rows: WindowRows, key: str, agg, ts: int) -> None:
    """What the aggregate does per record: a new row, or an update (None kills the row)."""
    row = rows.index.get(key)
    if row is None:
        if agg is not None:
            rows.append(key, (agg, ts, ts)[: len(rows.columns)])
        return
    aggs, max_ts = rows.columns[:2]
    aggs[row] = agg
    max_ts[row] = max(max_ts[row], ts)
    rows.dirty[row] = 1
    if agg is None:
        del rows.index[key]


class _Name(str):
    """A str subclass: saved keys must come back with their type."""


def live(rows: WindowRows) -> dict:
    return {key: rows.fields(row) for key, row in rows.live()}


def round_trip(saved: dict) -> dict:
    return pickle.loads(pickle.dumps(saved, protocol=5))


operations = st.lists(
    st.lists(
        st.tuples(
            # keys of any kind come back as they were: empty, non-ASCII, a NUL, a lone surrogate, a str
            # subclass, other types
            st.sampled_from(
                [f"k{i}" for i in range(12)] + ["", "é", "a\x00b", "\ud800", _Name("n"), 7, ("t", 1)]
            ),
            st.one_of(st.none(), st.integers(-(2**40), 2**40), st.text(max_size=3)),
            st.integers(0, 2**45),
        ),
        max_size=30,
    ),
    min_size=1,
    max_size=8,
)


@pytest.mark.parametrize("layout", LAYOUTS)
@PROPERTY
@given(batches=operations, rebase_at=st.sets(st.integers(0, 7)), extend_at=st.sets(st.integers(0, 7)))
def test_a_copy_that_loads_every_export_holds_the_same_entries(layout, batches, rebase_at, extend_at) -> None:
    kinds, fixed = LAYOUTS[layout]
    store, copy = WindowRows(kinds, fixed), WindowRows(kinds, fixed)
    unread = WindowRows(kinds, fixed)  # a copy whose index is first read at the end (built then)
    for n, batch in enumerate(batches):
        for key, agg, ts in batch:
            put(store, key, agg, ts)
        if n in extend_at:  # new keys appended together, their keys pickled as the fused pass does
            fresh = [f"x{n}.{i}" for i in range(3)]
            values = [[1, 2, 3] if kind == OBJECT else np.array([4, 5, 6]) for kind in kinds]
            store.extend(fresh, values, dumps_plain(fresh))
        if n == 0 or n in rebase_at:
            copy, unread = WindowRows(kinds, fixed), WindowRows(kinds, fixed)
            saved = round_trip(store.save(changed_only=False))
            copy.load(saved, "w.0")
            unread.load(saved, "w.0")
        else:
            changed = store.changes()
            saved = round_trip(store.save(changed_only=True))
            assert len(saved["rows"]) == changed
            copy.load(saved, f"w.{n}")
            unread.load(saved, f"w.{n}")
        assert live(copy) == live(store)
        assert copy.index == store.index and copy.keys.tolist() == store.keys.tolist()
        assert list(map(type, copy.keys)) == list(map(type, store.keys))
        assert store.changes() == 0  # the export cleared the flags
    batch = [(f"new{i}", i, i) for i in range(3)] + [("k1", 7, 2**44)]
    for key, agg, ts in batch:  # the next delta still applies: the rows are numbered alike
        put(store, key, agg, ts)
    saved = round_trip(store.save(changed_only=True))
    copy.load(saved, "w.last")
    unread.load(saved, "w.last")
    assert live(copy) == live(store)
    assert unread.index == store.index and unread.keys.tolist() == store.keys.tolist()


def test_a_delta_saves_only_the_rows_put_since_the_last_export() -> None:
    rows = WindowRows(KINDS)
    for i in range(1000):
        put(rows, f"k{i}", 1, 10)
    rows.save(changed_only=False)
    put(rows, "k5", 2, 30)
    put(rows, "k900", None, 20)  # dead
    put(rows, "new", 1, 40)
    saved = rows.save(changed_only=True)
    assert saved["from"] == 1000 and loaded_keys(saved["keys"]) == ["new"]
    assert list(saved["rows"]) == [5, 900, 1000]
    aggs, max_ts = saved["columns"]
    assert list(aggs) == [2, None, 1] and list(max_ts) == [30, 20, 40]
    assert rows.save(changed_only=True)["rows"] == saved["rows"][:0]  # nothing since


def test_int64_columns_are_saved_as_arrays_and_list_columns_as_their_values() -> None:
    rows = WindowRows(KINDS)
    put(rows, "a", 3, 1)
    put(rows, "b", 2**40, 2)
    aggs, max_ts = rows.save(changed_only=False)["columns"]
    assert type(max_ts) is array and list(aggs) == [3, 2**40]
    put(rows, "c", True, 3)  # a bool is not saved as an int: it loads back as True
    copy = WindowRows(KINDS)
    copy.load(round_trip(rows.save(changed_only=False)), "w.0")
    assert live(copy)["c"] == (True, 3) and type(live(copy)["c"][0]) is bool


def test_a_delta_that_does_not_continue_the_rows_is_refused() -> None:
    store = WindowRows(KINDS)
    put(store, "a", 1, 1)
    base = store.save(changed_only=False)
    put(store, "b", 1, 2)
    first = store.save(changed_only=True)
    put(store, "c", 1, 3)
    second = store.save(changed_only=True)
    copy = WindowRows(KINDS)
    copy.load(base, "w.0")
    with pytest.raises(ValueError, match="continues a window of 2 rows, not of this store's 1"):
        copy.load(second, "w.2")
    with pytest.raises(ValueError, match="a base over a window that has rows"):
        copy.load(base, "w.0")
    copy.load(first, "w.1")
    with pytest.raises(ValueError, match="0 values for 1 rows"):
        copy.load(dict(second, columns=[second["columns"][0][:0], second["columns"][1]]), "w.2")
    with pytest.raises(ValueError, match="rows out of the window's 3"):
        copy.load(dict(second, rows=array("q", [3])), "w.2")
    copy = WindowRows(KINDS)
    for n, saved in enumerate([base, first, second]):
        copy.load(saved, f"w.{n}")
    assert live(copy) == live(store)


def test_a_delta_holds_a_fixed_column_for_its_new_rows_only() -> None:
    rows = WindowRows(*LAYOUTS["fixed"])
    for i in range(5):
        put(rows, f"k{i}", 1, 10 + i)
    rows.save(changed_only=False)
    put(rows, "k1", 2, 30)
    put(rows, "new", 1, 40)
    saved = rows.save(changed_only=True)
    assert list(saved["rows"]) == [1, 5]
    aggs, max_ts, first_ts = saved["columns"]
    assert list(aggs) == [2, 1] and list(max_ts) == [30, 40] and list(first_ts) == [40]
    copy = WindowRows(*LAYOUTS["fixed"])
    for i in range(5):
        put(copy, f"k{i}", 1, 10 + i)
    copy.save(changed_only=False)
    with pytest.raises(ValueError, match="2 values for 1 rows"):
        copy.load(dict(saved, columns=[aggs, max_ts, max_ts]), "w.1")
    copy.load(saved, "w.1")
    assert live(copy) == live(rows) and live(copy)["k1"] == (2, 30, 11)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_delta_loads_its_older_rows_in_any_order_and_refuses_new_rows_out_of_order(layout) -> None:
    """`save` lists a delta's rows in ascending order, so its new rows are its last and `load` appends them
    as they come. Its older rows may come in any order; new rows out of order are refused, the store left
    as it was."""
    kinds, fixed = LAYOUTS[layout]
    store = WindowRows(kinds, fixed)
    for i in range(6):
        put(store, f"k{i}", i, 10 + i)
    base = round_trip(store.save(changed_only=False))  # pickled at once: a base holds the live columns
    put(store, "k4", None, 20)  # dead
    put(store, "new0", "x", 30)
    put(store, "k1", 7, 31)
    put(store, "new1", 9, 32)
    saved = store.save(changed_only=True)
    assert list(saved["rows"]) == [1, 4, 6, 7]
    changing = len(kinds) - fixed

    def reordered(order: list[int]) -> dict:
        return dict(
            saved,
            rows=array("q", [saved["rows"][i] for i in order]),
            columns=[
                array("q", [column[i] for i in order])
                if type(column) is array
                else tuple(column[i] for i in order)
                for column in saved["columns"][:changing]
            ]
            + saved["columns"][changing:],
        )

    for delta in (saved, reordered([1, 0, 2, 3])):  # the rows 1, 4, 6, 7 and 4, 1, 6, 7
        copy = WindowRows(kinds, fixed)
        copy.load(base, "w.0")
        copy.load(round_trip(delta), "w.1")
        assert live(copy) == live(store)
        assert copy.index == store.index and copy.keys.tolist() == store.keys.tolist()
    copy = WindowRows(kinds, fixed)
    copy.load(base, "w.0")
    before = live(copy)
    with pytest.raises(ValueError, match="its new rows are not its last 2, in order"):
        copy.load(round_trip(reordered([0, 1, 3, 2])), "w.1")  # the rows 1, 4, 7, 6
    assert live(copy) == before and len(copy) == 6


def test_a_key_is_pickled_once_while_its_window_lives() -> None:
    rows = WindowRows(KINDS)
    put(rows, "a", 1, 10)  # appended one by one: pickled by the save that first needs it
    batch = ["b", "c"]
    pickled = dumps_plain(batch)
    rows.extend(batch, [[1, 1], np.array([20, 20])], pickled)  # pickled by the caller as it appends
    first = rows.save(changed_only=True)["keys"]
    assert loaded_keys(first) == ["a", "b", "c"] and first[1] is pickled
    put(rows, "d", 1, 30)
    delta = rows.save(changed_only=True)["keys"]
    assert loaded_keys(delta) == ["d"]
    base = rows.save(changed_only=False)["keys"]  # every chunk reused: nothing pickled again
    assert base == (*first, *delta) and all(a is b for a, b in zip(base, (*first, *delta), strict=True))
    assert loaded_keys(base) == ["a", "b", "c", "d"]


def test_list_columns_saved_load_into_int64_columns_and_a_value_no_int64_holds_is_refused() -> None:
    """Saved parts of a final buffer fed by a count load into list columns or into int64 columns. A value
    an int64 cannot hold is refused, the store left as it was."""
    written = WindowRows((INT64, OBJECT, OBJECT), fixed=1)
    written.append("a", (1, 5, 0))
    written.append("b", (2, 6, 0))
    base = round_trip(written.save(changed_only=False))
    written.columns[1][0] = 7
    written.dirty[0] = 1
    written.append("c", (3, 8, 7))
    delta = round_trip(written.save(changed_only=True))
    copy = WindowRows((INT64, INT64, INT64), fixed=1)
    copy.load(base, "w.0")
    copy.load(delta, "w.1")
    assert live(copy) == live(written) == {"a": (1, 7, 0), "b": (2, 6, 0), "c": (3, 8, 7)}
    assert all(type(column) is array for column in copy.columns)
    for bad in (None, 2**63, "7"):
        refused = WindowRows((INT64, INT64, INT64), fixed=1)
        refused.load(base, "w.0")
        with pytest.raises(ValueError, match="'w.1': column 1 holds a value that is not an int64"):
            refused.load(dict(delta, columns=[delta["columns"][0], (bad, 8), delta["columns"][2]]), "w.1")
        assert live(refused) == {"a": (1, 5, 0), "b": (2, 6, 0)} and len(refused.dirty) == 2


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_base_loaded_twice_gives_two_windows_apart_unless_it_is_owned(layout) -> None:
    """`load` copies a base's columns, so one saved form can fill two windows that then change apart;
    `owned=True` (a form just unpickled, as a catch-up's) hands its columns over instead of copying."""
    kinds, fixed = LAYOUTS[layout]
    store = WindowRows(kinds, fixed)
    for i in range(4):
        put(store, f"k{i}", i, 10 + i)
    saved = round_trip(store.save(changed_only=False))
    first, second = WindowRows(kinds, fixed), WindowRows(kinds, fixed)
    first.load(saved, "w.0")
    second.load(saved, "w.0")
    put(first, "k1", 70, 40)
    put(first, "k9", 9, 41)
    assert live(second) == live(store)
    owner = WindowRows(kinds, fixed)
    owner.load(saved, "w.0", owned=True)
    assert all(mine is theirs for mine, theirs in zip(owner.columns, saved["columns"], strict=True))
    assert live(owner) == live(store)


STRUCT = StructFields(["count", "sum", "max"], [np.int64, np.float64, np.int64], [False, True, True])
struct_values = st.fixed_dictionaries(
    {
        "count": st.integers(-(2**63), 2**63 - 1),
        "sum": st.none() | st.floats(allow_nan=False),
        "max": st.none() | st.integers(-(2**63), 2**63 - 1),
    }
).map(lambda value: {name: value[name] for name in STRUCT.names})  # the fields' order, as a struct reads


@PROPERTY
@given(
    batches=st.lists(
        st.lists(st.tuples(st.sampled_from([f"k{i}" for i in range(6)]), struct_values), max_size=8),
        min_size=1,
        max_size=5,
    ),
    by_columns=st.booleans(),
)
def test_struct_columns_hold_save_and_load_the_values_they_were_put(batches, by_columns) -> None:
    """A column of dicts of numeric fields (a declared aggregation's values) held as a numpy array per
    field: read back, and loaded by a copy from every export, each value is the dict put (a null field
    None, -0.0 kept), whether put one at a time or as columns."""
    kinds = (INT64, STRUCT, STRUCT)  # ts | a fixed struct column: a row's first value
    store, copy = WindowRows(kinds, fixed=1), WindowRows(kinds, fixed=1)
    expected: dict = {}
    for n, batch in enumerate(batches):
        for key, value in batch:
            row = store.index.get(key)
            if row is None:
                if by_columns:
                    store.extend([key], [np.array([n]), STRUCT.parse([value]), STRUCT.parse([value])])
                else:
                    store.append(key, (n, value, value))
                expected[key] = (n, value, value)
            else:
                if by_columns:
                    store.put_rows(np.array([row]), [np.array([n]), STRUCT.parse([value])])
                else:
                    store.columns[0][row] = n
                    store.columns[1][row] = value
                    store.dirty[row] = 1
                expected[key] = (n, value, expected[key][2])
        copy.load(round_trip(store.save(changed_only=n > 0)), f"w.{n}")
        for rows in (store, copy):
            held = {key: tuple(column[row] for column in rows.columns) for key, row in rows.live()}
            assert repr(held) == repr(expected)  # repr: -0.0 is not 0.0
    assert list(store.columns[1]) == list(copy.columns[1]) == [expected[key][1] for key in store.keys]


def test_a_struct_column_saves_arrays_and_refuses_a_saved_form_of_other_fields() -> None:
    store = WindowRows((INT64, STRUCT))
    store.append("a", (1, {"count": 1, "sum": None, "max": 4}))
    store.append("b", (2, {"count": 2, "sum": 2.5, "max": None}))
    saved = round_trip(store.save(changed_only=False))
    column = saved["columns"][1]
    assert [type(field) for field in column["fields"]] == [array] * 3
    assert column["fields"][1].typecode == "d" and column["nulls"][0] is None
    assert store.columns[1].dicts() == [
        {"count": 1, "sum": None, "max": 4},
        {"count": 2, "sum": 2.5, "max": None},
    ]
    for bad in (
        dict(column, fields=column["fields"][:2]),
        dict(column, rows=3),
        dict(column, nulls=[b"\x00\x01", None, None]),  # the count is never null
        dict(column, fields=[column["fields"][1], *column["fields"][1:]]),  # a float64 where an int64 is
        [1, 2],
    ):
        refused = WindowRows((INT64, STRUCT))
        with pytest.raises(ValueError, match="'w.0': a struct column that is not one of the fields"):
            refused.load(dict(saved, columns=[saved["columns"][0], bad]), "w.0")
    with pytest.raises(TypeError, match="dicts of the fields"):
        store.columns[1][0] = {"count": 1}


def test_a_struct_field_of_one_value_in_every_row_is_saved_once() -> None:
    """A field holding one number in every row (to the bit: -0.0 is not 0.0) is saved as that number, a
    field null in every row as one byte; both load back as a value per row."""
    store = WindowRows((INT64, STRUCT))
    for i, total in enumerate([-0.0, -0.0, -0.0]):
        store.append(f"k{i}", (i, {"count": 0, "sum": total, "max": None}))
    saved = round_trip(store.save(changed_only=False))
    column = saved["columns"][1]
    assert [len(field) for field in column["fields"]] == [1, 1, 1] and column["nulls"][2] == b"\x01"
    copy = WindowRows((INT64, STRUCT))
    copy.load(saved, "w.0")
    assert repr(copy.columns[1].dicts()) == repr([{"count": 0, "sum": -0.0, "max": None}] * 3)
    store.columns[1][2] = {"count": 0, "sum": 0.0, "max": 1}
    store.dirty[2] = 1
    delta = round_trip(store.save(changed_only=True))
    copy.load(delta, "w.1")
    assert [len(field) for field in round_trip(store.save(changed_only=False))["columns"][1]["fields"]] == [
        1,
        3,
        3,
    ]
    assert repr(copy.columns[1].dicts()) == repr(store.columns[1].dicts())


def test_an_int64_column_of_one_value_and_a_sparse_column_of_none_are_saved_once() -> None:
    """A value that every row of an int64 column holds is saved once, a sparse list column that holds None
    in every row as None (and held without a list); either loads back as a value per row, in a base and in
    a delta, and is saved in full once its rows differ."""
    kinds = (INT64, OBJECT, INT64)  # a changing int64, a sparse list column, a fixed int64
    store, copy = WindowRows(kinds, fixed=1, sparse=(1,)), WindowRows(kinds, fixed=1, sparse=(1,))
    store.extend(["a", "b", "c"], [np.array([5, 5, 5]), [None] * 3, np.array([0, 0, 0])])
    # no list of a None per row while every row holds None: no container for the cyclic collector to scan
    assert not any(type(column) is list for column in store.columns)
    saved = round_trip(store.save(changed_only=False))
    assert [list(column) if column is not None else None for column in saved["columns"]] == [[5], None, [0]]
    copy.load(saved, "w.0")
    assert not any(type(column) is list for column in copy.columns)
    assert live(copy) == live(store) == {key: (5, None, 0) for key in "abc"}
    store.put_rows(np.array([0, 2]), [np.array([7, 7]), [None, None]])
    store.extend(["d", "e"], [np.array([7, 7]), [None, None], np.array([0, 0])])
    saved = round_trip(store.save(changed_only=True))
    assert list(saved["rows"]) == [0, 2, 3, 4]
    assert [list(column) if column is not None else None for column in saved["columns"]] == [[7], None, [0]]
    copy.load(saved, "w.1")
    assert live(copy) == live(store)
    store.put_rows(np.array([1, 4]), [np.array([8, 9]), [{"h": b"1"}, None]])
    saved = round_trip(store.save(changed_only=True))
    assert [list(column) for column in saved["columns"]] == [[8, 9], [{"h": b"1"}, None], []]
    copy.load(saved, "w.2")
    assert live(copy) == live(store)
    assert live(copy)["b"] == (8, {"h": b"1"}, 0) and live(copy)["e"] == (9, None, 0)
    saved = round_trip(store.save(changed_only=False))  # a header in one row: the column in full
    assert list(saved["columns"][1]) == [None, {"h": b"1"}, None, None, None]


def test_none_put_over_a_list_column_replaces_what_its_rows_held() -> None:
    """Putting None into rows of a list column leaves them None, whether the column held None in every row
    (nothing to store) or values in some (each put row replaced), and flags the rows put either way."""
    kinds = (INT64, OBJECT, OBJECT)  # a timestamp, a column of None only, a column holding values
    store = WindowRows(kinds)
    store.extend(["a", "b", "c"], [np.array([1, 2, 3]), [None] * 3, [None, {"v": 1}, {"v": 2}]])
    store.save(changed_only=True)
    store.put_rows(np.array([2, 0]), [np.array([5, 4]), [None, None], [None, None]])
    assert live(store) == {"a": (4, None, None), "b": (2, None, {"v": 1}), "c": (5, None, None)}
    store.put_rows(np.array([1]), [np.array([6]), [None], [None]])
    assert live(store)["b"] == (6, None, None)
    assert list(round_trip(store.save(changed_only=True))["rows"]) == [0, 1, 2]


def test_none_for_a_list_columns_values_is_none_in_every_row() -> None:
    """A list column's values given as None put or append None in every row concerned, over rows that held
    values too."""
    kinds = (INT64, OBJECT)
    store = WindowRows(kinds)
    store.extend(["a", "b"], [np.array([1, 2]), [{"v": 1}, {"v": 2}]])
    store.put_rows(np.array([1]), [np.array([3]), None])
    store.extend(["c"], [np.array([4]), None])
    assert live(store) == {"a": (1, {"v": 1}), "b": (3, None), "c": (4, None)}
    assert list(round_trip(store.save(changed_only=True))["columns"][1]) == [{"v": 1}, None, None]
