"""A windowed count whose only child is a final suppress, both run in one vectorized pass per batch.

`windowed_by(TimeWindows).count().suppress(until_window_closes(unbounded()))` is Kafka's way to get one
final count per key and window (KIP-328), and the shape of the window-finals job. Run node by node, every
record costs a trip through the count's loop (a Windowed key, four output columns) and then the suppress
buffer's loop; here a batch's records become (record, window) pairs in numpy arrays, each distinct key and
window is looked up once (each record once, in a batch within one window: `_number_keys`), and only the
entries that leave the buffer are built as Python objects.

The result is the nodes' own, to the metric: the same outputs in the same order, the same drops, the same
rows in both stores (new keys appended in order of first appearance, every row put flagged for the next
export), the same observed times and buffer metrics. What makes one pass possible (docs/semantics.md
sections 4 and 5): the count forwards every pair it keeps with the new count, the old count and the
row's maximum timestamp, so the buffer's observed time is the running maximum of those timestamps; a window
leaves the buffer at the first pair whose observed time reaches its end + grace, and no later pair can
be in it, since the count's observed time is never behind the buffer's and the count drops the pairs of a
closed window. So the buffer's entries are put with their batch-final values first, then the windows
leave in order, each at its pair, and the metrics (a sample after every put and after every eviction)
are sums over those positions. The plan checks all this before changing anything; a batch it cannot
vouch for (non-string or null keys, headers, timestamps it cannot hold in int64) runs node by node.
"""

from __future__ import annotations

from array import array
from collections import deque
from typing import Any, NamedTuple

import numpy as np

from ..records import Window
from ..timeutil import INT64_MAX
from .aggregations import TimeWindowAggregateNode
from .base import Batch
from .declared_aggregations import stable_order
from .key_table import (
    SAMPLE,
    SPARSE_TABLE,
    KeyTable,
    mostly_distinct,
    number_by_first_appearance,
    same_keys,
    table_size,
)
from .suppress import SuppressNode
from .time_ordered_buffer import Evicted, TimeOrderedKeyValueBuffer
from .window_rows import INT64, WindowRows, dumps_plain

# Below this many rows the nodes' loops are cheaper than numpy's fixed cost per call.
MIN_ROWS = 256
# `_distinct` counts values instead of sorting them while their span is below this many per value plus
# DENSE_SPAN: a count costs a pass over the span, a stable sort a few passes over the values.
DENSE_SPAN_PER_VALUE = 8
DENSE_SPAN = 1 << 16
# A window's new keys are pickled as they are appended (for both stores' saves, while they are in the CPU's
# caches) from this many on; fewer cost more in a pickler's set-up per window than an export saves on them.
MIN_KEYS_PICKLED = 1024


def final_window_count(count: Any) -> FinalWindowCount | None:
    """The fused pair when `count` is a windowed count whose only child is an unbounded final suppress."""
    suppress = final_suppress(count)
    if suppress is None or count.aggregation.kind != "count":
        return None
    return FinalWindowCount(count, suppress)


def final_suppress(node: Any) -> SuppressNode | None:
    """The only child of a time-window aggregation `node` when it is an unbounded final suppress."""
    if not isinstance(node, TimeWindowAggregateNode):
        return None
    if len(node.children) != 1 or not node.send_old_values:
        return None
    suppress = node.children[0]
    if not isinstance(suppress, SuppressNode) or not suppress.window_close:
        return None
    if suppress.buffer.bounded or suppress.buffer.track_bytes:
        return None  # a bounded buffer may shut down mid-batch; sizing bytes is per entry: node by node
    return suppress


class _Pairs(NamedTuple):
    """The count's (record, window) pairs of a batch, in its output order (by record, then window start),
    those of closed windows dropped. A key's number is its row in the count's window `rows_of` when it
    has one there (numbers below `first_new`), else `first_new` + its rank of first appearance among the
    keys without one."""

    observed: int  # the count's observed time after the batch
    late_rec: np.ndarray  # pairs of closed windows: their records
    late_start: np.ndarray  # and their windows' starts
    rec: np.ndarray  # per pair: its record
    start: np.ndarray  # per pair: its window's start
    key: np.ndarray  # per record: its key's number
    keys: np.ndarray  # the keys numbered from first_new on (objects: gathered in C, not one by one)
    ts: np.ndarray  # per record: its timestamp
    first_new: int  # 0 unless every pair is in one window whose count rows number the keys it holds
    rows_of: int  # that window's start (-1: none)
    # a KeyTable that numbered the keys (`keys`, pending) when every pair is in one window the count does
    # not hold yet: that window's table once its rows are appended (None: none)
    new_table: Any


