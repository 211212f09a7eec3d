"""The node base of tables and non-windowed aggregations: a key -> (value, timestamp) store (nodes/kv_store.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .base import Node, StateRow
from .kv_store import TimestampedKeyValueStore, int_column

__all__ = ["TimestampedStoreNode", "int_column"]


class TimestampedStoreNode(Node):
    """A node whose state is the latest value per key and the timestamp it carries (rule 4.3). Its parts
    are its store's (`kv<group>.<n>`; a non-windowed aggregation's row store also has `kv.<n>`, see
    nodes/kv_rows.py)."""

    store_kind = "key_value"  # the store's kind in `state_rows`

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.store = TimestampedKeyValueStore()

    def get(self, key: Any) -> tuple[Any, int] | None:
        return self.store.get(key)

    def get_list(self, keys: list) -> list:
        return self.store.get_list(keys)

    def get_values(self, keys: list) -> tuple[list, bool]:
        return self.store.get_values(keys)

    def str_keys(self) -> bool:
        str_keys = getattr(self.store, "str_keys", None)
        return str_keys is not None and str_keys()

    def export_parts(self, changed_only: bool) -> tuple[dict[str, Any], list[str]]:
        return self.store.export_parts(changed_only)

    def state_parts(self) -> dict[str, Any]:
        return self.store.state_parts()

    def apply_parts(self, parts: dict[str, Any], removed: list[str]) -> None:
        self.store.apply_parts(parts, removed)

    def state_size(self) -> tuple[int, int]:
        return len(self.store), 0

    def state_rows(self) -> Iterator[StateRow]:
        kind = self.store_kind
        for key, (value, timestamp) in self.store.items():
            yield StateRow(kind, key, None, None, value, timestamp)
