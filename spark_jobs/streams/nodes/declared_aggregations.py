"""Declared aggregations (spark_jobs/streams/aggregates.py) of grouped streams: numpy over a batch.

A batch becomes groups, one per (window, key) of its kept (record, window) pairs, or per key without
windows. Each group's running values in record order come from cumulative forms over the pairs sorted by
group (`segmented_accumulate`), so every pair still emits its window's value after it, as the
user-function aggregate does (docs/semantics.md 4.2, 4.3): the same output rows in the same order (by
record, then window start), the same timestamps (the maximum of the contributing records), the same late
pairs (Node.count_late) and null keys dropped. No Python function runs per record; Python objects are
made only for the output rows (keys, the value dicts) and the field values read from the records.

State: per window (or the one key-value group), an `AggregateRows`: the keys, a numpy column per state
column (the record count, the maximum timestamp, per value field the number of values, per declared sum,
min and max its accumulator) and a dirty flag per row; a state export saves the rows changed since the
last one through the store's log (nodes/store_log.py), as window stores do.
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
from .base import Batch, Node, StateRow
from .key_table import KeyTable, number_by_first_appearance, object_array
from .store_log import StoreLog

INT64_MIN, INT64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max
_FLOAT = np.dtype(np.float64)
_INT = np.dtype(np.int64)
KEY_VALUE_GROUP = "kv"  # the one group of a non-windowed aggregation's store


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
        # the value dicts of a row of columns, in one comprehension (the names as literals: a dict display
        # builds each dict in place, where dict(zip(names, row)) makes a zip and a call per row)
        items = ", ".join(f"{name!r}: _{i}" for i, name in enumerate(self.names))
        variables = ", ".join(f"_{i}" for i in range(len(self.names)))
        self.structs = eval(  # noqa: S307 - built from repr() of the names only
            f"lambda columns: [{{{items}}} for {variables}, in zip(*columns)]"
        )

    def value_columns(self, state: dict[str, np.ndarray]) -> list[list]:
        """The output fields, each a list over the rows of `state` (column name -> array)."""
        out = []
        for kind, name, counted in self.outputs:
            values = state[name]
            if kind == "count":
                out.append(values.tolist())
                continue
            n = state[counted]
            if kind == "mean":
                with np.errstate(invalid="ignore", divide="ignore"):
                    values = values / n
            missing = n == 0
            if missing.any():
                objects = values.astype(object)
                objects[missing] = None
                out.append(objects.tolist())
            else:
                out.append(values.tolist())
        return out

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


def segmented_accumulate(
    ufunc: np.ufunc, values: np.ndarray, sizes: np.ndarray, initial: np.ndarray
) -> np.ndarray:
    """`values` holds segments one after another (`sizes`, each at least 1); per element, `ufunc` folded
    left to right from its segment's `initial` over the segment's elements up to it, as a loop would (for
    floats to the last bit: no reassociation). Segments of similar length share a matrix, a row each, which
    `ufunc.accumulate` runs along; padding follows the elements, so it never reaches them."""
    out = np.empty(len(values), values.dtype)
    ends = np.cumsum(sizes)
    starts = ends - sizes
    length_class = np.zeros(len(sizes), np.int64)
    above = sizes > 1
    length_class[above] = np.ceil(np.log2(sizes[above])).astype(np.int64)
    for cls in np.unique(length_class).tolist():
        segments = np.flatnonzero(length_class == cls)
        if cls == 0:  # segments of one element
            at = starts[segments]
            with np.errstate(over="ignore", invalid="ignore"):
                out[at] = ufunc(initial[segments], values[at])
            continue
        lengths = sizes[segments]
        width = int(lengths.max())
        matrix = np.zeros((len(segments), width + 1), values.dtype)
        matrix[:, 0] = initial[segments]
        total = int(lengths.sum())
        row = np.repeat(np.arange(len(segments)), lengths)
        col = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths) + 1
        at = np.repeat(starts[segments], lengths) + col - 1
        matrix[row, col] = values[at]
        with np.errstate(over="ignore", invalid="ignore"):
            ufunc.accumulate(matrix, axis=1, out=matrix)
        out[at] = matrix[row, col]
    return out


class AggregateRows:
    """One group's entries: key -> row, a numpy column per state column, a dirty flag per row.

    Rows are appended when a key first enters the group and never die. Keys are looked up a batch at a
    time, in a `KeyTable` while they are str (nodes/key_table.py), else in a dict.
    """

    __slots__ = ("layout", "keys", "columns", "size", "dirty", "saved", "_index", "_table")

    def __init__(self, layout: AggregateLayout) -> None:
        self.layout = layout
        self.keys: list = []
        self.columns = {c.name: np.empty(0, c.dtype) for c in layout.columns}
        self.size = 0
        self.dirty = np.zeros(0, bool)
        self.saved = 0  # rows the last export (or import) saw
        self._index: dict | None = None
        self._table: KeyTable | None | bool = None  # None: not built, False: a key is not a str

    def __len__(self) -> int:
        return self.size

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
                self._append(new_keys.tolist())
        return rows

    def _rows_by_table(self, keys: np.ndarray) -> np.ndarray | None:
        table = self._table
        if table is None:
            table = KeyTable.new(max(len(keys), self.size))
            if table is None or not table.add(self.keys):
                self._table = False
                return None
            self._table = table
        rows, new_keys = table.number(keys)
        table.confirm(len(new_keys))
        if len(new_keys):
            self._append(new_keys.tolist())
        return rows

    def row_of(self, key: Any) -> int | None:
        return self._key_index().get(key)

    def _key_index(self) -> dict:
        if self._index is None:
            self._index = dict(zip(self.keys, range(self.size), strict=True))
        return self._index

    def _append(self, new_keys: list) -> None:
        """Rows for `new_keys`, with the initial values (a KeyTable or index already numbered them)."""
        first, end = self.size, self.size + len(new_keys)
        self._reserve(end)
        for state in self.layout.columns:
            self.columns[state.name][first:end] = state.initial
        self.keys += new_keys
        if self._index is not None and self._table is not False:
            self._index = None  # numbered by the table: built again when needed
        self.size = end

    def _reserve(self, rows: int) -> None:
        capacity = len(self.dirty)
        if rows <= capacity:
            return
        capacity = max(rows, 2 * capacity, 16)
        for name, column in self.columns.items():
            grown = np.empty(capacity, column.dtype)
            grown[: self.size] = column[: self.size]
            self.columns[name] = grown
        dirty = np.zeros(capacity, bool)
        dirty[: self.size] = self.dirty[: self.size]
        self.dirty = dirty

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
        for key, *row in zip(self.keys, *columns, strict=True):
            yield key, dict(zip(names, row, strict=True))

    # -- saving and loading: a base {"keys", "columns"}, a delta {"from", "keys", "rows", "columns"} ------

    def save(self, changed_only: bool) -> dict[str, Any]:
        first, self.saved = self.saved, self.size
        if not changed_only:
            self.dirty[: self.size] = False
            return self.base()
        rows = np.flatnonzero(self.dirty[: self.size])
        self.dirty[: self.size] = False
        return {
            "from": first,
            "keys": self.keys[first:],
            "rows": rows,
            "columns": {name: column[rows] for name, column in self.columns.items()},
        }

    def base(self) -> dict[str, Any]:
        """Every row (the live key list and column views: pickle it before the group changes, as every
        export and snapshot does)."""
        return {"keys": self.keys, "columns": {name: self.column(name) for name in self.columns}}

    def load(self, saved: dict[str, Any], name: str) -> None:
        """Apply a saved base (to an empty group) or delta (to the rows it continues)."""
        columns = saved["columns"]
        if set(columns) != set(self.columns):
            raise ValueError(
                f"state part {name!r}: columns {sorted(columns)}, this aggregation has {sorted(self.columns)}"
            )
        if "rows" not in saved:
            if self.size:
                raise ValueError(f"state part {name!r}: a base for a group that has rows")
            keys = list(saved["keys"])  # the loader may share the list with other parts
            self.keys = []
            self._append(keys)
            for column_name, values in columns.items():
                self.columns[column_name][: self.size] = values
        else:
            if saved["from"] != self.size:
                raise ValueError(
                    f"state part {name!r} continues {saved['from']} rows, the group has {self.size}"
                )
            self._append(list(saved["keys"]))
            rows = saved["rows"]
            for column_name, values in columns.items():
                self.columns[column_name][rows] = values
        self._index = None
        self._table = None
        self.dirty[: self.size] = False
        self.saved = self.size


class _BatchGroups:
    """A batch's kept pairs grouped: per pair its group, and per group its store and row."""

    __slots__ = (
        "group",
        "order",
        "sizes",
        "stores",
        "store_groups",
        "rows",
        "keys",
        "store_of_group",
    )

    def __init__(self, group, order, sizes, stores, store_groups, rows, keys, store_of_group) -> None:
        self.group = group  # per pair: its group
        self.order = order  # the pairs sorted by group, in record order within a group
        self.sizes = sizes  # per group: its pairs
        self.stores = stores  # the groups' stores, in group order
        self.store_groups = store_groups  # per store: (first group, end group)
        self.rows = rows  # per group: its row in its store
        self.keys = keys  # per group: its key (an object array)
        self.store_of_group = store_of_group  # per group: its store's index in `stores`


