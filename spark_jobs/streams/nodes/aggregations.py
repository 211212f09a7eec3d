"""Runtime nodes of aggregations (docs/semantics.md section 4).

Every result carries the maximum timestamp of the records that contributed to it (rule 4.3). Windowed
operators keep their own observed time, advanced before the record is handled, and drop (record, window)
pairs whose window has closed, counting each in dropped-records-total.

`count` and `reduce` are `aggregate` with a fixed initializer and aggregator (see `Aggregation`), as in
Kafka; count additionally has an inlined fast path in the time-window loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import repeat
from operator import is_not
from typing import Any

import numpy as np

from ..records import Windowed, make_windowed
from ..windows import SessionWindows, SlidingWindows, TimeWindows
from .base import Batch, Node, StateRow, holds_none
from .declared_aggregations import segmented_accumulate, stable_order
from .key_table import number_by_first_appearance
from .kv_rows import NO_TIME, KeyValueRows
from .late_rows import LateRows
from .stores import TimestampedStoreNode
from .time_window_store import TimeWindowStore
from .window_rows import INT64, OBJECT
from .window_stores import SessionStore, SlidingWindowStore


class Aggregation:
    """initializer() -> agg; aggregator(key, value, agg) -> agg; subtractor and merger where needed."""

    __slots__ = ("kind", "initializer", "aggregator", "subtractor", "merger")

    def __init__(
        self,
        kind: str,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        subtractor: Callable[[Any, Any, Any], Any] | None = None,
        merger: Callable[[Any, Any, Any], Any] | None = None,
    ) -> None:
        self.kind = kind
        self.initializer = initializer
        self.aggregator = aggregator
        self.subtractor = subtractor
        self.merger = merger

    @classmethod
    def count(cls) -> Aggregation:
        return cls("count", _zero, _plus_one, _minus_one, _add_aggregates)

    @classmethod
    def reduce(
        cls, reducer: Callable[[Any, Any], Any], subtractor: Callable[[Any, Any], Any] | None = None
    ) -> Aggregation:
        """Kafka's reduce: the first value is the aggregate, later ones are `reducer(agg, value)`."""

        def aggregate(key: Any, value: Any, agg: Any) -> Any:
            return value if agg is None else reducer(agg, value)

        def subtract(key: Any, value: Any, agg: Any) -> Any:
            return subtractor(agg, value)  # type: ignore[misc]

        def merge(key: Any, agg1: Any, agg2: Any) -> Any:
            return agg2 if agg1 is None else reducer(agg1, agg2)

        return cls("reduce", _none, aggregate, None if subtractor is None else subtract, merge)

    @classmethod
    def aggregate(
        cls,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        subtractor: Callable[[Any, Any, Any], Any] | None = None,
        merger: Callable[[Any, Any, Any], Any] | None = None,
    ) -> Aggregation:
        if not callable(initializer) or not callable(aggregator):
            raise ValueError("aggregate needs a callable initializer() and aggregator(key, value, agg)")
        return cls("aggregate", initializer, aggregator, subtractor, merger)


def _zero() -> int:
    return 0


def _none() -> None:
    return None


def _plus_one(key: Any, value: Any, agg: int) -> int:
    return agg + 1


def _minus_one(key: Any, value: Any, agg: int) -> int:
    return agg - 1


def _add_aggregates(key: Any, agg1: int, agg2: int) -> int:
    return agg1 + agg2


_NEVER_CLOSES = 1 << 64  # above every int64 timestamp


