"""A key -> (value, timestamp) store in rows: the store of a table or a non-windowed aggregation, with batch
operations over numpy columns and an export in proportion to what changed.

Rows: a key gets a row when it first comes and keeps it (a deleted key's row is dead, `live` False, and
lives again when the key is put again), until the dead rows outnumber the live ones: an export then first
compacts the store (`SavedByRowParts.compact_if_due`), numbering the live rows again in order, and starts
a new generation of parts (one delta of every row), so that keys gone for good cost neither memory
nor export. A batch's keys are looked up at once (in a
`KeyTable` while they are str, nodes/key_table.py, else in a dict): a look-up gives the row, and the
values, timestamps, live and dirty flags are numpy columns (int64 values for a count, objects otherwise),
read and written by row a batch at a time, so that no Python object is made or touched per entry.

Saved form. The rows go to the groups in turn a block of B rows at a time: row r belongs to group
`(r // B) % G` (`row_groups`, `group_rows`), G the store's number of groups (`group_count`: one group per
MIN_GROUP_ROWS rows, a power of two up to GROUPS, so a small store, a window of a few hundred keys, writes a
part or two per export, not GROUPS; a store that grows past a bound writes its rows again as a new store
does, below, its old bases gone). B is BLOCK_ROWS for a window's rows (nodes/time_window_store.py), whose
bases hold no keys: a base reads its group's values a block at a time, and values made in row order (a
fold's aggregates, a batch's new rows) lie in that order in memory, which one row in G would read
scattered, a cache miss apiece. B is 1 for a store whose bases hold its keys: the key objects lie where the
records made them, in no row order, so blocks gain nothing there, and gathering objects by an index array
costs more than by a strided slice. An export writes one delta of the whole store,
`<prefix>.<n>` (n: the export's number), {"from": rows the previous export saw, "keys": the keys of the rows
added since, "rows": the rows changed, "columns": [values, timestamps, live] of those rows}: a key already
saved is named by its row, not written again. Each export also writes the bases of a few groups in turn,
`<prefix><group>.0`, {"at": the export's number, "size": rows then, "groups": G, "block": B,
"keys": the group's keys, "columns": their values, timestamps, live}: as many that a turn over every group
takes the exports in which about DELTA_RATIO times the store's rows change (and at most MAX_DELTAS
exports), so the groups' bases are spread over the exports instead of all rewritten in one; the delta
leaves out the rows of the groups whose bases it comes with. The first export to write any of a store's
rows (a new store, a new generation, or a store grown into more groups, whose bases and deltas hold its rows
by the old groups) writes them all in one delta, in row order, from row 0, and no base: the store's values
were mostly made, and lie in memory, in row order (a batch appends its new rows in order), of which every
group's base would read a block in G; the bases then follow in turn. A delta goes once every group's base
is as new. A part's keys
are a list, or for a store whose keys are all str, {"key_text": the keys joined by NUL, "key_count": how
many} in its place (`saved_row_keys`: pickling one string is one C pass, a list of them a step per key). An import
replays the parts in export order: a base sets its group's rows, a delta the rows it holds, and a catch-up
forgets the bases removed (its group has none until the next); every part
names its generation, and a catch-up that meets a newer one starts the store again from its parts. A part is
`(saved, [])` as the other stores' parts (nodes/store_log.py). `RowParts` keeps this history for any store
of numbered rows: a declared aggregation's without windows is saved the same way (`KeyedRows`,
nodes/declared_aggregations.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import repeat
from operator import is_, is_not
from typing import Any

import numpy as np

from .key_table import (
    SPARSE_TABLE,
    KeyTable,
    as_object_array,
    grown,
    grown_capacity,
    number_by_first_appearance,
    object_array,
    table_size,
)
from .store_log import MAX_DELTAS

GROUPS = 32  # the most groups of rows, based in turn
# Rows per group below which a store has fewer groups: every part costs its own pickling, name and digest.
MIN_GROUP_ROWS = 2048
# Rows that go to one group together in a store whose bases hold no keys (see `row_groups`, RowParts): a base
# reads them in memory order, a run long enough that the memory's prefetch pays, and many of them per group
# (MIN_GROUP_ROWS / BLOCK_ROWS), so that the groups stay alike in size.
BLOCK_ROWS = 256
# Rows of changes the deltas since the oldest base hold, per row of the store: a delta's row is a row number,
# a value, a timestamp and a flag, without its key, where a base writes the key too.
DELTA_RATIO = 4
# Dead rows below which no compaction runs: a compaction passes over every row and rewrites every base.
MIN_DEAD_ROWS = 4096
NO_TIME = int(np.iinfo(np.int64).min)  # a dead row's timestamp: below every record's
# Below this many keys a batch's look-ups and puts go key by key: numpy's cost per call outweighs a loop's.
FEW_KEYS = 32
_HOLE = object()  # a row's key while an import has not reached the part that names it
KEY_SEPARATOR = "\x00"  # between the str keys of a part's `key_text` (see `saved_row_keys`)


def group_count(size: int) -> int:
    """The groups of a store of `size` rows: a power of two, at most GROUPS, each of MIN_GROUP_ROWS rows or
    more (one for a smaller store)."""
    groups = 1
    while groups < GROUPS and size >= 2 * groups * MIN_GROUP_ROWS:
        groups *= 2
    return groups


def row_groups(rows: np.ndarray, groups: int, block: int) -> np.ndarray:
    """Per row number its group among `groups` (a power of two): the rows go to the groups in turn, `block`
    rows at a time."""
    return (rows if block == 1 else rows // block) & (groups - 1)


def present_groups(size: int, groups: int, block: int) -> int:
    """How many of `groups` groups hold rows among `size` rows (`row_groups`): the first ones, a block each
    at least."""
    return min(groups, -(-size // block))


def group_rows(group: int, size: int, groups: int, block: int) -> slice | np.ndarray:
    """The rows of `group` among `size` rows in `groups` groups of blocks of `block` rows (`row_groups`),
    ascending: a slice for one row a block or one group, else an index array."""
    if block == 1 or groups == 1:
        return slice(group, size, groups)
    starts = np.arange(group * block, size, groups * block)
    rows = (starts[:, None] + np.arange(block)).ravel()
    return rows[rows < size] if len(rows) and rows[-1] >= size else rows


def saved_row_keys(store: Any, rows: slice | np.ndarray) -> dict[str, Any]:
    """The keys of `rows` as a part saves them: `{"keys": their list}`, or where the store knows them all
    to be str (a store that has `str_keys()` says so) and none holds a NUL, `{"key_text": joined by NUL,
    "key_count": how many}`: one string pickles and loads in one C pass, a list of them one object at a
    time. A store whose `keys_apart` is true saves none: `{"keys": ()}`."""
    if getattr(store, "keys_apart", False):
        return {"keys": ()}
    str_keys = getattr(store, "str_keys", None)
    if str_keys is not None and str_keys() and type(rows) is slice:
        appended = getattr(store, "appended_key_text", None)
        text = None if appended is None else appended(rows)
        if text is not None:
            return {"key_text": text, "key_count": len(range(rows.start, rows.stop, rows.step or 1))}
    keys = store.keys[rows]
    return saved_keys(keys if type(keys) is list else keys.tolist(), str_keys is not None and str_keys())


def joins_keys(text: str, count: int) -> bool:
    """Whether `text` splits back into the `count` keys joined by NUL in it: no key holds a NUL."""
    return text.count(KEY_SEPARATOR) == count - 1


def saved_keys(keys: list, str_keys: bool) -> dict[str, Any]:
    """A list of keys as a part saves it (`saved_row_keys`); `str_keys`: the caller knows them all to be
    str (`loaded_row_keys` reads either form)."""
    if keys and str_keys:
        text = KEY_SEPARATOR.join(keys)
        if joins_keys(text, len(keys)):
            return {"key_text": text, "key_count": len(keys)}
    return {"keys": keys}


def loaded_row_keys(saved: dict[str, Any], name: str) -> list:
    """The keys a part saved (`saved_row_keys`)."""
    if "key_text" not in saved:
        return saved["keys"]
    keys = saved["key_text"].split(KEY_SEPARATOR)
    if len(keys) != saved["key_count"]:
        raise ValueError(f"state part {name!r}: {len(keys)} keys in its text, not {saved['key_count']}")
    return keys


class SavedByRowParts:
    """A store of numbered rows whose export history is its `parts` (a RowParts, below), and whose rows
    die: it has `live_row_mask()` (a numpy flag per row), `keep_rows(rows)` (the given rows, numbered
    again in order, and no other) and `clear_rows()` (no row)."""

    __slots__ = ()

    def export_parts(self, changed_only: bool) -> tuple[dict[str, Any], list[str]]:
        self.compact_if_due()
        return self.parts.export(self, changed_only)

    def compact_if_due(self) -> bool:
        """Keep only the live rows once the dead ones outnumber them (and MIN_DEAD_ROWS); the next export
        starts a new generation of parts. A compaction's pass over the rows follows at least as many
        deaths as there are live rows, so its cost per death is bounded."""
        live = self.live_row_mask()
        dead = self.size - int(np.count_nonzero(live))
        if dead <= max(MIN_DEAD_ROWS, self.size - dead):
            return False
        self.keep_rows(np.flatnonzero(live))
        self.parts.new_generation()
        return True

    def state_parts(self) -> dict[str, Any]:
        return self.parts.state_parts(self)

    def apply_parts(self, parts: Mapping[str, Any], removed: list[str]) -> None:
        self.parts.apply(self, parts, removed)


class NumberedRows:
    """What the stores of numbered rows share (KeyValueRows here, AggregateRows in
    nodes/declared_aggregations.py): keys by row, looked up a batch at a time in a `KeyTable` (`_table`;
    False once a key is not a str) or in a dict index built when first needed (`_index`)."""

    __slots__ = ()

    def _key_index(self) -> dict:
        if self._index is None:
            self._index = dict(zip(self.keys[: self.size], range(self.size), strict=True))
        return self._index

    def _add_keys(self, new_keys: list) -> None:
        """Name the rows `size..` (their columns already set) by `new_keys`."""
        self._hold_keys(new_keys)
        if self._index is not None and self._table is not False:
            self._index = None  # numbered by the table: built again when needed
        self.size += len(new_keys)

    def append_rows(self, keys: list) -> None:
        """Rows for `keys` (an import's rows not yet named): the key table and index are built again."""
        self._index, self._table = None, None
        self._append(keys)


class KeyValueRows(NumberedRows, SavedByRowParts):
    """key -> (value, timestamp) in rows (see above). `counts`: the values are int64 counts (0 in a row
    without entry), else any objects (None in a row without entry)."""

    def __init__(self, prefix: str = "kv", counts: bool = False) -> None:
        self.prefix = prefix
        self.counts = counts
        # per row its key, in an object array the cyclic collector does not scan (it scans a list's every
        # item after each micro-batch: a cache miss per key of a large store); rows `size..` hold None
        self.keys = np.empty(0, object)
        self.size = 0
        self.live_count = 0
        self.values = np.empty(0, np.int64 if counts else object)
        self.stamps = np.empty(0, np.int64)
        self.live = np.zeros(0, bool)
        self.dirty = np.zeros(0, bool)
        self._index: dict | None = None
        self._table: KeyTable | None | bool = None  # None: not built, False: a key is not a str
        # (first row, end row, their keys joined by NUL) of rows appended since the last export, joined as
        # they were numbered (see `appended_key_text`)
        self._key_texts: list[tuple[int, int, str]] = []
        self.parts = RowParts(prefix)

    # -- operations -----------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self.live_count

    def rows_for(self, keys: list) -> np.ndarray:
        """Per key its row, -1 for a None key; the other keys new to the store get rows, without entry, in
        order of first appearance."""
        rows = self._rows_by_table(keys) if self._table is not False else None
        if rows is None:
            index = self._key_index()
            rows = np.fromiter(map(index.get, keys, repeat(-1)), np.int64, len(keys))
            new = np.flatnonzero(rows < 0)
            if len(new):
                candidates = object_array(keys)[new]
                named = np.fromiter(map(is_not, candidates, repeat(None)), bool, len(new))
                if named.any():
                    numbers, new_keys = number_by_first_appearance(candidates[named].tolist(), self.size)
                    rows[new[named]] = numbers
                    added = new_keys.tolist()
                    index.update(zip(added, range(self.size, self.size + len(added)), strict=True))
                    self._append(added)
        return rows

    def _rows_by_table(self, keys: list) -> np.ndarray | None:
        """Per key its row through the KeyTable (-1 for None); None where a key is neither a str nor None:
        the table is then dropped and the store looks its keys up in a dict from now on. Only the keys new
        to the table are checked, as the table holds str keys only. The list of keys is given to the table
        as it is (a large table makes it an array a chunk at a time, `KeyTable.number`)."""
        table = self._key_table(keys)
        if table is None:
            return None
        rows, new_keys = table.number(keys)
        added = new_keys.tolist()
        missing = np.flatnonzero(rows < 0).tolist()  # a null-like key: None, or one the table cannot hold
        if set(map(type, added)) - {str} or any(keys[i] is not None for i in missing):
            self._table = False
            return None
        table.confirm(len(added))
        if added:
            self._note_key_text(self.size, added)
            self._append(new_keys)
        return rows

    def _note_key_text(self, first: int, keys: list) -> None:
        """Join the str keys of the rows `first..` as they are appended, while they are in the CPU's caches,
        for the next export's delta (`appended_key_text`): joined at the export, each key of a large store would
        be a cache miss again."""
        saved = self.parts.saved_rows
        text = KEY_SEPARATOR.join(keys)
        if not joins_keys(text, len(keys)):
            return  # a key holds a NUL: the export saves the list
        self._key_texts = [kept for kept in self._key_texts if kept[0] >= saved]
        self._key_texts.append((first, first + len(keys), text))

    def appended_key_text(self, rows: slice) -> str | None:
        """The keys of `rows` joined by NUL, when they were joined as they were appended (`_note_key_text`):
        the rows appended since the last export (a delta's); else None (a group's rows, a base's)."""
        if rows.step is not None:
            return None
        texts = [kept for kept in self._key_texts if kept[0] >= rows.start]
        if not texts or texts[0][0] != rows.start or texts[-1][1] != rows.stop:
            return None
        if any(before[1] != after[0] for before, after in zip(texts, texts[1:], strict=False)):
            return None
        return texts[0][2] if len(texts) == 1 else KEY_SEPARATOR.join(kept[2] for kept in texts)

    def _key_table(self, batch: Any = ()) -> KeyTable | None:
        """The KeyTable, built from the rows' keys at its first use (sized for them and the batch of keys
        `batch`, `table_size`); None once a key is not a str, or without pandas (the store then looks its
        keys up in a dict)."""
        if self._table is None:
            table = KeyTable.new(max(SPARSE_TABLE * table_size(batch, self.size), 2 * self.size))
            self._table = table if table is not None and table.add(self.keys[: self.size].tolist()) else False
        return self._table or None

    def rows_of(self, keys: list) -> np.ndarray:
        """Per key its row, -1 where the store has none (no row is added); an unhashable key raises
        TypeError."""
        table = self._key_table(keys)
        if table is not None:
            return table.lookup(keys)
        return np.fromiter(map(self._key_index().get, keys, repeat(-1)), np.int64, len(keys))

    def get_values(self, keys: list) -> tuple[list, bool]:
        """Per key its entry's value, None where it has none, and whether every key has an entry (a None
        key has none): gathered by row (a look-up of the batch and one pass over the values), no entry
        object made or read per key, and told from the rows, not by reading the values again."""
        if not self.size:
            return [None] * len(keys), not keys
        if len(keys) < FEW_KEYS:
            values = [None if row is None else self.value_at(row) for row in map(self.row_of, keys)]
            return values, not any(map(is_, values, repeat(None)))
        rows = self.rows_of(keys)
        found = not len(rows) or int(rows.min()) >= 0
        at = rows if found else np.maximum(rows, 0)
        values = self.values[at].tolist()
        held = self.live[at]
        every = found and bool(held.all())
        if not every:
            for i in np.flatnonzero(~held | (rows < 0)).tolist():
                values[i] = None
        return values, every

    def put_changes(self, keys: list, values: list, stamps: list) -> tuple[list, list[int] | None]:
        """A table's changes: put `(value, stamp)` per record as a loop would, in record order (keys may
        repeat, a None value deletes the entry), a record with a None key dropped. Returns per record kept
        the value its key held before it (None without entry), and the indices of the records kept (None:
        every one). A batch of fewer than `FEW_KEYS` goes key by key, without numpy's cost per call; a
        larger one is looked up at once and each distinct row written once. A store of objects only."""
        if len(keys) < FEW_KEYS:
            return self._put_few_changes(keys, values, stamps)
        rows = self.rows_for(keys)  # -1 for a None key
        kept = None
        if len(rows) and rows.min() < 0:
            keep = rows >= 0
            kept = np.flatnonzero(keep).tolist()
            values, stamps, rows = [values[i] for i in kept], [stamps[i] for i in kept], rows[keep]
        return (self._put_in_order(rows, values, stamps) if len(rows) else []), kept

    def _put_few_changes(self, keys: list, values: list, stamps: list) -> tuple[list, list[int] | None]:
        """`put_changes` key by key."""
        previous, kept = [], []
        for i, key in enumerate(keys):
            if key is None:
                continue
            row = self.row_for(key)
            previous.append(self.value_at(row))
            self.put_row(row, values[i], stamps[i])
            kept.append(i)
        return previous, None if len(kept) == len(keys) else kept

    def _put_in_order(self, rows: np.ndarray, values: list, stamps: list) -> list:
        """`put_changes` of records whose rows are `rows` (they may repeat); returns per record the value its
        row held before it."""
        assert not self.counts, "a store of counts has no values to replace"
        n = len(rows)
        order = np.argsort(rows, kind="stable")
        by_row = rows[order]
        first = np.empty(n, bool)
        first[:1] = True
        np.not_equal(by_row[1:], by_row[:-1], out=first[1:])
        last = np.empty(n, bool)
        last[:-1] = first[1:]
        last[-1:] = True
        new = object_array(values)[order]
        before = np.empty(n, object)
        before[1:] = new[:-1]  # a record after another of its row: that one's value
        first_rows = by_row[first]
        held = self.values[first_rows]
        held[~self.live[first_rows]] = None
        before[first] = held
        olds = np.empty(n, object)
        olds[order] = before
        self.put_rows(by_row[last], new[last], np.fromiter(stamps, np.int64, n)[order][last])
        return olds.tolist()

    def str_keys(self) -> bool:
        """So while the KeyTable numbers the keys: it holds str keys only, and a key that is not one drops
        it (`_rows_by_table`); rows loaded or numbered again build it again from their keys."""
        return isinstance(self._table, KeyTable)

    def row_of(self, key: Any) -> int | None:
        """The key's row (None without one), through the KeyTable while there is one: a dict index would be
        built again after every batch that adds keys (a table's value getter reads a key at a time)."""
        table = self._key_table()
        if table is not None:
            row = table.row(key) if type(key) is str else -1
            return None if row < 0 else row
        return self._key_index().get(key)

    def row_for(self, key: Any) -> int:
        """`rows_for` of one key, without numpy (for a batch of a few records): its row, -1 for None."""
        table = self._key_table() if type(key) is str else None
        if table is None:
            return int(self.rows_for([key])[0])
        row = table.row(key)
        if row < 0:
            row = self.size
            table.append(key)
            self._append([key])
        return row

    def value_at(self, row: int) -> Any:
        """Row `row`'s value, None without entry (a store of objects)."""
        return self.values[row] if self.live[row] else None

    def put_row(self, row: int, value: Any, stamp: int) -> None:
        """`put_rows` of one row of a store of objects, without numpy's cost per call."""
        live = value is not None
        self.live_count += live - bool(self.live[row])
        self.values[row] = value
        self.stamps[row] = stamp if live else NO_TIME
        self.live[row] = live
        self.dirty[row] = True

    def _append(self, new_keys: list | np.ndarray) -> None:
        """Rows without entry for `new_keys` (a table or index already numbered them)."""
        first, end = self.size, self.size + len(new_keys)
        self._reserve(end, len(new_keys))
        self.values[first:end] = 0 if self.counts else None
        self.stamps[first:end] = NO_TIME
        self.live[first:end] = False
        self.dirty[first:end] = False
        self._add_keys(new_keys)

    def _hold_keys(self, new_keys: list | np.ndarray) -> None:
        """Rows `size..` (reserved) named by `new_keys` (a list, or an object array as a KeyTable gives)."""
        self.keys[self.size : self.size + len(new_keys)] = as_object_array(new_keys)

    def live_row_mask(self) -> np.ndarray:
        return self.live[: self.size]

    def export_parts(self, changed_only: bool) -> tuple[dict[str, Any], list[str]]:
        """The parts (SavedByRowParts), then no key text kept for them (`_note_key_text`)."""
        try:
            return super().export_parts(changed_only)
        finally:
            self._key_texts = []

    def keep_rows(self, rows: np.ndarray) -> None:
        self.keys, self.values, self.stamps, self.live, self.dirty = (
            self.keys[rows],
            self.values[rows],
            self.stamps[rows],
            self.live[rows],
            self.dirty[rows],
        )
        self.size = len(rows)
        self.live_count = int(np.count_nonzero(self.live))
        self._index, self._table = None, None
        self._key_texts = []

    def clear_rows(self) -> None:
        self.keep_rows(np.zeros(0, np.int64))

    def _reserve(self, rows: int, added: int) -> None:
        """Room for `rows` rows, `added` of them a batch appended at once (`grown_capacity`)."""
        capacity = grown_capacity(rows, len(self.dirty), added)
        if capacity is None:
            return
        for name in ("keys", "values", "stamps", "live", "dirty"):
            setattr(self, name, grown(getattr(self, name), self.size, capacity))

    def get_rows(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row its value and timestamp (a row without entry: 0 or None, and NO_TIME)."""
        return self.values[rows], self.stamps[rows]

    def put_rows(self, rows: np.ndarray, values: list | np.ndarray, stamps: np.ndarray) -> None:
        """Put an entry per row (distinct rows): a None value (of an object store) deletes its entry."""
        if self.counts:
            live = np.ones(len(rows), bool)
        else:
            values = object_array(values)
            live = np.fromiter(map(is_not, values, repeat(None)), bool, len(rows))
        was = self.live[rows]
        self.live_count += int(np.count_nonzero(live)) - int(np.count_nonzero(was))
        self.values[rows] = values
        self.stamps[rows] = np.where(live, stamps, NO_TIME)
        self.live[rows] = live
        self.dirty[rows] = True

    def get(self, key: Any) -> tuple[Any, int] | None:
        row = self.row_of(key)
        if row is None or not self.live[row]:
            return None
        value = self.values[row]
        return (int(value) if self.counts else value), int(self.stamps[row])

    def get_list(self, keys: list) -> list:
        return list(map(self.get, keys))

    def items(self) -> Iterator[tuple[Any, tuple[Any, int]]]:
        live = self.live[: self.size].tolist()
        values, stamps = self.values[: self.size].tolist(), self.stamps[: self.size].tolist()
        keys = self.keys[: self.size].tolist()
        for key, value, stamp, alive in zip(keys, values, stamps, live, strict=True):
            if alive:
                yield key, (value, stamp)

    # -- saving (RowParts) ----------------------------------------------------------------------------------

    def saved_columns(self, rows: Any) -> list:
        """The saved form of rows' entries (rows: an index array or a slice)."""
        return [self.values[rows], self.stamps[rows], self.live[rows]]

    def load_columns(self, rows: Any, columns: list, name: str) -> None:
        if len(columns) != 3:
            raise ValueError(f"state part {name!r}: {len(columns)} columns, not 3")
        self.values[rows], self.stamps[rows], self.live[rows] = columns

    def loaded(self) -> None:
        """An import or catch-up wrote the rows directly."""
        self._index, self._table = None, None
        self._key_texts = []
        self.dirty[: self.size] = False
        self.live_count = int(np.count_nonzero(self.live[: self.size]))


class RowParts:
    """The export history of a store of numbered rows (see above): which export each group's base was
    written in, and the deltas kept. The store has `size`, `keys` (per row), `dirty` (a numpy flag per
    row, cleared here once exported), and `saved_columns(rows)`, `load_columns(rows, columns, name)`,
    `append_rows(keys)` and `loaded()`; a store whose rows die (SavedByRowParts) also `clear_rows()`, for a
    catch-up that meets a newer generation. A store whose `keys_apart` is true saves its keys in parts of its
    own, which a load applies first (a window's rows, whose keys never change: nodes/time_window_store.py):
    its bases and deltas hold none. `in_blocks`: the rows go to the groups BLOCK_ROWS at a time, for a
    store whose values lie in row order and whose bases hold no keys (see above); else one at a time."""

    def __init__(self, prefix: str, in_blocks: bool = False) -> None:
        self.prefix = prefix
        self.block = BLOCK_ROWS if in_blocks else 1  # rows that go to a group together (`row_groups`)
        self.generation = 0  # the store's numbering of rows (a compaction numbers them again)
        self.exported = 0  # the number of the last export
        self.saved_rows = 0  # rows the last export (or import) saw
        self.groups = 1  # of rows (`row_groups`; `group_count` of the size the bases saw)
        self.base_at = [0] * GROUPS  # per group: the export of its base (0: none, its rows are in deltas)
        self.deltas: set[int] = set()  # the exports whose deltas are kept
        self.next_base = 0  # the group whose base is written next
        # the groups whose bases are due (see `_next_bases`): less than one after every export (an export adds
        # at most present groups * (1 / DELTA_RATIO + 1 / MAX_DELTAS) and takes the whole ones). No part holds
        # it, so a catch-up or an import does not restore it: such a copy's bases run at most one group ahead
        # of or behind the exporting copy's, which changes the parts it names, never what they load to nor the
        # bound on the deltas kept (counted from the deltas themselves, which a catch-up restores)
        self._base_credit = 0.0
        self._rebase_all = False  # the next export writes every base (a new generation)

    def _base(self, store: Any, group: int, at: int, groups: int) -> dict[str, Any]:
        rows = group_rows(group, store.size, groups, self.block)
        return {
            "generation": self.generation,
            "at": at,
            "size": store.size,
            "groups": groups,
            "block": self.block,
            **saved_row_keys(store, rows),
            "columns": store.saved_columns(rows),
        }

    def new_generation(self) -> None:
        """The store's rows were numbered again: the export history so far names rows that are gone, and
        the next export writes every row again (one delta; a store left without rows: group 0's base)."""
        self.generation += 1
        self._forget_history()
        self._rebase_all = True

    def _forget_history(self) -> None:
        self.base_at = [0] * GROUPS
        self.deltas = set()
        self.saved_rows = 0
        self._base_credit = 0.0
        self.next_base = 0

    def _name(self, group: int) -> str:
        return f"{self.prefix}{group}.0"

    def _groups(self, store: Any) -> range:
        """The groups that have rows; a compacted store without rows keeps group 0's base, which names the
        generation (a copy catching up must learn that its rows are gone)."""
        present = present_groups(store.size, self.groups, self.block)
        return range(present if store.size or not self.generation else 1)

    def export(self, store: Any, changed_only: bool, pickled: Any = None) -> tuple[dict[str, Any], list[str]]:
        """Parts new or changed since the last export (unless `changed_only`, every base and no delta, or one
        delta of every row where no part holds any yet), and the names of every current part. `pickled`:
        a window's chunks of pickled values (WindowRows.take_pickled_values), which its delta's columns save
        (`store.saved_columns(rows, pickled)`); its bases gather every value."""
        self.exported += 1
        export = self.exported
        parts: dict[str, Any] = {}
        if group_count(store.size) != self.groups:  # grown past a bound: every row in a new group
            # the bases and deltas kept hold the rows by the old groups: the rows are written again as a new
            # store's, one delta of them all in row order (a base per group would read a block in G of them),
            # and the bases follow in turn
            self.groups = group_count(store.size)
            self._forget_history()
        # no part of the store's rows written yet (a new store, a new generation, new groups): one delta of
        # every row
        fresh = store.size and not self.saved_rows and not self.deltas and not any(self.base_at)
        groups = self._groups(store)
        changed = np.arange(store.size) if fresh else np.flatnonzero(store.dirty[: store.size])
        whole = not changed_only or self._rebase_all or (store.size and not self.saved_rows)
        self._rebase_all = False
        if fresh:  # the delta holds every row, read in row order (see above), where bases read a block in G
            rebased = []
        elif whole:
            rebased = list(groups)
        else:
            rebased = self._next_bases(len(changed), store.size)
        for group in rebased:
            parts[self._name(group)] = (self._base(store, group, export, self.groups), [])
            self.base_at[group] = export
        if rebased:  # their bases hold their rows: the delta leaves them out
            unbased = np.ones(self.groups, bool)
            unbased[rebased] = False
            changed = changed[unbased[row_groups(changed, self.groups, self.block)]]
        # the delta, unless every group's base holds it
        if min((self.base_at[g] for g in groups), default=export) < export and (
            len(changed) or store.size > self.saved_rows
        ):
            columns = (
                store.saved_columns(changed) if pickled is None else store.saved_columns(changed, pickled)
            )
            delta = {
                "generation": self.generation,
                "from": self.saved_rows,
                **saved_row_keys(store, slice(self.saved_rows, store.size)),
                "rows": changed,
                "columns": columns,
            }
            parts[f"{self.prefix}.{export}"] = (delta, [])
            self.deltas.add(export)
        store.dirty[: store.size] = False
        self.saved_rows = store.size
        self._drop_deltas(groups)
        return parts, self._part_names(groups)

    def _next_bases(self, changed: int, size: int) -> list[int]:
        """The groups whose bases this export writes, in turn: a turn over the groups per DELTA_RATIO times
        the store's rows of changes (`_base_credit` counts the groups due), and once MAX_DELTAS deltas are
        kept, a turn per MAX_DELTAS exports at least; the deltas kept never outnumber twice MAX_DELTAS."""
        present = present_groups(size, self.groups, self.block)
        if not changed or not present:
            return []
        self._base_credit += present * changed / (DELTA_RATIO * size)
        if len(self.deltas) >= MAX_DELTAS:
            self._base_credit += present / MAX_DELTAS
        count = min(int(self._base_credit), present)
        self._base_credit = min(self._base_credit - count, present)
        turn = [(self.next_base + i) % present for i in range(present)]
        base_at = [self.base_at[g] for g in range(present)]
        for group in turn[:count]:
            base_at[group] = self.exported
        while count < present and sum(n > min(base_at) for n in self.deltas) >= 2 * MAX_DELTAS:
            base_at[turn[count]] = self.exported
            count += 1
        self.next_base = (self.next_base + count) % present
        return turn[:count]

    def _drop_deltas(self, groups: range) -> None:
        oldest = min((self.base_at[g] for g in groups), default=self.exported)
        self.deltas = {n for n in self.deltas if n > oldest}

    def _part_names(self, groups: range) -> list[str]:
        bases = [self._name(g) for g in groups if self.base_at[g]]
        return bases + [f"{self.prefix}.{n}" for n in sorted(self.deltas)]

    def state_parts(self, store: Any) -> dict[str, Any]:
        """A base per group, leaving the export history alone (a snapshot)."""
        groups = group_count(store.size)
        present = range(
            present_groups(store.size, groups, self.block) if store.size or not self.generation else 1
        )
        return {self._name(g): (self._base(store, g, self.exported, groups), []) for g in present}

    def apply(self, store: Any, parts: Mapping[str, Any], removed: list[str]) -> None:
        """Catch the store up with the parts exported since (every current part for an import): replayed
        in export order."""
        if self.saved_rows != store.size or store.dirty[: store.size].any():
            raise ValueError(f"store {self.prefix!r}: changes not exported, cannot catch up")
        self._start_generation_of(store, parts)
        for name in removed:  # a base goes when the store's groups change: its group has none until another
            group, export = self._part_of(name, None)
            if group is None:
                self.deltas.discard(export)
            else:
                self.base_at[group] = 0
        steps = []
        end = store.size
        for name, (saved, _) in parts.items():
            group, export = self._part_of(name, saved)
            part_keys = loaded_row_keys(saved, name)
            steps.append((export, group, saved, part_keys, name))
            end = max(end, saved["from"] + len(part_keys)) if group is None else max(end, saved["size"])
        if end > store.size:
            store.append_rows([_HOLE] * (end - store.size))
        keys = store.keys
        keys_apart = getattr(store, "keys_apart", False)
        for export, group, saved, part_keys, name in sorted(
            steps, key=lambda step: (step[0], step[1] is not None)
        ):
            if group is None:
                first = saved["from"]
                keys[first : first + len(part_keys)] = object_array(part_keys)
                rows = np.asarray(saved["rows"], np.int64)
                self.deltas.add(export)
            else:
                rows = group_rows(group, saved["size"], self._groups_of(saved, group, name), self.block)
                if not keys_apart:
                    keys[rows] = object_array(part_keys)
                self.base_at[group] = export
            store.load_columns(rows, saved["columns"], name)
            self.exported = max(self.exported, export)
        if any(map(is_, keys[: store.size], repeat(_HOLE))):
            raise ValueError(f"store {self.prefix!r}: the state parts leave rows without a key")
        store.loaded()
        self.saved_rows = store.size
        self.groups = group_count(store.size)  # as the exporting copy's after its export, based or not
        groups = self._groups(store)
        self._drop_deltas(groups)
        if groups:
            self.next_base = min(groups, key=lambda g: self.base_at[g])

    def _groups_of(self, saved: dict[str, Any], group: int, name: str) -> int:
        """The store's groups as a base saw them (all bases current at once saw the same: a store that
        changes its groups drops its bases, and writes them again in turn), now the store's. Its rows' blocks
        must be this store's (`row_groups`): the deltas that follow leave out rows by them."""
        groups = saved.get("groups")
        if type(groups) is not int or not 0 <= group < groups <= GROUPS:
            raise ValueError(f"state part {name!r}: group {group} of {groups!r} groups")
        if saved.get("block") != self.block:
            raise ValueError(f"state part {name!r}: blocks of {saved.get('block')!r} rows, not {self.block}")
        self.groups = groups
        return groups

    def _start_generation_of(self, store: Any, parts: Mapping[str, Any]) -> None:
        """Check that the parts are of one generation, this one or a newer one; a newer one (the exporting
        copy compacted its rows since) replaces the store's rows and history with its own."""
        generations = {saved["generation"] for saved, _ in parts.values()}
        if not generations:
            return
        if len(generations) > 1 or min(generations) < self.generation:
            raise ValueError(
                f"store {self.prefix!r}: state parts of generations {sorted(generations)}, "
                f"the store is at {self.generation}"
            )
        newest = generations.pop()
        if newest > self.generation:
            store.clear_rows()
            self._forget_history()
            self.generation = newest

    def _part_of(self, name: str, saved: Any) -> tuple[int | None, int]:
        """(group, export) of a part: a delta's group is None."""
        stem, _, index = name.rpartition(".")
        if stem == self.prefix and index.isdigit():
            return None, int(index)
        group = stem[len(self.prefix) :]
        if not stem.startswith(self.prefix) or not group.isdigit() or index != "0":
            raise ValueError(f"state part {name!r} is not a part of store {self.prefix!r}")
        return int(group), 0 if saved is None else saved["at"]
