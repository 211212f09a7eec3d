"""Runtime nodes of aggregations (docs/semantics.md section 4).

Every result carries the maximum timestamp of the records that contributed to it (rule 4.3). Windowed
operators keep their own observed time, advanced before the record is handled, and drop (record, window)
pairs whose window has closed, counting each in dropped-records-total.

`count` and `reduce` are `aggregate` with a fixed initializer and aggregator (see `Aggregation`), as in
Kafka; count additionally has an inlined fast path in the time-window loop.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, insort
from collections.abc import Callable, Iterator
from heapq import heappop, heappush
from itertools import repeat
from typing import Any

from ..records import Windowed, make_windowed
from ..windows import SessionWindows, SlidingWindows, TimeWindows
from .base import Batch, Node, StateRow
from .stores import TimestampedStoreNode, int_column
from .time_window_store import TimeWindowStore
from .window_rows import INT64, OBJECT, WindowRows


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
        close_after = size + windows.grace  # a window closes when end + grace <= observed time
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
        lag = size - advance  # the earliest window containing ts starts at ts - lag rounded down to `advance`
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
                last = ts - ts % advance
                first = ts - lag
                if first < 0:  # windows start at 0 or later: the first stays 0 until ts reaches size
                    first, slot_lo, slot_hi = 0, last, min(last + advance, size)
                else:
                    first -= first % advance
                    slot_lo, slot_hi = max(last, first + lag), min(last + advance, first + size)
                slot, slot_late, slot_closes = [], [], _NEVER_CLOSES
                for start in range(first, last + 1, advance):
                    closes = start + close_after
                    if closes <= observed:
                        slot_late.append(start)
                        continue
                    if closes < slot_closes:
                        slot_closes = closes
                    rows = store.open(start)  # created for this row, which goes into every open window
                    store.touch(start)
                    slot.append((rows.index, rows.keys, *rows.columns, rows.dirty, store.window(start)))
            if slot_late:
                late_rows += repeat(i, len(slot_late))
                late_starts += slot_late
            # dirty: 1 per row put since the last export (WindowRows)
            for index, row_keys, aggs, max_ts, dirty, window in slot:
                row = index.get(key)
                if row is None:
                    old = 0 if count else initializer()
                    new = old + 1 if count else aggregator(key, value, old)
                    new_ts = ts
                    if new is not None:
                        index[key] = len(row_keys)
                        row_keys.append(key)
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
            )
        self.store.evict_closed(observed - close_after)
        return Batch(out_k, out_v, out_o if self.send_old_values else None, out_t, out_h, src)

    def advance_to(self, observed: int) -> None:
        """Observed time after a batch put into the store by a caller (a rewrite running this node's
        pairs at once): the windows it closed are deleted, as a batch of this node's ends."""
        if observed > self.observed:
            self.observed = observed
        self.store.evict_closed(self.observed - self.windows.size - self.windows.grace)

    def get(self, windowed_key):
        return self.store.get(windowed_key[0], windowed_key[1][0])

    def state_rows(self) -> Iterator[StateRow]:
        return self.store.state_rows("window")

    def state_size(self) -> tuple[int, int]:
        return self.store.state_size()

    def restore_state(self, state):
        """A snapshot of an earlier engine (one pickled state per node)."""
        self.observed = state["observed"]
        self.store.clear()
        for start, base in state.get("rows", ()):
            self.store.load_window(start, base)
        for start, keys, aggs, timestamps in state.get("windows", ()):  # an earlier form, by key
            _load_keyed(self.store.open(start), (keys, aggs, timestamps), [])
        self.store.reindex()

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
        self.store.apply_parts(parts, removed, _load_keyed)


def _load_keyed(rows: WindowRows, saved: tuple, gone: list) -> None:
    """Apply a window part saved by key (an earlier engine's): `(keys, [(aggregate, max timestamp)])`, or
    `(keys, aggregates, max timestamps)`, and the keys removed since the previous part."""
    if len(saved) == 3:
        keys, aggs, timestamps = saved
        rows.load_by_key(keys, zip(aggs, timestamps, strict=True))
    else:
        rows.load_by_key(*saved)
    for key in gone:  # a key put and removed between two exports was never saved
        row = rows.index.pop(key, None)
        if row is not None:
            rows.columns[0][row] = None  # a dead row (a count, in an int64 column, never leaves)