class TimeWindowAggregateNode(Node):
    """Tumbling and hopping windows over a TimeWindowStore (nodes/time_window_store.py): per (record,
    window) pair of an open window, the aggregator's new aggregate is put and forwarded with the old one
    and the row's maximum timestamp. Pairs of closed windows are late (Node.count_late)."""

    drops_late = True

    def __init__(
        self, name: str, windows: TimeWindows, aggregation: Aggregation, send_old_values: bool
    ) -> None:
        super().__init__(name)
        self.windows = windows
        self.aggregation = aggregation
        self.send_old_values = send_old_values
        self.observed = -1
        # a window's rows: the aggregate (an int64 for count; else any value, None in a dead row), the max
        # timestamp
        self.store = TimeWindowStore(windows.size, (INT64 if aggregation.kind == "count" else OBJECT, INT64))

    def process_columns(self, keys, values, olds, timestamps, headers):
        windows = self.windows
        size, advance = windows.size, windows.advance
        is_open, closes_at = windows.is_open, windows.closes_at
        store = self.store
        new_windowed = tuple.__new__
        count = self.aggregation.kind == "count"
        initializer, aggregator = self.aggregation.initializer, self.aggregation.aggregator
        observed = self.observed
        out_k: list = []
        out_v: list = []
        out_o: list = []  # filled always (cheaper than a test per row), returned only if old values are sent
        out_t: list = []
        out_h: list | None = None if headers is None else []
        src: list | None = [] if self.need_src else None
        late_rows: list = []
        late_starts: list = []
        late_observed: list = []  # the observed time when each late pair was dropped
        # The open windows of the previous row's timestamp (their rows' index and columns, the Window), the
        # starts of its closed ones, and when it is valid: for timestamps in [slot_lo, slot_hi) (consecutive
        # records mostly are) while observed time stays below slot_closes, the earliest close time among the
        # open windows. Reusing it saves the window arithmetic, close checks and look-ups per row.
        slot: list[tuple] = []
        slot_late: list = []
        slot_lo = slot_hi = slot_closes = 0
        # the slot before it, kept for records that alternate across a window boundary (out-of-order
        # records near it) or come back after a late record
        alt: list[tuple] = []
        alt_late: list = []
        alt_lo = alt_hi = alt_closes = 0
        extra = src is not None or out_h is not None  # one test per row for the optional columns
        dropped = 0
        for i, key, value, ts in zip(range(len(keys)), keys, values, timestamps, strict=False):
            if key is None:  # no window for a null key; it advances no time
                dropped += 1
                continue
            if ts > observed:
                observed = ts
                if observed >= slot_closes:
                    slot_hi = slot_lo  # a window of the slot closed: recompute it
            if ts < slot_lo or ts >= slot_hi:
                # swap with the previous slot, then recompute unless that one fits
                slot, alt = alt, slot
                slot_late, alt_late = alt_late, slot_late
                slot_lo, alt_lo = alt_lo, slot_lo
                slot_hi, alt_hi = alt_hi, slot_hi
                slot_closes, alt_closes = alt_closes, slot_closes
                if not (slot_lo <= ts < slot_hi and observed < slot_closes):
                    slot_hi = slot_lo  # recomputed below
            if ts < slot_lo or ts >= slot_hi:
                starts = [start for start, _ in windows.windows_for(ts)]
                first, last = starts[0], starts[-1]
                # the timestamps in the same windows: from where the window before `first` (if any) ends
                # or `last` starts, to where `last + advance` starts or `first` ends
                slot_lo = last if first == 0 else max(last, first - advance + size)
                slot_hi = min(last + advance, first + size)
                slot, slot_late, slot_closes = [], [], _NEVER_CLOSES
                for start in starts:
                    if not is_open(start, observed):
                        slot_late.append(start)
                        continue
                    closes = closes_at(start)
                    if closes < slot_closes:
                        slot_closes = closes
                    rows = store.open(start)  # created for this row, which goes into every open window
                    store.touch(start)
                    # the key column with room for a row per record left (WindowRows.key_column)
                    row_keys = rows.key_column(len(keys) - i)
                    slot.append((rows.index, row_keys, *rows.columns, rows.dirty, store.window(start)))
            if slot_late:
                late_rows += repeat(i, len(slot_late))
                late_starts += slot_late
                late_observed += repeat(observed, len(slot_late))
            # dirty: 1 per row put since the last export (WindowRows)
            for index, row_keys, aggs, max_ts, dirty, window in slot:
                row = index.get(key)
                if row is None:
                    old = 0 if count else initializer()
                    new = old + 1 if count else aggregator(key, value, old)
                    new_ts = ts
                    if new is not None:
                        index[key] = row = len(dirty)  # a row (WindowRows.append, inlined)
                        row_keys[row] = key
                        aggs.append(new)
                        max_ts.append(ts)
                        dirty.append(1)
                else:
                    old = aggs[row]
                    new = old + 1 if count else aggregator(key, value, old)
                    new_ts = max_ts[row]
                    if ts > new_ts:
                        new_ts = max_ts[row] = ts
                    aggs[row] = new
                    dirty[row] = 1
                    if new is None:  # Kafka's store deletes a null aggregate: the row is dead (WindowRows)
                        del index[key]
                windowed = new_windowed(Windowed, (key, window))
                out_k.append(windowed)
                out_v.append(new)
                out_o.append(old)
                out_t.append(new_ts)
                if extra:
                    if src is not None:
                        src.append(i)
                    if out_h is not None:
                        out_h.append(headers[i])
        self.observed = observed
        if dropped:
            self.count_dropped(dropped)
        if late_rows:
            self.count_late(
                late_rows,
                [keys[r] for r in late_rows],
                [values[r] for r in late_rows],
                [timestamps[r] for r in late_rows],
                late_starts,
                [start + size for start in late_starts],
                late_observed,
            )
        self._evict_closed()
        return Batch(out_k, out_v, out_o if self.send_old_values else None, out_t, out_h, src)

    def advance_to(self, observed: int) -> None:
        """Observed time after a batch put into the store by a caller (a rewrite running this node's
        pairs at once): the windows it closed are deleted, as a batch of this node's ends."""
        if observed > self.observed:
            self.observed = observed
        self._evict_closed()

    def _evict_closed(self) -> None:
        """Delete the windows closed at the observed time."""
        self.store.evict_closed(self.windows.last_closed_start(self.observed))

    def get(self, windowed_key):
        return self.store.get(windowed_key[0], windowed_key[1][0])

    def state_rows(self) -> Iterator[StateRow]:
        return self.store.state_rows("window")

    def state_size(self) -> tuple[int, int]:
        return self.store.state_size()

    # State parts: "" holds the observed time; the windows' rows are the store's parts.
    def export_parts(self, changed_only):
        parts, names = self.store.export_parts(changed_only)
        parts[""] = self.observed
        return parts, ["", *names]

    def state_parts(self):
        parts = self.store.state_parts()
        parts[""] = self.observed
        return parts

    def apply_parts(self, parts, removed):
        if "" in parts:
            self.observed = parts.pop("")
        self.store.apply_parts(parts, removed)


