"""The key -> (value, timestamp) store that tables and non-windowed aggregations keep, with its snapshot."""

from __future__ import annotations

from array import array
from typing import Any

from .base import Node


def int_column(values: list | tuple) -> Any:
    """Pack ints as a signed 64-bit array (compact and fast to pickle); other values stay a list (bools and
    other int subclasses too: an array would load them back as plain ints)."""
    if set(map(type, values)) <= {int}:
        try:
            return array("q", values)
        except OverflowError:
            pass
    return list(values)


class TimestampedStoreNode(Node):
    """A node whose state is the latest value per key and the timestamp it carries (rule 4.3)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.store: dict[Any, tuple[Any, int]] = {}

    def get(self, key):
        return self.store.get(key)

    def snapshot_state(self):
        # Column-wise: one list of keys, one packed column of values where they are ints, one of timestamps.
        return {
            "keys": list(self.store),
            "values": int_column([v for v, _ in self.store.values()]),
            "ts": array("q", [t for _, t in self.store.values()]),
        }

    def restore_state(self, state):
        self.store = dict(zip(state["keys"], zip(state["values"], state["ts"], strict=True), strict=True))
