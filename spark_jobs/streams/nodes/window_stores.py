"""The session store, the sliding-window store and the join window stores: a structure per key, in rows
saved by column (the session store: SessionRows, through RowParts, nodes/kv_rows.py), in a KeyValueStore
(nodes/kv_store.py) or by segment of event time (the join stores), each saving what a batch changed, so
an export writes in proportion to what changed. Each store keeps its own clock (`store_time`) and retention, as Kafka's segmented stores
do: an entry older than the retention is neither found nor put (`put` says so: the caller counts the
record as late). Each store counts its live entries (and per window, where windows are shared by keys:
`WindowCounts`) as it changes, so that a node's state size (`Node.state_size`, read every micro-batch)
needs no pass over the entries; a join store keeps its records' timestamps in sorted int64 runs
(`TimestampCounts`), whose distinct ones a join counts in numpy passes. A session window belongs to its
key: a session store's windows are its sessions.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Iterator, Mapping, Sequence
from heapq import heapify, heappop, heappush
from itertools import accumulate, chain, compress, repeat
from operator import is_not, itemgetter, le, not_, sub
from typing import Any, NamedTuple

import numpy as np

from ..records import Window, Windowed
from .declared_aggregations import stable_order
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
from .kv_rows import (
    FEW_KEYS,
    KEY_SEPARATOR,
    RowParts,
    SavedByRowParts,
    joins_keys,
    loaded_row_keys,
    saved_keys,
)
from .kv_store import KeyValueStore
from .late_rows import LateRows
from .store_log import StoreLog


class WindowCounts:
    """A store's live entries per window (what its `items` list), kept as the store changes. A window is
    live while its bound (a session's end, a sliding window's start, a joined record's timestamp) is above
    the store's expiry limit (`store_time - retention`). That limit only grows, so `expire` drops a window
    at or below it for good: its entries are neither listed nor put again, and their physical deletion
    needs no count."""

    __slots__ = ("counts", "entries", "_bounds")

    def __init__(self) -> None:
        self.counts: dict[Any, int] = {}  # window -> its live entries (> 0)
        self.entries = 0
        self._bounds: list[tuple[int, Any]] = []  # heap of (bound, window); a window dropped since may stay

    def add(self, window: Any, bound: int | None) -> None:
        """One more entry in `window` (`bound` None: a window that never expires)."""
        n = self.counts.get(window)
        if n is None:
            self.counts[window] = 1
            if bound is not None:
                heappush(self._bounds, (bound, window))
        else:
            self.counts[window] = n + 1
        self.entries += 1

    def remove(self, window: Any) -> None:
        """One entry fewer in `window` (nothing where the window expired already)."""
        n = self.counts.get(window)
        if n is None:
            return
        self.entries -= 1
        if n == 1:
            del self.counts[window]
        else:
            self.counts[window] = n - 1

    def expire(self, limit: int) -> None:
        """Drop the windows whose bound is at or below `limit`."""
        bounds, counts = self._bounds, self.counts
        while bounds and bounds[0][0] <= limit:
            window = heappop(bounds)[1]
            n = counts.pop(window, None)
            if n is not None:
                self.entries -= n

    def clear(self) -> None:
        self.counts = {}
        self.entries = 0
        self._bounds = []


NO_LIMIT = int(np.iinfo(np.int64).max)  # above every timestamp
# Timestamps a join store's counts keep in a Python list (sorted when a look at them needs it) before they
# make a run of their own: a short batch's timestamps, as topics take turns, cost no numpy call.
FRESH_RUN = 1024


class TimestampCounts:
    """A join store's live records by timestamp (a record's window is its timestamp, which is also its
    bound), kept a batch at a time: `add_batch` adds a batch's timestamps to the fresh ones, and `expire`
    drops those at or below the limit; once FRESH_RUN fresh ones gather, they make a sorted int64 run, two
    runs merged while the older is at most twice the newer, so that the runs stay few (their sizes halve)
    and a timestamp is merged about log2(records) times, whatever the batches. The distinct timestamps of a
    join's stores are counted from their runs when asked (`stamps`, `distinct_count`)."""

    __slots__ = ("entries", "_runs", "_oldest", "_fresh", "_fresh_oldest")

    def __init__(self) -> None:
        self.entries = 0  # live records
        self._runs: list[np.ndarray] = []  # sorted timestamps (one per record), the longest first
        self._oldest = NO_LIMIT  # the lowest timestamp in the runs (above every timestamp without runs)
        self._fresh: list[int] = []  # the timestamps not in a run yet
        self._fresh_oldest = NO_LIMIT  # the lowest of them

    def add_batch(self, timestamps: list[int], limit: int) -> None:
        """A record more at each of `timestamps`, none of which has expired; `limit`: the store's expiry
        limit now, applied once FRESH_RUN fresh ones gather (`expire` is then due), else left to the next
        `expire`: dropping the expired ones costs a sort of the fresh ones, which a few timestamps added at
        a time (topics taking turns) would pay at every batch."""
        if timestamps:
            self._fresh += timestamps
            self._fresh_oldest = min(self._fresh_oldest, min(timestamps))
            self.entries += len(timestamps)
            if len(self._fresh) >= FRESH_RUN:
                self.expire(limit)

    def expire(self, limit: int) -> None:
        """Drop the timestamps at or below `limit`; the fresh ones make a run once FRESH_RUN gather."""
        fresh = self._fresh
        if self._fresh_oldest <= limit:
            fresh.sort()
            cut = bisect_right(fresh, limit)
            del fresh[:cut]
            self.entries -= cut
            self._fresh_oldest = fresh[0] if fresh else NO_LIMIT
        if len(fresh) >= FRESH_RUN:
            self._add_run(np.array(fresh, np.int64))
        if self._oldest <= limit:
            runs = []
            for run in self._runs:
                cut = int(np.searchsorted(run, limit, "right"))
                self.entries -= cut
                if cut < len(run):
                    runs.append(run[cut:])
            self._runs = sorted(runs, key=len, reverse=True)
            self._oldest = min((int(run[0]) for run in runs), default=NO_LIMIT)

    def _add_run(self, run: np.ndarray) -> None:
        self._fresh, self._fresh_oldest = [], NO_LIMIT
        run.sort()
        runs = self._runs
        runs.append(run)
        while len(runs) > 1 and len(runs[-2]) <= 2 * len(runs[-1]):
            newer = runs.pop()
            runs[-1] = np.sort(np.concatenate((runs[-1], newer)), kind="stable")  # two sorted runs: merged
        self._oldest = min(self._oldest, int(run[0]))

    def stamps(self) -> list[np.ndarray]:
        """The timestamps kept (those of records expired since the last `expire` too), in runs."""
        return [*self._runs, np.array(self._fresh, np.int64)]

    def clear(self) -> None:
        self.entries = 0
        self._runs, self._oldest = [], NO_LIMIT
        self._fresh, self._fresh_oldest = [], NO_LIMIT


def distinct_count(runs: list[np.ndarray], more: Iterable[int]) -> int:
    """The distinct timestamps among int64 runs (sorted, mostly) and `more`, in numpy passes."""
    merged = np.sort(np.concatenate([*runs, np.fromiter(more, np.int64)]), kind="stable")  # runs: merged
    return int(len(merged) and 1 + np.count_nonzero(merged[1:] != merged[:-1]))


# A session store of at least this many rows holds a key's single session in the key's saved fields rather
# than in a tuple (`SessionRows.put`): then most keys of a batch are new or changed once, their tuples
# scattered over memory and alive at the next collection, which must scan each; a smaller store's tuples
# stay in the CPU's caches and few outlive a batch, and a tuple is quicker to read and set than the fields.
HELD_ROWS = 1 << 14
_FIELDS = 4  # a session store's row: its sessions, its first session's start, end and (a count) aggregate


# A session store's expiry item is a bound (a session end, any int) and a row in one int, `bound <<
# ROW_BITS | row`: items order by bound, then row, and a row below 2**ROW_BITS (a row per key held in memory)
# comes back as `item & ROW_MASK`, the bound as `item >> ROW_BITS`.
ROW_BITS = 40
ROW_MASK = (1 << ROW_BITS) - 1