class StreamAggregateNode(TimestampedStoreNode):
    """Non-windowed count / reduce / aggregate of a grouped stream; skips null keys and null values.

    A batch is folded per key over the store's batch operations (nodes/kv_rows.py): its keys are looked up
    at once, and each distinct key's entry is read and its last one written once. `count` runs in numpy
    (a record's count is its key's stored count plus its rank among the key's records in the batch); a user
    aggregate or reduce calls its functions once per record in record order, keeping each key's aggregate
    so far by the key's number in the batch. A None result deletes the key's entry: its next record starts
    from the initializer again. A result's timestamp is the maximum of those of the records folded into it
    since its key's entry began (rule 4.3).
    """

    def __init__(self, name: str, aggregation: Aggregation) -> None:
        super().__init__(name)
        self.aggregation = aggregation
        self.store = KeyValueRows(counts=aggregation.kind == "count")

    def process_columns(self, keys, values, olds, timestamps, headers):
        if not keys:
            return None
        store = self.store
        rows = store.rows_for(keys)  # -1 for a None key
        kept = None
        null_values = holds_none(values)
        if null_values or rows.min() < 0:
            keep = rows >= 0
            if null_values:
                keep &= np.fromiter(map(is_not, values, repeat(None)), bool, len(values))
            kept = np.flatnonzero(keep).tolist()
            self.count_dropped(len(keys) - len(kept))
            keys, values = [keys[i] for i in kept], [values[i] for i in kept]
            timestamps = [timestamps[i] for i in kept]
            if headers is not None:
                headers = [headers[i] for i in kept]
            rows = rows[keep]
            if not keys:
                return None
        folds = _KeyFolds(rows)
        prior, prior_ts = store.get_rows(folds.rows)
        if store.counts:
            old = prior[folds.group] + folds.rank()
            news, olds_out = (old + 1).tolist(), old.tolist()
            finals = prior + folds.sizes
            out_ts, final_ts = folds.running_max(timestamps, prior_ts, None)
        else:
            finals = prior.tolist()  # per key its aggregate so far, None without entry
            olds_out, news = self._fold(folds.group, keys, values, finals)
            deleted = not all(map(is_not, news, repeat(None)))
            ended = [i for i, new in enumerate(news) if new is None] if deleted else None
            out_ts, final_ts = folds.running_max(timestamps, prior_ts, ended)
        store.put_rows(folds.rows, finals, final_ts)
        if store.str_keys():  # the KeyTable numbered them: every key is a str
            self.task_context.str_key_column(keys)
        return Batch(keys, news, olds_out, out_ts, headers, kept)

    def _fold(self, group: np.ndarray, keys: list, values: list, current: list) -> tuple[list, list]:
        """The user's aggregator once per record, in record order, over each key's aggregate so far
        (`current`, by the key's number in the batch; None: the key has no entry, its next record starts
        from the initializer). Returns the old and the new aggregate per record; `current` ends with each
        key's last."""
        initializer, aggregator = self.aggregation.initializer, self.aggregation.aggregator
        olds: list = []
        news: list = []
        old_append, new_append = olds.append, news.append
        for g, key, value in zip(group.tolist(), keys, values, strict=True):
            agg = current[g]
            if agg is None:
                agg = initializer()
            old_append(agg)
            agg = current[g] = aggregator(key, value, agg)
            new_append(agg)
        return olds, news


