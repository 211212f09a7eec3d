"""Declared aggregations (spark_jobs/streams/aggregates.py) of grouped streams: numpy over a batch.

A batch becomes groups, one per (window, key) of its kept (record, window) pairs, or per key without
windows (`group_pairs`). Each group's running values in record order come from left folds over the pairs
sorted by group (`SegmentedFold`, one plan for every column), so every pair still emits its window's value
after it, as the user-function aggregate does (docs/semantics.md 4.2, 4.3): the same output rows in the same order (by
record, then window start), the same timestamps (the maximum of the contributing records), the same late
pairs (Node.count_late) and null keys dropped. No Python function runs per record; Python objects are
made only for the output rows (keys, the value dicts) and the field values read from the records. A
reader of each group's last value only (the fused final suppress, nodes/final_window_aggregate.py) folds
without the running values.

State: per window (or one for every key), an `AggregateRows`: the keys, a numpy column per state column
(the record count, the maximum timestamp, per value field the number of values, per declared sum, min and
max its accumulator) and a dirty flag per row; a state export saves the rows changed since the last one as
a row store's (`KeyedRows`, nodes/kv_rows.py), and a window's keys apart, as window stores do
(`WindowedRows`, WindowParts in nodes/time_window_store.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from heapq import heappop, heappush
from itertools import repeat
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np

from ..aggregates import DeclaredAggregate
from ..records import Window, Windowed
from ..windows import TimeWindows
from .base import Batch, Node, StateRow, holds_none
from .key_table import (
    KeyNumbers,
    KeyTable,
    as_object_array,
    grown,
    grown_capacity,
    holds_none_object,
    number_by_first_appearance,
    object_array,
    table_size,
)
from .kv_rows import NumberedRows, RowParts
from .time_window_store import WindowParts, apply_window_parts, export_windows, windows_state_parts
from .window_rows import StructFields, StructValues

INT64_MIN, INT64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max
_FLOAT = np.dtype(np.float64)
_INT = np.dtype(np.int64)
KEY_VALUE_PREFIX = "kv"  # the parts of a non-windowed aggregation's store


class StateColumn:
    """A column of the store: its name, dtype, the value of a group without records, and how a record
    folds into it ("count": +1 per record, "ts": max of timestamps, "n": +1 per value of the field read as
    `reads`, "sum" / "min" / "max" of those values)."""

    __slots__ = ("name", "dtype", "reads", "initial", "fold", "field")

    def __init__(self, fold: str, field: str | None, reads: np.dtype | None) -> None:
        self.fold = fold
        self.field = field
        self.reads = reads
        self.dtype = _INT if fold in ("count", "ts", "n") else reads
        self.name = fold if field is None else f"{fold}/{field}/{reads.name}"
        if fold == "ts":
            self.initial = -1
        elif fold == "min":
            self.initial = np.inf if reads == _FLOAT else INT64_MAX
        elif fold == "max":
            self.initial = -np.inf if reads == _FLOAT else INT64_MIN
        elif fold == "sum" and reads == _FLOAT:
            self.initial = -0.0  # -0.0 + v is v for every float v, 0.0 + -0.0 is not
        else:
            self.initial = 0


class AggregateLayout:
    """The state columns that the declarations need, and how each output field reads them."""

    def __init__(self, declared: dict[str, DeclaredAggregate]) -> None:
        self.declared = declared
        columns = {"count": StateColumn("count", None, _INT), "ts": StateColumn("ts", None, _INT)}

        def column(fold: str, field: str, reads: str) -> str:
            state = StateColumn(fold, field, np.dtype(reads))
            columns.setdefault(state.name, state)
            return state.name

        # per output field: (kind, its accumulator column, the field's value count column)
        self.outputs: list[tuple[str, str, str | None]] = []
        for aggregate in declared.values():
            if aggregate.kind == "count":
                self.outputs.append(("count", "count", None))
                continue
            counted = column("n", aggregate.field, aggregate.dtype)
            fold = "sum" if aggregate.kind == "mean" else aggregate.kind
            self.outputs.append((aggregate.kind, column(fold, aggregate.field, aggregate.dtype), counted))
        self.columns = list(columns.values())
        # the (field, dtype) reads of a batch's values
        self.reads = list(dict.fromkeys((c.field, c.reads) for c in self.columns if c.field is not None))
        self.names = list(declared)
        # the values' fields: a count's is an int64 never null, a mean's a float64, a sum's, min's or max's
        # its accumulator's dtype; those are null where no record had a value
        self.fields = StructFields(
            self.names,
            [_FLOAT if kind == "mean" else columns[name].dtype for kind, name, _ in self.outputs],
            [kind != "count" for kind, _, _ in self.outputs],
        )
        self.structs = self.fields.structs  # the value dicts of rows of field lists

    def struct_values(self, state: dict[str, np.ndarray]) -> StructValues:
        """The values of the rows of `state` (column name -> per row) as columns of their fields."""
        fields, nulls = [], []
        for kind, name, counted in self.outputs:
            values = state[name]
            if kind == "count":
                fields.append(values)
                nulls.append(None)
                continue
            n = state[counted]
            if kind == "mean":
                with np.errstate(invalid="ignore", divide="ignore"):
                    values = values / n
            missing = n == 0
            fields.append(values)
            nulls.append(missing if missing.any() else None)
        return StructValues(fields, nulls)

    def value_columns(self, state: dict[str, np.ndarray]) -> list[list]:
        """The output fields, each a list over the rows of `state` (column name -> array)."""
        return self.fields.lists(self.struct_values(state))

    def struct(self, state: dict[str, Any]) -> dict[str, Any]:
        """One row's value dict (column name -> that row's value)."""
        return self.structs(self.value_columns({k: np.asarray([v]) for k, v in state.items()}))[0]


def field_values(values: list, field: str, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Per record `value[field]` as `dtype`, and whether it is a value (aggregates.py): a number (not a
    bool) in a dict value, not NaN, in int64's range for int64."""
    n = len(values)
    if set(map(type, values)) == {dict}:
        try:
            column = list(map(itemgetter(field), values))
        except KeyError:
            column = [value.get(field) for value in values]
    else:
        column = [value.get(field) if isinstance(value, dict) else None for value in values]
    types = set(map(type, column))
    if dtype == _FLOAT:
        if types <= {int, float}:
            try:
                numbers = np.array(column, np.float64)
                return numbers, ~np.isnan(numbers)
            except OverflowError:
                pass
        numbers = np.fromiter(map(_as_float, column), np.float64, n)
        return numbers, ~np.isnan(numbers)
    if types == {int}:
        try:
            return np.array(column, np.int64), np.ones(n, bool)
        except OverflowError:
            pass
    valid = np.fromiter(map(_is_int64, column), bool, n)
    numbers = np.zeros(n, np.int64)
    numbers[valid] = [x for x, ok in zip(column, valid.tolist(), strict=True) if ok]
    return numbers, valid