def group_pairs(keys: list, rec: np.ndarray, store_of_pair: np.ndarray, stores: list) -> _BatchGroups:
    """Groups of the pairs `(rec, store_of_pair)` (record, index into `stores`): one per (store, key). Each
    pair's key is looked up in its store once (numbering the batch's keys first, then looking up each
    store's distinct keys, costs more even at a few keys); a store's new keys get rows in order of first
    appearance among its pairs."""
    key_objects = object_array(keys)
    str_keys = set(map(type, keys)) == {str}
    by_store = np.argsort(store_of_pair, kind="stable")  # in record order within a store
    store_ends = np.cumsum(np.bincount(store_of_pair, minlength=len(stores)))
    pair_row = np.empty(len(rec), np.int64)
    lo = 0
    for store, hi in zip(stores, store_ends.tolist(), strict=True):
        at = by_store[lo:hi]
        pair_row[at] = store.rows_for(key_objects[rec[at]], str_keys)
        lo = hi
    base = np.cumsum([0] + [len(store) for store in stores])  # the stores' rows numbered one after another
    pair_group_id = base[store_of_pair] + pair_row
    # one stable sort: the pairs by group, in record order within a group
    order = np.argsort(pair_group_id, kind="stable")
    sorted_ids = pair_group_id[order]
    starts_group = np.empty(len(order), bool)
    starts_group[:1] = True
    np.not_equal(sorted_ids[1:], sorted_ids[:-1], out=starts_group[1:])
    group_at = np.flatnonzero(starts_group)
    ids, first = sorted_ids[group_at], order[group_at]
    sizes = np.diff(np.append(group_at, len(order)))
    group = np.empty(len(order), np.int64)
    group[order] = np.cumsum(starts_group) - 1
    store_of_group = np.searchsorted(base, ids, side="right") - 1
    bounds = np.searchsorted(ids, base).tolist()
    store_groups = list(zip(bounds[:-1], bounds[1:], strict=True))
    rows = ids - base[store_of_group]
    return _BatchGroups(
        group, order, sizes, stores, store_groups, rows, key_objects[rec[first]], store_of_group
    )