class _KeyFolds:
    """A batch's records grouped by their keys' rows: the records sorted by row, in record order within a
    key (`order`); per key (by row) its row, its number of records and where they begin in `order`; per
    record its key's number (`group`)."""

    __slots__ = ("group", "rows", "sizes", "order", "starts")

    def __init__(self, rows: np.ndarray) -> None:
        n = len(rows)
        self.order = stable_order(rows, int(rows.max()) + 1 if n else 0)  # by radix, not by merging
        sorted_rows = rows[self.order]
        first = np.empty(n, bool)
        first[:1] = True
        np.not_equal(sorted_rows[1:], sorted_rows[:-1], out=first[1:])
        self.starts = np.flatnonzero(first)
        self.rows = sorted_rows[self.starts]
        self.sizes = np.diff(np.append(self.starts, n))
        self.group = np.empty(n, np.int64)
        self.group[self.order] = np.cumsum(first) - 1

    def rank(self) -> np.ndarray:
        """Per record: how many records of its key come before it in the batch."""
        rank = np.empty(len(self.group), np.int64)
        rank[self.order] = np.arange(len(self.group)) - np.repeat(self.starts, self.sizes)
        return rank

    def running_max(self, timestamps: list, prior: np.ndarray, ended: list | None) -> tuple[list, np.ndarray]:
        """Per record the maximum of its timestamp, those of its key's records before it in the batch and
        its key's stored `prior` (per key), starting again after a record in `ended` (its result deleted
        the entry); and per key that maximum at its last record."""
        ts = np.fromiter(timestamps, np.int64, len(timestamps))[self.order]
        sizes, initial = self.sizes, prior
        if ended:
            restarts = np.zeros(len(ts), bool)
            position = np.empty(len(ts), np.int64)
            position[self.order] = np.arange(len(ts))
            after = position[np.asarray(ended, np.int64)] + 1
            restarts[after[after < len(ts)]] = True  # the key's next record, if any, starts a new entry
            restarts[self.starts] = True
            life_starts = np.flatnonzero(restarts)
            sizes = np.diff(np.append(life_starts, len(ts)))
            initial = np.full(len(life_starts), NO_TIME, np.int64)
            initial[np.isin(life_starts, self.starts)] = prior
        running = segmented_accumulate(np.maximum, ts, sizes, initial)
        out = np.empty_like(running)
        out[self.order] = running
        return out.tolist(), running[self.starts + self.sizes - 1]


