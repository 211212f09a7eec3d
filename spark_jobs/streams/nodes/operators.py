"""Runtime nodes of the stateless stream operators and of the non-aggregating table operators.

Stateless operators pass the input timestamp through (docs/semantics.md section 3). Table nodes carry KTable
changes: `values` holds the new value and `olds` the previous one (None when the key was absent).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import compress
from typing import Any

from .base import Batch, Node
from .kv_rows import KeyValueRows
from .stores import TimestampedStoreNode


def _select(
    mask: list, keys: list, values: list, olds: list | None, timestamps: list, headers: list | None
) -> Batch:
    """Keep the rows whose mask entry is true; identity (src None) when all are kept."""
    n = len(keys)
    kept = list(compress(range(n), mask))
    if len(kept) == n:
        return Batch(keys, values, olds, timestamps, headers, None)
    return Batch(
        list(compress(keys, mask)),
        list(compress(values, mask)),
        None if olds is None else list(compress(olds, mask)),
        list(compress(timestamps, mask)),
        None if headers is None else list(compress(headers, mask)),
        kept,
    )


class FilterNode(Node):
    def __init__(self, name: str, predicate: Callable[[Any, Any], Any], negate: bool) -> None:
        super().__init__(name)
        self.predicate = predicate
        self.negate = negate

    def process_columns(self, keys, values, olds, timestamps, headers):
        mask = list(map(self.predicate, keys, values))
        if self.negate:
            mask = [not m for m in mask]
        return _select(mask, keys, values, olds, timestamps, headers)


class MapNode(Node):
    """`map(fn)`: fn(key, value) -> (new_key, new_value)."""

    def __init__(self, name: str, mapper: Callable[[Any, Any], tuple]) -> None:
        super().__init__(name)
        self.mapper = mapper

    def process_columns(self, keys, values, olds, timestamps, headers):
        pairs = list(map(self.mapper, keys, values))
        return Batch([p[0] for p in pairs], [p[1] for p in pairs], None, timestamps, headers, None)


class MapValuesNode(Node):
    def __init__(self, name: str, mapper: Callable[[Any], Any]) -> None:
        super().__init__(name)
        self.mapper = mapper

    def process_columns(self, keys, values, olds, timestamps, headers):
        return Batch(keys, list(map(self.mapper, values)), None, timestamps, headers, None)


class SelectKeyNode(Node):
    def __init__(self, name: str, mapper: Callable[[Any, Any], Any]) -> None:
        super().__init__(name)
        self.mapper = mapper

    def process_columns(self, keys, values, olds, timestamps, headers):
        return Batch(list(map(self.mapper, keys, values)), values, None, timestamps, headers, None)


class FlatMapNode(Node):
    """`flat_map(fn)` (fn(k, v) -> iterable of (k, v)) or, with `values_only`, `flat_map_values(fn)`."""

    def __init__(self, name: str, mapper: Callable[..., Any], values_only: bool) -> None:
        super().__init__(name)
        self.mapper = mapper
        self.values_only = values_only

    def process_columns(self, keys, values, olds, timestamps, headers):
        mapper, values_only = self.mapper, self.values_only
        out_k: list = []
        out_v: list = []
        out_t: list = []
        out_h: list | None = None if headers is None else []
        src: list = []
        for i in range(len(keys)):
            key, ts = keys[i], timestamps[i]
            for item in mapper(values[i]) if values_only else mapper(key, values[i]):
                if values_only:
                    out_k.append(key)
                    out_v.append(item)
                else:
                    out_k.append(item[0])
                    out_v.append(item[1])
                out_t.append(ts)  # every output of a flat_map gets the input timestamp
                if out_h is not None:
                    out_h.append(headers[i])
                src.append(i)
        return Batch(out_k, out_v, None, out_t, out_h, src)


class PeekNode(Node):
    def __init__(self, name: str, action: Callable[[Any, Any], Any], forward: bool = True) -> None:
        super().__init__(name)
        self.action = action
        self.forward = forward

    def process_columns(self, keys, values, olds, timestamps, headers):
        for _ in map(self.action, keys, values):
            pass
        return Batch(keys, values, None, timestamps, headers, None) if self.forward else None


class PassThroughNode(Node):
    """merge, group_by_key and stream-side no-ops: rows pass unchanged (table changes lose their old value
    only where `drop_olds` says so, e.g. KTable.to_stream)."""

    def __init__(self, name: str, drop_olds: bool = False) -> None:
        super().__init__(name)
        self.drop_olds = drop_olds

    def process_columns(self, keys, values, olds, timestamps, headers):
        return Batch(keys, values, None if self.drop_olds else olds, timestamps, headers, None)


class TableSourceNode(TimestampedStoreNode):
    """`builder.table(topic)`: materializes the latest value per key and emits changes (new, old).

    The table is a store of numbered rows (nodes/kv_rows.py): a batch's keys are looked up at once and each
    distinct key's entry written once, and a join reads the values of a batch's keys by row
    (`get_values`), without an entry object per key."""

    store_kind = "table"

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.store = KeyValueRows()

    def process_columns(self, keys, values, olds, timestamps, headers):
        if not keys:
            return None
        previous, kept = self.store.put_changes(keys, values, timestamps)
        if kept is None:
            return Batch(keys, values, previous, timestamps, headers, None)
        self.count_dropped(len(keys) - len(kept))  # a None key
        if not kept:
            return None
        return Batch(
            [keys[i] for i in kept],
            [values[i] for i in kept],
            previous,
            [timestamps[i] for i in kept],
            None if headers is None else [headers[i] for i in kept],
            kept,
        )


class TableFilterNode(Node):
    """KTable filter: a row failing the predicate becomes a tombstone. When old values are sent (a
    downstream suppress or group_by needs them) a change that is null before and after is not forwarded."""

    def __init__(
        self,
        name: str,
        predicate: Callable[[Any, Any], Any],
        negate: bool,
        parent: str,
        send_old_values: bool,
    ) -> None:
        super().__init__(name)
        self.predicate = predicate
        self.negate = negate
        self.parent = parent
        self.send_old_values = send_old_values

    def _apply(self, key: Any, value: Any) -> Any:
        if value is not None and bool(self.predicate(key, value)) != self.negate:
            return value
        return None

    def process_columns(self, keys, values, olds, timestamps, headers):
        apply, send_old = self._apply, self.send_old_values
        new_values = list(map(apply, keys, values))
        if not send_old:
            return Batch(keys, new_values, None, timestamps, headers, None)
        old_values = [None] * len(keys) if olds is None else list(map(apply, keys, olds))
        mask = [n is not None or o is not None for n, o in zip(new_values, old_values, strict=False)]
        return _select(mask, keys, new_values, old_values, timestamps, headers)

    def get(self, key):
        got = self.task_context.value_getter(self.parent)(key)
        if got is None or self._apply(key, got[0]) is None:
            return None
        return got

    def getter_reads(self):
        return (self.parent,)


class TableMapValuesNode(Node):
    def __init__(self, name: str, mapper: Callable[[Any], Any], parent: str, send_old_values: bool) -> None:
        super().__init__(name)
        self.mapper = mapper
        self.parent = parent
        self.send_old_values = send_old_values

    def _apply(self, value: Any) -> Any:
        return None if value is None else self.mapper(value)

    def process_columns(self, keys, values, olds, timestamps, headers):
        new_values = list(map(self._apply, values))
        old_values = list(map(self._apply, olds)) if self.send_old_values and olds is not None else None
        return Batch(keys, new_values, old_values, timestamps, headers, None)

    def get(self, key):
        got = self.task_context.value_getter(self.parent)(key)
        return None if got is None else (self._apply(got[0]), got[1])

    def getter_reads(self):
        return (self.parent,)


class TableGroupByNode(Node):
    """KTable.group_by (Kafka 3.5+): a subtract row for the old group, then an add row for the new one;
    one combined row when the group key is unchanged. Rows are (group_key, new, old)."""

    def __init__(self, name: str, mapper: Callable[[Any, Any], tuple]) -> None:
        super().__init__(name)
        self.mapper = mapper

    def process_columns(self, keys, values, olds, timestamps, headers):
        mapper = self.mapper
        out_k: list = []
        out_v: list = []
        out_o: list = []
        out_t: list = []
        src: list = []
        dropped = 0
        for i in range(len(keys)):
            key, new, old, ts = keys[i], values[i], None if olds is None else olds[i], timestamps[i]
            new_pair = None if new is None else mapper(key, new)
            old_pair = None if old is None else mapper(key, old)
            if new_pair is not None and old_pair is not None and new_pair[0] == old_pair[0]:
                rows = ((new_pair[0], new_pair[1], old_pair[1]),)
            else:
                rows = tuple(
                    row
                    for row in (
                        None if old_pair is None else (old_pair[0], None, old_pair[1]),
                        None if new_pair is None else (new_pair[0], new_pair[1], None),
                    )
                    if row is not None
                )
            for group_key, new_value, old_value in rows:
                if group_key is None:  # a null group key cannot be aggregated
                    dropped += 1
                    continue
                out_k.append(group_key)
                out_v.append(new_value)
                out_o.append(old_value)
                out_t.append(ts)
                src.append(i)
        if dropped:
            self.count_dropped(dropped)
        out_h = None if headers is None else [headers[i] for i in src]
        return Batch(out_k, out_v, out_o, out_t, out_h, src)
