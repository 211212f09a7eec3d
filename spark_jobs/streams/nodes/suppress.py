"""The suppress node (docs/semantics.md section 5): Kafka's KTableSuppressProcessor, a put of every update
into its buffer (nodes/time_ordered_buffer.py), which evicts what its bounds say must go."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..suppress import SHUT_DOWN, Suppressed
from .base import Batch, Node, StateRow
from .time_ordered_buffer import TimeOrderedKeyValueBuffer


class SuppressNode(Node):
    """Hands each batch to its buffer and forwards what the buffer evicts."""

    def __init__(
        self, name: str, suppressed: Suppressed, duration: int, parent_name: str, send_old_values: bool = True
    ) -> None:
        super().__init__(name)
        config = suppressed.buffer_config
        # D: the time limit, or the upstream window's grace (+ gap for sessions)
        self.buffer = TimeOrderedKeyValueBuffer(
            suppressed.window_close,
            duration,
            config.records_limit,
            config.bytes_limit,
            config.policy == SHUT_DOWN,
            name,
        )
        self.parent_name = parent_name
        # Whether a child reads the old values this node forwards (its table sends them): else it forwards
        # none, and its buffer need not keep them (TimeOrderedKeyValueBuffer.forget_olds).
        self.send_old_values = send_old_values
        if not send_old_values:
            self.buffer.forget_olds()
        # A buffer that shuts down when full raises mid-batch: record by record, what it evicted before the
        # error has been forwarded, as in Kafka; a batch would lose it with the exception.
        self.columnar = not (self.buffer.bounded and self.buffer.shut_down)

    def measure_bytes(self) -> None:
        self.buffer.track_bytes = True

    def getter_unread(self) -> None:
        self.buffer.forget_priors()  # only `get` reads them

    @property
    def window_close(self) -> bool:
        return self.buffer.window_close

    def process_columns(self, keys, values, olds, timestamps, headers):
        out = self.buffer.put_batch(keys, values, olds, timestamps, headers, self.task_context.current_topic)
        out_h = out.headers
        if out_h is not None and all(h is None for h in out_h):
            out_h = None
        out_o = out.olds if self.send_old_values else None
        return Batch(out.keys, out.values, out_o, out.timestamps, out_h, out.src)

    def get(self, key: Any) -> tuple[Any, int] | None:
        """A join reading the suppressed table sees the last emitted value while the key is buffered."""
        buffered = self.buffer.prior(key)
        if buffered is not None:
            return None if buffered[0] is None else (buffered[0], -1)
        return self.task_context.value_getter(self.parent_name)(key)

    def metrics(self) -> dict[str, float]:
        return self.buffer.metrics()

    def state_rows(self) -> Iterator[StateRow]:
        return self.buffer.state_rows()

    def state_size(self) -> tuple[int, int]:
        return self.buffer.state_size()

    # State parts: "" holds the buffer's accounting, the buffer's parts hold its entries.
    def export_parts(self, changed_only: bool) -> tuple[dict[str, Any], list[str]]:
        parts, names = self.buffer.export_parts(changed_only)
        parts[""] = self.buffer.scalars()
        return parts, ["", *names]

    def state_parts(self) -> dict[str, Any]:
        parts = self.buffer.state_parts()
        parts[""] = self.buffer.scalars()
        return parts

    def apply_parts(self, parts: dict[str, Any], removed: list[str]) -> None:
        if "" in parts:
            self.buffer.set_scalars(parts.pop(""))
        self.buffer.apply_parts(parts, removed)
