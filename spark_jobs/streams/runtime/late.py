"""Late records: what a task keeps of every (record, window) pair a node drops as late.

A node reports the rows of its input batch it drops (`Node.count_late`); the task keeps each with the
input record it descends from, so that the runtime can say where it came from (an offset, or a file and a
line). The task finds that record without any cost per row while nothing is late:

- record by record (and for user processors' islands), the task says which input row it is processing
  (`row`);
- in columns, every node that has a node below it that may drop late records (`Node.drops_late`) builds
  its `src` (nodes/base.py), and each columnar runner puts the `src` of its node's output on `path` while
  its children process it: a node's input row maps back through the `src` of every node above it.

Within one `process_batch` the kept records are put in the order of the input records they descend from;
the order of the records one input record gives at several nodes is not specified.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any, NamedTuple

_position = itemgetter(0)


class LateRecord(NamedTuple):
    """One (record, window) pair a node dropped as late."""

    node: str  # the node that dropped it
    topic: str | None  # the input topic of the record it descends from; None: a punctuator's record
    partition: int
    origin: Any  # the caller's origin of that input record (`process_batch(origins=...)`), or None
    key: Any
    value: Any
    timestamp: int
    window_start: int | None  # the window it would have belonged to; None where no window applies
    window_end: int | None
    stream_time: int | None  # the node's observed stream time when it dropped the record


class LateKeeper:
    """A task's late records not drained yet, and where the row being processed came from."""

    __slots__ = ("_pending", "row", "path", "base", "_keep", "_origins", "_mark")

    def __init__(self) -> None:
        self._pending: list[tuple[int, LateRecord]] = []  # (position of the input row, record)
        self.row: int | None = None  # the row processed row by row, within the chunk; None: in columns
        self.path: list[list | None] = []  # the `src` of each columnar node's output above the node running
        self.base = 0  # the input row of the columnar chunk's first row
        self._keep: list[int] | None = None  # input rows of the rows processed (negative timestamps go)
        self._origins: Sequence | None = None
        self._mark = 0

    def begin_batch(self, origins: Sequence | None, keep: list[int] | None) -> None:
        self.row = None
        self.path.clear()
        self.base = 0
        self._keep = keep
        self._origins = origins
        self._mark = len(self._pending)

    def end_batch(self) -> None:
        """The batch's records in the order of their input rows (a stable sort: columnar nodes run one
        after the other)."""
        self._origins = self._keep = None
        self.row = None
        if len(self._pending) - self._mark > 1:
            self._pending[self._mark :] = sorted(self._pending[self._mark :], key=_position)

    def add(
        self,
        node: str,
        topic: str | None,
        partition: int,
        rows: Sequence[int],
        keys: Sequence[Any],
        values: Sequence[Any],
        timestamps: Sequence[int],
        window_starts: Sequence[int | None] | None,
        window_ends: Sequence[int | None] | None,
        stream_times: Sequence[int] | None,
    ) -> None:
        n = len(rows)
        if self.row is not None:
            positions = [self.row + self.base] * n
        else:
            positions = list(rows)
            for src in reversed(self.path):
                if src is not None:
                    positions = [src[p] for p in positions]
            if self.base:
                positions = [p + self.base for p in positions]
        origins = self._origins if topic is not None else None
        keep = self._keep
        for j in range(n):
            position = positions[j]
            origin = None
            if origins is not None:
                origin = origins[position if keep is None else keep[position]]
            self._pending.append(
                (
                    position,
                    LateRecord(
                        node,
                        topic,
                        partition,
                        origin,
                        keys[j],
                        values[j],
                        timestamps[j],
                        None if window_starts is None else window_starts[j],
                        None if window_ends is None else window_ends[j],
                        None if stream_times is None else stream_times[j],
                    ),
                )
            )

    def __len__(self) -> int:
        return len(self._pending)

    def drain(self) -> list[LateRecord]:
        records = [record for _, record in self._pending]
        self._pending = []
        self._mark = 0
        return records

    def pending(self) -> list[tuple] | None:
        """What a snapshot keeps (None: nothing)."""
        return [tuple(record) for _, record in self._pending] or None

    def restore(self, records: list[tuple] | None) -> None:
        self._pending = [(0, LateRecord(*record)) for record in records or ()]
        self._mark = len(self._pending)