class TableAggregateNode(TimestampedStoreNode):
    """Aggregation of a grouped table: subtract the old value from its group, then add the new one."""

    def __init__(self, name: str, aggregation: Aggregation) -> None:
        super().__init__(name)
        if aggregation.subtractor is None:
            raise ValueError("a KTable aggregation needs a subtractor")
        self.aggregation = aggregation

    def process_columns(self, keys, values, olds, timestamps, headers):
        """Per record in record order the subtractor and the adder over its key's aggregate so far (kept by
        the key's number in the batch); each distinct key's entry read and written once (the store's batch
        operations). A None aggregate deletes the entry: the key's next record starts anew."""
        agg = self.aggregation
        initializer, adder, subtractor = agg.initializer, agg.aggregator, agg.subtractor
        group, distinct = number_by_first_appearance(keys, 0)
        distinct_keys = distinct.tolist()
        entries = self.store.get_list(distinct_keys)
        current = [None if entry is None else entry[0] for entry in entries]
        prior_ts = np.fromiter(
            (NO_TIME if entry is None else entry[1] for entry in entries), np.int64, len(entries)
        )
        out_o: list = []
        out_v: list = []
        old_append, new_append = out_o.append, out_v.append
        olds = [None] * len(keys) if olds is None else olds
        for g, key, new, old in zip(group.tolist(), keys, values, olds, strict=True):
            old_agg = current[g]
            intermediate = (
                subtractor(key, old, old_agg) if old is not None and old_agg is not None else old_agg
            )
            if new is not None:
                new_agg = adder(key, new, initializer() if intermediate is None else intermediate)
            else:
                new_agg = intermediate
            current[g] = new_agg
            old_append(old_agg)
            new_append(new_agg)
        deleted = not all(map(is_not, out_v, repeat(None)))
        ended = [i for i, new in enumerate(out_v) if new is None] if deleted else None
        folds = _KeyFolds(group)  # the keys' numbers are 0.. in order: `folds.rows` is every one
        out_t, final_ts = folds.running_max(timestamps, prior_ts, ended)
        self.store.put_batch(
            zip(
                distinct_keys,
                [None if v is None else (v, t) for v, t in zip(current, final_ts.tolist(), strict=True)],
                strict=True,
            )
        )
        return Batch(keys, out_v, out_o, out_t, headers, None)


class SessionWindowAggregateNode(Node):
    """Session windows (Kafka's KStreamSessionWindowAggregate over an in-memory session store).

    The session store (nodes/window_stores.py) keeps per key its sessions sorted by (end, start), the
    store's iteration order. As in Kafka's store, sessions whose end is at or before `store time - (gap +
    grace)` are expired and no longer found by later records, and a result that is itself expired is
    forwarded but not stored (and counted late).
    """

    drops_late = True

    def __init__(self, name: str, windows: SessionWindows, aggregation: Aggregation) -> None:
        super().__init__(name)
        if aggregation.merger is None:
            raise ValueError("a session window aggregate needs a merger(key, agg1, agg2) to merge sessions")
        self.windows = windows
        self.aggregation = aggregation
        self.observed = -1
        self.store = SessionStore(windows.gap + windows.grace, counts=aggregation.kind == "count")

    def process_columns(self, keys, values, olds, timestamps, headers):
        out_k, out_v, out_o, out_t, src, late, dropped, self.observed, windows = self.store.merge_batch(
            keys, values, timestamps, self.windows.gap, self.observed, self.aggregation
        )
        if out_k:
            self.task_context.windowed_key_column(out_k, *windows)
        if dropped:
            self.count_dropped(dropped)
        late.report(self)
        out_h = None if headers is None else [headers[i] for i in src]
        return Batch(out_k, out_v, out_o, out_t, out_h, src)

    def get(self, windowed_key):
        return self.store.get(windowed_key[0], windowed_key[1][0], windowed_key[1][1])

    # State parts: "" holds the clocks, the store's parts its sessions.
    def export_parts(self, changed_only):
        parts, names = self.store.export_parts(changed_only)
        parts[""] = (self.observed, self.store.store_time)
        return parts, ["", *names]

    def state_parts(self):
        parts = self.store.state_parts()
        parts[""] = (self.observed, self.store.store_time)
        return parts

    def apply_parts(self, parts, removed):
        if "" in parts:
            self.observed, self.store.store_time = parts.pop("")
        self.store.apply_parts(parts, removed)

    def state_rows(self):
        for key, start, end, aggregate in self.store.items():
            yield StateRow("session", key, start, end, aggregate, end)

    def state_size(self) -> tuple[int, int]:
        return self.store.size()


