"""The suppress buffer's store: Kafka's InMemoryTimeOrderedKeyValueBuffer (docs/semantics.md section 5).

Entries are indexed by window, then key (`until_time_limit`: one bucket, by key): windowed keys of one
window share a Window object upstream, so the bucket is found by identity without hashing. They are
ordered by (buffer time, key bytes) in a heap; an update keeps its entry's place. The suppress node
(nodes/suppress.py) holds the emit policy: when entries are due or the buffer is over capacity.
"""

from __future__ import annotations

from array import array
from heapq import heapify, heappop, heappush
from itertools import chain, filterfalse, islice, repeat
from operator import add, itemgetter
from typing import Any

from ..records import Window, Windowed
from ..serde import key_bytes, value_size, window_start_bytes
from .store_log import StoreLog

# Entry fields, in a tuple per buffered key (replaced on update). The entry and its heap item hold only
# the inner key and plain values, no list and no Windowed key: tuples of untracked objects leave the cyclic
# GC's lists at its next young collection, so a buffer of 250k keys adds nothing to every full collection.
_BT, _KB, _NEW, _OLD, _PRIOR, _TS, _HDR, _SIZE, _SEQ, _BASE = range(10)
NO_WINDOW = object()
_new_tuple = tuple.__new__


class TimeOrderedKeyValueBuffer:
    def __init__(self, window_close: bool) -> None:
        self.window_close = window_close
        self.buckets: dict[Any, dict[Any, list]] = {}
        # (buffer time, key bytes, seq, inner key, window start or None): for until_window_closes the buffer
        # time is the window's end, so the item names its window without holding a Window object
        self.heap: list[tuple] = []
        # what changed since the last state export, per window (None: the one bucket of until_time_limit):
        # {inner key: entry} put, inner keys removed
        self.log = StoreLog()

    def pop_head(self) -> tuple[Any, list]:
        """Remove the entry first in (buffer time, key bytes) order: `(key, entry)`."""
        bt, _, _, inner, start = heappop(self.heap)
        if not self.window_close:
            return inner, self._pop(None, inner)
        window = _new_tuple(Window, (start, bt))
        return _new_tuple(Windowed, (inner, window)), self._pop(window, inner)

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

    def entry_columns(self, windows: list | Any, inners: list, entries: list) -> dict[str, Any]:
        """Entries (tuples, see _BT.._BASE) as columns: packed ints where the field is always an int;
        windowed keys as inner key, window start and end (no Windowed object pickled one by one). `windows`:
        the window of each entry, or the one window of them all. Fields that follow from others are not
        saved (`load_entries` computes them again): the key bytes, and the buffer time of a window's entries
        (its end)."""
        if not self.window_close:
            key_columns = {"keys": inners}
        elif type(windows) is list:
            key_columns = {
                "keys": inners,
                "starts": array("q", [w[0] for w in windows]),
                "ends": array("q", [w[1] for w in windows]),
            }
        else:
            n = len(inners)
            key_columns = {
                "keys": inners,
                "starts": array("q", [windows[0]]) * n,
                "ends": array("q", [windows[1]]) * n,
            }
        # the fields of every entry in one flat list, then a slice per field: one pass over the entries
        # (which lie scattered in memory), where zip(*entries) would visit each entry once per field
        flat = list(chain.from_iterable(entries))
        fields = [flat[i :: _BASE + 1] for i in range(_BASE + 1)]
        return {
            **key_columns,
            "bt": None if self.window_close else array("q", fields[_BT]),
            "new": fields[_NEW],
            "old": fields[_OLD],
            "prior": fields[_PRIOR],
            "ts": array("q", fields[_TS]),
            "hdr": fields[_HDR],
            "size": array("q", fields[_SIZE]),
            "seq": array("q", fields[_SEQ]),
        }

    def load_entries(self, columns: dict[str, Any]) -> None:
        """Put entries saved by `entry_columns` into the buckets (then `rebuild_heap`)."""
        keys = columns["keys"]
        if not keys:
            return
        prior, seq = columns["prior"], columns["seq"]
        kb = self._key_bytes(columns)
        # the fixed part of each entry's size: buffer time (8), key bytes and prior value (8 for an int)
        base = list(map(add, map(len, kb), [16 if type(p) is int else 8 + value_size(p) for p in prior]))
        bt = columns["ends"] if self.window_close else columns["bt"]
        fields = (bt, kb, columns["new"], columns["old"], prior, columns["ts"], columns["hdr"])
        entries = zip(*fields, columns["size"], seq, base, strict=True)  # tuples built in C
        if not self.window_close:
            self.buckets.setdefault(None, {}).update(zip(keys, entries, strict=True))
            return
        starts, ends = columns["starts"], columns["ends"]
        windows = list(zip(starts, ends, strict=True))
        n = len(windows)
        if windows.count(windows[0]) == n:
            runs = [(0, n)]  # one window, as in every state part
        else:  # a snapshot: windows interleave in seq order
            cuts = [i for i in range(1, n) if windows[i] != windows[i - 1]]
            runs = list(zip([0, *cuts], [*cuts, n], strict=True))
        entries = iter(entries)
        for lo, hi in runs:
            window = _new_tuple(Window, (starts[lo], ends[lo]))
            bucket = self.buckets.get(window)
            if bucket is None:
                bucket = self.buckets[window] = {}
            bucket.update(zip(keys[lo:hi], islice(entries, hi - lo), strict=True))

    def _key_bytes(self, columns: dict[str, Any]) -> list[bytes]:
        """The serialized keys (serde.key_bytes) of saved entries, as the put computed them."""
        keys = columns["keys"]
        if not self.window_close:
            return list(map(key_bytes, keys))
        starts = columns["starts"]
        if starts.count(starts[0]) == len(starts) and set(map(type, keys)) == {str}:
            # one window of string keys (every state part of a string-keyed job): C loops
            suffix = window_start_bytes(starts[0])
            return list(map(bytes.__add__, map(str.encode, keys), repeat(suffix)))
        suffixes: dict[int, bytes] = {}
        kb = []
        for inner, start, end in zip(keys, columns["starts"], columns["ends"], strict=True):
            suffix = suffixes.get(start)
            if suffix is None:
                suffix = suffixes[start] = window_start_bytes(start)
            if type(inner) is str:
                kb.append(inner.encode() + suffix)
            else:
                kb.append(key_bytes(_new_tuple(Windowed, (inner, _new_tuple(Window, (start, end))))))
        return kb

    def rebuild_heap(self) -> None:
        """The heap of every buffered entry (after loading): its order is the entries' own (bt, kb, seq)."""
        self.heap = [
            (entry[_BT], entry[_KB], entry[_SEQ], inner, None if window is None else window[0])
            for window, bucket in self.buckets.items()
            for inner, entry in bucket.items()
        ]
        heapify(self.heap)

    def snapshot_columns(self) -> dict[str, Any]:
        rows = sorted(
            (
                (entry[_SEQ], window, inner, entry)
                for window, bucket in self.buckets.items()
                for inner, entry in bucket.items()
            ),
            key=itemgetter(0),
        )
        return self.entry_columns([r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows])

    def restore_columns(self, columns: dict[str, Any]) -> None:
        self.buckets, self.log = {}, StoreLog()
        self.load_entries(columns)
        self.rebuild_heap()

    # Parts: the store log's (StoreLog) "<start>:<end>.<n>" per window for until_window_closes, "all.<n>"
    # for until_time_limit, each `entry_columns` and the inner keys removed.
    def export_parts(self, changed_only: bool) -> tuple[dict[str, Any], list[str]]:
        return self.log.export(self.buckets, changed_only, _part_name, self._columns)

    def _columns(self, window: Any, put: dict | None) -> dict[str, Any]:
        entries = self.buckets[window] if put is None else put  # put: the entries still buffered
        return self.entry_columns(window, list(entries), list(entries.values()))

    def apply_parts(self, parts: dict[str, Any], removed: list[str]) -> None:
        """Catch up with the parts written and removed since this buffer's last export, or load an empty
        buffer from every part (StoreLog.catch_up), and keep the heap: items are pushed for the entries new
        since (a new key, or a key buffered again), and the entries gone since were heap heads when they
        went, so their items are popped from the head. The heap is rebuilt instead when that is cheaper
        (as many entries new as there were items: a load) or when pushes and pops do not account for every
        item (an out-of-order entry went in before the ones that left)."""
        dropped, steps = self.log.catch_up(parts, removed, _window_of_name)
        before = {window: self.buckets.pop(window) for window in dropped if window in self.buckets}
        fresh: dict[tuple, None] = {}  # (window, inner key) of the entries whose heap item is new
        for window, columns, _ in steps:  # compared with the buffer before any step
            bucket = self.buckets.get(window) or before.get(window) or {}
            keys = columns["keys"]
            if not bucket or self.window_close:
                # Entries of a window share its buffer time (its end): a key buffered again in it has an
                # item that sorts as the new one would, so only keys new to the bucket need one.
                fresh.update(dict.fromkeys(zip(repeat(window), filterfalse(bucket.__contains__, keys))))
                continue
            for inner, seq in zip(keys, columns["seq"], strict=True):
                entry = bucket.get(inner)
                if entry is None or entry[_SEQ] != seq:
                    fresh[window, inner] = None
        for window, columns, gone in steps:
            self.load_entries(columns)
            bucket = self.buckets.get(window)
            if bucket is not None:
                for inner in gone:  # a key put and removed between two exports was never saved
                    bucket.pop(inner, None)
        for window in [w for w, bucket in self.buckets.items() if not bucket]:
            del self.buckets[window]
        heap, buckets = self.heap, self.buckets
        if len(fresh) >= len(heap):
            self.rebuild_heap()
            return
        for window, inner in fresh:
            entry = buckets.get(window, {}).get(inner)
            if entry is not None:
                heappush(
                    heap, (entry[_BT], entry[_KB], entry[_SEQ], inner, None if window is None else window[0])
                )
        while heap and self._stale(heap[0]):
            heappop(heap)
        if len(heap) != sum(map(len, buckets.values())):
            self.rebuild_heap()

    def _stale(self, item: tuple) -> bool:
        """Whether a heap item no longer stands for a buffered entry (gone, or buffered again since)."""
        bt, _, seq, inner, start = item
        window = None if start is None else _new_tuple(Window, (start, bt))
        entry = self.buckets.get(window, {}).get(inner)
        return entry is None or entry[_SEQ] != seq


def _window_of_name(name: str) -> Any:
    if name == "all":
        return None
    start, end = name.split(":")
    return _new_tuple(Window, (int(start), int(end)))


def _part_name(window: Any) -> str:
    return "all" if window is None else f"{window[0]}:{window[1]}"
