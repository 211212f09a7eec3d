"""One window's entries of a window store in rows: a key -> row index and a column per field.

A row is appended when a key first enters the window and keeps its number while the window lives. A put
flags its row in `dirty` (a bytearray), so a state export finds the rows changed in one vectorized pass and
saves their numbers and their fields gathered from the columns (an int64 column as an array: copied, not
pickled one object at a time; a list column as a tuple of its values), plus each new key's name once.
Keeping an entry as a tuple per key instead costs an export several cache misses per changed entry (the
tuple, its key, its int objects, scattered over the heap), which dominates an export of a large window.
A list column is not packed into an int64 array even when it holds ints: checking that they are all ints
(not bools) and packing costs more than pickling small ints. Stores whose values are ints by construction
have int64 columns instead: a count's, and a final suppress buffer fed by a count (its new, old and prior
values). A final suppress buffer fed by a declared aggregation holds its values, dicts of the same numeric
fields, in `StructColumn`s: a numpy array per field and a null mask, saved as arrays; a dict is made when a
value is read (an entry leaving the buffer).

A row whose entry left is dead: its first field is None and the index no longer names it; should the key
come back it gets a new row. Dead rows stay until the window goes, so that row numbers agree between the
copies of a store that the parts keep in step. A store whose first column is an int64 array (a count, a
final suppress buffer's) has no dead rows: its keys are distinct and a key's row is where it stands.

The index is built at its first use, not when rows are loaded or appended to a store nobody has looked up:
a final suppress buffer whose rows are its count's (nodes/final_window_count.py) is not looked up, and a
copy of a task catching up with another's exports does not look anything up until it processes.
A batch of keys is looked up (`rows_of`, `number_keys`) in a `KeyTable` instead when the rows are live and
the keys str (nodes/key_table.py): one C loop, where the index costs a call and several cache misses per key.

Saved form of a suppress buffer's window (a part of the store log, nodes/store_log.py; an aggregation's
window is saved by row groups instead, `saved_columns` and `load_columns`, nodes/time_window_store.py): a base `{"keys", "columns"}` holds every row; a
delta `{"from", "keys", "rows", "columns"}` holds the keys of the rows appended since the previous export
(rows `from`.. on), then the numbers of every row put since, in order, and their fields by column (of a
fixed column, set when a row is appended, only the new rows' values). An int64 column whose saved rows (more
than one) all hold one value saves that value alone, a `sparse` list column (a buffer's headers) whose every
row holds None saves None: a load gives each row the value. A store's `unsaved` columns are left
out: their owner derives them after a load (`fill`), as a final suppress buffer takes its new values from
its aggregation's store (nodes/time_ordered_buffer.py). Keys are saved as pickled lists, a
tuple of their bytes (`key_chunks`): a caller that appends many keys at once while they are in the CPU's
caches pickles them then (the fused count + final suppress, once for both stores), the others are pickled
by the save that first needs them; a base reuses every chunk, so a key is pickled once while its window
lives: pickling the keys at the export, from memory, dominates the export of a large window.

An aggregation's values (a list column, the first) are pickled the same way where a caller makes many of
them at once: a put may give them pickled in chunks of (rows, values) (`add_pickled_values`, the fused
user aggregate pickling what its fold just made), which flags its rows `hot` instead of `dirty`; an export
by row groups saves a delta's first column as those chunks, then the values of its other rows and of the
rows flagged in `dirty` (put otherwise, before or after their chunk), gathered: a load applies them in that
order, so each row takes its last value (`saved_columns`, `load_columns`). A delta of every row (a window
whose rows grew into more groups) gathers the rows not put since the previous export too. A base gathers
every value as ever.
"""

from __future__ import annotations

import io
import pickle
from array import array
from collections import deque
from itertools import repeat
from operator import is_, itemgetter
from typing import Any

import numpy as np

from .key_table import (
    KeyTable,
    as_object_array,
    grown,
    grown_capacity,
    number_by_first_appearance,
    table_size,
)

# A column is a list (any value), an array("q") (int64: timestamps, counts, sizes, sequence numbers), or a
# StructColumn (values that are dicts of the same numeric fields: its kind is their StructFields).
INT64 = "q"
OBJECT = ""
# A list column's values for `put_rows` that the rows hold already (`WindowRows.place`).
IN_PLACE = object()