class StreamAggregateNode(TimestampedStoreNode):
    """Non-windowed count / reduce / aggregate of a grouped stream; skips null keys and null values."""

    def __init__(self, name: str, aggregation: Aggregation) -> None:
        super().__init__(name)
        self.aggregation = aggregation

    def process_columns(self, keys, values, olds, timestamps, headers):
        store = self.store
        initializer, aggregator = self.aggregation.initializer, self.aggregation.aggregator
        out_k: list = []
        out_v: list = []
        out_o: list = []
        out_t: list = []
        src: list = []
        dropped = 0
        for i in range(len(keys)):
            key, value, ts = keys[i], values[i], timestamps[i]
            if key is None or value is None:
                dropped += 1
                continue
            previous = store.get(key)
            if previous is None:
                old, new_ts = initializer(), ts
            else:
                old, new_ts = previous[0], max(ts, previous[1])
            new = aggregator(key, value, old)
            if new is None:
                store.pop(key, None)
            else:
                store[key] = (new, new_ts)
            out_k.append(key)
            out_v.append(new)
            out_o.append(old)
            out_t.append(new_ts)
            src.append(i)
        if dropped:
            self.count_dropped(dropped)
        out_h = None if headers is None else [headers[i] for i in src]
        return Batch(out_k, out_v, out_o, out_t, out_h, src)


class TableAggregateNode(TimestampedStoreNode):
    """Aggregation of a grouped table: subtract the old value from its group, then add the new one."""

    def __init__(self, name: str, aggregation: Aggregation) -> None:
        super().__init__(name)
        if aggregation.subtractor is None:
            raise ValueError("a KTable aggregation needs a subtractor")
        self.aggregation = aggregation

    def process_columns(self, keys, values, olds, timestamps, headers):
        store = self.store
        agg = self.aggregation
        initializer, adder, subtractor = agg.initializer, agg.aggregator, agg.subtractor
        out_o: list = []
        out_v: list = []
        out_t: list = []
        for i in range(len(keys)):
            key, new, old, ts = keys[i], values[i], None if olds is None else olds[i], timestamps[i]
            previous = store.get(key)
            old_agg = None if previous is None else previous[0]
            new_ts = ts if previous is None else max(ts, previous[1])
            intermediate = (
                subtractor(key, old, old_agg) if old is not None and old_agg is not None else old_agg
            )
            if new is not None:
                new_agg = adder(key, new, initializer() if intermediate is None else intermediate)
            else:
                new_agg = intermediate
            if new_agg is None:
                store.pop(key, None)
            else:
                store[key] = (new_agg, new_ts)
            out_v.append(new_agg)
            out_o.append(old_agg)
            out_t.append(new_ts)
        return Batch(keys, out_v, out_o, out_t, headers, None)


