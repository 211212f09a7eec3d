"""A window's batch look-ups (nodes/key_table.py, WindowRows.rows_of / number_keys) give what its dict gives,
whatever path appended its rows, and a table that cannot follow the window is dropped, not trusted."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_jobs.streams.nodes import key_table, window_rows
from spark_jobs.streams.nodes.key_table import KeyNumbers, KeyTable, number_by_first_appearance, object_array
from spark_jobs.streams.nodes.window_rows import WindowRows


def test_a_table_numbers_the_keys_it_lacks_after_its_rows_in_order_of_first_appearance() -> None:
    table = KeyTable.new(0)
    assert table.add(["a", "b"])
    numbers, new = table.number(object_array(["b", "x", "a", "y", "x"]))
    assert numbers.tolist() == [1, 2, 0, 3, 2]
    assert new.tolist() == ["x", "y"]
    assert (table.size, table.pending) == (2, 2)
    table.confirm(2)
    assert table.lookup(["y", "q", "a"]).tolist() == [3, -1, 0]


def test_a_table_numbers_only_the_keys_asked_for() -> None:
    table = KeyTable.new(0)
    assert table.add(["a", "b"])
    numbers, new = table.number(object_array(["x", "a", "y", "z", "y"]), np.array([1, 1, 0, 1, 0], bool))
    assert numbers.tolist() == [2, 0, -1, 3, -1]  # "y" is not asked for: not numbered, not added
    assert new.tolist() == ["x", "z"]
    table.confirm(2)
    assert table.lookup(["y", "z"]).tolist() == [-1, 3]


def test_a_table_that_holds_nearly_all_of_a_batch_refuses_a_null_key_before_adding_any_key() -> None:
    table = KeyTable.new(0)
    assert table.add(["a", "b"])
    held = ["a", "b"] * 40  # a share of the batch new to the table below NUMBERED_AT_ONCE: looked up first
    assert 2 / (len(held) + 2) <= key_table.NUMBERED_AT_ONCE
    assert table.number(object_array([*held, "new", None]), str_only=True) is None
    assert table.pending == 0
    assert table.lookup(["new"]).tolist() == [-1]
    numbers, new = table.number(object_array(["b", "new"]), str_only=True)
    assert numbers.tolist() == [1, 2]
    assert new.tolist() == ["new"]


def test_a_table_numbers_a_list_of_keys_as_their_object_array_a_chunk_at_a_time(monkeypatch) -> None:
    monkeypatch.setattr(key_table, "LOOKUP_CHUNK", 3)
    batch = ["b", "x", "a", "y", "x", "b", "z", "a"]
    numbered = np.array([1, 1, 1, 1, 1, 0, 1, 1], bool)
    held = [f"k{i}" for i in range(10)] + ["a", "b"]  # alive while the table borrows them, as a window's
    results = []
    # an array; a list looked up a chunk at a time (a large table), and whole (a small one)
    for keys, chunked_from in ((object_array(batch), 0), (batch, 0), (batch, len(held) + 1)):
        monkeypatch.setattr(key_table, "CHUNKED_LOOKUP_KEYS", chunked_from)
        table = KeyTable.new(0)
        assert table.add(held)
        table.number(object_array(["a", "b"]))  # a batch the table held: the next one is looked up first
        numbers, new = table.number(keys, numbered)
        results.append((numbers.tolist(), new.tolist()))
        table.confirm(len(new))
        # a null key refuses the batch; numbered at once (most keys of the last batch were new), the table
        # took it, the only key it did not hold: `pending` tells the caller to drop the table
        assert table.number([*batch, None], str_only=True) is None and table.pending == 1
    assert results[0] == results[1] == results[2] == ([11, 12, 10, 13, 12, -1, 14, 10], ["x", "y", "z"])


def test_a_large_table_that_holds_most_of_a_list_numbers_the_keys_it_lacks_chunk_by_chunk_as_one_batch(
    monkeypatch,
) -> None:
    monkeypatch.setattr(key_table, "LOOKUP_CHUNK", 3)
    # new keys in several chunks, one ("x") again in a later chunk, and a None key
    batch = ["a", "x", "b", "c", None, "y", "x", "a", "z"]
    held = [f"k{i}" for i in range(10)] + ["a", "b", "c"]  # alive while the table borrows them
    results = []
    # a list looked up a chunk at a time (a large table), and whole (a small one); an array, whole
    for keys, chunked_from in ((batch, 0), (batch, len(held) + 1), (object_array(batch), 0)):
        monkeypatch.setattr(key_table, "CHUNKED_LOOKUP_KEYS", chunked_from)
        table = KeyTable.new(0)
        assert table.add(held)
        table.number(object_array(["a", "b"]))  # a batch the table held: the next one is looked up first
        numbers, new = table.number(keys)
        results.append((numbers.tolist(), new.tolist(), table.pending))
        table.confirm(len(new))
        assert table.lookup(["z", "x", "k0"]).tolist() == [15, 13, 0]
    expected = ([10, 13, 11, 12, -1, 14, 13, 10, 15], ["x", "y", "z"], 3)  # a None key: -1, not added
    assert results[0] == results[1] == results[2] == expected


def mostly_missing_table(held: list) -> KeyTable:
    """A table of `held` (alive while it borrows them, as a window's), then of "p", "q", "r", a batch new to
    it: the next batch is numbered at once, not looked up first."""
    table = KeyTable.new(0)
    assert table.add(held)
    table.number(object_array(["p", "q", "r"]))
    table.confirm(3)
    return table


def test_a_large_table_numbers_a_list_of_mostly_new_keys_a_chunk_at_a_time_as_it_numbers_their_array(
    monkeypatch,
) -> None:
    monkeypatch.setattr(key_table, "LOOKUP_CHUNK", 3)
    batch = ["x", "b", "y", "x", None, "z", "y", "w", "a"]
    held = ["a", "b"]  # alive while the table borrows them, as a window's
    results = []
    # a list numbered a chunk at a time (a large table), and whole (a small one); an array, whole
    for keys, chunked_from in ((batch, 0), (batch, len(held) + 1), (object_array(batch), 0)):
        monkeypatch.setattr(key_table, "CHUNKED_LOOKUP_KEYS", chunked_from)
        table = mostly_missing_table(held)
        numbers, new = table.number(keys)
        results.append((numbers.tolist(), new.tolist(), table.pending))
        table.confirm(len(new))
        assert table.lookup(["w", "x", "q"]).tolist() == [8, 5, 3]
        assert table.number([*batch, "s"], str_only=True, none_keys=True)[1].tolist() == ["s"]
    expected = ([5, 1, 6, 5, -1, 7, 6, 8, 0], ["x", "y", "z", "w"], 4)  # a None key: -1, not added
    assert results[0] == results[1] == results[2] == expected


def test_a_large_table_numbers_only_the_keys_asked_for_of_a_list_of_mostly_new_keys_a_chunk_at_a_time(
    monkeypatch,
) -> None:
    monkeypatch.setattr(key_table, "LOOKUP_CHUNK", 3)
    batch = ["x", "b", "y", "x", "v", "z", "y", "w", "a"]
    numbered = np.array([1, 1, 0, 1, 0, 0, 1, 1, 1], bool)  # a chunk ("x", "v", "z") of one key asked for
    held = ["a", "b"]  # alive while the table borrows them, as a window's
    results = []
    # a list numbered a chunk at a time (a large table), and whole (a small one)
    for chunked_from in (0, len(held) + 1):
        monkeypatch.setattr(key_table, "CHUNKED_LOOKUP_KEYS", chunked_from)
        table = mostly_missing_table(held)
        numbers, new = table.number(batch, numbered, str_only=True)
        results.append((numbers.tolist(), new.tolist(), table.pending))
        table.confirm(len(new))
        assert table.lookup(["y", "v", "z"]).tolist() == [6, -1, -1]  # not asked for: not added
        # a None key asked for refuses the batch
        assert table.number([*batch, None], np.append(numbered, True), str_only=True) is None
    expected = ([5, 1, -1, 5, -1, -1, 6, 7, 0], ["x", "y", "w"], 3)
    assert results[0] == results[1] == expected


def test_a_table_takes_str_keys_only() -> None:
    table = KeyTable.new(0)
    assert not table.add(["a", 1])
    assert table.size == 0
    assert table.lookup(["a"]).tolist() == [-1]


def test_numbering_by_first_appearance_starts_at_first() -> None:
    numbers, distinct = number_by_first_appearance(["q", "p", "q", "r"], 5)
    assert numbers.tolist() == [5, 6, 5, 7]
    assert distinct.tolist() == ["q", "p", "r"]


def live_window() -> WindowRows:
    return WindowRows(("q", "q"))  # int64 columns, as a count's: its rows never die


# What a window's users do to it: the fused pass numbers a batch's keys and appends the new ones (or
# plans and then runs node by node, appending nothing); the count's loop appends a key at a time through
# the index, keys of any type; a restore loads a base.
KEYS = st.sampled_from(["a", "b", "c", "d", "é", "f"])
OPERATIONS = st.one_of(
    st.tuples(st.just("batch"), st.lists(KEYS, max_size=8)),
    st.tuples(st.just("abandoned batch"), st.lists(KEYS, max_size=8)),
    st.tuples(st.just("append"), KEYS | st.sampled_from([7, ("t", 1)])),
    st.tuples(st.just("batch with a null key"), st.lists(KEYS, max_size=4)),
    st.tuples(st.just("batch with an unhashable key"), st.lists(KEYS, max_size=4)),
)


@pytest.mark.parametrize("with_table", [True, False], ids=["table", "dict only (no pandas)"])
@settings(max_examples=150, deadline=None)
@given(operations=st.lists(OPERATIONS, max_size=12), probes=st.lists(KEYS | st.just(7), max_size=8))
def test_a_window_numbers_and_finds_keys_as_its_rows_say(with_table, operations, probes) -> None:
    with pytest.MonkeyPatch.context() as patch:
        if not with_table:
            patch.setattr(window_rows.KeyTable, "new", staticmethod(lambda size_hint: None))
        window_goes_through(operations, probes)


def window_goes_through(operations, probes) -> None:
    rows = live_window()
    model: dict = {}  # key -> row

    def check_numbering(keys):
        numbered = rows.number_keys(object_array(keys))
        if numbered is None:
            return None
        numbers, new = numbered
        expected_new = list(dict.fromkeys(key for key in keys if key not in model))
        assert new.tolist() == expected_new
        first = len(rows)
        assert numbers.tolist() == [
            model[key] if key in model else first + expected_new.index(key) for key in keys
        ]
        return new

    for operation, argument in operations:
        if operation == "batch":
            new = check_numbering(argument)
            rows.extend(new.tolist(), [np.ones(len(new), np.int64)] * 2)
            model.update((key, len(model)) for key in new.tolist())
        elif operation == "abandoned batch":
            check_numbering(argument)
        elif operation == "append":
            if argument not in model:
                model[argument] = len(model)
                row = len(rows)  # as the count's loop appends: not through `append`
                rows.index[argument] = row
                rows.key_column(1)[row] = argument
                for column in rows.columns:
                    column.append(1)
                rows.dirty.append(1)
        elif operation == "batch with a null key":
            assert rows.number_keys(object_array([*argument, None])) is None
        else:
            with pytest.raises(TypeError):
                rows.number_keys(object_array([*argument, ["unhashable"]]))
        assert rows.rows_of(probes).tolist() == [model.get(key, -1) for key in probes]
    assert rows.keys.tolist() == list(model)


def test_a_table_built_over_an_empty_window_catches_up_with_a_base_loaded_into_it() -> None:
    rows = live_window()
    rows.extend(["a", "b"], [np.ones(2, np.int64)] * 2)
    assert rows.rows_of(["b"]).tolist() == [1]
    saved = rows.base()
    again = live_window()
    assert again.rows_of(["a"]).tolist() == [-1]  # a table built over no rows
    again.load(saved, "w")
    assert again.rows_of(["b", "a", "c"]).tolist() == [1, 0, -1]


def test_an_object_array_holds_composite_keys_one_per_element() -> None:
    keys = [("a", 1), ("b", 2)]
    assert np.array(keys, dtype=object).shape == (2, 2)  # what np.array makes of them
    assert object_array(keys).shape == (2,)
    assert object_array(keys).tolist() == keys


def test_key_numbers_number_keys_in_order_of_first_appearance_in_a_table_then_in_a_dict_once_one_is_not_a_str():
    ids = KeyNumbers()
    assert ids.lookup(["a"]).tolist() == [-1]
    assert ids.number(["b", "a", "b"], True).tolist() == [0, 1, 0]
    assert ids.str_only()
    assert ids.number(["a", "c"], True).tolist() == [1, 2]
    assert ids.number([("t", 1), "c", ("t", 1)], False).tolist() == [3, 2, 3]  # from now on in a dict
    assert not ids.str_only()
    assert ids.number(["d"], True).tolist() == [4]
    assert ids.lookup(["c", "x", ("t", 1)]).tolist() == [2, -1, 3]
    assert ids.keys[: len(ids)].tolist() == ["b", "a", "c", ("t", 1), "d"]


def test_key_numbers_number_str_refuses_a_batch_with_a_new_key_that_is_not_a_str_and_numbers_nothing():
    ids = KeyNumbers()
    assert ids.number(["b", "a"], True).tolist() == [0, 1]
    # the last batch was all new: this one is numbered at once, refused after, the table built again
    assert ids.number_str(object_array(["x", "y", ("t", 1)])) is None
    assert ids.str_only() and len(ids) == 2
    assert ids.lookup(["a", "b", "x", ("t", 1)]).tolist() == [1, 0, -1, -1]
    assert ids.number_str(object_array(["a", "c", "a", "b"])).tolist() == [1, 2, 1, 0]
    assert ids.number_str(object_array(["c", "a"])).tolist() == [2, 1]
    # the table held all of the last batch: this one is looked up first, refused before any is numbered
    assert ids.number_str(object_array(["c", 7])) is None
    assert ids.number_str(object_array(["x", "b"])).tolist() == [3, 0]
    assert ids.keys[: len(ids)].tolist() == ["b", "a", "c", "x"]


@pytest.mark.parametrize("known", [False, True], ids=["numbered at once", "looked up first"])
def test_key_numbers_number_str_with_none_keys_numbers_a_none_key_minus_one_and_still_refuses_a_nan(known):
    """`none_keys`: a None key is numbered -1 and never added, the other keys as ever, whether the batch
    is numbered at once (the last batch's keys were all new) or looked up first; a NaN is still refused."""
    ids = KeyNumbers()
    assert ids.number_str(["a", "b"]).tolist() == [0, 1]
    if known:  # a batch of keys all held: the next is looked up first
        assert ids.number_str(["b", "a"]).tolist() == [1, 0]
    assert ids.number_str([None, "b", "new", None, "new"], none_keys=True).tolist() == [-1, 1, 2, -1, 2]
    assert ids.keys[: len(ids)].tolist() == ["a", "b", "new"]
    assert ids.number_str(["b", None]) is None  # without `none_keys`: refused
    assert ids.number_str(["b", float("nan"), None], none_keys=True) is None
    assert ids.str_only() and ids.lookup(["new", None, "a"]).tolist() == [2, -1, 0]


@pytest.mark.parametrize("held", [0, 3], ids=["numbered at once", "looked up first"])
def test_key_numbers_of_keys_not_known_to_be_str_are_told_by_the_table_or_refused(held) -> None:
    """`number_str` numbers a batch of str keys as `number` does, checking only the keys new to the table;
    a batch with a key that is not a str (or a null key) it leaves to `number`, which numbers every key of
    it in a dict, none twice and none lost."""
    ids = KeyNumbers()
    assert ids.number_str(["k0", "k1", "k2"][:held] or ["k0"]).tolist() == list(range(max(held, 1)))
    assert ids.number_str(["k1", "k9", "k1"]).tolist() == [1, len(ids) - 1, 1]
    assert ids.str_only()
    for refused in (["k0", 7, "k8"], ["k8", None]):
        assert ids.number_str(refused) is None
    n = len(ids)
    assert ids.number(["k0", 7, "k8", "k9"], False).tolist() == [0, n, n + 1, n - 1]
    assert not ids.str_only()
    assert ids.number_str(["k0"]) is None  # in a dict from now on
    held = ids.keys[: len(ids)].tolist()
    assert held[-2:] == [7, "k8"] and len(set(held)) == len(held)
