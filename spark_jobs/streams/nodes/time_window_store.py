"""The store of a tumbling or hopping window aggregation: per window start, the window's rows (WindowRows).

Each window keeps key -> row, then the aggregate and the max timestamp by row (a list, or an int64 array
for a count, and an int64 array): one look-up per record and window, and an export gathers the rows a
batch changed from two columns. Windows by start make closed windows cheap to delete. The Windowed keys of
one window share one Window object (`window`), which lets a downstream suppress find its bucket by
identity. The store owns its operations: opening and looking up windows, evicting the closed ones,
per-change export through its StoreLog, and the rows of every entry for the state reader.
"""

from __future__ import annotations

from collections.abc import Iterator
from heapq import heappop, heappush
from typing import Any

import numpy as np

from ..records import Window
from .base import StateRow
from .store_log import StoreLog
from .window_rows import WindowRows


class TimeWindowStore:
    """Windows of `size` ms by start; `columns`: the kinds of a window's (aggregate, max timestamp)."""

    def __init__(self, size: int, columns: tuple[str, str]) -> None:
        self.size = size
        self.columns = columns
        self._rows: dict[int, WindowRows] = {}  # start -> its rows
        self._windows: dict[int, Window] = {}  # start -> the Window object its Windowed keys share
        self._starts: list[int] = []  # heap of the windows' starts
        self._log = StoreLog()  # which windows changed since the last export, by start

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
        self._log.touch(start)

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
            del self._rows[start], self._windows[start]
            self._log.drop(start)

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
        return rows

    # -- export ---------------------------------------------------------------------------------------------
    # Parts: "<window start>.<n>" of the store's log (StoreLog), as WindowRows saves them.

    def export_parts(self, changed_only: bool) -> tuple[dict[str, Any], list[str]]:
        return self._log.export(self._rows, changed_only, str, self._save, WindowRows.changes)

    def state_parts(self) -> dict[str, Any]:
        return self._log.bases(self._rows, str, lambda start: self._rows[start].base())

    def _save(self, start: int, put: dict | None) -> dict:
        return self._rows[start].save(changed_only=put is not None)

    def apply_parts(self, parts: dict[str, Any], removed: list[str]) -> None:
        """Catch up with the parts exported since (StoreLog.catch_up); a part not in WindowRows' saved form
        is refused."""
        dropped, steps = self._log.catch_up(parts, removed, int)
        for start in dropped:
            del self._rows[start], self._windows[start]
        for start, saved, _ in steps:
            rows = self._rows.get(start)
            if rows is None:
                rows = self._new_window(start)
            if type(saved) is not dict:
                raise ValueError(f"state part {start}: not a saved window")
            rows.load(saved, str(start), owned=True)  # unpickled for this catch-up
        self._starts = sorted(self._rows)

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
    ) -> None:
        """Replace the rows `rows` of the window `start` by `columns`, then append `new_keys` with
        `new_columns` (WindowRows.put_rows, WindowRows.extend), the window opened if need be and flagged
        changed for the next export."""
        window_rows = self.open(start)
        self.touch(start)
        if len(rows):
            window_rows.put_rows(rows, columns)
        if new_keys:
            window_rows.extend(new_keys, new_columns, pickled_keys)