class _PlanWindow(NamedTuple):
    """A window of a batch's plan."""

    start: int
    groups: np.ndarray  # its (window, key) groups; those new to either store in order of first appearance
    # the keys of its groups new to the count's window, in that order, as an object array (a store copies it
    # into its key column as it is)
    new_counts: np.ndarray
    new_entries: np.ndarray  # the keys of its groups new to the buffer's window, in that order (likewise)


class _Groups(NamedTuple):
    """Where a batch's (window, key) groups stand in the count's store: per group its window (an index in
    start order), its row there (-1 where it has none yet: such rows are appended in order of the groups'
    first pairs) and its first pair."""

    window: np.ndarray
    row: np.ndarray
    first: np.ndarray


class _Plan(NamedTuple):
    """A batch worked out, nothing changed yet (see FinalWindowCount._plan)."""

    pairs: _Pairs
    group: np.ndarray  # per pair: its (window, key) group
    windows: list[_PlanWindow]  # in order of first appearance
    final: Any  # per group: the count after the batch (an aggregate's: a list)
    last_old: Any  # per group: the old value its last put forwarded (None: the buffer keeps none)
    final_ts: np.ndarray  # per group: the row's maximum timestamp after the batch
    count_row: np.ndarray  # per group: its row in the count's window, -1 if new
    buffer_row: np.ndarray  # per group: its row in the buffer's window, -1 if new
    # per group new to the buffer: the entry's prior value (the old value at its first put); None where the
    # buffer keeps none (`drops_priors`)
    prior: Any
    delta_count: np.ndarray  # per pair: 1 where the put inserts an entry
    buffer_observed: np.ndarray  # per pair: the buffer's observed time after its put
    passes: list[int]  # the pairs after whose put windows leave the buffer, ascending