class SessionRows(SavedByRowParts):
    """key -> its sessions, a row per key (as KeyValueRows, nodes/kv_rows.py, keeps a table's entries): a
    key gets a row when it first comes and keeps it (a key without sessions has a dead row, which lives
    again when the key gets a session) until the dead rows outnumber the live ones and an export compacts
    the rows (`compact_if_due`: keys whose sessions all expired then cost nothing). `sessions[row]` is the
    key's sessions as one flat tuple `(start, end, aggregate, start, ...)` (a tuple of ints is left alone by
    the cyclic garbage collector once it has scanned it), or None where the row holds its single session in
    its saved fields (a store of HELD_ROWS rows or more, `put`); the merge reads them (`entry`, `held`) and
    sets them (`put`). After a batch, `written` brings the saved form of the rows it changed up to date,
    by column: a row's number of sessions, its first session's start, end and aggregate (int64 where the
    aggregates are counts, else objects) and the flat sessions after the first (`_more`, for a row with
    several), so that an export picks changed rows out of arrays (RowParts, nodes/kv_rows.py) instead of
    walking the entries.

    The columns are reserved ahead of the rows (`_reserve`, `grown_capacity`): rows `size..` of each hold
    what a new row starts with, so that a new row (most records' keys, at many keys) costs the write of its
    key."""

    def __init__(self, prefix: str, counts: bool) -> None:
        self.prefix = prefix
        self.counts = counts
        # row -> its key, in an object array the cyclic collector does not scan (it scans a list's every item
        # after each micro-batch: a cache miss per key of a large store); rows `size..` hold None
        self.keys = np.empty(0, object)
        self.size = 0
        # key -> row: in a KeyTable while every key is a str (None: not built, False: a key is not a str,
        # or pandas is missing), else in a dict (None: built again when needed)
        self._table: KeyTable | None | bool = None
        self._index: dict[Any, int] | None = None
        self.sessions: list[tuple | None] = []  # row -> its sessions, () for none, None: held in its fields
        # per row, side by side: its sessions, its first session's start, end and (a count) aggregate
        self._first = array("q")
        self._aggregates: list = []  # row -> its first session's aggregate, where they are not counts
        self._more: dict[int, tuple] = {}  # row -> the sessions after its first, where it has several
        self._dirty = bytearray()  # row -> changed since the last export
        self.total = 0  # sessions in all rows
        self.parts = RowParts(prefix)

    @property
    def dirty(self) -> np.ndarray:
        """The changed flags as a numpy view (RowParts reads and clears them)."""
        return np.frombuffer(self._dirty, np.bool_)

    def _fields(self) -> np.ndarray:
        """The rows' saved fields as a numpy view, a row of `_FIELDS` per row (not kept: the array grows)."""
        return np.frombuffer(self._first, np.int64).reshape(-1, _FIELDS)

    def rows_for(self, keys: Any, numbered: np.ndarray) -> list[int]:
        """Per key (a list or an object array) its row, or -1 for a key not `numbered` (a mask; a None key
        is never numbered); the keys numbered that the store does not hold get rows (without sessions), in
        order of first appearance. Looked up a batch at a time (in the KeyTable while the keys are str): a
        look-up per record costs several cache misses in a large store, which the batch's pass in C
        overlaps."""
        key_objects = as_object_array(keys)
        table = self._key_table(key_objects)
        if table is not None:
            try:
                numbering = table.number(key_objects, numbered, str_only=True, none_keys=True)
            except TypeError:
                self._table = None  # an unhashable key, some keys numbered: built again at its next use
                raise
            if numbering is not None:
                rows, new_keys = numbering
                table.confirm(len(new_keys))
                self._add_keys(new_keys)
                return rows.tolist()
            self._table = False  # a key that is not a str: the rows are looked up in a dict from now on
        index = self._key_index()
        rows = np.fromiter(map(index.get, key_objects, repeat(-1)), np.int64, len(keys))
        rows[~numbered] = -1
        unheld = (rows < 0) & numbered
        if holds_none_object(key_objects):
            unheld &= np.fromiter(map(is_not, key_objects, repeat(None)), bool, len(keys))
        if unheld.any():
            numbers, new_keys = number_by_first_appearance(key_objects[unheld].tolist(), self.size)
            rows[unheld] = numbers
            index.update(zip(new_keys.tolist(), range(self.size, self.size + len(new_keys)), strict=True))
            self._add_keys(new_keys)
        return rows.tolist()

    def row_of(self, key: Any) -> int | None:
        """The key's row, None where it has none: in the KeyTable where a batch built it, else in the dict
        (a store looked up a few records at a time does not import pandas)."""
        table = self._table or None
        if table is not None:
            row = table.row(key) if type(key) is str else -1
            return None if row < 0 else row
        return self._key_index().get(key)

    def new_row(self, key: Any) -> int:
        """A row (without sessions) for `key`, new to the store (`row_of`: in the KeyTable where a batch
        built it)."""
        table = self._table or None
        if table is not None and type(key) is not str:
            self._table, table = False, None  # the rows are looked up in a dict from now on
        if table is not None:
            table.append(key)
        else:
            self._key_index()[key] = self.size
        self._add_keys([key])
        return self.size - 1

    def _key_table(self, batch: Any = ()) -> KeyTable | None:
        """The KeyTable, built from the rows' keys at its first use (sized for them and the batch of keys
        `batch`, `table_size`); None once a key is not a str, or without pandas (the rows are then looked
        up in a dict)."""
        if self._table is None:
            table = KeyTable.new(max(table_size(batch, self.size), 2 * self.size))
            self._table = table if table is not None and table.add(self.keys[: self.size]) else False
            self._index = None
        return self._table or None

    def _key_index(self) -> dict:
        if self._index is None:
            self._index = dict(zip(self.keys[: self.size].tolist(), range(self.size), strict=True))
        return self._index

    def _add_keys(self, keys: list | np.ndarray) -> None:
        end = self.size + len(keys)
        self._reserve(end, len(keys))
        self.keys[self.size : end] = as_object_array(keys)
        self.size = end

    def _reserve(self, rows: int, added: int) -> None:
        """Columns for `rows` rows at least, `added` of them a batch appended at once (`grown_capacity`):
        the rows added hold no session, no key, and are unchanged."""
        capacity = grown_capacity(rows, len(self._dirty), added)
        if capacity is None:
            return
        added = capacity - len(self._dirty)
        self.keys = grown(self.keys, self.size, capacity)
        self.sessions += [()] * added
        self._first += array("q", bytes(8 * _FIELDS * added))
        if not self.counts:
            self._aggregates += [None] * added
        self._dirty += bytes(added)

    def held(self, row: int) -> tuple:
        """The one session of a row that holds it in its fields (`sessions[row]` None)."""
        at, first = row * _FIELDS, self._first
        return (first[at + 1], first[at + 2], first[at + 3] if self.counts else self._aggregates[row])

    def entry(self, row: int) -> tuple:
        """A row's sessions as a flat tuple."""
        entry = self.sessions[row]
        return self.held(row) if entry is None else entry

    def holds_sessions(self) -> bool:
        """Whether `put` holds a single session in its row's fields (the store has HELD_ROWS rows or more)."""
        return self.size >= HELD_ROWS

    def put(self, row: int, entry: tuple) -> None:
        """Set a row's sessions (`written` then brings its saved fields up to date): in a store of HELD_ROWS
        rows or more, a single one goes straight into the row's fields, no tuple kept, so that a key with
        one session (most keys, in a large store) costs the cyclic collector nothing and its fields need no
        pass of their own."""
        if len(entry) == 3 and self.size >= HELD_ROWS:  # `holds_sessions`, without a call per put
            self.sessions[row] = None
            at, first = row * _FIELDS, self._first
            first[at] = 1
            first[at + 1] = entry[0]
            first[at + 2] = entry[1]
            if self.counts:
                first[at + 3] = entry[2]
            else:
                self._aggregates[row] = entry[2]
        else:
            self.sessions[row] = entry

    def written(self, rows: list[int]) -> None:
        """Write the saved fields of `rows` (distinct) from their sessions, which a batch set (`put`), and
        mark them changed: a pass in C per field over the rows rather than work per put. A row holding one
        session in its fields has them written already."""
        if not rows:
            return
        index = np.array(rows, np.int64)
        more = self._more
        if more:  # the rows with several sessions that changed, found in numpy, not by a look-up per row
            several = np.fromiter(more, np.int64, len(more))
            changed = np.zeros(self.size, bool)
            changed[index] = True
            for row in several[changed[several]].tolist():
                del more[row]
        self.dirty[index] = True
        entries = list(map(self.sessions.__getitem__, rows))
        tuples = np.fromiter(map(is_not, entries, repeat(None)), bool, len(entries))
        if tuples.all():
            self._write_fields(rows, index, entries)
        elif tuples.any():
            kept = tuples.tolist()
            self._write_fields(list(compress(rows, kept)), index[tuples], list(compress(entries, kept)))
        self.total = int(self._fields()[: self.size, 0].sum())

    def _write_fields(self, rows: list[int], index: np.ndarray, entries: list) -> None:
        """The saved fields of `rows` (`index`, as an array) from their sessions, `entries` (tuples: none or
        several)."""
        n = np.fromiter(map(len, entries), np.int64, len(entries)) // 3
        fields = self._fields()
        more = self._more
        fields[index, 0] = n
        live = n > 0
        if live.all():
            kept, at = entries, index
        else:
            kept, at = list(compress(entries, live.tolist())), index[live]
        fields[at, 1] = np.fromiter(map(itemgetter(0), kept), np.int64, len(kept))
        fields[at, 2] = np.fromiter(map(itemgetter(1), kept), np.int64, len(kept))
        if self.counts:
            fields[at, 3] = np.fromiter(map(itemgetter(2), kept), np.int64, len(kept))
        else:
            objects = self._aggregates
            for row, entry in zip(rows, entries, strict=True):
                objects[row] = entry[2] if entry else None
        several = np.flatnonzero(n > 1).tolist()
        if several:
            more.update((rows[i], entries[i][3:]) for i in several)

    def live_row_mask(self) -> np.ndarray:
        return self._fields()[: self.size, 0] > 0

    def keep_rows(self, rows: np.ndarray) -> None:
        numbers = rows.tolist()
        renumbered = dict(zip(numbers, range(len(numbers)), strict=True))
        self.keys = self.keys[rows]
        self.sessions = list(map(self.sessions.__getitem__, numbers))
        self._first = array("q", self._fields()[rows].tobytes())
        if not self.counts:
            self._aggregates = list(map(self._aggregates.__getitem__, numbers))
        self._more = {renumbered[row]: rest for row, rest in self._more.items() if row in renumbered}
        self._dirty = bytearray(np.frombuffer(self._dirty, np.bool_)[rows].tobytes())
        self.size = len(numbers)
        self._table, self._index = None, None
        self.total = int(self._fields()[:, 0].sum())

    def clear_rows(self) -> None:
        self.keep_rows(np.zeros(0, np.int64))

    def items(self) -> Iterator[tuple[Any, tuple]]:
        """(key, sessions) of every key with sessions."""
        size = self.size
        for row, (key, entry) in enumerate(zip(self.keys[:size].tolist(), self.sessions[:size], strict=True)):
            if entry is None:
                yield key, self.held(row)
            elif entry:
                yield key, entry

    # -- saving (RowParts) ----------------------------------------------------------------------------------

    def saved_columns(self, rows: Any) -> list:
        """`[sessions per row, first starts, first ends, first aggregates, the flat sessions after the first
        of the rows with several, in row order]` (rows: an index array or a slice)."""
        fields = self._fields()[rows]
        n, starts, ends = fields[:, 0].copy(), fields[:, 1].copy(), fields[:, 2].copy()
        if self.counts:
            aggregates: Any = fields[:, 3].copy()
        elif isinstance(rows, slice):
            aggregates = self._aggregates[rows]
        else:
            aggregates = list(map(self._aggregates.__getitem__, rows.tolist()))
        more: list = []
        if self._more:
            several = np.arange(self.size)[rows][n > 1].tolist()
            more = list(chain.from_iterable(map(self._more.__getitem__, several)))
        return [n, starts, ends, aggregates, more]

    def load_columns(self, rows: Any, columns: list, name: str) -> None:
        if len(columns) != 5 or not len(columns[0]) == len(columns[1]) == len(columns[2]) == len(columns[3]):
            raise ValueError(f"state part {name!r}: not a session store's columns")
        numbers = np.arange(self.size)[rows].tolist()
        if len(numbers) != len(columns[0]):
            raise ValueError(f"state part {name!r}: {len(columns[0])} rows of sessions for {len(numbers)}")
        n, starts, ends, aggregates, more = columns
        fields = self._fields()
        fields[rows, 0], fields[rows, 1], fields[rows, 2] = n, starts, ends
        if self.counts:
            fields[rows, 3] = aggregates
        del fields
        sessions, kept, objects = self.sessions, self._more, self._aggregates
        at = 0
        for row, several, start, end, aggregate in zip(
            numbers, n.tolist(), starts.tolist(), ends.tolist(), _as_list(aggregates), strict=True
        ):
            kept.pop(row, None)
            if not several:
                sessions[row] = ()
                aggregate = None
            elif several == 1:
                sessions[row] = None  # held in the row's fields
            else:
                rest = kept[row] = tuple(more[at : at + 3 * (several - 1)])
                at += len(rest)
                sessions[row] = (start, end, aggregate, *rest)
            if not self.counts:
                objects[row] = aggregate
        if at != len(more) or len(more) % 3:
            raise ValueError(f"state part {name!r}: {len(more)} values of further sessions, {at} used")

    def append_rows(self, keys: list) -> None:
        """Rows for `keys` (an import's rows not yet named): the key table or index is built again once
        loaded."""
        self._table, self._index = None, None
        self._add_keys(keys)

    def loaded(self) -> None:
        """An import or catch-up wrote the rows directly."""
        self._table, self._index = None, None
        self.dirty[: self.size] = False
        self.total = int(self._fields()[: self.size, 0].sum())


