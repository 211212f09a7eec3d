"""The records a node drops as late during a batch, gathered for one `Node.count_late` call."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import Node


class LateRows:
    """The (record, window) pairs a node drops as late during one batch, handed to `Node.count_late` at
    its end (one call per batch)."""

    __slots__ = ("rows", "keys", "values", "timestamps", "starts", "ends", "stream_times")

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.keys: list = []
        self.values: list = []
        self.timestamps: list[int] = []
        self.starts: list[int | None] = []
        self.ends: list[int | None] = []
        self.stream_times: list[int] = []  # the node's observed time when it dropped each

    def add(
        self,
        row: int,
        key: Any,
        value: Any,
        timestamp: int,
        start: int | None,
        end: int | None,
        stream_time: int,
    ) -> None:
        self.rows.append(row)
        self.keys.append(key)
        self.values.append(value)
        self.timestamps.append(timestamp)
        self.starts.append(start)
        self.ends.append(end)
        self.stream_times.append(stream_time)

    def report(self, node: Node) -> None:
        if self.rows:
            node.count_late(
                self.rows, self.keys, self.values, self.timestamps, self.starts, self.ends, self.stream_times
            )
