"""The session store, the sliding-window store and the join window stores: a structure per key in a
KeyValueStore (nodes/kv_store.py), which saves the keys a batch changed, so an export writes in proportion
to what changed. Each store keeps its own clock (`store_time`) and retention, as Kafka's segmented stores
do: an entry older than the retention is neither found nor put (`put` says so: the caller counts the
record as late). Each store counts its live entries per window as it changes (`WindowCounts`), so that a
node's state size (`Node.state_size`, read every micro-batch) needs no pass over the entries.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator, Mapping
from heapq import heapify, heappop, heappush
from typing import Any

from .kv_store import KeyValueStore


class WindowCounts:
    """A store's live entries per window (what its `items` list), kept as the store changes. A window is
    live while its bound (a session's end, a sliding window's start, a joined record's timestamp) is above
    the store's expiry limit (`store_time - retention`). That limit only grows, so `expire` drops a window
    at or below it for good: its entries are neither listed nor put again, and their physical deletion
    needs no count. `union` (window -> how many counters hold it) is shared by the counters of one node's
    stores, whose windows are counted once (Node.state_size)."""

    __slots__ = ("counts", "entries", "_bounds", "_union")

    def __init__(self, union: dict[Any, int] | None = None) -> None:
        self.counts: dict[Any, int] = {}  # window -> its live entries (> 0)
        self.entries = 0
        self._bounds: list[tuple[int, Any]] = []  # heap of (bound, window); a window dropped since may stay
        self._union = union

    def add(self, window: Any, bound: int | None) -> None:
        """One more entry in `window` (`bound` None: a window that never expires)."""
        n = self.counts.get(window)
        if n is None:
            self.counts[window] = 1
            if bound is not None:
                heappush(self._bounds, (bound, window))
            union = self._union
            if union is not None:
                union[window] = union.get(window, 0) + 1
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
            self._drop(window)
        else:
            self.counts[window] = n - 1

    def expire(self, limit: int) -> None:
        """Drop the windows whose bound is at or below `limit`."""
        bounds, counts = self._bounds, self.counts
        while bounds and bounds[0][0] <= limit:
            window = heappop(bounds)[1]
            n = counts.get(window)
            if n is not None:
                self.entries -= n
                self._drop(window)

    def _drop(self, window: Any) -> None:
        del self.counts[window]
        union = self._union
        if union is not None:
            if union[window] == 1:
                del union[window]
            else:
                union[window] -= 1

    def clear(self) -> None:
        for window in list(self.counts):
            self._drop(window)
        self.entries = 0
        self._bounds = []


def _session_order(session: list) -> tuple[int, int]:
    return session[1], session[0]


class SessionStore:
    """key -> its sessions `[start, end, aggregate]`, sorted by (end, start) (Kafka's in-memory session store
    iteration order). Sessions whose end is at or before `store_time - retention` are expired: `expire`
    deletes them (the node calls it before each look-up, as Kafka's store expires on every put)."""

    def __init__(self, retention: int) -> None:
        self.retention = retention
        self.store_time = -1  # the max session end put
        self.kv = KeyValueStore("s")
        self._expiry: list[tuple[int, int, Any, int]] = []  # heap of (end, seq, key, start)
        self._seq = 0
        self.counts = WindowCounts()  # per (start, end)

    def sessions(self, key: Any) -> list[list]:
        """`key`'s live sessions (read only: change them through `remove` and `put`)."""
        return self.kv.entries.get(key) or []

    def remove(self, key: Any, session: list) -> None:
        """Remove a session that a merge absorbs: the merged session's `put` follows (a key left without
        sessions keeps its entry until then, so that it is not deleted and inserted again)."""
        self.kv.entries[key].remove(session)
        self.kv.touch(key)
        self.counts.remove((session[0], session[1]))

    def put(self, key: Any, start: int, end: int, aggregate: Any) -> bool:
        """Put a session (replacing the one of the same bounds); False, and nothing put, when it is
        expired already."""
        if end > self.store_time:
            self.store_time = end
        kv = self.kv
        if end <= self.store_time - self.retention:
            if kv.entries.get(key) == []:  # its sessions merged into this one
                kv.delete(key)
            return False
        sessions = kv.entries.get(key)
        if sessions is None:
            sessions = []
            kv.put(key, sessions)
        else:
            kv.put(key, sessions)  # changed in place below
            for session in sessions:
                if session[0] == start and session[1] == end:
                    session[2] = aggregate
                    return True
        insort(sessions, [start, end, aggregate], key=_session_order)
        heappush(self._expiry, (end, self._seq, key, start))
        self._seq += 1
        self.counts.add((start, end), end)
        return True

    def expire(self) -> None:
        expiry, limit, kv = self._expiry, self.store_time - self.retention, self.kv
        self.counts.expire(limit)
        while expiry and expiry[0][0] <= limit:
            end, _, key, start = heappop(expiry)
            sessions = kv.get(key)
            if sessions:
                kept = [s for s in sessions if not (s[0] == start and s[1] == end)]
                if len(kept) == len(sessions):
                    continue  # merged into a later session since
                if kept:
                    sessions[:] = kept
                    kv.touch(key)
                else:
                    kv.delete(key)

    def get(self, key: Any, start: int, end: int) -> tuple[Any, int] | None:
        for session in self.kv.get(key) or ():
            if session[0] == start and session[1] == end:
                return session[2], session[1]
        return None

    def items(self) -> Iterator[tuple[Any, int, int, Any]]:
        """(key, start, end, aggregate) of every live session (an expired one may wait for `expire`)."""
        limit = self.store_time - self.retention
        for key, sessions in self.kv.items():
            for start, end, aggregate in sessions:
                if end > limit:
                    yield key, start, end, aggregate

    def size(self) -> tuple[int, int]:
        """`(sessions, distinct (start, end))` that `items` lists."""
        self.counts.expire(self.store_time - self.retention)
        return self.counts.entries, len(self.counts.counts)

    def apply_parts(self, parts: Mapping[str, Any], removed: list[str]) -> None:
        self.kv.apply_parts(parts, removed)
        every = ((key, s[0], s[1]) for key, sessions in self.kv.items() for s in sessions)
        self._expiry = [(end, n, key, start) for n, (key, start, end) in enumerate(every)]
        heapify(self._expiry)
        self._seq = len(self._expiry)
        self.counts.clear()
        for end, _, _, start in self._expiry:
            self.counts.add((start, end), end)


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


_AFTER_EVERY_SEQ = float("inf")


class JoinWindowStore:
    """One side of a stream-stream join: key -> its records `(timestamp, seq, value)`, sorted. Records at or
    before `store_time - retention` are expired: neither found nor put; a fetch deletes those of its key."""

    def __init__(self, prefix: str, retention: int, union: dict[int, int] | None = None) -> None:
        self.retention = retention
        self.store_time = -1  # the max timestamp put
        self.kv = KeyValueStore(prefix)
        self.counts = WindowCounts(union)  # per timestamp; `union` shared with the join's other stores

    def put_batch(self, keys: list, values: list, timestamps: list, seqs: list) -> list[int]:
        """Put records in order; the positions of those not put (expired already: the store's clock had
        passed them by the retention, counting the earlier records of the batch)."""
        kv, retention, add = self.kv, self.retention, self.counts.add
        store_time = self.store_time
        expired: list[int] = []
        for n, (key, value, ts, seq) in enumerate(zip(keys, values, timestamps, seqs, strict=True)):
            if ts > store_time:
                store_time = ts
            if ts <= store_time - retention:
                expired.append(n)
                continue
            rows = kv.get(key)
            if rows is None:
                kv.put(key, [(ts, seq, value)])
            else:
                insort(rows, (ts, seq, value))
                kv.touch(key)
            add(ts, ts)
        self.store_time = store_time
        return expired

    def fetch_batch(self, keys: list, times_from: list, times_to: list) -> list[list[tuple[int, int, Any]]]:
        """Per key its records with timestamps in [time from, time to] (both inclusive), oldest first."""
        kv, limit = self.kv, self.store_time - self.retention
        self.counts.expire(limit)  # the records deleted below need no count
        found: list[list[tuple[int, int, Any]]] = []
        for key, time_from, time_to in zip(keys, times_from, times_to, strict=True):
            rows = kv.get(key)
            if not rows:
                found.append([])
                continue
            cut = bisect_right(rows, (limit, _AFTER_EVERY_SEQ))
            if cut:  # expired: deleted for good
                if cut == len(rows):
                    kv.delete(key)
                    found.append([])
                    continue
                del rows[:cut]
                kv.touch(key)
            time_from = max(time_from, limit + 1)
            found.append(
                rows[bisect_left(rows, (time_from,)) : bisect_right(rows, (time_to, _AFTER_EVERY_SEQ))]
            )
        return found

    def items(self) -> Iterator[tuple[Any, int, Any]]:
        """(key, timestamp, value) of every live record (an expired one may wait for a fetch)."""
        limit = self.store_time - self.retention
        for key, rows in self.kv.items():
            for ts, _, value in rows:
                if ts > limit:
                    yield key, ts, value

    def size(self) -> int:
        """The records `items` lists (their timestamps are the counter's windows)."""
        self.counts.expire(self.store_time - self.retention)
        return self.counts.entries

    def recount(self) -> None:
        """Count the entries again (after a catch-up)."""
        self.counts.clear()
        for rows in self.kv.entries.values():
            for ts, _, _ in rows:
                self.counts.add(ts, ts)