def _as_list(column: Any) -> list:
    """A saved column's values as Python objects (an int64 array's as ints)."""
    return column.tolist() if isinstance(column, np.ndarray) else list(column)


class SessionStore:
    """key -> its sessions (`SessionRows`), sorted by (end, start) (Kafka's in-memory session store
    iteration order). Sessions whose end is at or before `store_time - retention` are expired: neither found
    nor put, and deleted as the store's clock passes them (as Kafka's store expires on every put).

    `merge_batch` runs Kafka's session merge rule (KStreamSessionWindowAggregate) over a batch of records:
    per record, the sessions of its key within the inactivity gap of its timestamp merge with it into one
    session (the merger folds their aggregates, in store order, into the initializer's), which the
    aggregator then updates. Each absorbed session is retracted (a tombstone stamped with its own end,
    in store order) unless the record falls into a single session of its own timestamp only; the result is
    emitted stamped with its end. A record whose merged session ends before the close time (observed time
    - gap - grace) is late, and so is a result that is expired as it is put (emitted, not stored). A count
    (`Aggregation.count`: the initializer 0, the merger +, the aggregator + 1) is summed in place."""

    def __init__(self, retention: int, counts: bool) -> None:
        """`counts`: the aggregates are counts (`Aggregation.count`), saved as int64."""
        self.retention = retention
        self.store_time = -1  # the max session end put
        self.rows = SessionRows("s", counts)
        # heap of expiry items, `bound << ROW_BITS | row` (`expiry_item`): a key's sessions end at or after
        # the bound of one of its items (where its sessions' first end went down, a bound is pushed; an item
        # popped for a key that keeps sessions is pushed again with their first end). An int rather than a
        # (bound, row) tuple: one object fewer per push, and none the cyclic collector scans.
        self._expiry: list[int] = []

    def merge_batch(
        self, keys: list, values: list, timestamps: list, gap: int, observed: int, aggregation: Any
    ) -> tuple[list, list, list, list, list, LateRows, int, int, tuple[list, list, list]]:
        """Merge the records in order (see above): `(output keys, values, old values, timestamps, the record
        of each output row, the late records, the records without key, the observed time after, the output
        keys' keys, window starts and window ends)` (the last, made as the keys are, for the task's output:
        `TaskContext.windowed_key_column`)."""
        count = aggregation.kind == "count"
        initializer, aggregator, merger = aggregation.initializer, aggregation.aggregator, aggregation.merger
        retention = self.retention
        store_time = self.store_time
        rows = self.rows
        # the rows of the batch's keys, looked up at once; a key new to the store gets its row before the
        # loop where a record of it would make one (`_row_making`), else (a record the loop finds late)
        # -1, and the loop looks the key up (and makes its row, should the record not be late after all).
        # A batch of fewer than FEW_KEYS records is looked up by the loop, without numpy's cost per call.
        if len(keys) < FEW_KEYS:
            numbers: list[int] = [-1] * len(keys)
        else:
            key_objects = as_object_array(keys)
            numbers = rows.rows_for(key_objects, self._row_making(key_objects, timestamps, observed))
        row_of, new_row, sessions, held, put_sessions = (
            rows.row_of,
            rows.new_row,
            rows.sessions,
            rows.held,
            rows.put,
        )
        # where `rows.put` would set the tuple, the loop sets it without the call
        holds = rows.holds_sessions()
        expiry = self._expiry
        changed: set = set()  # the rows the batch changed
        new, windowed_type, window_type = tuple.__new__, Windowed, Window
        out_k: list = []
        out_v: list = []
        out_o: list = []
        out_t: list = []
        src: list = []
        inner_keys: list = []
        starts: list = []
        ends: list = []
        late = LateRows()
        dropped = 0
        for i, key, ts, row in zip(range(len(keys)), keys, timestamps, numbers, strict=False):
            if key is None:
                dropped += 1
                continue
            if ts > observed:
                observed = ts
            if expiry and expiry[0] >> ROW_BITS <= store_time - retention:
                self.store_time = store_time
                self._expire(changed)
            if row < 0:
                row = row_of(key)
            entry = () if row is None else sessions[row]
            if entry is None:  # one session, held in the row's fields
                entry = held(row)
            lo, hi = ts - gap, ts + gap
            kept: tuple = ()
            merged: tuple = ()
            if entry:
                if len(entry) == 3:
                    if entry[1] >= lo and entry[0] <= hi:
                        merged = entry
                    else:
                        kept = entry
                else:
                    merged, kept = _split_sessions(entry, lo, hi)
            start = end = ts
            if count:
                aggregate = 0
                for n in range(0, len(merged), 3):
                    aggregate += merged[n + 2]
                    if merged[n] < start:
                        start = merged[n]
                    if merged[n + 1] > end:
                        end = merged[n + 1]
            else:
                aggregate = initializer()
                for n in range(0, len(merged), 3):
                    aggregate = merger(key, aggregate, merged[n + 2])
                    if merged[n] < start:
                        start = merged[n]
                    if merged[n + 1] > end:
                        end = merged[n + 1]
            if end < observed - retention:
                late.add(i, key, values[i], ts, start, end, observed)
                continue
            retracted = start != ts or end != ts
            if retracted:
                for n in range(0, len(merged), 3):  # every absorbed session, stamped with its own end
                    s, e = merged[n], merged[n + 1]
                    out_k.append(new(windowed_type, (key, new(window_type, (s, e)))))
                    inner_keys.append(key)
                    starts.append(s)
                    ends.append(e)
                    out_v.append(None)
                    out_o.append(merged[n + 2])
                    out_t.append(e)
                    src.append(i)
            aggregate = aggregate + 1 if count else aggregator(key, values[i], aggregate)
            if end > store_time:
                store_time = end
            if row is None:
                row = new_row(key)
                if not holds:  # a store holds sessions in rows from HELD_ROWS rows on: asked until it does
                    holds = rows.holds_sessions()
            changed.add(row)
            if end <= store_time - retention:  # Kafka's store skips a put into an expired segment
                late.add(i, key, values[i], ts, start, end, observed)
                if retracted:
                    put_sessions(row, kept)
            else:
                if not retracted and merged:  # the record's own single-instant session: its aggregate only
                    put = _with_aggregate(entry, start, end, aggregate)
                else:
                    put = (start, end, aggregate) if not kept else _with_session(kept, start, end, aggregate)
                    if not entry or put[1] < entry[1]:  # the key's first end went down (or it is new)
                        heappush(expiry, put[1] << ROW_BITS | row)
                if holds:
                    put_sessions(row, put)
                else:
                    sessions[row] = put
            out_k.append(new(windowed_type, (key, new(window_type, (start, end)))))
            inner_keys.append(key)
            starts.append(start)
            ends.append(end)
            out_v.append(aggregate)
            out_o.append(None)
            out_t.append(end)
            src.append(i)
        self.store_time = store_time
        rows.written(list(changed))
        return out_k, out_v, out_o, out_t, src, late, dropped, observed, (inner_keys, starts, ends)

    def _row_making(self, key_objects: np.ndarray, timestamps: list, observed: int) -> np.ndarray:
        """Per record whether it gets a row for its key, should the key be new to the store: whether, as
        a record without sessions to merge with, it is not late (its timestamp at or after the observed time
        with it, less the retention). A mask for the look-up of the batch (`SessionRows.rows_for`): the
        loop decides each record, and makes a row the mask missed."""
        n = len(key_objects)
        stamps = np.fromiter(timestamps, np.int64, n)
        observing = stamps
        if holds_none_object(key_objects):  # a record without key is dropped: it observes no time
            observing = np.where(
                np.fromiter(map(is_not, key_objects, repeat(None)), bool, n), stamps, observed
            )
        observed_then = np.maximum(np.maximum.accumulate(observing), observed) if n else observing
        return stamps >= observed_then - self.retention

    def _expire(self, changed: set) -> None:
        """Delete the sessions the store's clock expired (the first ones of their keys: sorted by end); the
        rows changed go to `before` with their entries before the change (for the counts; the caller writes
        their saved fields)."""
        expiry, limit, rows = self._expiry, self.store_time - self.retention, self.rows
        sessions = rows.sessions
        while expiry and expiry[0] >> ROW_BITS <= limit:
            row = heappop(expiry) & ROW_MASK
            entry = sessions[row]
            if entry is None:
                entry = rows.held(row)
            elif not entry:
                continue
            cut = 0
            while cut < len(entry) and entry[cut + 1] <= limit:
                cut += 3
            if cut:
                changed.add(row)
                entry = entry[cut:]
                rows.put(row, entry)
                if not entry:
                    continue
            heappush(expiry, entry[1] << ROW_BITS | row)

    def get(self, key: Any, start: int, end: int) -> tuple[Any, int] | None:
        row = self.rows.row_of(key)
        entry = () if row is None else self.rows.entry(row)
        for n in range(0, len(entry), 3):
            if entry[n] == start and entry[n + 1] == end and end > self.store_time - self.retention:
                return entry[n + 2], end
        return None

    def items(self) -> Iterator[tuple[Any, int, int, Any]]:
        """(key, start, end, aggregate) of every live session (an expired one may wait for the clock)."""
        limit = self.store_time - self.retention
        for key, entry in self.rows.items():
            for n in range(0, len(entry), 3):
                if entry[n + 1] > limit:
                    yield key, entry[n], entry[n + 1], entry[n + 2]

    def size(self) -> tuple[int, int]:
        """`(sessions, windows)` that `items` lists: a session is its own window (of its key alone)."""
        changed: set = set()
        self._expire(changed)
        self.rows.written(list(changed))
        return self.rows.total, self.rows.total

    def export_parts(self, changed_only: bool) -> tuple[dict[str, Any], list[str]]:
        generation = self.rows.parts.generation
        exported = self.rows.export_parts(changed_only)
        if self.rows.parts.generation != generation:  # the export compacted the rows: numbered again
            self._index_expiry()
        return exported

    def state_parts(self) -> dict[str, Any]:
        return self.rows.state_parts()

    def _index_expiry(self) -> None:
        """The expiry heap made again from the rows' sessions."""
        ends = self.rows.live_row_mask()
        self._expiry = [self.rows.entry(row)[1] << ROW_BITS | row for row in np.flatnonzero(ends).tolist()]
        heapify(self._expiry)

    def apply_parts(self, parts: Mapping[str, Any], removed: list[str]) -> None:
        rows = self.rows
        rows.apply_parts(parts, removed)
        self._index_expiry()
        # the sessions the exporting copy had not deleted yet: a clean-up its own clock repeats, not a
        # change to export (the store stays at the point of the export history it caught up with)
        changed: set = set()
        self._expire(changed)
        rows.written(list(changed))
        rows.dirty[: rows.size] = False