def fold_groups(
    layout: AggregateLayout, groups: _BatchGroups, pair_ts: np.ndarray, fields: dict, pair_rec: np.ndarray
) -> GroupFolds:
    """Every state column's value after each pair, the pairs sorted by group; the groups' final values put
    into their stores. `fields`: per value field, its (values, valid) per record."""
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
    rank = np.arange(m) - np.repeat(seg_start, sizes)
    sorted_rec = pair_rec[order]
    running: dict[str, np.ndarray] = {}
    for state in layout.columns:
        initial = prior[state.name]
        if state.fold == "count":
            column = np.repeat(initial, sizes) + rank + 1
        elif state.fold == "ts":
            column = segmented_accumulate(np.maximum, pair_ts[order], sizes, initial)
        elif state.fold == "n":
            valid = fields[(state.field, state.reads)][1]
            if valid.all():
                column = np.repeat(initial, sizes) + rank + 1
            else:
                counted = valid[sorted_rec].astype(np.int64)
                total = np.cumsum(counted)
                column = np.repeat(initial - (total[seg_start] - counted[seg_start]), sizes) + total
        else:
            numbers, valid = fields[(state.field, state.reads)]
            values = numbers[sorted_rec]
            if not valid.all():
                values[~valid[sorted_rec]] = state.initial
            ufunc = {"sum": np.add, "min": np.minimum, "max": np.maximum}[state.fold]
            column = segmented_accumulate(ufunc, values, sizes, initial)
        running[state.name] = column
    final_at = seg_end - 1
    for store, (lo, hi) in zip(groups.stores, groups.store_groups, strict=True):
        store.put(groups.rows[lo:hi], {name: column[final_at[lo:hi]] for name, column in running.items()})
    return GroupFolds(groups, running, prior, seg_start)