class SessionWindowAggregateNode(Node):
    """Session windows (Kafka's KStreamSessionWindowAggregate over an in-memory session store).

    Per key, sessions `[start, end, agg]` sorted by (end, start), the store's iteration order. As in
    Kafka's store, sessions whose end is at or before `store time - (gap + grace)` are expired and no longer
    found by later records, and a result that is itself expired is forwarded but not stored.
    """

    def __init__(self, name: str, windows: SessionWindows, aggregation: Aggregation) -> None:
        super().__init__(name)
        if aggregation.merger is None:
            raise ValueError("a session window aggregate needs a merger(key, agg1, agg2) to merge sessions")
        self.windows = windows
        self.aggregation = aggregation
        self.observed = -1
        self.store_time = -1  # the session store's own clock: the max session end put
        self.sessions: dict[Any, list[list]] = {}
        self.expiry: list[tuple[int, int, Any, int]] = []  # (end, seq, key, start)
        self.next_seq = 0

    def process_columns(self, keys, values, olds, timestamps, headers):
        gap, grace = self.windows.gap, self.windows.grace
        retention = gap + grace
        agg = self.aggregation
        initializer, aggregator, merger = agg.initializer, agg.aggregator, agg.merger
        out_k: list = []
        out_v: list = []
        out_o: list = []
        out_t: list = []
        src: list = []
        dropped = 0
        for i in range(len(keys)):
            key = keys[i]
            if key is None:
                dropped += 1
                continue
            ts = timestamps[i]
            if ts > self.observed:
                self.observed = ts
            close_time = self.observed - grace - gap
            self._expire(retention)
            sessions = self.sessions.get(key, [])
            merged = [s for s in sessions if s[1] >= ts - gap and s[0] <= ts + gap]
            aggregate = initializer()
            start = end = ts
            for session in merged:
                aggregate = merger(key, aggregate, session[2])
                start, end = min(start, session[0]), max(end, session[1])
            if end < close_time:
                dropped += 1
                continue
            if (start, end) != (ts, ts):
                for session in merged:  # retract every absorbed session, stamped with its own end
                    sessions.remove(session)
                    out_k.append(make_windowed(key, session[0], session[1]))
                    out_v.append(None)
                    out_o.append(session[2])
                    out_t.append(session[1])
                    src.append(i)
            aggregate = aggregator(key, values[i], aggregate)
            if end > self.store_time:
                self.store_time = end
            if end <= self.store_time - retention:
                dropped += 1  # Kafka's store skips a put into an expired segment (and counts it)
            else:
                for session in sessions:
                    if session[0] == start and session[1] == end:
                        session[2] = aggregate
                        break
                else:
                    insort(sessions, [start, end, aggregate], key=lambda s: (s[1], s[0]))
                    heappush(self.expiry, (end, self.next_seq, key, start))
                    self.next_seq += 1
                self.sessions[key] = sessions
            out_k.append(make_windowed(key, start, end))
            out_v.append(aggregate)
            out_o.append(None)
            out_t.append(end)
            src.append(i)
        if dropped:
            self.count_dropped(dropped)
        out_h = None if headers is None else [headers[i] for i in src]
        return Batch(out_k, out_v, out_o, out_t, out_h, src)

    def _expire(self, retention: int) -> None:
        expiry, limit = self.expiry, self.store_time - retention
        while expiry and expiry[0][0] <= limit:
            end, _, key, start = heappop(expiry)
            sessions = self.sessions.get(key)
            if sessions:
                sessions[:] = [s for s in sessions if not (s[0] == start and s[1] == end)]
                if not sessions:
                    del self.sessions[key]

    def get(self, windowed_key):
        for session in self.sessions.get(windowed_key[0], ()):
            if session[0] == windowed_key[1][0] and session[1] == windowed_key[1][1]:
                return session[2], session[1]
        return None

    def snapshot_state(self):
        rows = [(key, s[0], s[1], s[2]) for key, sessions in self.sessions.items() for s in sessions]
        return {
            "scalars": (self.observed, self.store_time, self.next_seq),
            "keys": [r[0] for r in rows],
            "starts": array("q", [r[1] for r in rows]),
            "ends": array("q", [r[2] for r in rows]),
            "aggs": int_column([r[3] for r in rows]),
            "expiry": self.expiry,
        }

    def restore_state(self, state):
        self.observed, self.store_time, self.next_seq = state["scalars"]
        self.sessions = {}
        for key, start, end, aggregate in zip(
            state["keys"], state["starts"], state["ends"], state["aggs"], strict=False
        ):
            self.sessions.setdefault(key, []).append([start, end, aggregate])
        self.expiry = list(state["expiry"])