def _split_sessions(entry: tuple, lo: int, hi: int) -> tuple[tuple, tuple]:
    """A key's sessions that end at or after `lo` and start at or before `hi` (they merge with a record),
    and the others, each in store order."""
    merged: list = []
    kept: list = []
    for n in range(0, len(entry), 3):
        (merged if entry[n + 1] >= lo and entry[n] <= hi else kept).extend(entry[n : n + 3])
    return tuple(merged), tuple(kept)


def _with_session(entry: tuple, start: int, end: int, aggregate: Any) -> tuple:
    """`entry` with a session added in (end, start) order (none of its sessions has those bounds)."""
    at = len(entry)
    while at and (entry[at - 2], entry[at - 3]) > (end, start):
        at -= 3
    return (*entry[:at], start, end, aggregate, *entry[at:])


def _with_aggregate(entry: tuple, start: int, end: int, aggregate: Any) -> tuple:
    """`entry` with the aggregate of its session `[start, end]` replaced."""
    for n in range(0, len(entry), 3):
        if entry[n] == start and entry[n + 1] == end:
            return (*entry[: n + 2], aggregate, *entry[n + 3 :])
    raise AssertionError(f"no session [{start}, {end}] to update")


class SlidingWindowStore:
    """key -> `(starts, windows)`: its window starts, sorted, and start -> `[aggregate, max timestamp]`.
    Retention `2 * time difference + grace`, as Kafka's sliding window store; windows starting at or before
    `store_time - retention` are expired: neither found nor put, deleted by `expire`."""

    def __init__(self, retention: int) -> None:
        self.retention = retention
        self.store_time = -1  # the max window start put
        self.kv = KeyValueStore("w")
        self.counts = WindowCounts()  # per start

    def fetch(self, key: Any, time_from: int, time_to: int) -> list[tuple[int, list]]:
        """Windows of `key` with start in [time_from, time_to], newest first."""
        entry = self.kv.get(key)
        if entry is None:
            return []
        starts, windows = entry
        time_from = max(time_from, self.store_time - self.retention + 1)
        lo, hi = bisect_left(starts, time_from), bisect_left(starts, time_to + 1)
        return [(s, windows[s]) for s in reversed(starts[lo:hi])]

    def put(self, key: Any, start: int, window: list) -> bool:
        """Put `[aggregate, max timestamp]` as the window of `key` starting at `start`; False, and nothing
        put, when it is expired already."""
        if start > self.store_time:
            self.store_time = start
        if start <= self.store_time - self.retention:
            return False
        entry = self.kv.get(key)
        if entry is None:
            entry = ([], {})
            self.kv.put(key, entry)
        else:
            self.kv.touch(key)
        starts, windows = entry
        if start not in windows:
            insort(starts, start)
            self.counts.add(start, start)
        windows[start] = window
        return True

    def expire(self) -> None:
        """Delete the expired windows (fetch and put ignore them already)."""
        limit, kv = self.store_time - self.retention, self.kv
        self.counts.expire(limit)
        for key, (starts, windows) in list(kv.items()):
            cut = bisect_left(starts, limit + 1)
            if cut:
                for start in starts[:cut]:
                    del windows[start]
                del starts[:cut]
                if starts:
                    kv.touch(key)
                else:
                    kv.delete(key)

    def get(self, key: Any, start: int) -> list | None:
        entry = self.kv.get(key)
        return None if entry is None else entry[1].get(start)

    def items(self) -> Iterator[tuple[Any, int, Any, int]]:
        """(key, start, aggregate, max timestamp) of every live window (an expired one may wait for
        `expire`)."""
        limit = self.store_time - self.retention
        for key, (starts, windows) in self.kv.items():
            for start in starts[bisect_right(starts, limit) :]:
                aggregate, timestamp = windows[start]
                yield key, start, aggregate, timestamp

    def size(self) -> tuple[int, int]:
        """`(windows of every key, distinct starts)` that `items` lists."""
        self.counts.expire(self.store_time - self.retention)
        return self.counts.entries, len(self.counts.counts)

    def apply_parts(self, parts: Mapping[str, Any], removed: list[str]) -> None:
        self.kv.apply_parts(parts, removed)
        self.counts.clear()
        for starts, _ in self.kv.entries.values():
            for start in starts:
                self.counts.add(start, start)


SEGMENTS = 8  # a join store saves its records by segment of event time: its retention spans this many
_Chunk = tuple[list, np.ndarray, np.ndarray, list]  # records as saved: keys, timestamps, seqs (int64), values


def _int64_column(column: list, lo: int, hi: int) -> np.ndarray:
    """`column[lo:hi]` (ints) as an int64 array."""
    return np.fromiter(column if lo == 0 and hi == len(column) else column[lo:hi], np.int64, hi - lo)


def _seq_columns(parts: list) -> np.ndarray:
    """The seqs of batches put (`_seq_column` of each), one after the other, as one int64 array: those of
    consecutive batches under SEQ_ARRAY_MIN records read in one pass (an array apiece would cost more)."""
    columns: list[np.ndarray] = []
    small: list = []
    for part in [*parts, None]:
        if part is not None and type(part) is not np.ndarray and len(part) < SEQ_ARRAY_MIN:
            small.append(part)
            continue
        if small:
            columns.append(np.fromiter(chain.from_iterable(small), np.int64, sum(map(len, small))))
            small = []
        if part is not None:
            columns.append(_seq_column(part, 0, len(part)))
    return columns[0] if len(columns) == 1 else np.concatenate(columns)


def _seq_column(seqs: Sequence[int], lo: int, hi: int) -> np.ndarray:
    """`seqs[lo:hi]` (increasing; a list, a range or an int64 array) as an int64 array: a run of consecutive
    seqs (a batch's, as the join node numbers them) without reading each."""
    if type(seqs) is np.ndarray:
        return seqs[lo:hi]
    if hi > lo and seqs[hi - 1] - seqs[lo] == hi - lo - 1:
        return np.arange(seqs[lo], seqs[hi - 1] + 1, dtype=np.int64)
    return _int64_column(seqs, lo, hi)