class SlidingWindowAggregateNode(Node):
    """Sliding windows, Kafka 3.5+'s KStreamSlidingWindowAggregate (reverse-iteration variant, as used with
    in-memory stores). Windows are `[start, start + d]`, in a sliding window store (nodes/window_stores.py)
    of retention 2d + grace, as Kafka's."""

    drops_late = True

    def __init__(self, name: str, windows: SlidingWindows, aggregation: Aggregation) -> None:
        super().__init__(name)
        self.windows = windows
        self.aggregation = aggregation
        self.observed = -1
        self.store = SlidingWindowStore(2 * windows.time_difference + windows.grace)
        self._expired_below = -1  # the store's expiry limit when it last deleted its expired windows

    # -- processing -------------------------------------------------------------------------------------

    def process_columns(self, keys, values, olds, timestamps, headers):
        self._out: tuple[list, list, list, list, list] = ([], [], [], [], [])
        self._late = late = LateRows()
        d, grace = self.windows.time_difference, self.windows.grace
        dropped = 0
        for i in range(len(keys)):
            key, value, ts = keys[i], values[i], timestamps[i]
            self._row = i
            if key is None:  # a null value reaches the aggregator (docs/semantics.md 4.4)
                dropped += 1
                continue
            if ts > self.observed:
                self.observed = ts
            close_time = self.observed - grace
            if ts + 1 + d <= close_time:
                start = max(0, ts - d)
                late.add(i, key, value, ts, start, start + d, self.observed)
                continue
            if ts < d:
                self._process_early(key, value, ts, close_time)
            else:
                self._process(key, value, ts, close_time)
        store = self.store
        if store.store_time - store.retention > self._expired_below + d:
            self._expired_below = store.store_time - store.retention
            store.expire()  # physical clean-up only: fetch and put already ignore expired windows
        if dropped:
            self.count_dropped(dropped)
        late.report(self)
        out_k, out_v, out_o, out_t, src = self._out
        out_h = None if headers is None else [headers[i] for i in src]
        return Batch(out_k, out_v, out_o, out_t, out_h, src)

    def _process(self, key: Any, value: Any, ts: int, close_time: int) -> None:
        d = self.windows.time_difference
        window_starts: set[int] = set()
        left_agg = right_agg = None
        left_created = right_created = False
        previous_ts = None
        for start, window in self.store.fetch(key, max(0, ts - 2 * d), ts + 1):
            window_starts.add(start)
            end = start + d
            if start == ts + 1:
                right_created = True
            elif end > ts:
                if right_agg is None:
                    right_agg = window
                self._update(key, value, ts, start, window, close_time)
            elif end == ts:
                left_created = True
                self._update(key, value, ts, start, window, close_time)
                if window[1] < ts:
                    previous_ts = window[1]
                else:
                    return  # a record at ts already exists: every window it implies exists too
            else:
                left_agg = window
                previous_ts = window[1]
                break
        self._create_windows(
            key,
            value,
            ts,
            close_time,
            window_starts,
            right_agg,
            left_agg,
            left_created,
            right_created,
            previous_ts,
        )

    def _process_early(self, key: Any, value: Any, ts: int, close_time: int) -> None:
        """Records before `d` would open windows starting below 0: they share the window [0, d]."""
        combined = None
        right_agg = None
        right_created = False
        window_starts: set[int] = set()
        previous_ts = None
        for start, window in reversed(self.store.fetch(key, 0, ts + 1)):
            window_starts.add(start)
            if start == 0:
                combined = window
                if window[1] < ts:
                    previous_ts = window[1]
            elif start <= ts:
                right_agg = window
                self._update(key, value, ts, start, window, close_time)
            elif start == ts + 1:
                right_created = True
        if right_agg is None and combined is not None and combined[1] > ts:
            right_agg = combined
        if not right_created and right_agg is not None and right_agg[1] > ts:
            self._create_right_window(key, value, ts, right_agg)
        if previous_ts is not None and previous_ts + 1 not in window_starts:
            self._update(key, value, ts, previous_ts + 1, [self.aggregation.initializer(), ts], close_time)
        if combined is None:
            self._update(key, value, ts, 0, [self.aggregation.initializer(), ts], close_time)
        else:
            self._update(key, value, ts, 0, combined, close_time)

    def _create_windows(
        self,
        key,
        value,
        ts,
        close_time,
        window_starts,
        right_agg,
        left_agg,
        left_created,
        right_created,
        previous_ts,
    ) -> None:
        d = self.windows.time_difference
        if previous_ts is not None:
            previous_right_start = previous_ts + 1
            if previous_right_start not in window_starts and previous_right_start + d >= ts:
                self._update(
                    key, value, ts, previous_right_start, [self.aggregation.initializer(), ts], close_time
                )
        if not left_created:
            if previous_ts is not None and ts - d <= previous_ts:
                window = [left_agg[0], ts]  # type: ignore[index]
            else:
                window = [self.aggregation.initializer(), ts]
            self._update(key, value, ts, ts - d, window, close_time)
        if not right_created and right_agg is not None and right_agg[1] > ts:
            self._create_right_window(key, value, ts, right_agg)

    def _create_right_window(self, key: Any, value: Any, ts: int, right_agg: list) -> None:
        start = ts + 1
        self._put(key, value, ts, start, [right_agg[0], right_agg[1]])
        self._emit(key, start, right_agg[0], None, right_agg[1])

    def _update(self, key: Any, value: Any, ts: int, start: int, window: list, close_time: int) -> None:
        """Add the record to a window (Kafka's updateWindowAndForward); new windows come as [init, ts]."""
        end = start + self.windows.time_difference
        if end < close_time:
            self._late.add(self._row, key, value, ts, start, end, self.observed)
            return
        old = window[0]
        new = self.aggregation.aggregator(key, value, old)
        new_ts = ts if old is None else max(ts, window[1])
        self._put(key, value, ts, start, [new, new_ts])
        self._emit(key, start, new, old, new_ts)

    def _put(self, key: Any, value: Any, ts: int, start: int, window: list) -> None:
        if not self.store.put(key, start, window):  # out of the store's retention
            self._late.add(
                self._row, key, value, ts, start, start + self.windows.time_difference, self.observed
            )

    def _emit(self, key: Any, start: int, new: Any, old: Any, ts: int) -> None:
        out_k, out_v, out_o, out_t, src = self._out
        out_k.append(make_windowed(key, start, start + self.windows.time_difference))
        out_v.append(new)
        out_o.append(old)
        out_t.append(ts)
        src.append(self._row)

    def get(self, windowed_key):
        window = self.store.get(windowed_key[0], windowed_key[1][0])
        return None if window is None else (window[0], window[1])

    # State parts: "" holds the clocks, the store's parts its windows.
    def _scalars(self) -> tuple[int, int, int]:
        return self.observed, self.store.store_time, self._expired_below

    def export_parts(self, changed_only):
        parts, names = self.store.kv.export_parts(changed_only)
        parts[""] = self._scalars()
        return parts, ["", *names]

    def state_parts(self):
        parts = self.store.kv.state_parts()
        parts[""] = self._scalars()
        return parts

    def apply_parts(self, parts, removed):
        if "" in parts:
            self.observed, self.store.store_time, self._expired_below = parts.pop("")
        self.store.apply_parts(parts, removed)

    def state_rows(self):
        d = self.windows.time_difference
        for key, start, aggregate, timestamp in self.store.items():
            yield StateRow("window", key, start, start + d, aggregate, timestamp)

    def state_size(self) -> tuple[int, int]:
        return self.store.size()
