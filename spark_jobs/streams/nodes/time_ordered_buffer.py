"""The suppress buffer's store: Kafka's InMemoryTimeOrderedKeyValueBuffer (docs/semantics.md section 5).

Entries are indexed by window, then key (`until_time_limit`: one bucket, by key): windowed keys of one
window share a Window object upstream, so the bucket is found by identity without hashing. They leave in
(buffer time, key bytes) order; an update keeps its entry's place. `until_time_limit` keeps a heap of its
entries (each has its own buffer time, its first put's). `until_window_closes` keeps a heap of its windows
only: a window's entries share its end as buffer time and, the config being strict, leave together when it
closes, so they are sorted by key bytes once then, not pushed into a heap one by one (and their key bytes
are computed then, not kept). The suppress node (nodes/suppress.py) holds the emit policy: when entries are
due or the buffer is over capacity.
"""

from __future__ import annotations

from array import array
from heapq import heapify, heappop, heappush
from itertools import repeat
from operator import add, itemgetter
from typing import Any

from ..records import Window, Windowed
from ..serde import key_bytes, value_size, window_start_bytes
from .store_log import StoreLog

# Entry fields, in a tuple per buffered key (replaced on update). The entry and its heap item hold only
# the inner key and plain values, no list and no Windowed key: tuples of untracked objects leave the cyclic
# GC's lists at its next young collection, so a buffer of 250k keys adds nothing to every full collection.
# In until_window_closes entries _BT and _KB are None: the buffer time is the window's end, and the key bytes
# are computed when the window leaves (less to save and load per entry). _BASE is the part of _SIZE fixed
# while the key stays buffered: buffer time, key bytes and prior value.
_BT, _KB, _NEW, _OLD, _PRIOR, _TS, _HDR, _SIZE, _SEQ, _BASE = range(10)
NO_WINDOW = object()
_new_tuple = tuple.__new__