class GroupFolds:
    """A batch's groups folded: per state column its value after each pair (`running`, the pairs sorted by
    group as `groups.order` has them) and per group its value before the batch (`prior`)."""

    __slots__ = ("groups", "running", "prior", "seg_start")

    def __init__(self, groups: _BatchGroups, running: dict, prior: dict, seg_start: np.ndarray) -> None:
        self.groups = groups
        self.running = running
        self.prior = prior
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
        last = self.seg_start + self.groups.sizes - 1
        single = self.groups.sizes == 1
        finals, olds = {}, {}
        for name, column in self.running.items():
            finals[name] = column[last]
            olds[name] = np.where(single, self.prior[name], column[np.maximum(last - 1, 0)])
        return finals, olds


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
    window_starts: list[int]  # the windows of the pairs, ascending: the groups' stores, in order
    groups: _BatchGroups
    folds: GroupFolds


class _DeclaredAggregateNode(Node):
    """What the windowed and non-windowed declared aggregations share: their layout and store log."""

    def __init__(self, name: str, declared: dict[str, DeclaredAggregate]) -> None:
        super().__init__(name)
        self.layout = AggregateLayout(declared)
        self.declared = declared
        self.groups: dict[Any, AggregateRows] = {}
        self.log = StoreLog()

    def _split_nulls(self, keys, values, timestamps, headers, drop_null_values: bool):
        """The records to aggregate: (their indices in the batch or None for all, keys, values, ts)."""
        n = len(keys)
        null = None in keys or (drop_null_values and None in values)
        if not null:
            return None, keys, values, np.fromiter(timestamps, np.int64, n)
        keep = [i for i in range(n) if keys[i] is not None and not (drop_null_values and values[i] is None)]
        self.count_dropped(n - len(keep))
        return (
            np.array(keep, np.int64),
            [keys[i] for i in keep],
            [values[i] for i in keep],
            np.fromiter((timestamps[i] for i in keep), np.int64, len(keep)),
        )

    def _outputs(self, after, before, out_keys, src, headers) -> Batch:
        layout = self.layout
        out_v = layout.structs(layout.value_columns(after))
        out_o = None if before is None else layout.structs(layout.value_columns(before))
        out_h = None if headers is None else [headers[i] for i in src]
        return Batch(out_keys, out_v, out_o, after["ts"].tolist(), out_h, src)

    def _group_name(self, group: Any) -> str:
        return str(group)

    def export_parts(self, changed_only):
        parts, names = self.log.export(
            self.groups, changed_only, self._group_name, self._save, AggregateRows.changes
        )
        parts[""] = self._scalars()
        return parts, ["", *names]

    def state_parts(self):
        parts = self.log.bases(self.groups, self._group_name, lambda group: self.groups[group].base())
        parts[""] = self._scalars()
        return parts

    def _save(self, group: Any, put: dict | None) -> dict:
        return self.groups[group].save(changed_only=put is not None)

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
        self.window_objects: dict[int, Window] = {}
        self.starts: list[int] = []  # heap of the groups' starts

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

    def fold_batch(self, keys, values, timestamps, headers) -> FoldedBatch | None:
        """A batch's records folded into the store (late pairs counted, null keys dropped); None when no
        pair is kept. The closed windows are still held: the caller deletes them (`drop_closed_windows`)
        once it has read what it needs of them."""
        kept, keys, values, ts = self._split_nulls(keys, values, timestamps, headers, False)
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
        window_starts, store_of_pair = np.unique(start, return_inverse=True)
        stores = []
        for window_start in window_starts.tolist():
            rows = self.groups.get(window_start)
            if rows is None:
                rows = self.open_window(window_start)
            self.log.touch(window_start)
            stores.append(rows)
        groups = group_pairs(keys, rec, store_of_pair, stores)
        fields = read_fields(self.layout, values)
        folds = fold_groups(self.layout, groups, ts[rec], fields, rec)
        return FoldedBatch(kept, rec, window_starts.tolist(), groups, folds)

    def open_window(self, start: int) -> AggregateRows:
        heappush(self.starts, start)
        return self._new_window(start)

    def _new_window(self, start: int) -> AggregateRows:
        rows = self.groups[start] = AggregateRows(self.layout)
        self.window_objects[start] = tuple.__new__(Window, (start, start + self.windows.size))
        return rows

    def drop_closed_windows(self) -> None:
        """Delete the windows that closed (end + grace <= observed time), as a batch ends."""
        starts, is_open = self.starts, self.windows.is_open
        while starts and not is_open(starts[0], self.observed):
            start = heappop(starts)
            del self.groups[start], self.window_objects[start]
            self.log.drop(start)

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

    def apply_parts(self, parts, removed):
        if "" in parts:
            scalars = parts.pop("")
            self._check_scalars(scalars)
            self.observed = scalars["observed"]
        dropped, steps = self.log.catch_up(parts, removed, int)
        for start in dropped:
            del self.groups[start], self.window_objects[start]
        for start, saved, gone in steps:
            if gone:
                raise ValueError(f"node {self.name}: window {start} part removes keys, rows never leave")
            rows = self.groups.get(start)
            if rows is None:
                rows = self._new_window(start)
            rows.load(saved, f"{self.name}/{start}")
        self.starts = sorted(self.groups)