class _Segment:
    """A join store's segment: the records its parts hold, as the columns of the parts that wrote them
    (`chunks`, `_held`), and how many of them the last export wrote."""

    __slots__ = ("chunks", "records", "new", "str_keys")

    def __init__(self) -> None:
        self.chunks: list[tuple] = []
        self.records = 0
        self.new = 0
        self.str_keys = True  # every key of its records is a str (saved as one text: kv_rows.saved_keys)

    def __len__(self) -> int:
        return self.records

    def changes(self) -> int:
        return self.new

    def add(self, chunk: _Chunk, str_keys: bool, text: str | None = None) -> None:
        """A part's records (`text`: their keys joined by NUL, or None)."""
        self.chunks.append(_held(chunk, text))
        self.records += len(chunk[1])
        self.str_keys = self.str_keys and str_keys

    def columns(self, more: _Chunk | None = None, more_text: str | None = None) -> tuple:
        """Every record of the chunks (and `more`, its keys joined in `more_text` or not), as one held
        chunk."""
        chunks = self.chunks if more is None else [*self.chunks, _held(more, more_text)]
        return chunks[0] if len(chunks) == 1 else _concatenated(chunks)

    def rebased(self) -> tuple:
        """Every record in one held chunk, which the chunks are now (a new base holds them all)."""
        self.chunks = [self.columns()]
        return self.chunks[0]


def _held(chunk: _Chunk, text: str | None) -> tuple:
    """A chunk as a segment holds it: the keys joined by NUL in one str (`text`, where no key holds a NUL)
    or in an object array, the values in an object array. The cyclic collector visits neither's items,
    where it would visit every record a list held after each micro-batch (at many records, a cache miss
    apiece)."""
    keys, stamps, seqs, values = chunk
    if text is None or not joins_keys(text, len(keys)):
        text = None
    return object_array(keys) if text is None else text, stamps, seqs, object_array(values)


def _held_keys(held: tuple) -> list:
    """A held chunk's keys, in a list."""
    keys = held[0]
    if type(keys) is not str:
        return keys.tolist()
    return keys.split(KEY_SEPARATOR) if len(held[1]) else []


def _concatenated(chunks: list[tuple]) -> tuple:
    """Held chunks (`_held`) as one."""
    keys, stamps, seqs, values = zip(*chunks, strict=True)
    if all(type(text) is str for text in keys):
        joined: str | np.ndarray = KEY_SEPARATOR.join(
            text for text, chunk_stamps in zip(keys, stamps, strict=True) if len(chunk_stamps)
        )
    else:
        joined = np.concatenate([object_array(_held_keys(chunk)) for chunk in chunks])
    return joined, np.concatenate(stamps), np.concatenate(seqs), np.concatenate(values)


# Records a join store indexes at once (its batches put since the last index) from which they go into its
# sorted columns (`SortedRecords`) rather than into its dict of key -> records, and at least a SORTED_SHARE-th
# of the records those columns hold: merging a batch into the columns moves each of their records, where the
# dict costs a look-up and a list append per record (at many keys, cache misses apiece).
SORTED_MIN = 1024
SORTED_SHARE = 64
# Keys of a batch below which a join store joins them at the export rather than as they are put (see
# `_new_texts`): a few keys' join costs more than the cache misses it saves.
JOINED_KEYS_MIN = 256
# Records of a batch from which a join store makes its seqs an int64 array as it puts them, where some of
# them expired (a range of seqs is one until the export): a few records' seqs cost less in a list.
SEQ_ARRAY_MIN = 256
# Expired records below which the sorted columns are not compacted (a compaction moves every live record).
MIN_EXPIRED = 4096
# Arrays of values the sorted columns hold (one per batch added) past which they are joined into one.
MAX_VALUE_ARRAYS = 64


class SortedRecords:
    """A join store's records in numpy columns, looked up a batch at a time: per record (by position, in the
    order they came) its key's number (`KeyNumbers`), timestamp, seq and value (objects), and the positions
    sorted by (key number, timestamp, seq) with, aligned, the sort key `number * width + timestamp - base`
    in one int64 (`width` above any timestamp's distance to `base`, which is at or below every record's
    timestamp). A key's records in a join window are then a range of that order, found by two binary
    searches per probe (the key numbers times `width` must stay within int64: `check_numbers`). Records are
    added a batch at a time (a sort of the batch and one merge), and leave by compaction once the expired
    ones outnumber the live ones (or are all there is)."""

    __slots__ = ("kid", "ts", "seq", "values", "starts", "size", "comp", "order", "width", "base")

    def __init__(self, retention: int) -> None:
        self.kid = np.zeros(0, np.int64)
        self.ts = np.zeros(0, np.int64)
        self.seq = np.zeros(0, np.int64)
        # the values in object arrays, not a list: the cyclic collector does not visit an array's items,
        # where it would visit every record's value after each micro-batch (at many records, a cache miss
        # apiece); an array per batch added (`starts`: the position of each one's first record), not one
        # grown, as growing an array of objects copies and touches every value it holds
        self.values: list[np.ndarray] = []
        self.starts: list[int] = []
        self.size = 0
        self.comp = np.zeros(0, np.int64)
        self.order = np.zeros(0, np.int64)
        # the live records span at most a retention: a base moved once a timestamp is a width past it
        self.width = 1 << (4 * retention + 4).bit_length()
        self.base = 0

    def add(self, numbers: np.ndarray, stamps: np.ndarray, seqs: np.ndarray, values: list, limit: int):
        """Records (their keys' numbers), in order of seq, put later than those held (higher seqs), none at
        or below `limit` (the store's expiry limit)."""
        if not self.size:
            self.base = limit + 1
        elif int(stamps.max()) - self.base >= self.width:
            self.compact(limit, rebase=True)
        else:
            self.compact_if_due(limit)
        first, end = self.size, self.size + len(values)
        capacity = grown_capacity(end, len(self.kid))
        if capacity is not None:
            self.kid, self.ts, self.seq = (
                grown(column, first, capacity) for column in (self.kid, self.ts, self.seq)
            )
        self.kid[first:end], self.ts[first:end], self.seq[first:end] = numbers, stamps, seqs
        if len(self.values) >= MAX_VALUE_ARRAYS:
            self.values, self.starts = [np.concatenate(self.values)], [0]
        self.values.append(object_array(values))
        self.starts.append(first)
        self.size = end
        comp = numbers * self.width + (stamps - self.base)
        # the records come in order of seq: ties stay so
        by = stable_order(comp, int(comp.max()) + 1 if len(comp) else 0)
        comp = comp[by]
        at = np.searchsorted(self.comp, comp, "right")  # after the records held of an equal key and time
        # one merge for both columns: `at` is sorted (so is `comp`), so the batch's records go to `at` plus
        # their rank, and the records held fill the other places in order (np.insert, once per column,
        # would sort `at` and mark the places twice)
        places = at + np.arange(len(at))
        held = np.ones(len(self.comp) + len(at), bool)
        held[places] = False
        merged_comp, merged_order = np.empty(len(held), np.int64), np.empty(len(held), np.int64)
        merged_comp[places], merged_comp[held] = comp, self.comp
        merged_order[places], merged_order[held] = by + first, self.order
        self.comp, self.order = merged_comp, merged_order

    def check_numbers(self, count: int) -> None:
        """Raise OverflowError where `count` key numbers would not fit the int64 sort key."""
        if count * self.width >= 1 << 62:
            raise OverflowError(f"a join store's {count} keys times its retention exceed its int64 sort key")

    def matches(self, numbers: np.ndarray, time_from: np.ndarray, time_to: np.ndarray) -> Partners:
        """The records of each probe key (by number, -1 for none) at times in [time_from, time_to] (each at
        or above `base`)."""
        start = numbers * self.width - self.base
        # searched for in order: each search starts where the one before ended, reading the sort keys
        # near those it read last (in a random order, each search is cache misses at many keys)
        firsts, lasts = start + time_from, start + time_to
        by = np.argsort(firsts)
        lo, hi = np.empty_like(firsts), np.empty_like(lasts)
        lo[by] = np.searchsorted(self.comp, firsts[by], "left")
        hi[by] = np.searchsorted(self.comp, lasts[by], "right")
        counts = np.where((numbers >= 0) & (time_to >= time_from), hi - lo, 0)
        probes = np.flatnonzero(counts)
        if not len(probes):
            return NO_PARTNERS
        counts = counts[probes]
        lo = lo[probes]
        total = int(counts.sum())
        # the matches' places in the order: each probe's range, one after the other
        steps = np.ones(total, np.int64)
        starts = np.cumsum(counts) - counts
        steps[0] = lo[0]
        steps[starts[1:]] = lo[1:] - (lo[:-1] + counts[:-1]) + 1
        positions = self.order[np.cumsum(steps)]
        return Partners(
            np.repeat(probes, counts).tolist(),
            self.ts[positions].tolist(),
            self.seq[positions].tolist(),
            self._values_at(positions),
        )

    def _values_at(self, positions: np.ndarray) -> list:
        """The values at `positions`, in that order: gathered array by array."""
        arrays = self.values
        if len(arrays) == 1:
            return arrays[0][positions].tolist()
        array_of = np.searchsorted(self.starts, positions, "right") - 1
        by = np.argsort(array_of, kind="stable")
        ends = np.searchsorted(array_of[by], np.arange(len(arrays)), "right").tolist()
        found = np.empty(len(positions), object)
        lo = 0
        for held, start, hi in zip(arrays, self.starts, ends, strict=True):
            if hi > lo:
                at = by[lo:hi]
                found[at] = held[positions[at] - start]
            lo = hi
        return found.tolist()

    def records(self, keys: list, limit: int) -> Iterator[tuple[Any, int, int, Any]]:
        """(key, timestamp, seq, value) of the records after `limit`, by key number (`keys` by number), then
        time and seq."""
        positions = self.order[self.ts[self.order] > limit].tolist()
        kid, ts, seq, values = (
            self.kid.tolist(),
            self.ts.tolist(),
            self.seq.tolist(),
            np.concatenate(self.values).tolist() if self.values else [],
        )
        for at in positions:
            yield keys[kid[at]], ts[at], seq[at], values[at]

    def live_stamps(self, limit: int) -> list[int]:
        stamps = self.ts[: self.size]
        return stamps[stamps > limit].tolist()

    def compact_if_due(self, limit: int) -> None:
        """Drop the expired records once they outnumber the live ones (and MIN_EXPIRED), or are all there
        is (a fetch then reads no columns)."""
        expired = int(np.count_nonzero(self.ts[: self.size] <= limit))
        if expired > max(MIN_EXPIRED, self.size - expired) or expired == self.size:
            self.compact(limit)

    def compact(self, limit: int, rebase: bool = False) -> None:
        """Drop the records at or below `limit`, and move `base` up to it (`rebase`)."""
        self.keep(self.ts[: self.size] > limit, limit, rebase)

    def drop_seqs(self, seqs: np.ndarray, limit: int) -> None:
        """Drop the records of these seqs."""
        self.keep(~np.isin(self.seq[: self.size], seqs), limit, False)

    def keep(self, live: np.ndarray, limit: int, rebase: bool) -> None:
        kept = np.flatnonzero(live)
        moved = np.cumsum(live) - 1  # per position kept, its new one
        in_order = live[self.order]
        self.order = moved[self.order[in_order]]
        self.kid, self.ts, self.seq = self.kid[kept], self.ts[kept], self.seq[kept]
        if len(kept):
            held = self.values[0] if len(self.values) == 1 else np.concatenate(self.values)
            self.values, self.starts = [held[kept]], [0]
        else:
            self.values, self.starts = [], []
        self.size = len(kept)
        if rebase:
            self.base = limit + 1
            self._sort_keys()
        else:
            self.comp = self.comp[in_order]

    def renumber(self, live: np.ndarray) -> None:
        """The keys numbered again: each by its rank among the old numbers `live` (sorted, every number
        held among them), so that the order holds."""
        self.kid = np.searchsorted(live, self.kid[: self.size])
        self._sort_keys()

    def _sort_keys(self) -> None:
        at = self.order
        self.comp = self.kid[at] * self.width + (self.ts[at] - self.base)


