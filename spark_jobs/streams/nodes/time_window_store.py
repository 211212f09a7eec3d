"""The store of a tumbling or hopping window aggregation: per window start, the window's rows (WindowRows).

Each window keeps key -> row, then the aggregate and the max timestamp by row (a list, or an int64 array
for a count, and an int64 array): one look-up per record and window, and an export gathers the rows a
batch changed from two columns. Windows by start make closed windows cheap to delete. The Windowed keys of
one window share one Window object (`window`), which lets a downstream suppress find its bucket by
identity. The store owns its operations: opening and looking up windows, evicting the closed ones,
per-change export, and the rows of every entry for the state reader.

Saved form: each window's rows as `WindowParts` saves them (below): its keys in parts of their own, its rows'
fields as a store of numbered rows whose groups' bases are written in turn (RowParts, nodes/kv_rows.py), so
that no export rewrites a large window whole; a closed window's parts all go. A delta's aggregates are
the chunks pickled as they were put (`put_batch`'s `pickled_values`), then those gathered at the export
(WindowRows.saved_columns). A windowed declared aggregation's windows are saved the same way
(nodes/declared_aggregations.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from heapq import heappop, heappush
from typing import Any

import numpy as np

from ..records import Window
from .base import StateRow
from .kv_rows import RowParts
from .store_log import MAX_DELTAS
from .window_rows import WindowRows, loaded_keys, saved_key_chunks


class TimeWindowStore:
    """Windows of `size` ms by start; `columns`: the kinds of a window's (aggregate, max timestamp)."""

    def __init__(self, size: int, columns: tuple[str, str]) -> None:
        self.size = size
        self.columns = columns
        self._rows: dict[int, WindowRows] = {}  # start -> its rows
        self._windows: dict[int, Window] = {}  # start -> the Window object its Windowed keys share
        self._starts: list[int] = []  # heap of the windows' starts
        self._saved: dict[int, WindowParts] = {}  # start -> its rows' export history
        self._exported = False  # see `exported`

    @property
    def exported(self) -> bool:
        """Whether the store is in an export history: an export has taken its parts (`export_parts`) or
        its state came from parts (`apply_parts`: the Spark runtime reads a task's state at every
        micro-batch unless a worker keeps it live, and exports after it). From then on a caller that can
        pickle its values as it puts them does (`put_batch`'s `pickled_values`), for the deltas of the
        exports that follow; before, nothing may ever save them (a run that never exports)."""
        return self._exported

    def __len__(self) -> int:
        return len(self._rows)

    def rows(self, start: int) -> WindowRows | None:
        """The rows of the window `start`, None when the store holds none."""
        return self._rows.get(start)

    def open(self, start: int) -> WindowRows:
        """The rows of the window `start`, created empty when the store holds none."""
        rows = self._rows.get(start)
        if rows is None:
            heappush(self._starts, start)
            rows = self._new_window(start)
        return rows

    def window(self, start: int) -> Window:
        """The Window object of an open window, shared by its Windowed keys."""
        return self._windows[start]

    def touch(self, start: int) -> None:
        """Mark the window changed: its rows flag what changed (WindowRows), the next export saves them."""

    def largest(self) -> int:
        """Rows of the store's largest window: how many keys a window may come to hold."""
        return max(map(len, self._rows.values()), default=0)

    def get(self, key: Any, start: int) -> tuple[Any, int] | None:
        """(aggregate, max timestamp) of `key` in the window `start`, None when it has none."""
        rows = self._rows.get(start)
        if rows is None:
            return None
        row = rows.index.get(key)
        return None if row is None else (rows.columns[0][row], rows.columns[1][row])

    def evict_closed(self, limit: int) -> None:
        """Delete the windows starting at or before `limit`: what they put since the last export is not
        kept until then."""
        starts = self._starts
        while starts and starts[0] <= limit:
            start = heappop(starts)
            self._drop_window(start)

    def state_size(self) -> tuple[int, int]:
        """`(entries, windows)` the store holds (a window whose rows all died holds none, as state_rows
        lists it)."""
        live = [rows.live_count() for rows in self._rows.values()]
        return sum(live), sum(1 for count in live if count)

    def state_rows(self, store: str = "window") -> Iterator[StateRow]:
        for start, rows in sorted(self._rows.items()):
            aggs, max_ts = rows.columns
            end = start + self.size
            for key, row in rows.live():
                yield StateRow(store, key, start, end, aggs[row], max_ts[row])

    def _new_window(self, start: int) -> WindowRows:
        rows = self._rows[start] = WindowRows(self.columns)
        self._windows[start] = tuple.__new__(Window, (start, start + self.size))
        self._saved[start] = WindowParts(SavedWindow(rows), start)
        return rows

    # -- export ---------------------------------------------------------------------------------------------
    # Parts: per window its WindowParts' (below).

    def export_parts(self, changed_only: bool) -> tuple[dict[str, Any], list[str]]:
        self._exported = True
        # each window's aggregates pickled as they were put, for its delta
        pickled = {start: rows.take_pickled_values() for start, rows in self._rows.items()}
        return export_windows(self._saved, changed_only, pickled)

    def state_parts(self) -> dict[str, Any]:
        return windows_state_parts(self._saved)

    def apply_parts(self, parts: dict[str, Any], removed: list[str]) -> None:
        self._exported = True
        apply_window_parts(self._saved, parts, removed, self._new_window, self._drop_window)
        self._starts = sorted(self._rows)

    def _drop_window(self, start: int) -> None:
        del self._rows[start], self._windows[start], self._saved[start]

    # -- batch operations -----------------------------------------------------------------------------------

    def number_keys(
        self, start: int, keys: np.ndarray, size_hint: int = 0
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """WindowRows.number_keys over the window `start` (which must be open)."""
        return self._rows[start].number_keys(keys, size_hint)

    def put_batch(
        self,
        start: int,
        rows: np.ndarray,
        columns: list,
        new_keys: list,
        new_columns: list,
        pickled_keys: Any,
        pickled_values: list | None = None,
    ) -> None:
        """Replace the rows `rows` of the window `start` by `columns`, then append `new_keys` with
        `new_columns` (WindowRows.put_rows, WindowRows.extend), the window opened if need be and flagged
        changed for the next export. `pickled_values`: every one of those rows' aggregates pickled by the
        caller as it made them, in chunks (WindowRows.add_pickled_values), for the next export to save as
        they are."""
        window_rows = self.open(start)
        self.touch(start)
        hot = pickled_values is not None
        if hot:
            window_rows.add_pickled_values(pickled_values)
        if len(rows):
            window_rows.put_rows(rows, columns, hot)
        if len(new_keys):
            window_rows.extend(new_keys, new_columns, pickled_keys, hot)


class WindowParts:
    """The export history of a window's rows (a store of numbered rows that RowParts, nodes/kv_rows.py,
    saves; rows never die nor move while the window lives). Its keys, which never change, are saved in parts
    of their own, `<start>k.<first row>`, {"keys": those of the rows appended since the previous export; the
    first one, `<start>k.0`, even without rows: the part that names the window}, written once (pickled
    chunks: `saved_key_chunks`, nodes/window_rows.py), and merged into one part, `<start>k.0`, once
    MAX_DELTAS of them are kept (a copy of their bytes). The rows' fields are saved by
    RowParts under the prefix `<start>w`: a delta per export of the rows changed, and the bases of the
    groups of rows written in turn, spread over the exports, without keys (the store's `keys_apart`), the
    rows going to the groups in blocks (a base reads the aggregates in the order the fold made them). A
    load appends the keys' rows first (`append_keys`: placeholder fields), then replays the rows' parts over
    them. The store also has `key_chunks` and `changes()`."""

    __slots__ = ("store", "prefix", "parts", "key_firsts", "keys_saved")

    def __init__(self, store: Any, start: int) -> None:
        self.store = store
        self.prefix = str(start)
        self.parts = RowParts(f"{start}w", in_blocks=True)
        self.key_firsts: list[int] = []  # the first rows of the key parts kept, ascending
        self.keys_saved = 0  # the rows whose keys the key parts hold

    def _key_name(self, first: int) -> str:
        return f"{self.prefix}k.{first}"

    def export(self, changed_only: bool, pickled: Any = None) -> tuple[dict[str, Any], list[str]]:
        """`pickled`: the window's chunks of pickled values (WindowRows.take_pickled_values), which its
        delta saves as they are (RowParts.export)."""
        parts: dict[str, Any] = {}
        store = self.store
        if not changed_only or len(self.key_firsts) >= MAX_DELTAS:
            self.key_firsts, self.keys_saved = [], 0
        if store.size > self.keys_saved or not self.key_firsts:  # a window without rows has its k.0 too
            first = self.keys_saved
            keys = saved_key_chunks(store.keys[: store.size], store.key_chunks, first)
            parts[self._key_name(first)] = ({"keys": keys}, [])
            self.key_firsts.append(first)
            self.keys_saved = store.size
        row_parts, names = self.parts.export(store, changed_only, pickled)
        parts.update(row_parts)
        return parts, [*map(self._key_name, self.key_firsts), *names]

    def state_parts(self) -> dict[str, Any]:
        parts: dict[str, Any] = {}
        store = self.store
        keys = saved_key_chunks(store.keys[: store.size], store.key_chunks, 0)
        parts[self._key_name(0)] = ({"keys": keys}, [])
        parts.update(self.parts.state_parts(store))
        return parts

    def apply(self, parts: dict[str, Any], removed: list[str]) -> bool:
        """Catch up with the window's parts exported since: the rows of keys new to it appended, then its
        rows' parts replayed (RowParts.apply). False when the window closed since: its first key part went
        (a merge of the key parts rewrites it, only a closed window's parts go)."""
        store = self.store
        if self._key_name(0) in removed and self._key_name(0) not in parts:
            return False
        if self.parts.saved_rows != store.size or store.changes():
            raise ValueError(f"window {self.prefix}: changes not exported, cannot catch up")
        key_stem = f"{self.prefix}k"
        key_parts, row_parts = {}, {}
        for name, part in parts.items():
            stem, _, first = name.rpartition(".")
            if stem == key_stem:
                if not first.isdigit() or type(part[0]) is not dict or "keys" not in part[0]:
                    raise ValueError(f"state part {name!r} is not a part of window {self.prefix}")
                key_parts[int(first)] = part[0]["keys"]
            else:
                row_parts[name] = part
        firsts = set(self.key_firsts)
        for name in removed:
            stem, _, first = name.rpartition(".")
            if stem == key_stem and first.isdigit():
                if 0 not in key_parts:  # only a merge into a new first key part removes key parts
                    raise ValueError(
                        f"state parts of window {self.prefix}: {name!r} removed without a new base"
                    )
                firsts.discard(int(first))
        for first in sorted(key_parts):
            keys = loaded_keys(key_parts[first])
            if first > store.size:
                raise ValueError(f"state part {self._key_name(first)!r}: keys after rows no part holds")
            if first + len(keys) > store.size:
                store.append_keys(list(keys[store.size - first :]))
            firsts.add(first)
        self.key_firsts = sorted(firsts)
        self.keys_saved = store.size
        self.parts.saved_rows = store.size  # the rows the row parts continue
        self.parts.apply(store, row_parts, [name for name in removed if not name.startswith(key_stem)])
        return True


class SavedWindow:
    """A window's rows (WindowRows) as WindowParts saves and loads them: their size, keys and change flags
    (a numpy view of the rows' bytearray, made per use: a bytearray whose buffer is viewed cannot grow), the
    rest WindowRows' own."""

    __slots__ = ("rows",)
    keys_apart = True

    def __init__(self, rows: WindowRows) -> None:
        self.rows = rows

    @property
    def size(self) -> int:
        return len(self.rows)

    @property
    def keys(self) -> np.ndarray:
        return self.rows.keys

    @property
    def key_chunks(self) -> list:
        return self.rows.key_chunks

    @property
    def dirty(self) -> np.ndarray:
        return np.frombuffer(self.rows.dirty, np.bool_)  # its bytes are 0 or 1 (WindowRows.dirty)

    def changes(self) -> int:
        return self.rows.changes()

    def saved_columns(self, rows: Any, pickled: tuple | None = None) -> list:
        return self.rows.saved_columns(rows, pickled)

    def load_columns(self, rows: Any, columns: list, name: str) -> None:
        self.rows.load_columns(rows, columns, name)

    def append_keys(self, keys: list) -> None:
        self.rows.append_rows(keys)

    def append_rows(self, keys: list) -> None:
        raise ValueError("state parts of a window: rows whose keys no key part holds")

    def loaded(self) -> None:
        self.rows.loaded()

    def clear_rows(self) -> None:
        raise ValueError("state parts of a window: a window's rows are numbered once")


def export_windows(
    histories: dict[int, WindowParts], changed_only: bool, pickled: dict[int, Any] | None = None
) -> tuple[dict[str, Any], list[str]]:
    """Parts new or changed of the windows (every part unless `changed_only`), and the names of every
    current part. `pickled`: by window start, its chunks of pickled values (WindowParts.export)."""
    parts: dict[str, Any] = {}
    names: list[str] = []
    for start, history in histories.items():
        window_parts, window_names = history.export(
            changed_only, None if pickled is None else pickled.get(start)
        )
        parts.update(window_parts)
        names += window_names
    return parts, names


def windows_state_parts(histories: dict[int, WindowParts]) -> dict[str, Any]:
    """Every window's parts as an export of every part writes them, leaving the histories alone."""
    parts: dict[str, Any] = {}
    for history in histories.values():
        parts.update(history.state_parts())
    return parts


def apply_window_parts(
    histories: dict[int, WindowParts],
    parts: dict[str, Any],
    removed: list[str],
    open_window: Callable[[int], Any],
    drop_window: Callable[[int], None],
) -> None:
    """Catch windows up with the parts exported since, window by window (WindowParts.apply): a window new
    to the store is opened (`open_window(start)`, which adds its history), a window whose parts all went
    (closed) is dropped."""
    by_window: dict[int, dict[str, Any]] = {}
    for name, part in parts.items():
        by_window.setdefault(_start_of(name), {})[name] = part
    gone: dict[int, list[str]] = {}
    for name in removed:
        gone.setdefault(_start_of(name), []).append(name)
    for start in sorted(by_window.keys() | gone.keys()):
        if start not in histories:
            if start not in by_window:
                continue  # opened and closed after this store's last export
            open_window(start)
        if not histories[start].apply(by_window.get(start, {}), gone.get(start, [])):
            drop_window(start)


def _start_of(name: str) -> int:
    """The window start of a part's name (`<start>w...` or `<start>k...`); ValueError for another name."""
    start = name.split("w", 1)[0].split("k", 1)[0]
    try:
        return int(start)
    except ValueError:
        raise ValueError(f"state part {name!r} is not a part of a window") from None