class DeclaredStreamAggregateNode(_DeclaredAggregateNode):
    """`group_by_key().agg(...)` without windows: one store of every key; skips null keys and null values
    (docs/semantics.md 4.4)."""

    def process_columns(self, keys, values, olds, timestamps, headers):
        kept, keys, values, ts = self._split_nulls(keys, values, timestamps, headers, True)
        if not len(keys):
            return None
        store = self.groups.get(KEY_VALUE_GROUP)
        if store is None:
            store = self.groups[KEY_VALUE_GROUP] = AggregateRows(self.layout)
        self.log.touch(KEY_VALUE_GROUP)
        rec = np.arange(len(keys))
        groups = group_pairs(keys, rec, np.zeros(len(keys), np.int64), [store])
        fields = read_fields(self.layout, values)
        folds = fold_groups(self.layout, groups, ts, fields, rec)
        after, before = folds.after(), folds.before()
        src = (rec if kept is None else kept).tolist()
        return self._outputs(after, before, keys, src, headers)

    def get(self, key):
        store = self.groups.get(KEY_VALUE_GROUP)
        row = None if store is None else store.row_of(key)
        if row is None:
            return None
        state = {name: store.columns[name][row] for name in store.columns}
        return self.layout.struct(state), int(state["ts"])

    def state_size(self) -> tuple[int, int]:
        return sum(map(len, self.groups.values())), 0

    def state_rows(self) -> Iterator[StateRow]:
        store = self.groups.get(KEY_VALUE_GROUP)
        if store is not None:
            for key, state in store.entries():
                yield StateRow("key_value", key, None, None, self.layout.struct(state), state["ts"])

    def apply_parts(self, parts, removed):
        if "" in parts:
            self._check_scalars(parts.pop(""))
        dropped, steps = self.log.catch_up(parts, removed, str)
        for group in dropped:
            del self.groups[group]
        for group, saved, gone in steps:
            if gone:
                raise ValueError(f"node {self.name}: part {group} removes keys, rows never leave")
            store = self.groups.get(group)
            if store is None:
                store = self.groups[group] = AggregateRows(self.layout)
            store.load(saved, f"{self.name}/{group}")


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