class TimeOrderedKeyValueBuffer:
    def __init__(self, window_close: bool) -> None:
        self.window_close = window_close
        self.buckets: dict[Any, dict[Any, list]] = {}
        # until_time_limit: (buffer time, key bytes, seq, inner key) per entry; until_window_closes:
        # (end, start) per window. Either way the head's buffer time is heap[0][0].
        self.heap: list[tuple] = []
        # what changed since the last state export, per window (None: the one bucket of until_time_limit):
        # {inner key: entry} put, inner keys removed
        self.log = StoreLog()

    def pop_head(self) -> tuple[Any, list]:
        """Remove the entry first in (buffer time, key bytes) order: `(key, entry)` (until_time_limit: an
        until_window_closes buffer is strict, so its entries only leave by `pop_due`)."""
        if self.window_close:
            raise RuntimeError("an until_window_closes buffer only emits windows that closed (pop_due)")
        inner = heappop(self.heap)[3]
        return inner, self._pop(None, inner)

    def pop_due(self, limit: int) -> list[tuple[Any, tuple]]:
        """Remove the entries whose buffer time is at or before `limit`, in (buffer time, key bytes)
        order: `[(key, entry)]`."""
        heap = self.heap
        if not self.window_close:
            due = []
            while heap and heap[0][0] <= limit:
                due.append(self.pop_head())
            return due
        due = []
        while heap and heap[0][0] <= limit:
            end = heap[0][0]
            rows: list[tuple[bytes, Any, Any, tuple]] = []  # (key bytes, inner key, window, entry)
            while heap and heap[0][0] == end:  # windows ending together interleave by key bytes
                start = heappop(heap)[1]
                window = _new_tuple(Window, (start, end))
                bucket = self.buckets.pop(window, None)
                if bucket:
                    self.log.drop(window)
                    keys = list(bucket)
                    rows += zip(
                        self._window_key_bytes(keys, start, end), keys, repeat(window), bucket.values()
                    )
            rows.sort(key=itemgetter(0))  # key bytes are unique within an end (they hold the start)
            due += [(_new_tuple(Windowed, (inner, window)), entry) for _, inner, window, entry in rows]
        return due

    def _pop(self, window: Any, inner: Any) -> tuple:
        bucket = self.buckets[window]
        entry = bucket.pop(inner)
        self.log.remove(window, inner)
        if not bucket:
            del self.buckets[window]
        return entry

    def entry(self, key: Any) -> tuple | None:
        window, inner = (key[1], key[0]) if self.window_close else (None, key)
        bucket = self.buckets.get(window)
        return None if bucket is None else bucket.get(inner)

    def saved_entries(self, windows: list | Any, inners: list, entries: list) -> dict[str, Any]:
        """Entries as saved: their inner keys, the entry tuples themselves (plain values: pickled and loaded
        at C speed, and loaded as they are), and for until_window_closes their windows: `windows` is the
        window of each entry (a snapshot: "starts" and "ends" columns) or the one window of them all (a
        state part: "window")."""
        saved: dict[str, Any] = {"keys": inners, "entries": entries}
        if not self.window_close:
            return saved
        if type(windows) is list:
            saved["starts"] = array("q", [w[0] for w in windows])
            saved["ends"] = array("q", [w[1] for w in windows])
        else:
            saved["window"] = (windows[0], windows[1])
        return saved

    def load_entries(self, saved: dict[str, Any]) -> None:
        """Put entries saved by `saved_entries` (in `_current_form`) into the buckets (then `rebuild_heap`)."""
        keys, entries = saved["keys"], saved["entries"]
        if not keys:
            return
        if not self.window_close:
            self.buckets.setdefault(None, {}).update(zip(keys, entries, strict=True))
            return
        window = saved.get("window")
        if window is not None:  # a state part: one window
            runs = [(window, 0, len(keys))]
        else:  # a snapshot: windows interleave in seq order
            windows = list(zip(saved["starts"], saved["ends"], strict=True))
            cuts = [i for i in range(1, len(keys)) if windows[i] != windows[i - 1]]
            runs = [(windows[lo], lo, hi) for lo, hi in zip([0, *cuts], [*cuts, len(keys)], strict=True)]
        for (start, end), lo, hi in runs:
            window = _new_tuple(Window, (start, end))
            bucket = self.buckets.get(window)
            if bucket is None:
                bucket = self.buckets[window] = {}
            bucket.update(zip(keys[lo:hi], entries[lo:hi], strict=True))

    def _current_form(self, saved: dict[str, Any]) -> dict[str, Any]:
        """Saved entries in `saved_entries`' form, also those saved a column per field before 2026-11-23
        (no key bytes, no fixed size part, the buffer time of a window's entries its end)."""
        if "entries" in saved:
            return saved
        if not saved["keys"]:  # a part of removed keys only
            return {"keys": [], "entries": []}
        prior = saved["prior"]
        kb = self._key_bytes(saved)
        # the fixed part of each entry's size: buffer time (8), key bytes and prior value (8 for an int)
        base = list(map(add, map(len, kb), [16 if type(p) is int else 8 + value_size(p) for p in prior]))
        if self.window_close:  # neither is kept (see _BT, _KB)
            bt = kb = [None] * len(kb)
        else:
            bt = saved["bt"]
        fields = (bt, kb, saved["new"], saved["old"], prior, saved["ts"], saved["hdr"])
        current = {
            "keys": saved["keys"],
            "entries": list(zip(*fields, saved["size"], saved["seq"], base, strict=True)),
        }
        if self.window_close:
            current["starts"], current["ends"] = saved["starts"], saved["ends"]
        return current

    def _key_bytes(self, saved: dict[str, Any]) -> list[bytes]:
        """The serialized keys (serde.key_bytes) of entries saved a column per field."""
        keys = saved["keys"]
        if not self.window_close:
            return list(map(key_bytes, keys))
        starts, ends = saved["starts"], saved["ends"]
        if starts.count(starts[0]) == len(starts):
            return self._window_key_bytes(keys, starts[0], ends[0])
        return [  # a snapshot: windows interleave
            self._window_key_bytes([inner], start, end)[0]
            for inner, start, end in zip(keys, starts, ends, strict=True)
        ]

    @staticmethod
    def _window_key_bytes(keys: list, start: int, end: int) -> list[bytes]:
        """serde.key_bytes of the windowed keys of one window, by their inner keys."""
        suffix = window_start_bytes(start)
        if set(map(type, keys)) <= {str}:  # a string-keyed job: C loops
            return list(map(bytes.__add__, map(str.encode, keys), repeat(suffix)))
        window = _new_tuple(Window, (start, end))
        return [
            inner.encode() + suffix
            if type(inner) is str
            else key_bytes(_new_tuple(Windowed, (inner, window)))
            for inner in keys
        ]

    def rebuild_heap(self) -> None:
        """The heap of every window (until_window_closes) or buffered entry (after loading): an entry's
        order is its own (bt, kb, seq)."""
        if self.window_close:
            self.heap = [(window[1], window[0]) for window in self.buckets]
            heapify(self.heap)
            return
        self.heap = [
            (entry[_BT], entry[_KB], entry[_SEQ], inner)
            for inner, entry in self.buckets.get(None, {}).items()
        ]
        heapify(self.heap)

    def snapshot_entries(self) -> dict[str, Any]:
        rows = sorted(
            (
                (entry[_SEQ], window, inner, entry)
                for window, bucket in self.buckets.items()
                for inner, entry in bucket.items()
            ),
            key=itemgetter(0),
        )
        return self.saved_entries([r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows])

    def restore_entries(self, saved: dict[str, Any]) -> None:
        self.buckets, self.log = {}, StoreLog()
        self.load_entries(self._current_form(saved))
        self.rebuild_heap()

    # Parts: the store log's (StoreLog) "<start>:<end>.<n>" per window for until_window_closes, "all.<n>"
    # for until_time_limit, each `saved_entries` and the inner keys removed.
    def export_parts(self, changed_only: bool) -> tuple[dict[str, Any], list[str]]:
        return self.log.export(self.buckets, changed_only, _part_name, self._save)

    def _save(self, window: Any, put: dict | None) -> dict[str, Any]:
        entries = self.buckets[window] if put is None else put  # put: the entries still buffered
        return self.saved_entries(window, list(entries), list(entries.values()))

    def apply_parts(self, parts: dict[str, Any], removed: list[str]) -> None:
        """Catch up with the parts written and removed since this buffer's last export, or load an empty
        buffer from every part (StoreLog.catch_up), and keep the heap. until_window_closes: the heap of
        windows is rebuilt (a few items). until_time_limit: items are pushed for the entries new since (a
        new key, or a key buffered again), and the entries gone since were heap heads when they went, so
        their items are popped from the head. The heap is rebuilt instead when that is cheaper (as many
        entries new as there were items: a load) or when pushes and pops do not account for every item (an
        out-of-order entry went in before the ones that left)."""
        dropped, steps = self.log.catch_up(parts, removed, _window_of_name)
        steps = [(window, self._current_form(saved), gone) for window, saved, gone in steps]
        before = {window: self.buckets.pop(window) for window in dropped if window in self.buckets}
        fresh: dict[tuple, None] = {}  # (window, inner key) of the entries whose heap item is new
        for window, saved, _ in steps if not self.window_close else ():  # compared with the buffer before
            bucket = self.buckets.get(window) or before.get(window) or {}
            keys = saved["keys"]
            if not bucket:
                fresh.update(dict.fromkeys(zip(repeat(window), keys)))
                continue
            for inner, new_entry in zip(keys, saved["entries"], strict=True):
                entry = bucket.get(inner)
                if entry is None or entry[_SEQ] != new_entry[_SEQ]:
                    fresh[window, inner] = None
        for window, saved, gone in steps:
            self.load_entries(saved)
            bucket = self.buckets.get(window)
            if bucket is not None:
                for inner in gone:  # a key put and removed between two exports was never saved
                    bucket.pop(inner, None)
        for window in [w for w, bucket in self.buckets.items() if not bucket]:
            del self.buckets[window]
        heap, buckets = self.heap, self.buckets
        if self.window_close or len(fresh) >= len(heap):
            self.rebuild_heap()
            return
        for window, inner in fresh:
            entry = buckets.get(window, {}).get(inner)
            if entry is not None:
                heappush(heap, (entry[_BT], entry[_KB], entry[_SEQ], inner))
        while heap and self._stale(heap[0]):
            heappop(heap)
        if len(heap) != sum(map(len, buckets.values())):
            self.rebuild_heap()

    def _stale(self, item: tuple) -> bool:
        """Whether an until_time_limit heap item no longer stands for a buffered entry (gone, or buffered
        again since)."""
        entry = self.buckets.get(None, {}).get(item[3])
        return entry is None or entry[_SEQ] != item[2]


def _window_of_name(name: str) -> Any:
    if name == "all":
        return None
    start, end = name.split(":")
    return _new_tuple(Window, (int(start), int(end)))


def _part_name(window: Any) -> str:
    return "all" if window is None else f"{window[0]}:{window[1]}"