def _unexpired(batches: list, limit: int) -> Iterator[tuple]:
    """Each of a join store's unindexed batches (`JoinWindowStore._unindexed`) that has records after
    `limit`, its expired records left out, in C passes: `(keys, timestamps, values, seqs as int64s, whether
    every key is a str, their keys' numbers or None)`."""
    for latest, keys, stamps, seqs, values, str_keys, numbers in batches:
        if latest <= limit:
            continue
        seq_column = _seq_column(seqs, 0, len(seqs))
        if min(stamps) <= limit:
            live = list(map(limit.__lt__, stamps))
            keys, stamps, values = (list(compress(column, live)) for column in (keys, stamps, values))
            live_mask = np.fromiter(live, bool, len(live))
            seq_column = seq_column[live_mask]
            numbers = None if numbers is None else numbers[live_mask]
        yield keys, stamps, values, seq_column, str_keys, numbers


def _joined_keys(keys: list, lo: int, hi: int, pieces: list[tuple[int, int, str]]) -> str:
    """`keys[lo:hi]` (str) joined by NUL: `pieces` (in order, within) joined already, the others now."""
    parts, at = [], lo
    for first, end, text in pieces:
        if first > at:
            parts.append(KEY_SEPARATOR.join(keys[at:first]))
        parts.append(text)
        at = end
    if hi > at:
        parts.append(KEY_SEPARATOR.join(keys[at:hi]))
    return KEY_SEPARATOR.join(parts)


class Partners(NamedTuple):
    """What a join store's fetch found for a batch of probes: its records, probe after probe, each probe's
    in order of (timestamp, seq); per record the index of its probe, its timestamp, seq and value."""

    probes: list[int]
    stamps: list[int]
    seqs: list[int]
    values: list

    def merged(self, other: Partners) -> Partners:
        """The records of both, in that order (one sort of their columns)."""
        if not other.probes:
            return self
        if not self.probes:
            return other
        columns = [a + b for a, b in zip(self, other, strict=True)]
        order = np.lexsort((columns[2], columns[1], columns[0])).tolist()
        return Partners(*(list(map(column.__getitem__, order)) for column in columns))


NO_PARTNERS = Partners([], [], [], [])


_run_segment = itemgetter(1)  # of a run `(position, segment)` of a join store's records put


def join_records(rows: list) -> Iterator[tuple[int, int, Any]]:
    """The records `(timestamp, seq, value)` of a key's flat list (JoinWindowStore.entries), in order."""
    it = iter(rows)
    return zip(it, it, it, strict=True)


def _expired_end(rows: list, limit: int) -> int:
    """Where the records after `limit` start in a key's flat list whose first record is at or before it:
    the expired records come first, and a scan over them costs what deleting them does."""
    cut, end = 3, len(rows)
    while cut < end and rows[cut] <= limit:
        cut += 3
    return cut


def _insert_record(rows: list, ts: int, seq: int, value: Any) -> None:
    """Put a record into a key's flat list, sorted by (timestamp, seq)."""
    if rows[-3] < ts or (rows[-3] == ts and rows[-2] < seq):  # the common case: after the key's records
        rows += (ts, seq, value)
        return
    at = bisect_right(rows[0::3], ts)
    while at and rows[3 * at - 3] == ts and rows[3 * at - 2] > seq:
        at -= 1
    rows[3 * at : 3 * at] = (ts, seq, value)


