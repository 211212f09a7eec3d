"""The suppress buffer's store: Kafka's InMemoryTimeOrderedKeyValueBuffer (docs/semantics.md section 5).

Entries are indexed by window, then key (`until_time_limit`: one bucket, by key): windowed keys of one
window share a Window object upstream, so the bucket is found by identity without hashing. They are
ordered by (buffer time, key bytes) in a heap; an update keeps its entry's place. The suppress node
(nodes/suppress.py) holds the emit policy: when entries are due or the buffer is over capacity.
"""

from __future__ import annotations

from array import array
from heapq import heapify, heappop
from itertools import islice, repeat
from operator import add, itemgetter
from typing import Any

from ..records import Window, Windowed
from ..serde import value_size
from .base import DirtyKeys, KeyBuckets

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
        self.touched: set = set()  # windows (None: the one bucket of until_time_limit) changed since export
        self.dirty_keys = DirtyKeys()  # keys (inner keys of windowed ones) changed since then
        self.key_buckets = KeyBuckets()
        self.part_names: dict[Any, set[int]] = {}  # window -> its exported key buckets

    def pop_head(self) -> tuple[Any, list]:
        """Remove the entry first in (buffer time, key bytes) order: `(key, entry)`."""
        bt, _, _, inner, start = heappop(self.heap)
        if not self.window_close:
            return inner, self._pop(None, inner)
        window = _new_tuple(Window, (start, bt))
        return _new_tuple(Windowed, (inner, window)), self._pop(window, inner)

    def pop(self, key: Any) -> tuple:
        window, inner = (key[1], key[0]) if self.window_close else (None, key)
        return self._pop(window, inner)

    def _pop(self, window: Any, inner: Any) -> tuple:
        bucket = self.buckets[window]
        entry = bucket.pop(inner)
        self.touched.add(window)
        self.dirty_keys.keys.add(inner)
        if not bucket:
            del self.buckets[window]
        return entry

    def entry(self, key: Any) -> tuple | None:
        window, inner = (key[1], key[0]) if self.window_close else (None, key)
        bucket = self.buckets.get(window)
        return None if bucket is None else bucket.get(inner)

    def entry_columns(self, windows: list, inners: list, entries: list) -> dict[str, Any]:
        """Entries (tuples, see _BT.._BASE) of the given windows and inner keys as columns: packed ints
        where the field is always an int; windowed keys as inner key, window start and end (no Windowed
        object pickled one by one)."""
        if self.window_close:
            key_columns = {
                "keys": inners,
                "starts": array("q", [w[0] for w in windows]),
                "ends": array("q", [w[1] for w in windows]),
            }
        else:
            key_columns = {"keys": inners}
        fields = (
            list(zip(*entries, strict=True)) if entries else [()] * (_BASE + 1)
        )  # one tuple per field, in C
        return {
            **key_columns,
            "bt": array("q", fields[_BT]),
            "kb": list(fields[_KB]),
            "new": list(fields[_NEW]),
            "old": list(fields[_OLD]),
            "prior": list(fields[_PRIOR]),
            "ts": array("q", fields[_TS]),
            "hdr": list(fields[_HDR]),
            "size": array("q", fields[_SIZE]),
            "seq": array("q", fields[_SEQ]),
        }

    def load_entries(self, columns: dict[str, Any]) -> None:
        """Add entries saved by `entry_columns` to the buckets and the (not yet heapified) heap."""
        keys = columns["keys"]
        if not keys:
            return
        kb, prior, seq = columns["kb"], columns["prior"], columns["seq"]
        # the fixed part of each entry's size: buffer time (8), key bytes and prior value (8 for an int)
        base = list(map(add, map(len, kb), [16 if type(p) is int else 8 + value_size(p) for p in prior]))
        fields = (columns["bt"], kb, columns["new"], columns["old"], prior, columns["ts"], columns["hdr"])
        entries = zip(*fields, columns["size"], seq, base, strict=True)  # tuples built in C
        if not self.window_close:
            self.buckets.setdefault(None, {}).update(zip(keys, entries, strict=True))
            self.heap += zip(columns["bt"], kb, seq, keys, repeat(None, len(keys)), strict=True)
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
        self.heap += zip(columns["bt"], kb, seq, keys, starts, strict=True)

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
        self.buckets, self.heap, self.touched, self.dirty_keys = {}, [], set(), DirtyKeys()
        self.load_entries(columns)
        heapify(self.heap)

    # Parts: "<start>:<end>.<key bucket>" the entries of one window whose keys fall in one bucket
    # (KeyBuckets) for until_window_closes, "all.<key bucket>" for until_time_limit.
    def export_parts(self, changed_only: bool, count: int) -> tuple[dict[str, Any], list[str]]:
        parts: dict[str, Any] = {}
        buckets, names, key_buckets = self.buckets, self.part_names, self.key_buckets
        for window in list(names):
            if window not in buckets:
                del names[window]
        if not changed_only:
            names.clear()
        dirty = None
        if changed_only:
            dirty = {key_buckets.bucket(key) for key in self.dirty_keys.keys}
            for window in self.touched if self.dirty_keys.scan else ():
                if window in buckets:
                    dirty.update(key_buckets.group(self.dirty_keys.changed_in(buckets[window])))
        for window in self.touched if changed_only else buckets:
            bucket = buckets.get(window)
            if bucket is None:
                continue
            groups = key_buckets.group(bucket, dirty)
            exported = names.setdefault(window, set())
            gone = exported - set(groups) if dirty is None else (exported & dirty) - set(groups)
            exported -= gone
            for b, inners in groups.items():
                parts[f"{_part_name(window)}.{b}"] = self.entry_columns(
                    [window] * len(inners), inners, [bucket[k] for k in inners]
                )
                exported.add(b)
        self.touched, self.dirty_keys = set(), DirtyKeys()
        if len(key_buckets.bucket_of) > 2 * count + 1024:
            key_buckets.forget(key for bucket in buckets.values() for key in bucket)
        return parts, [f"{_part_name(w)}.{b}" for w, bs in names.items() for b in bs]

    def import_parts(self, parts: dict[str, Any]) -> None:
        self.buckets, self.heap, self.touched, self.dirty_keys = {}, [], set(), DirtyKeys()
        self.part_names = {}
        for name, columns in parts.items():
            self.load_entries(columns)
            if columns["keys"]:
                window = None if not self.window_close else _columns_window(columns)
                self.part_names.setdefault(window, set()).add(int(name.rsplit(".", 1)[1]))
        heapify(self.heap)


def _columns_window(columns: dict[str, Any]) -> Window:
    return tuple.__new__(Window, (columns["starts"][0], columns["ends"][0]))


def _part_name(window: Any) -> str:
    return "all" if window is None else f"{window[0]}:{window[1]}"