class FinalWindowCount:
    """Runs `count` and its child `suppress` over a batch as the two nodes would, in one pass."""

    def __init__(self, count: TimeWindowAggregateNode, suppress: SuppressNode) -> None:
        self.count = count
        self.suppress = suppress
        # The buffer's values are this count's ints: int64 columns, which the fused pass fills with numpy.
        # Only for the fused pair: a count and final suppress that are not fused run node by node, where
        # the suppress loop reads and writes each value, and an array boxes every int.
        suppress.buffer.hold_counts()
        suppress.buffer.share_new_values(self.stored_values, self.stored_keys)

    def stored_keys(self, window: Any) -> np.ndarray | None:
        """The keys by row of the count's window `window[0]`, None when its store holds none: the buffer's
        where its rows are the count's (TimeOrderedKeyValueBuffer.share_new_values)."""
        rows = self.count.store.rows(window[0])
        return None if rows is None else rows.keys

    def stored_values(self, window: Any, entries: WindowRows, at: np.ndarray | None) -> Any:
        """The buffer's new values of its window `window`'s rows `entries` at row numbers `at` (None: every
        row), as the buffer loads them (TimeOrderedKeyValueBuffer.share_new_values): each key's value in
        the aggregation's store, the last one it forwarded (None where its row died: a tombstone's). A
        window whose rows are the store's reads them by row number, the others by key."""
        rows = self.count.store.rows(window[0])
        if rows is None:
            raise ValueError(
                f"state of {self.suppress.name}: window {window[0]}:{window[1]} buffered, "
                f"not in the store of {self.count.name}"
            )
        values = rows.columns[0]
        if same_keys(rows.keys, entries.keys):
            found = np.arange(len(entries)) if at is None else at
        else:
            keys = entries.keys if at is None else entries.keys[at]
            found = rows.rows_of(keys, len(rows))
        if type(values) is array:
            if len(found) and found.min() < 0:
                raise ValueError(f"state of {self.suppress.name}: an entry without a count in {window}")
            return np.frombuffer(values, np.int64)[found]
        return [values[row] if row >= 0 else None for row in found.tolist()]

    def process_columns(self, keys, values, olds, timestamps, headers) -> Batch | None:
        """The suppress node's output; its `src` points at this batch's rows (the count's input), when the
        count's `need_src` says that anything reads it."""
        if len(keys) >= MIN_ROWS and headers is None:
            pairs = self._pairs(keys, timestamps)
            if pairs is not None and not len(pairs.rec):  # every pair late: the count's time and drops
                self._finish_count(pairs, keys, values, timestamps)
                return None
            plan = None if pairs is None else self._plan(pairs)
            if plan is not None:
                return self._apply(plan, keys, values, timestamps)
        return self._node_by_node(keys, values, olds, timestamps, headers)

    def _node_by_node(self, keys, values, olds, timestamps, headers) -> Batch | None:
        out = self.count.process_columns(keys, values, olds, timestamps, headers)
        if out is None or not out.keys:
            return None
        final = self.suppress.process_columns(out.keys, out.values, out.olds, out.timestamps, out.headers)
        # the count's own src is None when nothing reads it (then the suppress's is not read either)
        return final._replace(src=None if out.src is None else [out.src[i] for i in final.src])

    # -- planning: everything worked out, nothing changed -------------------------------------------------

    def _pairs(self, keys: list, timestamps: list) -> _Pairs | None:
        """The batch's pairs; None for a batch to run node by node."""
        count = self.count
        ts = np.array(timestamps)
        if ts.dtype != np.int64 or ts.min() < 0 or count.windows.closes_at(int(ts.max())) > INT64_MAX:
            return None
        observed = np.maximum(np.maximum.accumulate(ts), count.observed)
        rec, start, keep = count.windows.pairs(ts, observed)  # keep: the pair's window is still open
        late_rec, late_start = rec[~keep], start[~keep]
        if not keep.all():
            rec, start = rec[keep], start[keep]
        numbered = self._number_keys(keys, rec, start)
        if numbered is None:
            return None
        number, distinct, first_new, rows_of, new_table = numbered
        return _Pairs(
            int(observed[-1]),
            late_rec,
            late_start,
            rec,
            start,
            number,
            distinct,
            ts,
            first_new,
            rows_of,
            new_table,
        )

    def _number_keys(
        self, keys: list, rec: np.ndarray, start: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, int, int, Any] | None:
        """Per record its key's number, the keys numbered from `first_new` on, `first_new`, the window
        whose count rows number the others and the table that numbered the keys of a window new to the
        count (see _Pairs); None for a batch to run node by node.

        When every pair is in one window that the count holds, the window numbers the keys: a key it holds
        by its row, the others from its row count on, in the order they are to be appended (one batch
        look-up, `WindowRows.number_keys`). Numbering every key afresh and then looking up each distinct
        one would cost two hash-table operations per key, each a cache miss once the window holds a few
        hundred thousand keys. When that window is new to the count (whose windows' rows are live: a count's
        int64 column), a new KeyTable numbers them, in the order its rows are to be appended: the window's
        table from then on (`WindowRows.take_table`), where numbering them in a dict and then building the
        table from the rows would hash each key twice. Only the keys of records with a pair are numbered
        there: a late record's key is not appended. Any other batch (its pairs in several windows, as every
        record's are in hopping windows, or in one window new to a store of aggregates) is numbered in a
        KeyTable of its own (`_number_in_table`), and without pandas in a dict."""
        single = len(start) and int(start.min()) == int(start.max())
        rows = self.count.store.rows(int(start[0])) if single else None
        try:
            if rows is not None:
                return self._number_by_rows(rows, int(start[0]), keys, rec)
            if single and self.count.store.columns[0] == INT64:  # a window of live rows (a count's)
                # sized for the keys the window may come to hold (as many as the largest window's, or the
                # batch's and more for a store filling up, `table_size`): the window's table from then on
                expected = max(self._expected_keys(), table_size(keys, 0))
                numbered = self._number_in_table(keys, expected, self._numbered_mask(keys, rec), kept=True)
            else:  # the batch's own table (each window then looks the distinct keys up in its own rows)
                numbered = self._number_in_table(keys, len(keys) if mostly_distinct(keys) else SAMPLE)
            if numbered is not False:
                return numbered
            number, distinct = number_by_first_appearance(keys, 0)
        except TypeError:  # an unhashable key: the count's loop raises it
            return None
        if len(distinct) and set(map(type, distinct)) != {str}:  # null keys are dropped, and equal keys of
            return None  # other types may differ in which object a row keeps: node by node
        return number, distinct, 0, -1, None

    @staticmethod
    def _number_in_table(
        keys: list, expected: int, numbered: np.ndarray | None = None, kept: bool = False
    ) -> tuple[np.ndarray, np.ndarray, int, int, Any] | None | bool:
        """`_number_keys` in a new KeyTable sized for SPARSE_TABLE times `expected` keys, in one C loop
        where a dict costs a call and a boxed int per key: the keys where `numbered` (None: every key) by
        first appearance, and the table where it is `kept` (the window's, `WindowRows.take_table`); None
        where a key is not a str (node by node, as the keys a dict numbered are refused), False without
        pandas (numbered in a dict then)."""
        table = KeyTable.new(SPARSE_TABLE * expected)
        if table is None:
            return False
        # the list as it is: a batch of many keys is made an object array a chunk at a time (KeyTable.number)
        numbering = table.number(keys, numbered, str_only=True)
        if numbering is None:
            return None
        number, distinct = numbering
        return number, distinct, 0, -1, table if kept else None

    @staticmethod
    def _numbered_mask(keys: list, rec: np.ndarray) -> np.ndarray | None:
        """The records that have a pair, where some have none (None: every record has one; a batch whose
        pairs are all in one window has a pair per record at most)."""
        if len(rec) == len(keys):
            return None
        numbered = np.zeros(len(keys), bool)
        numbered[rec] = True
        return numbered

    def _number_by_rows(
        self, rows: WindowRows, start: int, keys: list, rec: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, int, int] | None:
        """`_number_keys` for a batch whose pairs are all in the window `start`, whose count rows are
        `rows`: one pair per record that has one. A null key makes the window's numbering refuse the batch
        (node by node), found among the keys its table does not hold: no pass over every key looks for it."""
        numbered = self._numbered_mask(keys, rec)  # the records without a pair are numbered -1
        # the list as it is: the key table makes it an object array as it looks it up (KeyTable.number)
        numbering = rows.number_keys(keys, self._table_keys(), numbered)
        if numbering is None:
            return None
        number, distinct = numbering
        return number, distinct, len(rows), start, None

    def _expected_keys(self) -> int:
        """How many keys a window of the count may come to hold: as many as its largest open window."""
        return self.count.store.largest()

    def _table_keys(self) -> int:
        """The keys a window's KeyTable is sized for: SPARSE_TABLE times those it may come to hold, as a
        key-value store's table is (nodes/key_table.py: a look-up in a sparser table compares its key with
        fewer buckets' keys, each a cache miss in a large window)."""
        return SPARSE_TABLE * self._expected_keys()

    def _plan(self, pairs: _Pairs) -> _Plan | None:
        count, suppress = self.count, self.suppress
        rec, start, code, distinct, ts = pairs.rec, pairs.start, pairs.key, pairs.keys, pairs.ts
        first_new = pairs.first_new
        numbers = first_new + len(distinct)
        m = len(rec)
        size = count.windows.size

        # (window, key) groups, numbered by window then key; windows in order of first appearance. A window's
        # start is a multiple of the advance (TimeWindows.pairs): numbered by it, the windows are a few
        # numbers apart, which _distinct counts without sorting.
        advance = count.windows.advance
        starts, window_first, window_of, _ = _distinct(start // advance)
        starts *= advance
        group_id = window_of * numbers + code[rec]
        ids, group_first, group, sizes = _distinct(group_id)
        pair_ts = ts[rec]
        group_max_ts = np.full(len(ids), -1, np.int64)  # timestamps are non-negative (_pairs)
        np.maximum.at(group_max_ts, group, pair_ts)
        group_window = ids // numbers
        key_of_group = ids % numbers  # per group: its key's number
        window_groups = np.searchsorted(group_window, np.arange(len(starts) + 1))

        n_groups = len(ids)
        old0 = self._no_values(n_groups)  # the value before the batch (the initializer's, 0, if new)
        ts0 = np.full(n_groups, -1, np.int64)  # the row's maximum timestamp before the batch
        count_row = np.full(n_groups, -1, np.int64)
        buffer_row = np.full(n_groups, -1, np.int64)
        prior = None if suppress.buffer.drops_priors else self._no_values(n_groups)
        plan_windows: list[_PlanWindow] = []
        buffer = suppress.buffer
        table_keys = self._table_keys()
        for w in np.argsort(window_first).tolist():  # windows in order of first appearance
            lo, hi = window_groups[w], window_groups[w + 1]
            window_start = int(starts[w])
            rows = count.store.rows(window_start)
            entries = buffer.window_rows((window_start, window_start + size))
            same_rows = entries is not None and _same_rows(rows, entries)
            if window_start == pairs.rows_of:  # numbers below first_new are rows of `rows`
                if same_rows:  # the held keys' order does not matter: only the new ones are appended
                    held_groups = int(np.searchsorted(key_of_group[lo:hi], first_new))  # groups: by key
                    order = stable_order(group_first[lo + held_groups : hi], m)
                    in_window = np.concatenate((np.arange(lo, lo + held_groups), lo + held_groups + order))
                else:
                    in_window = lo + stable_order(group_first[lo:hi], m)
                numbers_in_window = key_of_group[in_window]
                found = np.where(numbers_in_window < first_new, numbers_in_window, -1)
                new_counts = _taken(distinct, numbers_in_window[found < 0] - first_new)
                wkeys = None  # the window's keys in group order, built only for a look-up by key
            else:
                in_window = lo + stable_order(group_first[lo:hi], m)  # its groups by first appearance
                if pairs.new_table is not None and not np.array_equal(
                    key_of_group[in_window], np.arange(hi - lo)
                ):  # the window's rows are to be appended in the order its new table numbered their keys
                    return None
                wkeys = new_counts = _taken(distinct, key_of_group[in_window] - first_new)
                found = None
                if rows is not None:
                    # numbered, not only looked up: the keys new to the window take the rows it appends
                    # next, in this order (new_counts), in the same pass over its table, where a look-up
                    # then the table catching up with the appended rows would probe it twice for each
                    numbering = rows.number_keys(wkeys, table_keys)
                    if numbering is None:
                        return None
                    found = numbering[0]
                    found[found >= len(rows)] = -1
            if found is not None:
                count_row[in_window] = found
                old = found >= 0
                if wkeys is not None and old.any():
                    new_counts = wkeys[~old]
                max_ts = np.frombuffer(rows.columns[1], np.int64)
                ts0[in_window[old]] = max_ts[found[old]]
                del max_ts  # an array exporting its buffer cannot grow
                self._old_values(old0, in_window[old], rows, found[old])
            if same_rows:  # a key's entry is in its count row
                held = found >= 0
                new_entries = new_counts
            else:
                if wkeys is None:  # a number below first_new is a row of `rows`, else a new key's
                    in_rows = numbers_in_window < first_new
                    wkeys = np.empty(len(numbers_in_window), object)
                    if in_rows.any():
                        wkeys[in_rows] = rows.keys[numbers_in_window[in_rows]]
                    wkeys[~in_rows] = distinct[numbers_in_window[~in_rows] - first_new]
                if entries is None:
                    held = np.zeros(len(wkeys), bool)
                    new_entries = wkeys
                else:
                    found = entries.rows_of(wkeys, table_keys)
                    held = found >= 0
                    new_entries = wkeys[~held]
            if entries is not None:  # a held entry keeps its prior value (a fixed column): not read
                buffer_row[in_window] = found
            plan_windows.append(_PlanWindow(window_start, in_window, new_counts, new_entries))
        new_entry = buffer_row < 0
        # the buffer's puts (an unbounded buffer: no sizes, see nodes/time_ordered_buffer.py)
        delta_count = np.zeros(m, np.int64)
        delta_count[group_first[new_entry]] = 1  # a new entry's first put
        buffer_observed = np.maximum(np.maximum.accumulate(np.maximum(pair_ts, ts0[group])), buffer.observed)

        group_last = np.full(len(ids), -1, np.int64)  # per group: its last pair
        np.maximum.at(group_last, group, np.arange(m))
        passes = self._passes(buffer_observed, plan_windows, group_first, group_last)
        if passes is None:
            return None
        # the values: from here on the plan is kept (an aggregation's functions are called)
        places = _Groups(group_window, count_row, group_first)
        final, last_old, first_old = self._results(old0, sizes, group, pairs, places)
        if prior is not None:  # an entry's first put has its old value as prior value
            new_entries = np.flatnonzero(new_entry)
            _put(prior, new_entries, _gather(first_old, new_entries))
        final_ts = np.maximum(ts0, group_max_ts)
        return _Plan(
            pairs,
            group,
            plan_windows,
            final,
            last_old,
            final_ts,
            count_row,
            buffer_row,
            prior,
            delta_count,
            buffer_observed,
            passes,
        )

    def _passes(
        self,
        buffer_observed: np.ndarray,
        plan_windows: list[_PlanWindow],
        group_first: np.ndarray,
        group_last: np.ndarray,
    ) -> list[int] | None:
        """The pairs after whose put windows leave the buffer, ascending: a window leaves at the first pair
        whose observed time reaches its end + grace. None when that is not as the node would have it (a
        window leaving before its first pair or before its last one, an empty window)."""
        buffer = self.suppress.buffer
        size, m = self.count.windows.size, len(buffer_observed)
        leaves: dict[int, int] = {}  # window start -> the pair it leaves at (m: not in this batch)
        for window in buffer.windows():
            if not len(buffer.window_rows(window)):
                return None  # an empty window leaves without a metric sample: node by node
            leaves[window[0]] = int(np.searchsorted(buffer_observed, buffer.due_at(window[1]), "left"))
        for start, in_window, _, _ in plan_windows:
            at = leaves.get(start)
            if at is None:  # a window new to the buffer: it must not leave before its first pair
                at = leaves[start] = int(
                    np.searchsorted(buffer_observed, buffer.due_at(start + size), "left")
                )
                if at < int(group_first[in_window].min()):
                    return None
            if at < m and int(group_last[in_window].max()) > at:
                return None  # a pair after its window left: not what the count lets through
        return sorted({at for at in leaves.values() if at < m})

    # -- the values: a count's, in numpy ------------------------------------------------------------------

    def _no_values(self, n: int) -> Any:
        """Per group a value not yet known (a count: its initializer's 0)."""
        return np.zeros(n, np.int64)

    def _old_values(self, old0: Any, groups: np.ndarray, rows: WindowRows, found: np.ndarray) -> None:
        """old0[groups] = the values of the count's rows `found` of a window (`rows`): the groups' values
        before the batch, for `_results`."""
        _put_gathered(old0, groups, rows.columns[0], found)

    def _results(
        self, old0: Any, sizes: np.ndarray, group: np.ndarray, pairs: _Pairs, places: _Groups
    ) -> tuple[Any, Any, Any]:
        """Per group, from `old0` (its value before the batch), the value after the batch, the old value
        its last put forwarded and the one its first put forwarded (an aggregation's: None where the buffer
        keeps no old values, no priors); `sizes`: its pairs, `group`: per pair its group, `places`: where
        the groups' rows stand (nodes/final_window_user_aggregate.py for an aggregation's)."""
        final = old0 + sizes
        return final, final - 1, old0

    def _pickled_values(self, start: int) -> list | None:
        """The values `_results` gave the groups of the window `start`, pickled already in chunks
        (TimeWindowStore.put_batch); None: left to the export (a count's, an int64 column)."""
        return None

    # -- applying the plan --------------------------------------------------------------------------------

    def _apply(self, plan: _Plan, keys: list, values: list, timestamps: list) -> Batch:
        for plan_window in plan.windows:
            new_keys = plan_window.new_counts
            # saves hold the keys pickled as a list
            pickled_keys = dumps_plain(new_keys.tolist()) if len(new_keys) >= MIN_KEYS_PICKLED else None
            window, finals = self._put_counts(plan_window, plan, pickled_keys)
            if plan_window.new_entries is new_keys:  # the same rows: the same groups held and new
                self._put_entries(window, plan_window, plan, pickled_keys, finals)
            else:
                self._put_entries(window, plan_window, plan, None)
        self._finish_count(plan.pairs, keys, values, timestamps)

        out = evict_at_passes(
            self.suppress.buffer, plan.passes, plan.delta_count, plan.buffer_observed, plan.pairs.rec
        )
        olds = out.olds if self.suppress.send_old_values else None  # as the suppress node forwards them
        return Batch(out.keys, out.values, olds, out.timestamps, None, out.src)

    def _put_counts(
        self, plan_window: _PlanWindow, plan: _Plan, pickled_keys: bytes | None
    ) -> tuple[Window, tuple[Any, Any]]:
        """The count's rows of one window: created, updated, flagged; its Window object, and the values put
        (of the groups it held, of the new ones)."""
        store = self.count.store
        start, in_window = plan_window.start, plan_window.groups
        found = plan.count_row[in_window]
        held = found >= 0
        (groups, rows), new = _by_row(in_window[held], found[held]), in_window[~held]
        finals = self._held_values(plan, start, groups), _gather(plan.final, new)
        if plan.pairs.new_table is not None:  # the batch's one window, new: its keys numbered in the table
            store.open(start).take_table(plan.pairs.new_table)
        store.put_batch(
            start,
            rows,
            [finals[0], plan.final_ts[groups]],
            plan_window.new_counts,
            [finals[1], plan.final_ts[new]],
            pickled_keys,
            self._pickled_values(start),
        )
        return store.window(start), finals

    def _held_values(self, plan: _Plan, start: int, groups: np.ndarray) -> Any:
        """The values after the batch of the window `start`'s held groups `groups`, for the count's rows
        and, where they are the buffer's, its entries: `plan.final`'s (an aggregation's may be in place,
        nodes/final_window_user_aggregate.py)."""
        return _gather(plan.final, groups)

    def _put_entries(
        self,
        window: Window,
        plan_window: _PlanWindow,
        plan: _Plan,
        pickled_keys: bytes | None,
        finals: tuple[Any, Any] | None = None,
    ) -> None:
        """The buffer's entries of one window, with their values after the batch ((COUNT_)ENTRY_COLUMNS: ts,
        size, new, old, hdr | base, prior; the new value is the final one, the old one what the last put
        forwarded; no sizes in an unbounded buffer). `finals`: the count's values put, when its rows are
        the buffer's (the same groups held and new)."""
        in_window = plan_window.groups
        found = plan.buffer_row[in_window]
        held = found >= 0
        (groups, rows), new = _by_row(in_window[held], found[held]), in_window[~held]
        if finals is None:
            finals = _gather(plan.final, groups), _gather(plan.final, new)
        self.suppress.buffer.put_window_rows(
            window,
            rows,
            [
                plan.final_ts[groups],
                np.zeros(len(groups), np.int64),
                finals[0],
                None if plan.last_old is None else _gather(plan.last_old, groups),
                None,  # no headers
            ],
            plan_window.new_entries,
            [
                plan.final_ts[new],
                np.zeros(len(new), np.int64),
                finals[1],
                None if plan.last_old is None else _gather(plan.last_old, new),
                None,
                np.zeros(len(new), np.int64),
                [None] * len(new) if plan.prior is None else _gather(plan.prior, new),
            ],
            pickled_keys,
        )

    def _finish_count(self, pairs: _Pairs, keys: list, values: list, timestamps: list) -> None:
        """The count's late pairs, observed time, and closed windows deleted (as its loop ends)."""
        count = self.count
        if len(pairs.late_rec):
            rows = pairs.late_rec.tolist()
            starts = pairs.late_start.tolist()
            size = count.windows.size
            # the count's observed time at each record (its time before this batch is still count.observed)
            observed = np.maximum(np.maximum.accumulate(pairs.ts), count.observed)
            count.count_late(
                rows,
                [keys[r] for r in rows],
                [values[r] for r in rows],
                [timestamps[r] for r in rows],
                starts,
                [start + size for start in starts],
                observed[pairs.late_rec].tolist(),
            )
        count.advance_to(pairs.observed)


def evict_at_passes(
    buffer: TimeOrderedKeyValueBuffer,
    passes: list[int],
    delta_count: np.ndarray,
    buffer_observed: np.ndarray,
    src_of_pair: np.ndarray,
) -> Evicted:
    """The buffer's evictions and accounting for a batch of puts already applied at once (put_window_rows):
    the windows leave, each after the put of its pair in `passes` (ascending), in the buffer's order, as its
    put loop would have them. `delta_count[i]`: 1 where pair i's put inserted an entry; `buffer_observed[i]`:
    the buffer's observed time after pair i's put; `src_of_pair[i]`: the input row of pair i."""
    out = Evicted(with_headers=False)
    inserted = np.cumsum(delta_count)  # per pair: the entries inserted by the puts up to it
    accounted = 0
    count_before = buffer.count
    gone: list[int] = []
    for at in passes:
        buffer.count_inserted(int(inserted[at]) - accounted)
        accounted = int(inserted[at])
        limit = buffer.due_limit(int(buffer_observed[at]))
        gone.append(buffer.evict_due(limit, int(src_of_pair[at]), out))
    buffer.count_inserted(int(inserted[-1]) - accounted)
    # the samples after every put (the entry count then): `count_before` entries before the batch,
    # `inserted[i]` inserted up to pair i, `gone[k]` evicted by pass k (after the put of pair passes[k])
    m = len(delta_count)
    before = np.searchsorted(np.array(passes, np.int64), np.arange(m), "left")  # the passes before each put
    count_put = count_before + inserted - np.concatenate(([0], np.cumsum(np.array(gone, np.int64))))[before]
    buffer.add_put_samples(int(buffer_observed[-1]), m, int(count_put.sum()), int(count_put.max()))
    return out


def _by_row(groups: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Held groups and their rows, in row order: a store's puts then go through its columns in memory
    order, and so do the frees of the values they replace (where the next values are made)."""
    if len(rows) < 2 or (rows[1:] > rows[:-1]).all():
        return groups, rows
    order = np.argsort(rows)
    return groups[order], rows[order]


def _taken(keys: np.ndarray, at: np.ndarray) -> np.ndarray:
    """keys[at] of an object array: `keys` itself where `at` is each of its positions in order (a batch's
    keys new to its one window), not a gathered copy (which takes a reference to each key and drops it,
    among many keys a cache miss apiece)."""
    if len(at) == len(keys) and (not len(at) or (at[0] == 0 and (np.diff(at) == 1).all())):
        return keys
    return keys[at]


def _gather(values: Any, at: np.ndarray) -> Any:
    """values[at]: an int64 array or column (array("q")) by numpy, a list by a list of its items."""
    if type(values) is np.ndarray:
        return values[at]
    if type(values) is array:
        return np.frombuffer(values, np.int64)[at]  # a copy: the view goes with it
    return list(map(values.__getitem__, at.tolist()))


def _put(target: Any, at: np.ndarray, values: Any) -> None:
    """target[at] = values: an int64 array by numpy, a list item by item."""
    if type(target) is np.ndarray:
        target[at] = values
    else:
        deque(map(target.__setitem__, at.tolist(), values), maxlen=0)


def _put_gathered(target: Any, at: np.ndarray, source: Any, source_at: np.ndarray) -> None:
    """target[at] = source[source_at]; into a list in one pass, each value taken once (a gathered list
    between them would take and drop each value once more: a cache miss apiece where they are scattered)."""
    if type(target) is np.ndarray:
        target[at] = _gather(source, source_at)
    else:
        _put(target, at, map(source.__getitem__, source_at.tolist()))


def _distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """np.unique(values, return_index=True, return_inverse=True, return_counts=True) of int64 `values`.
    Values within a span of a few times their number (keys and windows numbered densely) are counted
    (np.bincount) instead of sorted; an array of one value (a batch in one window) is neither."""
    n = len(values)
    lo, hi = (int(values.min()), int(values.max())) if n else (0, 0)
    if lo == hi:
        zeros = np.zeros(n, np.int64)
        return values[:1], zeros[:1], zeros, np.array([n])
    if hi - lo < DENSE_SPAN_PER_VALUE * n + DENSE_SPAN:
        shifted = values - lo
        counts = np.bincount(shifted)
        # np.flatnonzero of bools runs without a branch per value; of the int64 counts, with one,
        # mispredicted where the values present are scattered over the span
        present = np.flatnonzero(counts != 0)
        number = np.empty(len(counts), np.int64)  # per value present: its rank among them
        number[present] = np.arange(len(present))
        inverse = number[shifted]
        first = np.full(len(present), n, np.int64)
        np.minimum.at(first, inverse, np.arange(n))
        return present + lo, first, inverse, counts[present]
    order = np.argsort(values, kind="stable")
    in_order = values[order]
    new_run = np.empty(n, bool)
    new_run[:1] = True
    np.not_equal(in_order[1:], in_order[:-1], out=new_run[1:])
    run_at = np.flatnonzero(new_run)
    inverse = np.empty(n, np.int64)
    inverse[order] = np.cumsum(new_run) - 1
    return in_order[run_at], order[run_at], inverse, np.diff(np.append(run_at, n))


def _same_rows(rows: WindowRows | None, entries: WindowRows) -> bool:
    """Whether a key's row in the buffer's window is its row in the count's, for every key: the same keys
    in the same rows, none dead (then the buffer's index is not needed, nor built). So it is when the two
    nodes built them, since the count forwards each row's first put, which appends the buffer's row. The
    key lists compare by length, then by identity before content: a pointer per row while the two stores
    hold the same string objects, a string comparison per row once an import gave each its own copy
    (`same_keys`)."""
    return rows is not None and entries.rows_live and rows.all_live() and same_keys(rows.keys, entries.keys)
