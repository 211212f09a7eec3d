"""Suppress (docs/semantics.md section 5): the configuration objects (the node is nodes/suppress.py)."""

from __future__ import annotations

from typing import Any

from .timeutil import Duration, to_millis

_EMIT_EARLY = "emit_early_when_full"
SHUT_DOWN = "shut_down_when_full"


class BufferFullError(RuntimeError):
    """Raised by a `shut_down_when_full` suppress buffer that exceeded its max capacity."""


class _ConfigMethod:
    """`BufferConfig.max_records(n)` starts a new config; `config.max_records(n)` changes a copy of one."""

    def __init__(self, func: Any) -> None:
        self.func = func
        self.__doc__ = func.__doc__

    def __get__(self, instance: BufferConfig | None, owner: type) -> Any:
        base = instance if instance is not None else BufferConfig(None, None, _EMIT_EARLY)
        return lambda *args: self.func(base, *args)


class BufferConfig:
    """How much a suppress buffer may hold and what it does when full.

    `BufferConfig.unbounded()`; `BufferConfig.max_records(n)` / `.max_bytes(b)` (emit early when full by
    default), then `.emit_early_when_full()` or `.shut_down_when_full()`.
    """

    __slots__ = ("records_limit", "bytes_limit", "policy")

    def __init__(self, records_limit: int | None, bytes_limit: int | None, policy: str) -> None:
        self.records_limit = records_limit
        self.bytes_limit = bytes_limit
        self.policy = policy

    @staticmethod
    def unbounded() -> BufferConfig:
        return BufferConfig(None, None, SHUT_DOWN)

    @_ConfigMethod
    def max_records(self, records: int) -> BufferConfig:
        """Emit early / shut down when more than `records` entries are buffered."""
        if type(records) is not int or records < 0:
            raise ValueError(f"max_records must be a non-negative int, got {records!r}")
        return BufferConfig(records, self.bytes_limit, self.policy)

    @_ConfigMethod
    def max_bytes(self, num_bytes: int) -> BufferConfig:
        """Emit early / shut down when the buffered entries take more than `num_bytes` bytes."""
        if type(num_bytes) is not int or num_bytes < 0:
            raise ValueError(f"max_bytes must be a non-negative int, got {num_bytes!r}")
        return BufferConfig(self.records_limit, num_bytes, self.policy)

    def with_no_bound(self) -> BufferConfig:
        return BufferConfig(None, None, self.policy)

    def emit_early_when_full(self) -> BufferConfig:
        return BufferConfig(self.records_limit, self.bytes_limit, _EMIT_EARLY)

    def shut_down_when_full(self) -> BufferConfig:
        return BufferConfig(self.records_limit, self.bytes_limit, SHUT_DOWN)

    @property
    def is_strict(self) -> bool:
        """Strict configs never emit a result early: unbounded, or bounded with shut_down_when_full."""
        return self.policy == SHUT_DOWN

    def __repr__(self) -> str:
        return f"BufferConfig(max_records={self.records_limit}, max_bytes={self.bytes_limit}, {self.policy})"


class Suppressed:
    """`Suppressed.until_window_closes(config)` or `Suppressed.until_time_limit(duration, config)`."""

    __slots__ = ("window_close", "time_limit", "buffer_config", "name")

    def __init__(
        self, window_close: bool, time_limit: int, buffer_config: BufferConfig, name: str | None = None
    ) -> None:
        self.window_close = window_close
        self.time_limit = time_limit
        self.buffer_config = buffer_config
        self.name = name

    @staticmethod
    def until_window_closes(buffer_config: BufferConfig) -> Suppressed:
        """Emit each windowed result once, when its window closes (window end + grace)."""
        if not isinstance(buffer_config, BufferConfig):
            raise ValueError(f"until_window_closes needs a BufferConfig, got {buffer_config!r}")
        if not buffer_config.is_strict:
            raise ValueError(
                "until_window_closes needs a strict buffer config (BufferConfig.unbounded(), or a "
                "bounded one with .shut_down_when_full()): emitting early would break final results"
            )
        return Suppressed(True, 0, buffer_config)

    @staticmethod
    def until_time_limit(time_to_wait_for_more_events: Duration, buffer_config: BufferConfig) -> Suppressed:
        """Emit a key's latest value once `duration` has passed since its first un-emitted update."""
        limit = to_millis(time_to_wait_for_more_events, "time limit")
        if limit < 0:
            raise ValueError(f"suppress time limit must not be negative, got {limit} ms")
        if not isinstance(buffer_config, BufferConfig):
            raise ValueError(f"until_time_limit needs a BufferConfig, got {buffer_config!r}")
        return Suppressed(False, limit, buffer_config)

    def with_name(self, name: str) -> Suppressed:
        if not isinstance(name, str) or not name:
            raise ValueError(f"suppress name must be a non-empty string, got {name!r}")
        return Suppressed(self.window_close, self.time_limit, self.buffer_config, name)

    def __repr__(self) -> str:
        kind = "until_window_closes" if self.window_close else f"until_time_limit({self.time_limit})"
        return f"Suppressed.{kind}({self.buffer_config!r}, name={self.name!r})"