class WindowRows:
    """The rows of one window; `kinds` says per column whether it is an int64 array or a list. The last
    `fixed` columns are set when a row is appended and never change: a delta holds them for its new rows
    only."""

    __slots__ = (
        "_index",
        "_table",
        "_keys",
        "columns",
        "changing",
        "unsaved",
        "sparse",
        "dirty",
        "saved",
        "key_chunks",
        "hot",
        "pickled_values",
        "pickled_rows",
    )

    def __init__(
        self,
        kinds: tuple[str, ...],
        fixed: int = 0,
        unsaved: tuple[int, ...] = (),
        sparse: tuple[int, ...] = (),
    ) -> None:
        self._index: dict[Any, int] | None = None  # key -> its live row; None: not built (see `index`)
        # the keys' rows for look-ups by batch (see `rows_of`); None: not built, False: not for this window
        self._table: KeyTable | None | bool = None
        # per row its key (rows `len(self)..`: None), in an object array the cyclic collector does not scan
        # (it scans a list's every item after each micro-batch: a cache miss per key of a large window)
        self._keys = np.empty(0, object)
        self.columns: list[Any] = [_new_column(kind) for kind in kinds]
        self.changing = len(kinds) - fixed  # the columns before it can change
        if any(n >= self.changing for n in sparse):
            raise ValueError("a sparse column is a changing one")
        # columns the saved form leaves out: their owner derives them from another store after a load, or
        # never reads them (a load leaves the rows' values as they were, and gives new rows a placeholder:
        # 0 or None)
        self.unsaved = unsaved
        # list columns that mostly hold None in every row (a buffer's headers): saved as None while they do,
        # and held as None instead of a list (`_densify`): a list of a None per row is a container that the
        # cyclic collector scans item by item after each micro-batch
        self.sparse = sparse
        for n in sparse:
            self.columns[n] = None
        # by row: 1 where put since the last export (0 else, so numpy views it as bools: np.flatnonzero
        # of bools runs without a branch per row, of uint8 with one, mispredicted at scattered puts); its
        # length is the rows'
        self.dirty = bytearray()
        self.saved = 0  # rows the last export (or import) saw: later ones are new to the store's copies
        # (first row, end row, the pickled list of their keys), ascending, not overlapping: what saves of
        # those rows reuse (see `_saved_keys`)
        self.key_chunks: list[tuple[int, int, bytes]] = []
        # by row: 1 where a put since the last export gave the first column's value pickled already, in
        # `pickled_values`, and left `dirty` as it was (None: no such row); may be shorter than the rows
        self.hot: bytearray | None = None
        # (rows as an int64 array, the pickled list of their first column's values), in the order they were
        # put: a caller that makes the values pickles them while they are in the CPU's caches (the fused
        # user aggregate), where an export would read each one from memory (see `take_pickled_values`)
        self.pickled_values: list[tuple[array, bytes]] = []
        self.pickled_rows = 0  # the rows the chunks hold, one per value

    def __len__(self) -> int:  # rows, dead ones too: what a base saves
        return len(self.dirty)

    @property
    def keys(self) -> np.ndarray:
        """The keys by row, an object array (a view of the key column: read it before the window grows)."""
        return self._keys[: len(self.dirty)]

    def key_column(self, rows: int) -> np.ndarray:
        """The key column, with room for `rows` rows after `len(self)`: for a loop that appends rows one by
        one, writing row `len(self)`'s key there before flagging the row (`dirty.append`). The column moves
        only when it grows: a loop that appends a row per record at most, and reserves the records it has
        left each time it takes a window's column, finds a column taken again in that loop where it was."""
        size = len(self.dirty)
        capacity = grown_capacity(size + rows, len(self._keys))
        if capacity is not None:
            self._keys = grown(self._keys, size, capacity)
        return self._keys

    def _hold_keys(self, keys: Any) -> None:
        """Keys (a list or an object array) for the rows `len(self)..` that the caller appends next: a
        batch of them, which the column makes room for as a batch (`grown_capacity`)."""
        size = len(self.dirty)
        capacity = grown_capacity(size + len(keys), len(self._keys), len(keys))
        if capacity is not None:
            self._keys = grown(self._keys, size, capacity)
        self._keys[size : size + len(keys)] = as_object_array(keys)

    @property
    def index(self) -> dict[Any, int]:
        """key -> its live row, built from the rows at the first use since they were loaded."""
        if self._index is None:
            size = len(self)
            self._index = dict(zip(self.keys.tolist(), range(size), strict=True))  # the last row wins
            self._forget_dead(range(size), self.columns[0])
        return self._index

    def rows_of(self, keys: list, size_hint: int = 0) -> np.ndarray:
        """Per key its live row, -1 where it has none; an unhashable key raises TypeError."""
        table = self._key_table(size_hint, keys)
        return table.lookup(keys) if table else self._indexed_rows(keys)

    def number_keys(
        self, keys: Any, size_hint: int = 0, numbered: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Per key its live row, or for a key without one `len(self)` + the rank of its first appearance
        among those; and those keys in that order: the rows to append next, by `extend`. `keys`: a list or
        an object array (a list is looked up as KeyTable.number makes it one); those keys: an object array.
        `numbered`: a mask of the keys to number (None: every key), the others numbered
        -1 and not appended. None when one of those keys is not a str (a null key too: nothing is numbered
        then, and the key table stays, unless it had numbered keys before it met that one); an unhashable
        key raises TypeError, and the key table is built again at its next use."""
        table = self._key_table(size_hint, keys)
        if table:
            try:
                numbered_keys = table.number(keys, numbered, str_only=True)
            except TypeError:
                self._table = None  # some keys numbered, none to be appended: built again at its next use
                raise
            if numbered_keys is None and table.pending:
                self._table = None  # keys numbered that the window will not append
            return numbered_keys
        keys = as_object_array(keys)
        number = self._indexed_rows(keys)
        unnumbered = number < 0
        if numbered is not None:
            number[~numbered] = -1
            unnumbered &= numbered
        numbers, new_keys = number_by_first_appearance(keys[unnumbered], len(self))
        if len(new_keys) and set(map(type, new_keys)) != {str}:
            return None
        number[unnumbered] = numbers
        return number, new_keys

    def _indexed_rows(self, keys: Any) -> np.ndarray:
        """Per key its live row by the index, -1 where it has none: a look-up per key."""
        return np.fromiter(map(self.index.get, keys, repeat(-1)), np.int64, len(keys))

    def _key_table(self, expected: int, batch: Any) -> KeyTable | None:
        """The window's `KeyTable`, brought up to date with the rows appended since its last use (by any
        path: a live window's rows never change once appended), built at the first use, sized for
        `expected` keys or for its rows and the batch of keys `batch` (`table_size`: a table that grows
        rehashes every key it holds); None when the window cannot have one (see key_table.py) or pandas
        is missing. A table whose pending keys were not appended (a batch planned, then run node by node)
        is built again. A window that can hold dead rows has one while none is: a row that dies (its key
        gone from the index) drops it for good."""
        table = self._table
        if table and not self.all_live():
            table = self._table = False
        if table is None or (table and table.pending):
            hint = max(expected, table_size(batch, len(self)))
            table = self._table = (KeyTable.new(hint) or False) if self.all_live() else False
        if table and table.size < len(self) and not table.add(self.keys[table.size :]):
            table = self._table = False  # a key that is not a str
        return table or None

    def take_table(self, table: KeyTable) -> None:
        """A new KeyTable that numbered the keys this window, empty and live, is to append next, in that
        order (pending in it, confirmed by `extend`): the window's table, for the look-ups to come."""
        if len(self) or self._table is not None or not self.rows_live or table.size:
            raise ValueError("a key table is taken by an empty window of live rows only")
        self._table = table

    @property
    def rows_live(self) -> bool:
        """Whether no row can be dead: the first column is int64, which cannot hold None."""
        return type(self.columns[0]) is array

    def all_live(self) -> bool:
        """Whether no row is dead (the index built if need be, for a window that can hold dead rows)."""
        return self.rows_live or len(self.index) == len(self)

    def append(self, key: Any, fields: tuple) -> None:
        """A row for `key` (new to the window, or back after its entry left)."""
        row = len(self)
        self.index[key] = row
        self.key_column(1)[row] = key
        for n in self.sparse:  # a sparse column held as None: its list, for a value that is not None
            if self.columns[n] is None and fields[n] is not None:
                self.columns[n] = [None] * row
        for column, value in zip(self.columns, fields, strict=True):
            if column is not None:
                column.append(value)
        self.dirty.append(1)

    def extend(self, keys: Any, columns: list, pickled_keys: bytes | None = None, hot: bool = False) -> None:
        """Rows for `keys` (a list or an object array, each new to the window), appended in order; per
        column its values, an int64 ndarray, a list (None: None in every row, for a list column) or
        StructValues. `pickled_keys`: `dumps_plain` of the
        keys' list, made by the caller while the keys are in the CPU's caches (and once for two stores that
        append the same keys), for saves to reuse. `hot`: the first column's values are pickled already,
        in chunks the caller gave `add_pickled_values`: the rows are flagged hot instead of put."""
        first = len(self)
        if pickled_keys is not None:
            self.key_chunks.append((first, first + len(keys), pickled_keys))
        if self._index is not None:
            self._index.update(zip(keys, range(first, first + len(keys)), strict=True))
        table = self._table
        if table and table.pending:  # the keys it numbered (`number_keys`), or others: built again
            if table.size == first and table.pending == len(keys):
                table.confirm(len(keys))
            else:
                self._table = None
        self._densify(columns)
        self._hold_keys(keys)
        for column, values in zip(self.columns, columns, strict=True):
            if column is None:  # a sparse column of None, and so are the values
                continue
            if type(values) is np.ndarray:
                column.frombytes(values.astype(np.int64, copy=False).tobytes())
            else:  # a list (None: of None), or an int64 array from a list of ints
                column.extend(repeat(None, len(keys)) if values is None else values)
        self.dirty += (b"\x00" if hot else b"\x01") * len(keys)
        if hot:
            self._flag_hot(slice(first, first + len(keys)))

    def release(self, column: int, rows: list[int]) -> None:
        """Drop a list column's references to the values of `rows` (row numbers), None in their place, for
        a caller that holds those values and puts the rows again (`put_rows`) or gives them back
        (`give_back`) before anything reads them: a value it replaces in the meantime is freed there, while
        it is in the CPU's caches, not by the put that replaces it (a cache miss apiece where the values
        are scattered). The rows are not flagged."""
        deque(map(self.columns[column].__setitem__, rows, repeat(None)), maxlen=0)

    def take(self, column: int, rows: list[int]) -> list:
        """A list column's values of `rows`, released (`release`): the caller holds them then, and each
        value is touched by its read and its release at once, while it is in the CPU's caches."""
        values = list(map(self.columns[column].__getitem__, rows))
        self.release(column, rows)
        return values

    def place(self, column: int, rows: list[int], values: Any) -> None:
        """Values for rows released (`release`) that the caller made and puts next with IN_PLACE for that
        column (`put_rows`): written as it makes them, while they are in the CPU's caches (the put would
        read each one from memory). The rows are flagged by the put."""
        deque(map(self.columns[column].__setitem__, rows, values), maxlen=0)

    def give_back(self, column: int, rows: list[int], values: Any) -> None:
        """Values for rows released (`release`) and not put: the rows hold them, flagged put (they need not
        be the values released: an export then saves what they hold)."""
        self.place(column, rows, values)
        np.frombuffer(self.dirty, np.bool_)[rows] = True

    def put_rows(self, rows: np.ndarray, columns: list, hot: bool = False) -> None:
        """Replace the changing fields of existing rows (their numbers in `rows`) and flag them put; per
        changing column its values, an int64 ndarray, a list (None: None in every row, for a list column),
        or StructValues for a struct column, or IN_PLACE for a list column whose rows hold their values
        already (`place`). `hot`: the first column's values are pickled already, in chunks the caller gave
        `add_pickled_values`: the rows are flagged hot instead of put."""
        self._densify(columns)
        changed = [
            (column, values)
            for column, values in zip(self.columns[: self.changing], columns, strict=True)
            if column is not None
            and values is not IN_PLACE
            and not (type(column) is list and _none_over_none(column, values))
        ]
        row_list = self._row_list(rows, [column for column, _ in changed])
        for column, values in changed:
            _assign(column, rows, row_list, repeat(None) if values is None else values)
        if hot:
            self._flag_hot(rows)
        else:
            np.frombuffer(self.dirty, np.bool_)[rows] = True

    def add_pickled_values(self, chunks: list[tuple[array, bytes]]) -> None:
        """Chunks of (rows, pickled list of their first column's values) for rows that the caller puts
        next, flagged hot (`put_rows`, `extend`): an export saves them as they are, and a load applies
        them in order, so a row in two chunks takes its later value. A row put again otherwise (flagged
        in `dirty`) has its value gathered by the export, which a load applies after the chunks. Chunks
        that come to hold more values than twice the rows (many puts between two exports; a caller pickles
        none before its store's first export) are dropped, their rows flagged in `dirty`: the export
        gathers them."""
        if self.pickled_rows > 2 * len(self):
            self._drop_pickled_values()
        self.pickled_values += chunks
        self.pickled_rows += sum(len(at) for at, _ in chunks)

    def _flag_hot(self, rows: Any) -> None:
        hot = self.hot
        if hot is None:
            hot = self.hot = bytearray(len(self))
        elif len(hot) < len(self):
            hot += bytes(len(self) - len(hot))
        np.frombuffer(hot, np.bool_)[rows] = True

    def take_pickled_values(self) -> tuple[list[tuple[array, bytes]], np.ndarray] | None:
        """For an export: the chunks of pickled values (`add_pickled_values`) and, by row, whether its value
        is to be gathered, no chunk holding its last one: flagged in `dirty` (put otherwise, before or after
        its chunk) or not hot (not in a chunk: saved only by a delta of every row); the hot rows are
        flagged in `dirty` then, as every row the export saves. None when no row is hot."""
        if self.hot is None:
            self._drop_pickled_values()  # chunks of no row put (none to save)
            return None
        gathered = np.ones(len(self), np.bool_)  # the rows after the hot ones' are not hot
        np.logical_not(np.frombuffer(self.hot, np.bool_), out=gathered[: len(self.hot)])
        gathered |= np.frombuffer(self.dirty, np.bool_)
        chunks = self.pickled_values
        self._drop_pickled_values()
        return chunks, gathered

    def _drop_pickled_values(self) -> None:
        """The hot rows flagged in `dirty`, their chunks dropped."""
        if self.hot is not None:
            dirty = np.frombuffer(self.dirty, np.bool_)
            dirty[: len(self.hot)] |= np.frombuffer(self.hot, np.bool_)
            del dirty  # a bytearray exporting its buffer cannot grow
        self.hot, self.pickled_values, self.pickled_rows = None, [], 0

    def _densify(self, values_by_column: list) -> None:
        """A sparse column held as None (every row None) made its list of a None per row, where the values
        to be written into it (`values_by_column`: per column from the first on) are not all None."""
        for n in self.sparse:
            if self.columns[n] is None and n < len(values_by_column) and not _all_none(values_by_column[n]):
                self.columns[n] = [None] * len(self)

    def fields(self, row: int) -> tuple:
        """A row's fields, by column (None in a sparse column held as None)."""
        return tuple(None if column is None else column[row] for column in self.columns)

    def dense_columns(self) -> list:
        """The columns, a sparse one held as None made its list first: for a loop that writes rows' fields
        one by one (a header that is not None among them)."""
        for n in self.sparse:
            if self.columns[n] is None:
                self.columns[n] = [None] * len(self)
        return self.columns

    def _row_list(self, rows: np.ndarray, columns: list | None = None) -> list[int] | None:
        """The row numbers as a list, for the list columns' stores (None when every changing column, or
        every one of `columns`, is an int64 array: a count's window)."""
        if all(
            type(column) is not list
            for column in (self.columns[: self.changing] if columns is None else columns)
        ):
            return None
        return rows.tolist()

    def changes(self) -> int:
        """Rows put since the last export, hot ones too (numpy's count: bytearray.count compares byte by
        byte)."""
        dirty = np.frombuffer(self.dirty, np.bool_)
        if self.hot is None:
            return int(np.count_nonzero(dirty))
        hot = np.frombuffer(self.hot, np.bool_)
        return int(np.count_nonzero(dirty[: len(hot)] | hot)) + int(np.count_nonzero(dirty[len(hot) :]))

    def live_count(self) -> int:
        """How many live entries the rows hold, without building the index."""
        if self._index is not None:
            return len(self._index)
        if self.rows_live:
            return len(self)
        return len(self) - self.columns[0].count(None)

    def live(self) -> list[tuple[Any, int]]:
        """(key, row) of the live entries, in row order."""
        keys = self._keys
        return [(keys[row], row) for row in sorted(self.index.values())]

    # -- saving and loading -------------------------------------------------------------------------------

    def save(self, changed_only: bool, with_keys: bool = True) -> dict[str, Any]:
        """The saved form of the rows put since the last export (a delta), or of every row (a base); without
        keys (an empty tuple) for an owner that saves them elsewhere."""
        size, columns, first = len(self), self.columns, self.saved
        self.saved = size
        if not changed_only:
            self.dirty[:] = bytes(size)
            return self.base(with_keys)
        flags = np.frombuffer(self.dirty, np.bool_)
        rows = np.flatnonzero(flags)
        del flags  # a bytearray exporting its buffer cannot grow
        self.dirty[:] = bytes(size)
        unsaved = self.unsaved
        changing = [
            None if n in self.sparse and _all_none(column) else column
            for n, column in enumerate(columns[: self.changing])
            if n not in unsaved
        ]
        # gathers a list column in one C loop (with one row itemgetter returns the value, not a tuple); a
        # window without one to gather (a count's, a buffer's whose headers are all None) needs no list of
        # the row numbers
        positions = rows.tolist() if any(type(column) is list for column in changing) else []
        gather = (
            itemgetter(*positions) if len(positions) > 1 else lambda column: [column[r] for r in positions]
        )
        return {
            "from": first,
            "keys": self._saved_keys(first) if with_keys else (),
            "rows": _int64s(rows),
            "columns": [
                _saved_int64s(np.frombuffer(column, np.int64)[rows])
                if type(column) is array
                else column.saved(rows)
                if type(column) is StructColumn
                else None
                if column is None
                else gather(column)
                for column in changing
            ]
            + [
                _saved_int64s(np.frombuffer(column, np.int64)[first:])
                if type(column) is array
                else column.saved(slice(first, None))
                if type(column) is StructColumn
                else tuple(column[first:])
                for n, column in enumerate(columns[self.changing :], self.changing)
                if n not in unsaved
            ],
        }

    def base(self, with_keys: bool = True) -> dict[str, Any]:
        """The saved form of every row (what `save` writes as a base), leaving the export state alone. It
        holds the live columns, not copies (a copy of every column is a large part of a snapshot): pickle it
        before the window changes, as every export and snapshot does."""
        unsaved = self.unsaved
        columns = [
            column.saved()
            if type(column) is StructColumn
            else _saved_int64s(np.frombuffer(column, np.int64), column)
            if type(column) is array
            else None
            if n in self.sparse and _all_none(column)
            else column
            for n, column in enumerate(self.columns)
            if n not in unsaved
        ]
        return {"keys": self._saved_keys(0) if with_keys else (), "columns": columns}

    def _saved_keys(self, first: int) -> tuple[bytes, ...]:
        return saved_key_chunks(self.keys, self.key_chunks, first)

    def load(self, saved: dict[str, Any], name: str, owned: bool = False) -> None:
        """Apply a saved base (to an empty window) or delta (to the rows it continues). `owned`: `saved` is
        this call's to keep (just unpickled), so a base's columns become the window's, not copies of them."""
        columns = self.columns
        new_keys = loaded_keys(saved["keys"])
        if "rows" not in saved:
            if len(self):
                raise ValueError(f"state part {name!r}: a base over a window that has rows")
            saved = {**saved, "columns": self._loadable(saved["columns"], name, len(new_keys), len(new_keys))}
            self._hold_keys(new_keys)  # copied: stores loaded from one import share key lists
            for n, values in enumerate(self._with_placeholders(saved["columns"], len(new_keys), True)):
                if columns[n] is None and _all_none(values):  # a sparse column of None: held as None
                    continue
                if owned and type(values) is type(columns[n]):
                    columns[n] = values
                elif columns[n] is None:
                    columns[n] = list(values)
                else:
                    columns[n].extend(values)
            self._index = None  # a key table over the empty window catches up at its next use
        else:
            first = saved["from"]
            if first != len(self):
                raise ValueError(
                    f"state part {name!r} continues a window of {first} rows, not of this store's {len(self)}"
                )
            rows, added = saved["rows"], len(new_keys)
            saved = {**saved, "columns": self._loadable(saved["columns"], name, len(rows), added)}
            values_by_column = saved["columns"]
            positions = np.frombuffer(rows, np.int64)
            # checked before any change: a part refused leaves the store as it was
            if len(positions) and not 0 <= positions.min() <= positions.max() < first + added:
                raise ValueError(f"state part {name!r}: rows out of the window's {first + added}")
            # `save` lists the rows in ascending order, so the new ones (each one put) are the last, in order
            kept = len(positions) - added
            if kept < 0 or not np.array_equal(positions[kept:], np.arange(first, first + added)):
                raise ValueError(f"state part {name!r}: its new rows are not its last {added}, in order")
            saved_changing = self.changing - sum(n < self.changing for n in self.unsaved)
            for n, values in enumerate(values_by_column):
                expected = len(rows) if n < saved_changing else added
                if len(values) != expected:
                    raise ValueError(f"state part {name!r}: {len(values)} values for {expected} rows")
            values_by_column = self._with_placeholders(values_by_column, len(rows), False)
            self._densify(values_by_column)
            self._hold_keys(new_keys)
            for column, values in zip(
                columns[self.changing :], values_by_column[self.changing :], strict=True
            ):  # fixed: the new rows' values, in order (an unsaved one's placeholders)
                column.extend(_placeholders(column, added) if values is None else values)
            older = positions[:kept]  # scattered back; the new rows are appended as they come
            row_list = self._row_list(older)
            for column, values in zip(columns[: self.changing], values_by_column, strict=False):
                if column is None:  # a sparse column of None, and so are the values
                    continue
                if values is None:  # unsaved: placeholders for the new rows, the others left as they were
                    column.extend(_placeholders(column, added))
                    continue
                if type(column) is array:
                    values = np.frombuffer(values, np.int64)
                    column.frombytes(values[kept:].tobytes())
                else:
                    column.extend(values[kept:])
                _assign(column, older, row_list, values[:kept])
            if self._index is not None:
                self._index.update(zip(new_keys, range(first, first + added), strict=True))
                self._forget_dead(rows, saved["columns"][0])
        self.dirty.extend(bytes(len(new_keys)))
        self.saved = len(self)

    # -- saved by row groups (RowParts, nodes/kv_rows.py: a store of numbered rows whose bases are spread) --

    def saved_columns(self, rows: Any, pickled: tuple | None = None) -> list:
        """The saved form of rows' fields (rows: an index array or a slice), a value per row and saved
        column (an int64 column's values that are all one value: that value alone). `pickled`: what
        `take_pickled_values` gave, for the rows of a delta: the first column is saved as
        {"pickled": the chunks, "rows": the rows flagged in `dirty`, "values": theirs}, which a load
        applies in that order (the rows' other values are in the chunks)."""
        saved = []
        for n, column in enumerate(self.columns):
            if n in self.unsaved:
                continue
            if column is None:  # a sparse column of None: saved as a list column
                column = [None] * len(self)
            if n == 0 and pickled is not None:
                chunks, gathered = pickled
                at = rows[gathered[rows]]
                saved.append(
                    {"pickled": chunks, "rows": _int64s(at), "values": _gathered(column, at.tolist())}
                )
            elif type(column) is array:
                saved.append(_saved_int64s(np.frombuffer(column, np.int64)[rows]))
            elif type(column) is StructColumn:
                saved.append(column.saved(rows))
            elif type(rows) is slice:
                saved.append(column[rows])
            else:
                saved.append(_gathered(column, rows.tolist()))
        return saved

    def load_columns(self, rows: Any, saved: list, name: str) -> None:
        """Set rows' fields (rows: an index array or a slice) from their saved form (`saved_columns`);
        ValueError for a saved form that does not fit, checked before any change."""
        count = len(range(*rows.indices(len(self)))) if type(rows) is slice else len(rows)
        pickled = None
        if saved and type(saved[0]) is dict and type(self.columns[0]) is list:
            pickled = self._loadable_pickled(saved[0], name)
            saved = [[None] * count, *saved[1:]]  # its place checked as a column's; `pickled` applied
        loadable = self._loadable(saved, name, count, count)
        for values in loadable:
            if len(values) != count:
                raise ValueError(f"state part {name!r}: {len(values)} values for {count} rows")
        if type(rows) is not slice and len(rows) and not 0 <= rows.min() <= rows.max() < len(self):
            raise ValueError(f"state part {name!r}: rows out of the window's {len(self)}")
        positions = np.arange(len(self))[rows] if type(rows) is slice else rows
        row_list = None
        self._densify(self._with_placeholders(loadable, count, False))
        saved_columns = [column for n, column in enumerate(self.columns) if n not in self.unsaved]
        for n, (column, values) in enumerate(zip(saved_columns, loadable, strict=True)):
            if column is None:  # a sparse column of None, and so are the values
                continue
            if n == 0 and pickled is not None:
                for at, chunk_values in pickled:
                    deque(map(column.__setitem__, at, chunk_values), maxlen=0)
                continue
            if type(column) is array:
                values = np.frombuffer(values, np.int64)
            elif type(column) is list and type(rows) is slice:
                column[rows] = values if type(values) is list else list(values)
                continue
            elif type(column) is list and row_list is None:
                row_list = positions.tolist()
            _assign(column, positions, row_list, values)

    def _loadable_pickled(self, saved: dict, name: str) -> list[tuple[list[int], list]]:
        """A first column saved with pickled chunks (`saved_columns`) as (rows, values) to apply in order,
        the chunks' then the gathered ones; ValueError where it does not fit the window."""
        try:
            chunks = [(at, pickle.loads(data)) for at, data in saved["pickled"]]
            chunks.append((saved["rows"], saved["values"]))
            steps = []
            for at, values in chunks:
                if type(at) is not array or at.typecode != INT64 or len(at) != len(values):
                    raise ValueError
                positions = np.frombuffer(at, np.int64)
                if len(positions) and not 0 <= positions.min() <= positions.max() < len(self):
                    raise ValueError
                steps.append((positions.tolist(), values))
        except (KeyError, TypeError, ValueError, pickle.UnpicklingError):
            raise ValueError(f"state part {name!r}: pickled values that do not fit the window") from None
        return steps

    def append_rows(self, keys: list) -> None:
        """Rows for `keys` whose fields a load sets next: placeholders (0 or None) until then."""
        self._hold_keys(keys)
        for column in self.columns:
            if column is not None:  # a sparse column of None holds the placeholders
                column.extend(_placeholders(column, len(keys)))
        self.dirty += bytes(len(keys))
        self._index, self._table = None, None

    def loaded(self) -> None:
        """A load set rows and keys directly: the index and key table are built again at their next use."""
        self._index, self._table = None, None
        self.dirty[:] = bytes(len(self))
        self.hot, self.pickled_values, self.pickled_rows = None, [], 0
        self.saved = len(self)

    def clear_rows(self) -> None:
        """No row (a load that starts the window again)."""
        self._keys = np.empty(0, object)
        self.columns = [
            None if n in self.sparse else _new_column(_kind(column)) for n, column in enumerate(self.columns)
        ]
        self.dirty = bytearray()
        self.saved = 0
        self.key_chunks = []
        self._index, self._table = None, None
        self.hot, self.pickled_values, self.pickled_rows = None, [], 0

    def _with_placeholders(self, values_by_column: list, rows: int, base: bool) -> list:
        """The saved values by column with the unsaved columns put back: for a base (`rows`: every row)
        their placeholders, for a delta None (`load` appends placeholders for its new rows)."""
        if not self.unsaved:
            return values_by_column
        saved = iter(values_by_column)
        full = []
        for n, column in enumerate(self.columns):
            if n not in self.unsaved:
                full.append(next(saved))
            elif base:
                full.append(_placeholders(column, rows))
            else:
                full.append(None)
        return full

    def fill(self, column: int, rows: np.ndarray | None, values: Any) -> None:
        """Set an unsaved column's values at `rows` (None: every row, `values` then one per row): what its
        owner derived after a load."""
        target = self.columns[column]
        if rows is None:
            if len(values) != len(self):
                raise ValueError(f"{len(values)} values for a window of {len(self)} rows")
            if type(target) is array:
                self.columns[column] = _int64s(np.asarray(values, np.int64))
            elif type(target) is StructColumn:
                target.assign(np.arange(len(self)), values)
            else:
                self.columns[column] = values if type(values) is list else list(values)
            return
        _assign(target, rows, rows.tolist() if type(target) is not array else None, values)

    def _loadable(self, values_by_column: list, name: str, changed: int, added: int) -> list:
        """The saved values by column, those of an int64 column as an array("q") (a part saved by a store
        whose column was a list, an earlier engine's final buffer, loads into int64 columns), one per row:
        `changed` rows of a changing column, `added` of a fixed one (`_saved_int64s`; a sparse column saved
        as None holds None in each)."""
        saved_columns = [(n, column) for n, column in enumerate(self.columns) if n not in self.unsaved]
        if len(values_by_column) != len(saved_columns):
            raise ValueError(
                f"state part {name!r}: {len(values_by_column)} columns, not {len(saved_columns)}"
            )
        loadable = []
        for (n, column), values in zip(saved_columns, values_by_column, strict=True):
            rows = changed if n < self.changing else added
            if type(column) is StructColumn:
                values = column.spec.loadable(values, name)
            elif values is None and n in self.sparse:
                values = [None] * rows
            elif type(column) is array and type(values) is array and values.typecode == INT64:
                values = _loaded_int64s(values, rows)
            elif type(column) is array:
                try:
                    values = array(INT64, values)
                except (TypeError, OverflowError) as error:
                    raise ValueError(
                        f"state part {name!r}: column {n} holds a value that is not an int64 ({error})"
                    ) from None
            loadable.append(values)
        return loadable

    def _forget_dead(self, rows: Any, firsts: Any) -> None:
        """Drop from the index the keys of `rows` whose first field (`firsts`, by position) is None."""
        if type(firsts) is array or None not in firsts:
            return
        index, keys = self._index, self._keys
        for row, first in zip(rows, firsts, strict=True):
            if first is None and index.get(keys[row]) == row:
                del index[keys[row]]


def saved_key_chunks(keys: Any, chunks: list[tuple[int, int, bytes]], first: int) -> tuple[bytes, ...]:
    """The keys of rows `first`.. as pickled lists, in row order: the chunks (first row, end row, bytes)
    pickled when their rows were appended, and the rows between them (appended one by one, or loaded)
    pickled now and kept in `chunks` too, so that a later base does not pickle them again. `first` is 0
    or a row count that an export saw: no chunk made since runs across it."""
    at = len(chunks)
    while at and chunks[at - 1][0] >= first:
        at -= 1
    if at and chunks[at - 1][1] > first:  # across `first`: pickled apart (no history makes one)
        return (_pickled_keys(keys[first:]),)
    covered: list[tuple[int, int, bytes]] = []
    row = first
    for chunk in [*chunks[at:], (len(keys), len(keys), b"")]:
        if chunk[0] > row:
            covered.append((row, chunk[0], _pickled_keys(keys[row : chunk[0]])))
        if chunk[1] > chunk[0]:
            covered.append(chunk)
        row = chunk[1]
    chunks[at:] = covered
    return tuple(chunk[2] for chunk in covered)


def _pickled_keys(keys: Any) -> bytes:
    """Keys (a list or an object array) pickled as the list that saves hold."""
    return dumps_plain(keys if type(keys) is list else keys.tolist())


def dumps_plain(obj: Any) -> bytes:
    """Pickle without the memo: a column of str and bytes makes no memo entry (a dict insert) per object,
    and loads the same. Only for plain columns, which share no object and hold no cycle (the memo would
    keep a shared object shared; a cycle raises ValueError)."""
    buffer = io.BytesIO()
    dump_plain(obj, buffer)
    return buffer.getvalue()


def dump_plain(obj: Any, file: Any) -> None:
    """`dumps_plain` into a binary file."""
    pickler = pickle.Pickler(file, protocol=5)
    pickler.fast = True
    pickler.dump(obj)


def loaded_keys(saved: Any) -> list:
    """The keys of a saved form: pickled lists (a tuple of their bytes, as `save` writes them), or the list
    itself (an earlier engine's forms, or already loaded: runtime/part_keys.py)."""
    if type(saved) is not tuple:
        return saved
    keys: list = []
    for data in saved:
        keys += pickle.loads(data)
    return keys


def _assign(column: Any, rows: np.ndarray, row_list: list[int] | None, values: Any) -> None:
    """column[rows] = values: an int64 column through a numpy view, a list column by a C loop of stores."""
    if type(column) is array:
        target = np.frombuffer(column, np.int64)
        target[rows] = values
        del target  # an array exporting its buffer cannot grow
    elif type(column) is StructColumn:
        column.assign(rows, values)
    else:
        if type(values) is np.ndarray:
            values = values.tolist()
        deque(map(column.__setitem__, row_list, values), maxlen=0)


def _all_none(values: Any) -> bool:
    """Whether a list column, or values to write into one, hold None in every row (None: a sparse column
    held as None). The last row is looked at first: a column of other values is mostly not compared at
    all."""
    if values is None:
        return True
    if type(values) is not list and type(values) is not tuple:  # a saved delta's gathered rows: a tuple
        return False
    return not values or (values[-1] is None and values.count(None) == len(values))


def _none_over_none(column: list, values: Any) -> bool:
    """Whether putting `values` into a list column changes nothing: they are all None, and so is every row
    of the column (a buffer's headers and, where nothing reads them, old values). Both checks are C passes
    in memory order, the last row looked at first, where the stores would touch a row each, scattered."""
    if values is not None and (
        type(values) is not list or (values and values[-1] is not None) or values.count(None) != len(values)
    ):
        return False
    return not column or (column[-1] is None and column.count(None) == len(column))


def _gathered(column: list, at: list[int]) -> Any:
    """column[at], in one C loop."""
    if len(at) > 1:
        return itemgetter(*at)(column)
    return [column[row] for row in at]


def _kind(column: Any) -> Any:
    """A column's kind (`_new_column`'s argument)."""
    if type(column) is StructColumn:
        return column.spec
    return INT64 if type(column) is array else OBJECT


def _placeholders(column: Any, rows: int) -> Any:
    """What an unsaved column holds for `rows` rows until its owner fills them: 0, None or zero fields."""
    if type(column) is array:
        return array(INT64, bytes(8 * rows))
    if type(column) is StructColumn:
        return column.spec.zeros(rows)
    return [None] * rows


def _new_column(kind: Any) -> Any:
    """An empty column of a kind: INT64, OBJECT or StructFields."""
    if type(kind) is StructFields:
        return StructColumn(kind)
    return array(kind) if kind else []


def _int64s(values: np.ndarray) -> array:
    """An int64 ndarray as an array("q"): saved forms hold no numpy object."""
    return array(INT64, values.astype(np.int64, copy=False).tobytes())


def _saved_int64s(values: np.ndarray, column: array | None = None) -> array:
    """The saved form of an int64 column's values: the one value alone when more than one row holds it (a
    buffer's base sizes and prior counts are mostly 0), else every value; `column`: the array `values` views
    whole, saved as it is instead of a copy."""
    if len(values) > 1 and not (values != values[0]).any():
        return _int64s(values[:1])
    return column if column is not None else _int64s(values)


def _loaded_int64s(saved: array, rows: int) -> array:
    """An int64 column's saved values (`_saved_int64s`) for `rows` rows."""
    if len(saved) == 1 and rows > 1:
        return saved * rows
    return saved


# -- struct columns: values that are dicts of the same numeric fields --------------------------------------


class StructFields:
    """The fields of a struct column's values: dicts of the same names in the same order, each field's value
    a number of its dtype (int64 or float64) or, where the field is `nullable`, None (a declared
    aggregation's value: nodes/declared_aggregations.py)."""

    __slots__ = ("names", "dtypes", "nullable", "structs")

    def __init__(self, names: list[str], dtypes: list[np.dtype], nullable: list[bool]) -> None:
        self.names = tuple(names)
        self.dtypes = tuple(np.dtype(dtype) for dtype in dtypes)
        self.nullable = tuple(nullable)
        # the dicts of rows of field lists, in one comprehension (the names as literals: a dict display
        # builds each dict in place, where dict(zip(names, row)) makes a zip and a call per row)
        items = ", ".join(f"{name!r}: _{i}" for i, name in enumerate(self.names))
        variables = ", ".join(f"_{i}" for i in range(len(self.names)))
        self.structs = eval(  # noqa: S307 - built from repr() of the names only
            f"lambda columns: [{{{items}}} for {variables}, in zip(*columns)]"
        )

    def dicts(self, values: StructValues) -> list[dict]:
        """The values as dicts, None in a field where it is null."""
        return self.structs(self.lists(values))

    def lists(self, values: StructValues) -> list[list]:
        """The values as a list per field, None where it is null."""
        lists = []
        for field, null in zip(values.fields, values.nulls, strict=True):
            if null is not None and null.any():
                objects = field.astype(object)
                objects[null] = None
                lists.append(objects.tolist())
            else:
                lists.append(field.tolist())
        return lists

    def zeros(self, rows: int) -> StructValues:
        """`rows` values whose fields are all 0."""
        return StructValues([np.zeros(rows, dtype) for dtype in self.dtypes], [None] * len(self.dtypes))

    def parse(self, dicts: list) -> StructValues:
        """Dicts of these fields as columns; TypeError for a value that is not one."""
        fields, nulls = [], []
        for name, dtype, nullable in zip(self.names, self.dtypes, self.nullable, strict=True):
            try:
                column = list(map(itemgetter(name), dicts))
            except (KeyError, TypeError):
                raise TypeError(f"a struct column holds dicts of the fields {list(self.names)}") from None
            null = np.fromiter(map(is_, column, repeat(None)), bool, len(column)) if nullable else None
            if null is not None and null.any():
                column = [0 if x is None else x for x in column]
            else:
                null = None
            fields.append(np.array(column, dtype))
            nulls.append(null)
        return StructValues(fields, nulls)

    def loadable(self, saved: Any, name: str) -> StructValues:
        """A saved form of a struct column (`StructColumn.saved`) as columns, checked against these
        fields."""
        try:
            rows, fields, nulls = saved["rows"], saved["fields"], saved["nulls"]
            if len(fields) != len(self.dtypes) or len(nulls) != len(self.dtypes):
                raise ValueError
            arrays = []
            for field, dtype in zip(fields, self.dtypes, strict=True):
                if type(field) is not array or field.typecode != ("d" if dtype == np.float64 else INT64):
                    raise ValueError
                arrays.append(_rows_of(np.frombuffer(field, dtype), rows))
            masks = []
            for null, nullable in zip(nulls, self.nullable, strict=True):
                if null is not None and (not nullable or type(null) is not bytes):
                    raise ValueError
                masks.append(None if null is None else _rows_of(np.frombuffer(null, bool), rows))
        except (KeyError, TypeError, ValueError):
            raise ValueError(
                f"state part {name!r}: a struct column that is not one of the fields {list(self.names)}"
            ) from None
        return StructValues(arrays, masks)


def _rows_of(saved: np.ndarray, rows: int) -> np.ndarray:
    """A saved field or mask of `rows` rows: its value per row, or one for every row (`StructColumn.saved`);
    ValueError for another length."""
    if len(saved) == rows:
        return saved
    if len(saved) == 1 and rows > 1:
        return np.broadcast_to(saved, rows)
    raise ValueError


class StructValues:
    """Values of a struct column as columns: per field its numbers and its null mask (None: no null)."""

    __slots__ = ("fields", "nulls")

    def __init__(self, fields: list[np.ndarray], nulls: list[np.ndarray | None]) -> None:
        self.fields = fields
        self.nulls = nulls

    def __len__(self) -> int:
        return len(self.fields[0])

    def __getitem__(self, at: Any) -> StructValues:
        """The values at a slice or at row numbers."""
        return StructValues([f[at] for f in self.fields], [None if n is None else n[at] for n in self.nulls])


class StructColumn:
    """A column of struct values (`StructFields`) held as a numpy array per field and a null mask per
    nullable field: a value is a dict made when it is read, so that a store of many of them holds no
    Python object per value and saves its columns as arrays. A list of such dicts otherwise, for the
    loops that read and write one value at a time."""

    __slots__ = ("spec", "fields", "nulls", "size")

    def __init__(self, spec: StructFields) -> None:
        self.spec = spec
        self.fields = [np.zeros(0, dtype) for dtype in spec.dtypes]
        self.nulls = [np.zeros(0, bool) if nullable else None for nullable in spec.nullable]
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def _reserve(self, rows: int) -> None:
        capacity = grown_capacity(rows, len(self.fields[0]))
        if capacity is not None:
            self.fields = [grown(field, self.size, capacity) for field in self.fields]
            self.nulls = [None if null is None else grown(null, self.size, capacity) for null in self.nulls]

    def values(self, at: Any = None) -> StructValues:
        """The values at row numbers or a slice (None: every row), as columns."""
        size = self.size
        whole = StructValues(
            [field[:size] for field in self.fields], [None if n is None else n[:size] for n in self.nulls]
        )
        return whole if at is None else whole[at]

    def dicts(self, at: Any = None) -> list[dict]:
        """The values at row numbers (None: every row), as dicts."""
        return self.spec.dicts(self.values(at))

    def extend(self, values: Any) -> None:
        """Append values: `StructValues`, or dicts."""
        if type(values) is not StructValues:
            values = self.spec.parse(list(values))
        first = self.size
        end = first + len(values)
        self._reserve(end)
        for field, new in zip(self.fields, values.fields, strict=True):
            field[first:end] = new
        for null, new in zip(self.nulls, values.nulls, strict=True):
            if null is not None:
                null[first:end] = False if new is None else new
        self.size = end

    def append(self, value: Any) -> None:
        self.extend([value])

    def assign(self, rows: np.ndarray, values: Any) -> None:
        """Replace the values at row numbers `rows`: `StructValues`, or dicts."""
        if type(values) is not StructValues:
            values = self.spec.parse(list(values))
        for field, new in zip(self.fields, values.fields, strict=True):
            field[rows] = new
        for null, new in zip(self.nulls, values.nulls, strict=True):
            if null is not None:
                null[rows] = False if new is None else new

    def _row(self, row: int) -> int:
        if type(row) is not int or not -self.size <= row < self.size:
            raise IndexError(f"row {row!r} of a struct column of {self.size}")
        return row + self.size if row < 0 else row

    def __getitem__(self, row: int) -> dict:
        return self.dicts(np.array([self._row(row)]))[0]

    def __setitem__(self, row: int, value: dict) -> None:
        self.assign(np.array([self._row(row)]), [value])

    def __iter__(self):
        return iter(self.dicts())

    def __contains__(self, value: Any) -> bool:
        return value is not None and value in self.dicts()

    def saved(self, at: Any = None) -> dict[str, Any]:
        """The saved form of the values at row numbers or a slice (None: every row): per field its numbers
        as an array ("q": int64, "d": float64) and its null mask as bytes (None where none is null). A
        field that holds one number in every row (to the bit) is saved as that number alone, a mask that is
        null in every row as one byte: a buffer's prior values, a key's first old value, are mostly the
        aggregation's initial one."""
        values = self.values(at)
        rows = len(values)
        fields, nulls = [], []
        for field, null in zip(values.fields, values.nulls, strict=True):
            if null is not None and null.any():
                field = np.where(null, field.dtype.type(0), field)  # a null's number: 0, however it was put
                nulls.append(b"\x01" if rows > 1 and null.all() else null.tobytes())
            else:
                nulls.append(None)
            bits = field.view(np.int64)
            if rows > 1 and (bits == bits[0]).all():
                field = field[:1]
            fields.append(array("d" if field.dtype == np.float64 else INT64, field.tobytes()))
        return {"rows": rows, "fields": fields, "nulls": nulls}