def _as_float(x: Any) -> float:
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        try:
            return float(x)
        except OverflowError:  # an int beyond float's range: not a float64 value
            return np.nan
    return np.nan


def _is_int64(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and INT64_MIN <= x <= INT64_MAX


class SegmentedFold:
    """Left folds of segments that lie one after another (`sizes`, each at least 1), as a loop would fold
    them (for floats to the last bit: no reassociation), planned once for every column folded over them.

    Step r folds the r-th element of every segment longer than r into its accumulator: the segments sorted
    longest first, those are a prefix, so each step is one gather and one ufunc call over it, and the steps
    together touch each element once. Once few segments remain, each folds the rest of its elements on
    its own (`ufunc.accumulate`), so that a long segment costs one call, not one per element.
    """

    __slots__ = ("sizes", "by_size", "steps", "tail", "tail_from")

    # below this many segments still growing, each folds the rest of its elements on its own
    TAIL_SEGMENTS = 8

    def __init__(self, sizes: np.ndarray) -> None:
        self.sizes = sizes
        starts = np.cumsum(sizes) - sizes
        longest = int(sizes.max()) if len(sizes) else 0
        # the segments, longest first (in order among equals), sorted by radix: sizes are small numbers
        self.by_size = stable_order(longest - sizes, longest + 1)
        longest_first = sizes[self.by_size]
        starts = starts[self.by_size]
        # per r: how many segments are longer than r (a prefix of the longest first)
        longer = np.searchsorted(-longest_first, -np.arange(longest + 1), "left").tolist()
        # per step: (segments longer than r, those longer than r + 1, where their r-th elements are)
        self.steps: list[tuple[int, int, np.ndarray]] = []
        r = 0
        while r < longest and (r == 0 or longer[r] > self.TAIL_SEGMENTS):
            self.steps.append((longer[r], longer[r + 1], starts[: longer[r]] + r))
            r += 1
        self.tail_from = r
        # the segments still growing after the steps: (position longest first, first element, end)
        self.tail = [
            (i, int(starts[i]) + r, int(starts[i] + longest_first[i]))
            for i in range(longer[r] if r < longest else 0)
        ]

    def fold(
        self, ufunc: np.ufunc, values: np.ndarray, initial: np.ndarray, running: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Per segment, `ufunc` folded from its `initial` over its elements: the result, and the result
        before its last element; with `running`, per element the result up to it."""
        order = self.by_size
        acc = initial[order]
        before = np.empty_like(acc)
        out = np.empty(len(values), values.dtype) if running else None
        with np.errstate(over="ignore", invalid="ignore"):
            for longer, longer_next, at in self.steps:
                before[longer_next:longer] = acc[longer_next:longer]  # their last element comes now
                folded = ufunc(acc[:longer], values[at])
                acc[:longer] = folded
                if running:
                    out[at] = folded
            for i, lo, hi in self.tail:
                segment = np.empty(hi - lo + 1, values.dtype)
                segment[0] = acc[i]
                segment[1:] = values[lo:hi]
                ufunc.accumulate(segment, out=segment)
                acc[i], before[i] = segment[-1], segment[-2]
                if running:
                    out[lo:hi] = segment[1:]
        final = np.empty_like(acc)
        final[order] = acc
        previous = np.empty_like(before)
        previous[order] = before
        return final, previous, out


def segmented_accumulate(
    ufunc: np.ufunc, values: np.ndarray, sizes: np.ndarray, initial: np.ndarray
) -> np.ndarray:
    """`values` holds segments one after another (`sizes`, each at least 1); per element, `ufunc` folded
    left to right from its segment's `initial` over the segment's elements up to it, as a loop would."""
    return SegmentedFold(sizes).fold(ufunc, values, initial, running=True)[2]


class AggregateRows(NumberedRows):
    """One group's entries: key -> row, a numpy column per state column, a dirty flag per row.

    Rows are appended when a key first enters the group and never die. Keys are looked up a batch at a
    time, in a `KeyTable` while they are str (nodes/key_table.py), else in a dict.
    """

    __slots__ = (
        "layout",
        "keys",
        "columns",
        "size",
        "dirty",
        "saved",
        "_index",
        "_table",
        "key_chunks",
        "number_rows",
        "numbered",
    )

    def __init__(self, layout: AggregateLayout) -> None:
        self.layout = layout
        # per row its key, in an object array the cyclic collector does not scan (it scans a list's every
        # item after each micro-batch: a cache miss per key of a large store); rows `size..` hold None
        self.keys = np.empty(0, object)
        self.columns = {c.name: np.empty(0, c.dtype) for c in layout.columns}
        self.size = 0
        self.dirty = np.zeros(0, bool)
        self.saved = 0  # rows the last export (or import) saw
        self._index: dict | None = None
        self._table: KeyTable | None | bool = None  # None: not built, False: a key is not a str
        # (first row, end row, the pickled list of their keys), ascending: what saves of those rows reuse,
        # as a window's rows do (nodes/window_rows.py)
        self.key_chunks: list[tuple[int, int, bytes]] = []
        # per number of its node's `KeyNumbers` the key's row here (-1: none), for rows `0..numbered`
        self.number_rows = np.empty(0, np.int64)
        self.numbered = 0

    def __len__(self) -> int:
        return self.size

    def add_key_chunk(self, first: int, end: int, pickled_keys: bytes) -> None:
        """`dumps_plain(keys[first:end])`, made by a caller that pickled those keys for another store too
        (the fused final suppress's buffer, which appends the same keys), for saves to reuse; ignored if
        earlier chunks reach past `first`."""
        if not self.key_chunks or self.key_chunks[-1][1] <= first:
            self.key_chunks.append((first, end, pickled_keys))

    def column(self, name: str) -> np.ndarray:
        return self.columns[name][: self.size]

    def rows_for(self, keys: np.ndarray, str_keys: bool) -> np.ndarray:
        """Per key (an object array; `str_keys`: all str) its row; the keys new to the group get rows
        appended in order of first appearance, holding the initial values."""
        rows = self._rows_by_table(keys) if str_keys and self._table is not False else None
        if rows is None:
            if not str_keys:
                self._table = False
            index = self._key_index()
            rows = np.fromiter(map(index.get, keys, repeat(-1)), np.int64, len(keys))
            new = rows < 0
            if new.any():
                numbers, new_keys = number_by_first_appearance(keys[new].tolist(), self.size)
                rows[new] = numbers
                index.update(zip(new_keys.tolist(), range(self.size, self.size + len(new_keys)), strict=True))
                self._append(new_keys)
        return rows

    def _rows_by_table(self, keys: np.ndarray) -> np.ndarray | None:
        table = self._table
        if table is None:
            table = KeyTable.new(table_size(keys, self.size))
            if table is None or not table.add(self.keys[: self.size]):
                self._table = False
                return None
            self._table = table
        elif table.size < self.size and not table.add(
            self.keys[table.size : self.size]
        ):  # rows appended by number
            self._table = False
            return None
        rows, new_keys = table.number(keys)
        table.confirm(len(new_keys))
        if len(new_keys):
            self._append(new_keys)
        return rows

    def rows_by_number(
        self, numbers: KeyNumbers, pair_number: np.ndarray, keys: np.ndarray, pair_key: np.ndarray
    ) -> np.ndarray | None:
        """`rows_for` of pairs whose str keys `numbers` numbered (`pair_number`, per pair): their rows by
        number, in numpy; the keys new to the group get rows in order of first appearance, named by the
        objects of their first pairs (`keys[pair_key]`: per pair its key, an object array). None, and
        nothing changed, when a key of the group is not a str."""
        if self.numbered < self.size:  # rows appended otherwise (loaded, or looked up by key): numbered now
            if self._table is False:
                return None
            unnumbered = self.keys[self.numbered : self.size]
            if set(map(type, unnumbered)) != {str}:
                self._table = False
                return None
            self._number_rows_for(len(numbers) + len(unnumbered))
            self.number_rows[numbers.number(unnumbered)] = np.arange(self.numbered, self.size)
            self.numbered = self.size
        self._number_rows_for(len(numbers))
        rows = self.number_rows[pair_number]
        new = np.flatnonzero(rows < 0)
        if len(new):
            first = first_appearances(pair_number[new], len(numbers))
            distinct, first = pair_number[new[first]], new[first]
            self.number_rows[distinct] = np.arange(self.size, self.size + len(distinct))
            rows[new] = self.number_rows[pair_number[new]]
            self._append(keys[pair_key[first]])
            self.numbered = self.size
        return rows

    def _number_rows_for(self, numbers: int) -> None:
        """`number_rows` long enough for `numbers` key numbers (doubling; -1 for the numbers added)."""
        held = len(self.number_rows)
        if numbers > held:
            grown_rows = np.full(max(numbers, 2 * held, 1024), -1, np.int64)
            grown_rows[:held] = self.number_rows
            self.number_rows = grown_rows

    def forget_numbers(self) -> None:
        """Its node numbered its keys afresh (`KeyNumbers`): every row to be numbered again."""
        self.number_rows = np.empty(0, np.int64)
        self.numbered = 0

    def row_of(self, key: Any) -> int | None:
        return self._key_index().get(key)

    def _append(self, new_keys: Any) -> None:
        """Rows for `new_keys` (a list or an object array), with the initial values (a KeyTable or index
        already numbered them)."""
        first, end = self.size, self.size + len(new_keys)
        self._reserve(end, len(new_keys))
        for state in self.layout.columns:
            self.columns[state.name][first:end] = state.initial
        self._add_keys(new_keys)

    def _hold_keys(self, new_keys: Any) -> None:
        """Rows `size..` (reserved) named by `new_keys`."""
        self.keys[self.size : self.size + len(new_keys)] = as_object_array(new_keys)

    def _reserve(self, rows: int, added: int) -> None:
        """Room for `rows` rows, `added` of them a batch appended at once (`grown_capacity`)."""
        capacity = grown_capacity(rows, len(self.dirty), added)
        if capacity is None:
            return
        for name, column in self.columns.items():
            self.columns[name] = grown(column, self.size, capacity)
        self.dirty = grown(self.dirty, self.size, capacity)
        self.keys = grown(self.keys, self.size, capacity)

    def put(self, rows: np.ndarray, values: dict[str, np.ndarray]) -> None:
        """Rows' new values (column name -> per row), flagged for the next export."""
        for name, column in values.items():
            self.columns[name][rows] = column
        self.dirty[rows] = True

    def changes(self) -> int:
        return int(np.count_nonzero(self.dirty[: self.size]))

    def entries(self) -> Iterator[tuple[Any, dict[str, Any]]]:
        """(key, column name -> its value) per row."""
        names = list(self.columns)
        columns = [self.column(name).tolist() for name in names]
        for key, *row in zip(self.keys[: self.size].tolist(), *columns, strict=True):
            yield key, dict(zip(names, row, strict=True))


class _BatchGroups:
    """A batch's kept pairs grouped: per pair its group, and per group its store and row."""

    __slots__ = (
        "order",
        "sizes",
        "stores",
        "store_groups",
        "rows",
        "_key_objects",
        "key_records",
        "store_of_group",
        "_group",
    )

    def __init__(
        self, order, sizes, stores, store_groups, rows, key_objects, key_records, store_of_group
    ) -> None:
        self.order = order  # the pairs sorted by group, in record order within a group
        self.sizes = sizes  # per group: its pairs
        self.stores = stores  # the groups' stores, in group order
        self.store_groups = store_groups  # per store: (first group, end group)
        self.rows = rows  # per group: its row in its store
        self._key_objects = key_objects  # per record: its key (an object array)
        self.key_records = key_records  # per group: its first pair's record, whose key object names it
        self.store_of_group = store_of_group  # per group: its store's index in `stores`
        self._group: np.ndarray | None = None

    @property
    def keys(self) -> np.ndarray:
        """Per group: its key (an object array)."""
        return self._key_objects[self.key_records]

    def keys_of(self, groups: np.ndarray) -> np.ndarray:
        """The keys of `groups` (group numbers), an object array: gathered for those groups only, as each
        reference taken is a write to a key object (a cache miss apiece among many keys)."""
        return self._key_objects[self.key_records[groups]]

    @property
    def group(self) -> np.ndarray:
        """Per pair: its group (made when first read: the fused final suppress does not)."""
        if self._group is None:
            self._group = np.empty(len(self.order), np.int64)
            self._group[self.order] = np.repeat(np.arange(len(self.sizes)), self.sizes)
        return self._group


def group_pairs(
    keys: Any,
    rec: np.ndarray,
    store_of_pair: np.ndarray,
    stores: list,
    by_rows: bool | None = None,
    numbers: KeyNumbers | None = None,
    str_keys: bool | None = None,
) -> _BatchGroups:
    """Groups of the pairs `(rec, store_of_pair)` (record, index into `stores`; `keys`: per record its key,
    a list or an object array): one per (store, key), by store then row, each group's pairs in record
    order. A store's new keys get rows in order of first appearance among its pairs; a group's key is the
    key object of its first pair.

    Where the stores are small next to the batch (few keys, many pairs per group), the batch's keys are
    numbered once, the pairs sorted by (store, key number), and each store looks up its groups' keys only;
    where they are large (many keys: about a look-up per pair either way), each store looks up its pairs'
    keys and the pairs are sorted by (store, row) at once (`by_rows`: that way or not, None: by the sizes).
    The groups are the same either way. `numbers`: the node's `KeyNumbers`, which number str keys over
    several stores either way: the look-ups by rows then take one per record, not one per pair, and the
    stores find their rows by number (`AggregateRows.rows_by_number`). `str_keys`: whether every key is a
    str, when the caller knows (None: found here, by the numbering while it holds str keys only, which
    checks the keys new to it, else by reading every key's type)."""
    key_objects = as_object_array(keys)
    key_number = None
    if str_keys is None:
        if numbers is not None and numbers.str_only() and len(stores) > 1:
            key_number = numbers.number_str(key_objects)
        str_keys = key_number is not None or set(map(type, keys)) == {str}
    if by_rows is None:
        by_rows = sum(map(len, stores)) > len(rec) // 2
    numbered = numbers if str_keys and len(stores) > 1 else None
    if numbered is not None and key_number is None:
        key_number = numbered.number(key_objects)
    if by_rows:
        return _group_by_rows(key_objects, str_keys, rec, store_of_pair, stores, numbered, key_number)
    # numbered by the node's numbers where it has them: the stores find their groups' rows by number, and
    # a store that grows large has its rows numbered already when the batches turn to look-ups by rows
    if numbered is not None:
        n_keys = max(len(numbered), 1)
    else:
        key_number, n_keys = _number_keys(key_objects, str_keys)
    order, sizes, codes = _sorted_runs(store_of_pair * n_keys + key_number[rec], len(stores) * n_keys)
    store_of_group = codes // n_keys
    store_groups = _store_ranges(store_of_group, len(stores))
    first = order[np.cumsum(sizes) - sizes]  # per group: its first pair
    key_records = rec[first]
    rows = np.empty(len(first), np.int64)
    for store, (lo, hi) in zip(stores, store_groups, strict=True):
        in_store = lo + np.argsort(first[lo:hi], kind="stable")  # by first appearance
        found = None
        if numbered is not None:
            first_rec = rec[first[in_store]]
            found = store.rows_by_number(numbered, key_number[first_rec], key_objects, first_rec)
        if found is None:
            found = store.rows_for(key_objects[key_records[in_store]], str_keys)
        rows[in_store] = found
    # the groups of each store in row order: the stores' columns, the value objects made per group and the
    # buffer's rows are then written and read in memory order (by a save too), not scattered
    base = np.cumsum([0] + [len(store) for store in stores])
    by_row = np.argsort(base[store_of_group] + rows)
    if (by_row != np.arange(len(by_row))).any():
        sizes_by_row = sizes[by_row]
        new_start = np.cumsum(sizes_by_row) - sizes_by_row
        old_start = np.cumsum(sizes) - sizes
        order = order[np.repeat(old_start[by_row] - new_start, sizes_by_row) + np.arange(len(order))]
        sizes, rows, key_records = sizes_by_row, rows[by_row], key_records[by_row]
    return _BatchGroups(order, sizes, stores, store_groups, rows, key_objects, key_records, store_of_group)


def _group_by_rows(
    key_objects,
    str_keys: bool,
    rec,
    store_of_pair,
    stores: list,
    numbers: KeyNumbers | None = None,
    key_number: np.ndarray | None = None,
) -> _BatchGroups:
    """`group_pairs` by a look-up of each pair's key in its store (by the keys' numbers in `numbers`:
    `key_number`, per key)."""
    by_store, store_sizes, _ = _sorted_runs(store_of_pair, len(stores))  # in record order within a store
    pair_row = np.empty(len(rec), np.int64)
    lo = 0
    for store, hi in zip(stores, np.cumsum(store_sizes).tolist(), strict=True):
        at = by_store[lo:hi]
        records = rec[at]
        rows = None
        if key_number is not None:
            rows = store.rows_by_number(numbers, key_number[records], key_objects, records)
        pair_row[at] = store.rows_for(key_objects[records], str_keys) if rows is None else rows
        lo = hi
    base = np.cumsum([0] + [len(store) for store in stores])  # the stores' rows numbered one after another
    order, sizes, ids = _sorted_runs(base[store_of_pair] + pair_row, int(base[-1]))
    store_of_group = np.searchsorted(base, ids, side="right") - 1
    first = order[np.cumsum(sizes) - sizes]
    return _BatchGroups(
        order,
        sizes,
        stores,
        _store_ranges(store_of_group, len(stores)),
        ids - base[store_of_group],
        key_objects,
        rec[first],
        store_of_group,
    )


def _sorted_runs(codes: np.ndarray, bound: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The stable sort of `codes` (each below `bound`; a radix sort for small ones), and its runs of equal
    codes: their lengths and codes."""
    order = stable_order(codes, bound)
    in_order = codes[order]
    starts_run = np.empty(len(order), bool)
    starts_run[:1] = True
    np.not_equal(in_order[1:], in_order[:-1], out=starts_run[1:])
    run_at = np.flatnonzero(starts_run)
    return order, np.diff(np.append(run_at, len(order))), in_order[run_at]


def stable_order(codes: np.ndarray, bound: int) -> np.ndarray:
    """`np.argsort(codes, kind="stable")` of non-negative int64 `codes` below `bound`. numpy sorts 16-bit
    ints by radix (a pass over the data per byte) and wider ones by merging (many passes): codes below 2**32
    are sorted by their low 16 bits, then stably by their high 16 bits, two radix sorts. Wider codes, where
    a code times their count fits an int64, are sorted with their positions as the low digits (distinct
    values: numpy's unstable sort, in SIMD passes, gives the stable order)."""
    if bound <= 1 << 16:
        return np.argsort(codes.astype(np.uint16), kind="stable")
    if bound > 1 << 32:
        n = len(codes)
        if bound <= (1 << 62) // max(n, 1):
            return np.argsort(codes * n + np.arange(n))
        return np.argsort(codes, kind="stable")
    by_low = np.argsort(codes.astype(np.uint16), kind="stable")  # astype keeps the low 16 bits
    high = (codes[by_low] >> 16).astype(np.uint16)
    return by_low[np.argsort(high, kind="stable")]


def first_appearances(codes: np.ndarray, bound: int) -> np.ndarray:
    """The positions of the first appearance of each distinct code among non-negative int64 `codes` below
    `bound`, ascending: `np.unique(codes, return_index=True)` in order of appearance, by a stable radix sort
    (`stable_order`) where np.unique merge-sorts the codes and the positions would be sorted again."""
    order = stable_order(codes, bound)
    in_order = codes[order]
    starts_run = np.empty(len(order), bool)
    starts_run[:1] = True
    np.not_equal(in_order[1:], in_order[:-1], out=starts_run[1:])
    # a run's first element is its code's first appearance: the sort is stable
    first = np.zeros(len(codes), bool)
    first[order[starts_run]] = True
    return np.flatnonzero(first)


def _store_ranges(store_of_group: np.ndarray, n_stores: int) -> list[tuple[int, int]]:
    """Per store, the range of its groups (sorted by store)."""
    bounds = np.searchsorted(store_of_group, np.arange(n_stores + 1)).tolist()
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def _number_keys(keys: np.ndarray, str_keys: bool) -> tuple[np.ndarray, int]:
    """Per key (an object array) a number, the same for equal keys: 0.. in order of first appearance."""
    table = KeyTable.new(len(keys)) if str_keys else None
    if table is not None:
        numbers, distinct = table.number(keys)
    else:
        numbers, distinct = number_by_first_appearance(keys.tolist(), 0)
    return numbers, max(len(distinct), 1)


def fold_groups(
    layout: AggregateLayout,
    groups: _BatchGroups,
    pair_ts: np.ndarray,
    fields: dict,
    pair_rec: np.ndarray,
    running: bool = True,
) -> GroupFolds:
    """Every state column's value per group after its last pair and before it, and with `running` after
    each pair (the pairs sorted by group); the groups' final values put into their stores. `fields`: per
    value field, its (values, valid) per record."""
    order, sizes = groups.order, groups.sizes
    m, n_groups = len(order), len(sizes)
    seg_end = np.cumsum(sizes)
    seg_start = seg_end - sizes
    prior: dict[str, np.ndarray] = {}
    for state in layout.columns:
        column = np.empty(n_groups, state.dtype)
        for store, (lo, hi) in zip(groups.stores, groups.store_groups, strict=True):
            column[lo:hi] = store.columns[state.name][groups.rows[lo:hi]]
        prior[state.name] = column
    plan = SegmentedFold(sizes)
    rank = np.arange(m) - np.repeat(seg_start, sizes) if running else None
    sorted_rec = pair_rec[order]
    finals: dict[str, np.ndarray] = {}
    befores: dict[str, np.ndarray] = {}
    runs: dict[str, np.ndarray] = {}
    for state in layout.columns:
        initial = prior[state.name]
        valid = fields[(state.field, state.reads)][1] if state.field is not None else None
        if state.fold == "count" or (state.fold == "n" and valid.all()):
            final = initial + sizes
            before = final - 1
            run = np.repeat(initial, sizes) + rank + 1 if running else None
        elif state.fold == "n":
            counted = valid[sorted_rec].astype(np.int64)
            total = np.cumsum(counted)
            base = initial - (
                total[seg_start] - counted[seg_start]
            )  # per group: its count minus the pairs' before it
            final = base + total[seg_end - 1]
            before = final - counted[seg_end - 1]
            run = np.repeat(base, sizes) + total if running else None
        elif state.fold == "ts":
            final, before, run = plan.fold(np.maximum, pair_ts[order], initial, running)
        else:
            numbers = fields[(state.field, state.reads)][0]
            values = numbers[sorted_rec]
            if not valid.all():
                values[~valid[sorted_rec]] = state.initial
            ufunc = {"sum": np.add, "min": np.minimum, "max": np.maximum}[state.fold]
            final, before, run = plan.fold(ufunc, values, initial, running)
        finals[state.name], befores[state.name] = final, before
        if running:
            runs[state.name] = run
    for store, (lo, hi) in zip(groups.stores, groups.store_groups, strict=True):
        store.put(groups.rows[lo:hi], {name: column[lo:hi] for name, column in finals.items()})
    return GroupFolds(groups, runs if running else None, prior, finals, befores, seg_start)


class GroupFolds:
    """A batch's groups folded: per state column, per group its value before the batch (`prior`), after
    its last pair (`finals`) and before that pair (`befores`), and, when folded with them, its value after
    each pair (`running`, the pairs sorted by group as `groups.order` has them)."""

    __slots__ = ("groups", "running", "prior", "finals", "befores", "seg_start")

    def __init__(
        self,
        groups: _BatchGroups,
        running: dict | None,
        prior: dict,
        finals: dict,
        befores: dict,
        seg_start: np.ndarray,
    ) -> None:
        self.groups = groups
        self.running = running
        self.prior = prior
        self.finals = finals
        self.befores = befores
        self.seg_start = seg_start  # per group: where its pairs begin in `running`

    def after(self) -> dict[str, np.ndarray]:
        """Per state column its value after each pair, in pair order."""
        return {name: _unsort(column, self.groups.order) for name, column in self.running.items()}

    def before(self) -> dict[str, np.ndarray]:
        """Per state column its value before each pair, in pair order."""
        before = {}
        for name, column in self.running.items():
            previous = np.empty_like(column)
            previous[1:] = column[:-1]
            previous[self.seg_start] = self.prior[name]
            before[name] = _unsort(previous, self.groups.order)
        return before

    def at_last_pairs(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Per state column, per group: its value after its last pair (the batch's), and before it."""
        return self.finals, self.befores


def _unsort(values: np.ndarray, order: np.ndarray) -> np.ndarray:
    out = np.empty_like(values)
    out[order] = values
    return out


def read_fields(layout: AggregateLayout, values: list) -> dict:
    """Per (field, dtype) the layout reads: the records' values and whether each is one."""
    return {(field, dtype): field_values(values, field, dtype) for field, dtype in layout.reads}


class FoldedBatch(NamedTuple):
    """A batch folded by a windowed declared aggregation: its kept (record, window) pairs, in output order
    (by record, then window start), grouped by (window, key), and their folds."""

    kept: np.ndarray | None  # the aggregated records' rows in the batch (None: every row)
    rec: np.ndarray  # per pair: its record, among the aggregated ones
    pair_ts: np.ndarray  # per pair: its record's timestamp
    window_starts: list[int]  # the windows of the pairs, ascending: the groups' stores, in order
    groups: _BatchGroups
    folds: GroupFolds


class _DeclaredAggregateNode(Node):
    """What the windowed and non-windowed declared aggregations share: their layout and scalars."""

    def __init__(self, name: str, declared: dict[str, DeclaredAggregate]) -> None:
        super().__init__(name)
        self.layout = AggregateLayout(declared)
        self.declared = declared

    def _split_nulls(self, keys, values, timestamps, headers, drop_null_values: bool):
        """The records to aggregate: (their indices in the batch or None for all, keys, the keys as an
        object array, values, ts, whether those keys are all str: None when not read). The null keys are
        found by the array's pointers, without reading a key object (a pass over a batch's keys that reads
        or takes a reference to each one costs a cache miss apiece among many keys): whether the keys are
        str, the grouping finds out (`group_pairs`), where a batch holds none."""
        n = len(keys)
        key_objects = object_array(keys)
        null = holds_none_object(key_objects) or (drop_null_values and holds_none(values))
        if not null:
            return None, keys, key_objects, values, np.fromiter(timestamps, np.int64, n), None
        key_types = set(map(type, keys))
        keep = [i for i in range(n) if keys[i] is not None and not (drop_null_values and values[i] is None)]
        self.count_dropped(n - len(keep))
        kept_keys = [keys[i] for i in keep]
        return (
            np.array(keep, np.int64),
            kept_keys,
            object_array(kept_keys),
            [values[i] for i in keep],
            np.fromiter((timestamps[i] for i in keep), np.int64, len(keep)),
            key_types - {type(None)} == {str},
        )

    def _outputs(self, after, before, out_keys, src, headers) -> Batch:
        layout = self.layout
        out_v = layout.structs(layout.value_columns(after))
        out_o = None if before is None else layout.structs(layout.value_columns(before))
        out_h = None if headers is None else [headers[i] for i in src]
        return Batch(out_keys, out_v, out_o, after["ts"].tolist(), out_h, src)

    def _scalars(self) -> Any:
        return {"declared": [(name, repr(a)) for name, a in self.declared.items()]}

    def _check_scalars(self, scalars: Any) -> None:
        if scalars["declared"] != self._scalars()["declared"]:
            raise ValueError(
                f"node {self.name}: the state holds aggregations {scalars['declared']}, this topology "
                f"declares {self._scalars()['declared']}: start from an empty state"
            )


class DeclaredWindowAggregateNode(_DeclaredAggregateNode):
    """`windowed_by(TimeWindows).agg(...)`: tumbling and hopping windows, a store per window start (the
    groups), which goes when the window closes."""

    drops_late = True

    def __init__(
        self, name: str, windows: TimeWindows, declared: dict[str, DeclaredAggregate], send_old_values: bool
    ) -> None:
        super().__init__(name, declared)
        self.windows = windows
        self.send_old_values = send_old_values
        self.observed = -1
        self.groups: dict[int, WindowedRows] = {}  # start -> its rows
        self.histories: dict[int, WindowParts] = {}  # start -> its rows' export history
        self.window_objects: dict[int, Window] = {}
        self.starts: list[int] = []  # heap of the groups' starts
        self.key_numbers = KeyNumbers()

    def process_columns(self, keys, values, olds, timestamps, headers):
        folded = self.fold_batch(keys, values, timestamps, headers)
        if folded is None:
            self.drop_closed_windows()
            return None
        groups, rec, kept = folded.groups, folded.rec, folded.kept
        # a Windowed key per group, which its pairs' output rows share
        windows = object_array([self.window_objects[s] for s in folded.window_starts])
        group_keys = groups.keys.tolist()
        windowed = map(
            tuple.__new__,
            repeat(Windowed),
            zip(group_keys, windows[groups.store_of_group].tolist(), strict=True),
        )
        out_keys = object_array(list(windowed))[groups.group].tolist()
        src = (rec if kept is None else kept[rec]).tolist() if self.need_src or headers is not None else None
        self.drop_closed_windows()
        folds = folded.folds
        before = folds.before() if self.send_old_values else None
        return self._outputs(folds.after(), before, out_keys, src, headers)

    def fold_batch(self, keys, values, timestamps, headers, running: bool = True) -> FoldedBatch | None:
        """A batch's records folded into the store (late pairs counted, null keys dropped); None when no
        pair is kept. `running`: the folds hold each pair's value too, not only each group's last two. The
        closed windows are still held: the caller deletes them (`drop_closed_windows`) once it has read what
        it needs of them."""
        kept, keys, key_objects, values, ts, str_keys = self._split_nulls(
            keys, values, timestamps, headers, False
        )
        if not len(keys):
            return None
        observed = np.maximum(np.maximum.accumulate(ts), self.observed)
        rec, start, open_ = self.windows.pairs(ts, observed)
        self.observed = int(observed[-1])
        if not open_.all():
            late = rec[~open_]
            late_starts = start[~open_]
            self.count_late(
                (late if kept is None else kept[late]).tolist(),
                [keys[i] for i in late.tolist()],
                [values[i] for i in late.tolist()],
                ts[late].tolist(),
                late_starts.tolist(),
                [start + self.windows.size for start in late_starts.tolist()],
                observed[late].tolist(),
            )
            rec, start = rec[open_], start[open_]
        if not len(rec):
            return None
        window_starts, store_of_pair = self._window_numbers(start)
        stores = []
        for window_start in window_starts.tolist():
            rows = self.groups.get(window_start)
            if rows is None:
                rows = self.open_window(window_start)
            stores.append(rows)
        if self.key_numbers.stale(sum(map(len, self.groups.values()))):
            self.key_numbers = KeyNumbers()
            for rows in self.groups.values():
                rows.forget_numbers()
        groups = group_pairs(
            key_objects, rec, store_of_pair, stores, numbers=self.key_numbers, str_keys=str_keys
        )
        fields = read_fields(self.layout, values)
        pair_ts = ts[rec]
        folds = fold_groups(self.layout, groups, pair_ts, fields, rec, running)
        return FoldedBatch(kept, rec, pair_ts, window_starts.tolist(), groups, folds)

    def _window_numbers(self, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`np.unique(start, return_inverse=True)`: the distinct window starts, ascending, and per pair the
        number of its start among them. Starts are multiples of the advance, so while they span few
        advances they are counted in a table, not sorted."""
        advance = self.windows.advance
        low = int(start.min())
        slot = (start - low) // advance
        span = int(slot.max()) + 1
        if span > 4 * len(start) + 64:
            return np.unique(start, return_inverse=True)
        present = np.flatnonzero(np.bincount(slot, minlength=span))
        number = np.empty(span, np.int64)
        number[present] = np.arange(len(present))
        return low + present * advance, number[slot]

    def open_window(self, start: int) -> WindowedRows:
        heappush(self.starts, start)
        return self._new_window(start)

    def _new_window(self, start: int) -> WindowedRows:
        rows = self.groups[start] = WindowedRows(self.layout)
        self.histories[start] = WindowParts(rows, start)
        self.window_objects[start] = tuple.__new__(Window, (start, start + self.windows.size))
        return rows

    def _drop_window(self, start: int) -> None:
        del self.groups[start], self.histories[start], self.window_objects[start]

    def drop_closed_windows(self) -> None:
        """Delete the windows that closed (end + grace <= observed time), as a batch ends."""
        starts, is_open = self.starts, self.windows.is_open
        while starts and not is_open(starts[0], self.observed):
            self._drop_window(heappop(starts))

    def get(self, windowed_key):
        rows = self.groups.get(windowed_key[1][0])
        if rows is None:
            return None
        row = rows.row_of(windowed_key[0])
        if row is None:
            return None
        state = {name: rows.columns[name][row] for name in rows.columns}
        return self.layout.struct(state), int(state["ts"])

    def state_rows(self) -> Iterator[StateRow]:
        size = self.windows.size
        for start in sorted(self.groups):
            for key, state in self.groups[start].entries():
                yield StateRow("window", key, start, start + size, self.layout.struct(state), state["ts"])

    def state_size(self) -> tuple[int, int]:
        return sum(map(len, self.groups.values())), len(self.groups)

    def _scalars(self) -> Any:
        return {**super()._scalars(), "observed": self.observed}

    # State parts: "" the scalars; per window its WindowParts' (nodes/time_window_store.py).
    def export_parts(self, changed_only):
        parts, names = export_windows(self.histories, changed_only)
        parts[""] = self._scalars()
        return parts, ["", *names]

    def state_parts(self):
        parts = windows_state_parts(self.histories)
        parts[""] = self._scalars()
        return parts

    def apply_parts(self, parts, removed):
        if "" in parts:
            scalars = parts.pop("")
            self._check_scalars(scalars)
            self.observed = scalars["observed"]
        apply_window_parts(self.histories, parts, removed, self._new_window, self._drop_window)
        self.starts = sorted(self.groups)


class KeyedRows(AggregateRows):
    """A non-windowed declared aggregation's store: its rows saved as a row store's (RowParts,
    nodes/kv_rows.py), a delta of the rows changed per export and the bases of its groups of rows in turn."""

    __slots__ = ()

    def saved_columns(self, rows: Any) -> dict[str, np.ndarray]:
        return {name: column[rows] for name, column in self.columns.items()}

    def load_columns(self, rows: Any, columns: dict, name: str) -> None:
        if set(columns) != set(self.columns):
            raise ValueError(
                f"state part {name!r}: columns {sorted(columns)}, this aggregation has {sorted(self.columns)}"
            )
        for column_name, values in columns.items():
            self.columns[column_name][rows] = values

    def loaded(self) -> None:
        self._index, self._table = None, None
        self.dirty[: self.size] = False
        self.saved = self.size


class WindowedRows(KeyedRows):
    """A window's store of a windowed declared aggregation: saved as a window's rows (WindowParts,
    nodes/time_window_store.py), its keys apart from its rows' fields."""

    __slots__ = ()
    keys_apart = True

    def append_keys(self, keys: list) -> None:
        """Rows for `keys` with the initial values, which a load sets next."""
        first = self.size
        self._append(keys)
        self.dirty[first : self.size] = False


class DeclaredStreamAggregateNode(_DeclaredAggregateNode):
    """`group_by_key().agg(...)` without windows: one store of every key (`KeyedRows`, parts `kv.<n>` and
    `kv<group>.0`); skips null keys and null values (docs/semantics.md 4.4)."""

    def __init__(self, name: str, declared: dict[str, DeclaredAggregate]) -> None:
        super().__init__(name, declared)
        self.store = KeyedRows(self.layout)
        self.parts = RowParts(KEY_VALUE_PREFIX)

    def process_columns(self, keys, values, olds, timestamps, headers):
        kept, keys, key_objects, values, ts, str_keys = self._split_nulls(
            keys, values, timestamps, headers, True
        )
        if not len(keys):
            return None
        rec = np.arange(len(keys))
        groups = group_pairs(key_objects, rec, np.zeros(len(keys), np.int64), [self.store], str_keys=str_keys)
        fields = read_fields(self.layout, values)
        folds = fold_groups(self.layout, groups, ts, fields, rec)
        after, before = folds.after(), folds.before()
        src = (rec if kept is None else kept).tolist()
        return self._outputs(after, before, keys, src, headers)

    def get(self, key):
        store = self.store
        row = store.row_of(key)
        if row is None:
            return None
        state = {name: store.columns[name][row] for name in store.columns}
        return self.layout.struct(state), int(state["ts"])

    def state_size(self) -> tuple[int, int]:
        return len(self.store), 0

    def state_rows(self) -> Iterator[StateRow]:
        for key, state in self.store.entries():
            yield StateRow("key_value", key, None, None, self.layout.struct(state), state["ts"])

    def export_parts(self, changed_only):
        parts, names = self.parts.export(self.store, changed_only)
        parts[""] = self._scalars()
        return parts, ["", *names]

    def state_parts(self):
        parts = self.parts.state_parts(self.store)
        parts[""] = self._scalars()
        return parts

    def apply_parts(self, parts, removed):
        if "" in parts:
            self._check_scalars(parts.pop(""))
        self.parts.apply(self.store, parts, removed)


# -- session windows: the declarations as a user aggregate with a merger -----------------------------------


class DeclaredValue(dict):
    """A declared aggregation's value (the dict of declared names) that also carries its state columns
    (`state`: per column of the layout, in order, its value), which merging sessions needs (a mean is
    merged from sums and value counts that the dict does not show)."""

    __slots__ = ("state",)


def read_value(value: Any, field: str, dtype: np.dtype) -> Any:
    """One record's value of `field` as `field_values` reads it, or None where it has none."""
    x = value.get(field) if isinstance(value, dict) else None
    if dtype == _FLOAT:
        f = _as_float(x)
        return None if f != f else f
    return x if _is_int64(x) else None


def session_aggregation(layout: AggregateLayout) -> Any:
    """The declarations as `Aggregation(initializer, aggregator, merger)` for the session window node
    (nodes/aggregations.py), which calls them once per record and per merged session: the record-at-a-time
    path of session windows (their merging runs per key), folding exactly as `fold_groups` does."""
    from .aggregations import Aggregation

    columns = layout.columns
    position = {state.name: i for i, state in enumerate(columns)}
    folds = [(i, state) for i, state in enumerate(columns) if state.fold not in ("count", "ts")]

    def value_of(state: list) -> DeclaredValue:
        row = {name: np.asarray([state[position[name]]], columns[position[name]].dtype) for name in position}
        out = DeclaredValue(layout.structs(layout.value_columns(row))[0])
        out.state = state
        return out

    def initializer() -> DeclaredValue:
        return value_of([state.dtype.type(state.initial).item() for state in columns])

    def aggregator(key: Any, value: Any, agg: DeclaredValue) -> DeclaredValue:
        state = list(agg.state)
        state[position["count"]] += 1
        for i, column in folds:
            x = read_value(value, column.field, column.reads)
            if x is not None:
                state[i] = _fold(column, state[i], 1 if column.fold == "n" else x)
        return value_of(state)

    def merger(key: Any, agg1: DeclaredValue, agg2: DeclaredValue) -> DeclaredValue:
        state = list(agg1.state)
        state[position["count"]] += agg2.state[position["count"]]
        for i, column in folds:
            state[i] = _fold(column, state[i], agg2.state[i])
        return value_of(state)

    return Aggregation("aggregate", initializer, aggregator, merger=merger)


def _fold(column: StateColumn, current: Any, x: Any) -> Any:
    """`x` folded into a state column's value, as the column's numpy ufunc does (for min and max, of equal
    values the later one; int64 sums wrap around)."""
    if column.fold in ("n", "sum"):
        total = current + x
        if column.dtype == _INT:
            total = (total + 2**63) % 2**64 - 2**63
        return total
    if column.fold == "min":
        return current if current < x else x
    return current if current > x else x