class SlidingWindowAggregateNode(Node):
    """Sliding windows, Kafka 3.5+'s KStreamSlidingWindowAggregate (reverse-iteration variant, as used with
    in-memory stores). Windows are `[start, start + d]`; per key, a sorted list of starts and a dict
    start -> [aggregate, max timestamp]."""

    def __init__(self, name: str, windows: SlidingWindows, aggregation: Aggregation) -> None:
        super().__init__(name)
        self.windows = windows
        self.aggregation = aggregation
        self.observed = -1
        self.store_time = -1  # the window store's clock: the max window start put
        self.starts: dict[Any, list[int]] = {}
        self.aggs: dict[Any, dict[int, list]] = {}
        self._expired_below = -1

    # -- store access (retention 2d + grace, as Kafka's sliding window store) --------------------------

    def _retention(self) -> int:
        return 2 * self.windows.time_difference + self.windows.grace

    def _fetch(self, key: Any, time_from: int, time_to: int) -> list[tuple[int, list]]:
        """Windows of `key` with start in [time_from, time_to], newest first."""
        starts = self.starts.get(key)
        if not starts:
            return []
        time_from = max(time_from, self.store_time - self._retention() + 1)
        lo, hi = bisect_left(starts, time_from), bisect_left(starts, time_to + 1)
        aggs = self.aggs[key]
        return [(s, aggs[s]) for s in reversed(starts[lo:hi])]

    def _put(self, key: Any, start: int, value: list) -> None:
        if start > self.store_time:
            self.store_time = start
        if start <= self.store_time - self._retention():
            self.count_dropped()
            return
        aggs = self.aggs.setdefault(key, {})
        if start not in aggs:
            insort(self.starts.setdefault(key, []), start)
        aggs[start] = value

    def _expire(self) -> None:
        limit = self.store_time - self._retention()
        self._expired_below = limit
        for key in list(self.starts):
            starts = self.starts[key]
            cut = bisect_left(starts, limit + 1)
            if cut:
                aggs = self.aggs[key]
                for start in starts[:cut]:
                    del aggs[start]
                del starts[:cut]
                if not starts:
                    del self.starts[key], self.aggs[key]

    # -- processing -------------------------------------------------------------------------------------

    def process_columns(self, keys, values, olds, timestamps, headers):
        self._out: tuple[list, list, list, list, list] = ([], [], [], [], [])
        d, grace = self.windows.time_difference, self.windows.grace
        for i in range(len(keys)):
            key, value, ts = keys[i], values[i], timestamps[i]
            self._row = i
            if key is None:  # a null value reaches the aggregator (docs/semantics.md 4.4)
                self.count_dropped()
                continue
            if ts > self.observed:
                self.observed = ts
            close_time = self.observed - grace
            if ts + 1 + d <= close_time:
                self.count_dropped()
                continue
            if ts < d:
                self._process_early(key, value, ts, close_time)
            else:
                self._process(key, value, ts, close_time)
        if self.store_time - self._retention() > self._expired_below + d:
            self._expire()  # physical clean-up only: _fetch and _put already ignore expired windows
        out_k, out_v, out_o, out_t, src = self._out
        out_h = None if headers is None else [headers[i] for i in src]
        return Batch(out_k, out_v, out_o, out_t, out_h, src)

    def _process(self, key: Any, value: Any, ts: int, close_time: int) -> None:
        d = self.windows.time_difference
        window_starts: set[int] = set()
        left_agg = right_agg = None
        left_created = right_created = False
        previous_ts = None
        for start, window in self._fetch(key, max(0, ts - 2 * d), ts + 1):
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
        for start, window in reversed(self._fetch(key, 0, ts + 1)):
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
            self._create_right_window(key, ts, right_agg)
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
            self._create_right_window(key, ts, right_agg)

    def _create_right_window(self, key: Any, ts: int, right_agg: list) -> None:
        start = ts + 1
        self._put(key, start, [right_agg[0], right_agg[1]])
        self._emit(key, start, right_agg[0], None, right_agg[1])

    def _update(self, key: Any, value: Any, ts: int, start: int, window: list, close_time: int) -> None:
        """Add the record to a window (Kafka's updateWindowAndForward); new windows come as [init, ts]."""
        end = start + self.windows.time_difference
        if end < close_time:
            self.count_dropped()
            return
        old = window[0]
        new = self.aggregation.aggregator(key, value, old)
        new_ts = ts if old is None else max(ts, window[1])
        self._put(key, start, [new, new_ts])
        self._emit(key, start, new, old, new_ts)

    def _emit(self, key: Any, start: int, new: Any, old: Any, ts: int) -> None:
        out_k, out_v, out_o, out_t, src = self._out
        out_k.append(make_windowed(key, start, start + self.windows.time_difference))
        out_v.append(new)
        out_o.append(old)
        out_t.append(ts)
        src.append(self._row)

    def get(self, windowed_key):
        window = self.aggs.get(windowed_key[0], {}).get(windowed_key[1][0])
        return None if window is None else (window[0], window[1])

    def snapshot_state(self):
        rows = [(key, start, w[0], w[1]) for key, aggs in self.aggs.items() for start, w in aggs.items()]
        return {
            "scalars": (self.observed, self.store_time),
            "keys": [r[0] for r in rows],
            "starts": array("q", [r[1] for r in rows]),
            "aggs": int_column([r[2] for r in rows]),
            "ts": array("q", [r[3] for r in rows]),
        }

    def restore_state(self, state):
        self.observed, self.store_time = state["scalars"]
        self.starts, self.aggs = {}, {}
        for key, start, aggregate, ts in zip(
            state["keys"], state["starts"], state["aggs"], state["ts"], strict=False
        ):
            self.aggs.setdefault(key, {})[start] = [aggregate, ts]
        for key, aggs in self.aggs.items():
            self.starts[key] = sorted(aggs)