class JoinWindowStore:
    """One side of a stream-stream join: key -> its records `(timestamp, seq, value)`, sorted. The batches
    put go into the index when a fetch or a listing first needs it (a record that expires before then never
    does: a side that the other side's records rarely look up costs a put per batch), and there, where they
    are many (SORTED_MIN), into numpy columns sorted by key number, timestamp and seq (`SortedRecords`: a
    batch merged at once, looked up a batch at a time, no object per record), else one by one into a dict
    of key -> its records, flat in one list per key (`[ts, seq, value, ts, ...]`: no object per record,
    which the cyclic collector would visit after every batch; `join_records` reads them as triples), as
    short batches come where topics take turns. A fetch reads both and merges what they found. Records at
    or before `store_time - retention` are expired: neither found nor put; a fetch deletes those of its key
    in the dict, and once the clock expires a segment, a put deletes those of the keys put in it
    (`_purge`) and compacts the columns where their expired records outnumber the live ones, so that the
    store holds about a retention of records, as Kafka's segmented store does.

    Saved as Kafka's segmented window stores keep their records, by segment of event time (`interval`, a
    SEGMENTS-th of the retention), each a group of a StoreLog (nodes/store_log.py). A record goes to the
    segment of the store's clock as it is put (at or after its own timestamp's: the segment expires no
    earlier than the record, and a batch's records fall into runs, one per segment). A record only joins
    the store or leaves it by expiry, so a delta holds the records put into its segment since the last
    export and no part removes a record: a segment past the retention loses its parts whole, and a store
    loaded from parts leaves out the records its clock expired (neither found nor listed anyway). An export
    touches the batch's records only, never the lists of the keys they joined; a segment keeps the columns
    of its parts for a new base. Saved form: `{"keys": [...], "columns": [timestamps, seqs, values]}`, a
    record per position, the timestamps and seqs int64 arrays; where every key is a str (the join node
    says so), `{"key_text": ..., "key_count": ...}` in place of "keys" (nodes/kv_rows.py, `saved_keys`)."""

    def __init__(self, prefix: str, retention: int) -> None:
        self.prefix = prefix
        self.retention = retention
        self.interval = max(1, -(-retention // SEGMENTS))
        self.store_time = -1  # the max timestamp put
        self._entries: dict[Any, list] = {}  # key -> its records, flat (those not in `_sorted`)
        self._sorted = SortedRecords(retention)  # the records indexed a large batch at a time
        # the numbers of the keys in `_sorted`, shared by the stores in `sharing` (a join's two sides, which
        # look the same keys up: a batch is numbered once, `numbers_for`)
        self.key_ids = KeyNumbers()
        self.sharing: tuple[JoinWindowStore, ...] = (self,)
        # the batches put since the index was last brought up to date: (their max timestamp, keys,
        # timestamps, seqs, values, whether every key is a str, their keys' numbers or None)
        self._unindexed: list[tuple[int, list, list, Sequence[int], list, bool, np.ndarray | None]] = []
        self.counts = TimestampCounts()  # per timestamp
        self._segments: dict[int, _Segment] = {}  # the segments the parts hold
        self._new: tuple[list, list, list] = ([], [], [])  # keys, timestamps, values put
        # their seqs, as the batches gave them (a range, where none expired): made an array at the export, as
        # a batch's of a few records would cost more as an array of its own
        self._new_seqs: list[Sequence[int]] = []
        self._new_str = True  # every key in `_new` is a str
        # (first, end, their keys joined by NUL) of runs of `_new`'s str keys, joined as they were put, while
        # in the CPU's caches (joined at the export, each key of a large store would be a cache miss again);
        # split where a segment's records start; for batches of JOINED_KEYS_MIN keys or more
        self._new_texts: list[tuple[int, int, str]] = []
        self._runs: list[
            tuple[int, int]
        ] = []  # (position in `_new`, segment) where a segment's records start
        self._purged = -1  # the segments up to this one have no record left in `entries`
        self.log = StoreLog()

    def share_key_ids(self, other: JoinWindowStore) -> None:
        """Number keys as one with `other` (a join's other side)."""
        self.key_ids = other.key_ids
        self.sharing = other.sharing = (other, self)

    def numbers_for(self, keys: list) -> tuple[np.ndarray | None, bool]:
        """The numbers of a batch's keys, which the sorted columns of this store and those sharing its
        numbers read (`fetch_batch`, `put_batch`), numbered once (None for a batch under SORTED_MIN, which
        the sorted columns look up only if they hold records), and whether every key is a str: told by the
        numbering where the numbers are in a key table, which checks only the keys new to it (a pass over a
        large batch's keys is a cache miss apiece), else by a pass over the keys. The keys are first
        numbered again where most numbers are of keys no store holds any longer (`_renumber_if_due`).

        A None key (a record the join drops) is numbered -1 in a key table, and never added; where the
        numbers are not in one, a batch with a None key gets none, `(None, False)`: the caller numbers the
        keys it keeps. Where a batch holds None keys, "every key is a str" speaks of the others."""
        if len(keys) < SORTED_MIN:
            return None, set(map(type, keys)) == {str}
        self._renumber_if_due()
        numbers = self.key_ids.number_str(keys, none_keys=True)
        str_keys = numbers is not None
        if numbers is None:
            types = set(map(type, keys))
            if type(None) in types:
                return None, False
            str_keys = types == {str}
            numbers = self.key_ids.number(keys, str_keys)
        self._sorted.check_numbers(len(self.key_ids))
        return numbers, str_keys

    def _renumber_if_due(self) -> None:
        """Number the keys held (in the sorted columns, or waiting for them) again, in the order of their
        numbers, once they are stale next to the records held (`KeyNumbers.stale`)."""
        held = sum(
            store._sorted.size + sum(len(batch[1]) for batch in store._unindexed) for store in self.sharing
        )
        if not self.key_ids.stale(held):
            return
        numbered = [store._sorted.kid[: store._sorted.size] for store in self.sharing]
        numbered += [batch[6] for store in self.sharing for batch in store._unindexed if batch[6] is not None]
        live = np.unique(np.concatenate(numbered)) if numbered else np.zeros(0, np.int64)
        key_ids = KeyNumbers()
        keys = self.key_ids.keys
        key_ids.number([keys[n] for n in live.tolist()], self.key_ids.str_only())
        for store in self.sharing:
            store.key_ids = key_ids
            store._sorted.renumber(live)
            store._unindexed = [
                (*batch[:6], None if batch[6] is None else np.searchsorted(live, batch[6]))
                for batch in store._unindexed
            ]

    def put_batch(
        self,
        keys: list,
        values: list,
        timestamps: list,
        seqs: Sequence[int],
        str_keys: bool = False,
        numbers: np.ndarray | None = None,
    ) -> list[int]:
        """Put records in order; the positions of those not put (expired already: the store's clock had
        passed them by the retention, counting the earlier records of the batch). The lists become the
        store's. `str_keys`: the caller knows every key to be a str; `numbers`: the keys' numbers
        (`numbers_for`), or None."""
        if not keys:
            return []
        retention, interval = self.retention, self.interval
        clocks = list(accumulate(timestamps, max, initial=self.store_time))  # the clock before each put
        del clocks[0]  # ... and after it
        store_time = clocks[-1]
        expired: list[int] = []
        if max(map(sub, clocks, timestamps)) >= retention:  # a record as far behind the clock as that
            # each record's lag behind the clock against the retention, in C passes over the batch
            late = list(map(le, repeat(retention), map(sub, clocks, timestamps)))
            expired = list(compress(range(len(keys)), late))
            kept = list(map(not_, late))
            keys, values = list(compress(keys, kept)), list(compress(values, kept))
            timestamps = list(compress(timestamps, kept))
            if len(seqs) >= SEQ_ARRAY_MIN:  # not read one by one
                seqs = np.delete(_seq_column(seqs, 0, len(seqs)), expired)
            else:
                seqs = list(compress(seqs, kept))
            if numbers is not None:
                numbers = np.delete(numbers, expired)
        new, runs = self._new, self._runs
        at = len(new[0])
        if not runs:
            runs.append((at, self.store_time // interval))
        first_run = len(runs)  # the runs this batch starts after its first record
        # a run of records starts where the clock enters a segment (a record that moves the clock is kept)
        next_segment = (self.store_time // interval + 1) * interval
        n = bisect_left(clocks, next_segment)
        while n < len(clocks):
            segment = clocks[n] // interval
            runs.append((at + n - bisect_left(expired, n), segment))
            next_segment = (segment + 1) * interval
            n = bisect_left(clocks, next_segment, n)
        self.store_time = store_time
        if keys:
            self.counts.add_batch(timestamps, store_time - retention)
            self._new_str = self._new_str and str_keys
            if str_keys and len(keys) >= JOINED_KEYS_MIN:
                ends = [lo for lo, _ in runs[first_run:] if lo > at] + [at + len(keys)]  # in order
                for lo, hi in zip([at, *ends], ends, strict=False):
                    self._new_texts.append((lo, hi, KEY_SEPARATOR.join(keys[lo - at : hi - at])))
            new[0].extend(keys)
            new[1].extend(timestamps)
            new[2].extend(values)
            self._new_seqs.append(seqs)
            self._unindexed.append((max(timestamps), keys, timestamps, seqs, values, str_keys, numbers))
        if self._last_expired_segment() > self._purged:
            self._purge()
        return expired

    @property
    def entries(self) -> dict[Any, list]:
        """key -> its records `(timestamp, seq, value)`, sorted, flat, of the records indexed one by one
        (read only; expired ones may wait for a fetch or a purge); the others are in `_sorted`."""
        self._index()
        return self._entries

    def _index(self) -> None:
        """Put the live records of the batches not indexed yet into the index: into the sorted columns
        where they are many (SORTED_MIN, and a SORTED_SHARE-th of the columns' records), else one by one
        into the dict."""
        batches = self._unindexed
        if not batches:
            return
        self._unindexed = []
        limit = self.store_time - self.retention
        records = len(batches[0][1]) if len(batches) == 1 else sum(len(batch[1]) for batch in batches)
        if records >= SORTED_MIN and records >= self._sorted.size // SORTED_SHARE:
            self._index_sorted(batches, limit)
            return
        entries = self._entries
        get = entries.get
        # the expired records left out one by one, as they are put one by one (no pass to find them first)
        for latest, keys, stamps, seqs, values, *_ in batches:
            if latest <= limit:
                continue
            for key, ts, seq, value in zip(keys, stamps, seqs, values, strict=True):
                if ts <= limit:
                    continue
                rows = get(key)
                if rows is None:
                    entries[key] = [ts, seq, value]
                elif rows[-3] <= ts:  # the common case: later than the key's records (whose seqs are lower)
                    rows += (ts, seq, value)
                else:
                    _insert_record(rows, ts, seq, value)

    def _index_sorted(self, batches: list, limit: int) -> None:
        """`_index` of batches into the sorted columns, their expired records left out."""
        stamps: list = []
        values: list = []
        seq_columns, numbered = [], []
        for batch_keys, batch_stamps, batch_values, seq_column, str_keys, numbers in _unexpired(
            batches, limit
        ):
            if numbers is None:
                numbers = self.key_ids.number(batch_keys, str_keys)
                self._sorted.check_numbers(len(self.key_ids))
            stamps += batch_stamps
            values += batch_values
            seq_columns.append(seq_column)
            numbered.append(numbers)
        if values:
            stamp_column = np.fromiter(stamps, np.int64, len(stamps))
            self._sorted.add(
                np.concatenate(numbered), stamp_column, np.concatenate(seq_columns), values, limit
            )

    def _last_expired_segment(self) -> int:
        """The last segment whose whole span the clock has expired (`_expired_segment`)."""
        return (self.store_time - self.retention + 1) // self.interval - 1

    def _purge(self) -> None:
        """Delete the expired records of the keys put in the segments expired since the last purge: every
        record put in such a segment is expired (a record's segment is that of the clock as it was put)."""
        last, purged = self._last_expired_segment(), self._purged
        limit = self.store_time - self.retention
        if self._entries:
            keys: set = set()
            for number, segment in self._segments.items():
                if purged < number <= last:
                    for chunk in segment.chunks:
                        keys.update(_held_keys(chunk))
            new_keys, runs = self._new[0], self._runs
            # the runs (in order of segment) put in the segments expired since: those before were purged
            first = bisect_right(runs, purged, key=_run_segment)
            for r in range(first, len(runs)):
                lo, number = runs[r]
                if number > last:
                    break
                keys.update(new_keys[lo : runs[r + 1][0] if r + 1 < len(runs) else len(new_keys)])
            self._cut_expired(keys)
        if self._sorted.size:
            self._sorted.compact_if_due(limit)
        self._purged = last
        self._unindexed = [batch for batch in self._unindexed if batch[0] > limit]

    def _cut_expired(self, keys) -> None:
        """Delete the expired records of `keys` (a key left without records goes)."""
        entries, limit = self._entries, self.store_time - self.retention
        for key in keys:
            rows = entries.get(key)
            if rows is None or rows[0] > limit:
                continue
            cut = _expired_end(rows, limit)
            if cut == len(rows):
                del entries[key]
            else:
                del rows[:cut]

    def fetch_batch(
        self, keys: list, timestamps: list, before: int, after: int, numbers: np.ndarray | None = None
    ) -> Partners:
        """Per key its records with timestamps in [max(0, t - before), max(0, t + after)] for its `t` in
        `timestamps` (a join window), oldest first. `numbers`: the keys' numbers (`numbers_for`), or None."""
        self._index()
        entries, limit = self._entries, self.store_time - self.retention
        # the records deleted below need no count: the counts drop expired timestamps by the limit, when read
        # a record's window, clipped at 0 and to the live records: its records are those of the key from
        # the first at or after `time_from` to the last at or before `time_to`
        floor = max(0, limit + 1)
        found = NO_PARTNERS
        if self._sorted.size:
            stamps = np.fromiter(timestamps, np.int64, len(timestamps))
            time_from = np.maximum(stamps - before, floor)
            time_to = np.minimum(np.maximum(stamps + after, 0), self.store_time)
            if numbers is None:
                numbers = self.key_ids.lookup(keys)
            found = self._sorted.matches(numbers, time_from, time_to)
        if entries:
            found = found.merged(self._fetch_entries(keys, timestamps, before, after, floor))
        return found

    def _fetch_entries(self, keys: list, timestamps: list, before: int, after: int, floor: int) -> Partners:
        """`fetch_batch` of the records in the dict (ints compared, no tuple built)."""
        entries, limit = self._entries, self.store_time - self.retention
        probes: list[int] = []
        found: list = []  # flat, as the dict holds them
        get = entries.get
        for n, rows in enumerate(map(get, keys)):  # the look-ups in C
            if rows is None:
                continue
            if rows[0] <= limit:  # expired: deleted for good
                cut = _expired_end(rows, limit)
                if cut == len(rows):
                    del entries[keys[n]]
                    continue
                del rows[:cut]
            ts = timestamps[n]
            time_from, time_to = ts - before, ts + after
            if time_from < floor:
                time_from = floor
            if time_to < 0:
                time_to = 0
            if rows[0] >= time_from:
                if rows[-3] <= time_to:  # every record of the key (the common case)
                    probes += repeat(n, len(rows) // 3)
                    found += rows
                    continue
                stamps = rows[0::3]
                lo = 0
            else:
                stamps = rows[0::3]
                lo = 3 * bisect_left(stamps, time_from)
            hi = 3 * bisect_right(stamps, time_to)
            if hi > lo:
                probes += repeat(n, (hi - lo) // 3)
                found += rows[lo:hi]
        return Partners(probes, found[0::3], found[1::3], found[2::3])

    def items(self) -> Iterator[tuple[Any, int, Any]]:
        """(key, timestamp, value) of every live record (an expired one may wait for a fetch)."""
        limit = self.store_time - self.retention
        for key, rows in self.entries.items():
            for ts, _, value in join_records(rows):
                if ts > limit:
                    yield key, ts, value
        for key, ts, _, value in self._sorted.records(self.key_ids.keys, limit):
            yield key, ts, value

    def size(self) -> int:
        """The records `items` lists (their timestamps are the counter's windows)."""
        self.counts.expire(self.store_time - self.retention)
        return self.counts.entries

    def recount(self) -> None:
        """Count the entries again (after a catch-up)."""
        limit = self.store_time - self.retention
        self.counts.clear()
        self.counts.add_batch(list(chain.from_iterable(rows[0::3] for rows in self.entries.values())), limit)
        self.counts.add_batch(self._sorted.live_stamps(limit), limit)

    # -- saving ---------------------------------------------------------------------------------------------

    def _expired_segment(self, segment: int) -> bool:
        return (segment + 1) * self.interval - 1 <= self.store_time - self.retention

    def _name(self, segment: int) -> str:
        return f"{self.prefix}{segment}"

    def _segment_named(self, name: str) -> int:
        number = name[len(self.prefix) :]
        if not name.startswith(self.prefix) or not number.lstrip("-").isdigit():
            raise ValueError(f"state part {name!r} is not a part of store {self.prefix!r}")
        return int(number)

    def _new_chunks(self) -> tuple[dict[int, _Chunk], dict[int, str]]:
        """The records put since the last export, per segment (slices of the batch's columns), and per
        segment its keys joined by NUL where every one is a str (the pieces joined as they were put,
        `_new_texts`, and the keys between them)."""
        keys, stamps, values = self._new
        seqs = _seq_columns(self._new_seqs) if keys else None
        runs = self._runs
        chunks: dict[int, _Chunk] = {}
        texts: dict[int, str] = {}
        if not keys:
            return chunks, texts
        bounds = [at for at, _ in runs[1:]] + [len(keys)]
        pieces = self._new_texts
        p = 0  # the next piece: pieces and runs are in order, and a run's pieces lie within it
        for (lo, segment), hi in zip(runs, bounds, strict=True):
            inside = []
            while p < len(pieces) and pieces[p][1] <= hi:
                if pieces[p][0] >= lo:
                    inside.append(pieces[p])
                p += 1
            if hi > lo and not self._expired_segment(segment):
                whole = lo == 0 and hi == len(keys)
                chunks[segment] = (
                    keys if whole else keys[lo:hi],
                    _int64_column(stamps, lo, hi),
                    seqs if whole else seqs[lo:hi].copy(),
                    values if whole else values[lo:hi],
                )
                if self._new_str:
                    texts[segment] = _joined_keys(keys, lo, hi, inside)
        return chunks, texts

    @staticmethod
    def _saved(chunk: _Chunk, str_keys: bool, text: str | None = None) -> dict[str, Any]:
        """A chunk's saved form; `text`: its keys joined by NUL already (saved so unless a key holds a NUL)."""
        keys, stamps, seqs, values = chunk
        if text is not None and joins_keys(text, len(keys)):
            saved: dict[str, Any] = {"key_text": text, "key_count": len(keys)}
        else:
            saved = saved_keys(keys, str_keys)
        return {**saved, "columns": [stamps, seqs, values]}

    @staticmethod
    def _saved_held(held: tuple, str_keys: bool) -> dict[str, Any]:
        """A segment's held chunk's saved form (`_saved`)."""
        keys, stamps, seqs, values = held
        if type(keys) is str:
            return {"key_text": keys, "key_count": len(stamps), "columns": [stamps, seqs, values.tolist()]}
        return JoinWindowStore._saved((keys.tolist(), stamps, seqs, values.tolist()), str_keys)

    def export_parts(self, changed_only: bool) -> tuple[dict[str, Any], list[str]]:
        """Parts new or changed since the last export (every part unless `changed_only`), and the names of
        every current part."""
        (chunks, texts), new_str = self._new_chunks(), self._new_str
        self._new, self._new_seqs, self._runs, self._new_str = ([], [], []), [], [], True
        self._new_texts = []
        segments, log = self._segments, self.log
        for segment in segments.values():
            segment.new = 0
        for number, chunk in chunks.items():
            segment = segments.get(number)
            if segment is None:
                segment = segments[number] = _Segment()
            segment.add(chunk, new_str, texts.get(number))
            segment.new = len(chunk[0])
            log.touch(number)
        for number in [n for n in segments if self._expired_segment(n)]:
            del segments[number]
            log.drop(number)

        def save(number: int, put: Any) -> dict[str, Any]:
            if put is not None:
                return self._saved(chunks[number], new_str, texts.get(number))
            segment = segments[number]
            # a new base: the parts hold these records only
            return self._saved_held(segment.rebased(), segment.str_keys)

        return log.export(segments, changed_only, self._name, save, _Segment.changes)

    def state_parts(self) -> dict[str, Any]:
        """A base per segment, leaving the export history alone (a snapshot)."""
        chunks, texts = self._new_chunks()
        segments = self._segments
        numbers = [n for n in segments.keys() | chunks.keys() if not self._expired_segment(n)]

        def base(number: int) -> dict[str, Any]:
            segment = segments.get(number)
            if segment is None:
                return self._saved(chunks[number], self._new_str, texts.get(number))
            more = chunks.get(number)
            whole = segment.columns(more, texts.get(number))
            return self._saved_held(whole, segment.str_keys and (more is None or self._new_str))

        return StoreLog.bases(dict.fromkeys(numbers), self._name, base)

    def apply_parts(self, parts: Mapping[str, Any], removed: list[str]) -> None:
        """Catch up with the parts exported since (see StoreLog.catch_up); the join node sets the store's
        clock first, and recounts (`recount`) after."""
        if self._new[0]:
            raise ValueError(f"store {self.prefix!r}: changes not exported, cannot catch up")
        self._runs = []
        dropped, steps = self.log.catch_up(parts, removed, self._segment_named)
        entries, segments = self.entries, self._segments
        for number in dropped:  # its records go (gone, or in its new base)
            segment = segments.pop(number, None)
            if segment is not None:
                held = segment.columns()
                keys, stamps, seqs = _held_keys(held), held[1], held[2]
                if self._sorted.size:
                    self._sorted.drop_seqs(seqs, self.store_time - self.retention)
                records = set(zip(stamps.tolist(), seqs.tolist(), strict=True))
                for key in set(keys):
                    rows = [
                        field
                        for ts, seq, value in join_records(entries.get(key, ()))
                        if (ts, seq) not in records
                        for field in (ts, seq, value)
                    ]
                    if rows:
                        entries[key] = rows
                    else:
                        entries.pop(key, None)
        for number, saved, removed_keys in steps:
            keys, columns = loaded_row_keys(saved, self._name(number)), saved["columns"]
            if (
                removed_keys
                or len(columns) != 3
                or not len(keys) == len(columns[0]) == len(columns[1]) == len(columns[2])
            ):
                raise ValueError(f"state part {self._name(number)!r}: not a join store's records")
            stamps, seqs = np.asarray(columns[0], np.int64), np.asarray(columns[1], np.int64)
            for key, ts, seq, value in zip(keys, stamps.tolist(), seqs.tolist(), columns[2], strict=True):
                rows = entries.get(key)
                if rows is None:
                    entries[key] = [ts, seq, value]
                else:
                    _insert_record(rows, ts, seq, value)
            segment = segments.get(number)
            if segment is None:
                segment = segments[number] = _Segment()
            segment.add((keys, stamps, seqs, columns[2]), "key_text" in saved, saved.get("key_text"))
        for number in [n for n in segments if self._expired_segment(n)]:
            del segments[number]  # its parts go at the next export
        self._cut_expired(list(entries))
        self._purged = self._last_expired_segment()
