"""Window definitions (docs/semantics.md section 4). Invalid sizes and graces raise ValueError when built."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from .timeutil import Duration, to_millis


def _non_negative(value: Duration, name: str) -> int:
    ms = to_millis(value, name)
    if ms < 0:
        raise ValueError(f"{name} must not be negative, got {ms} ms")
    return ms


def _positive(value: Duration, name: str) -> int:
    ms = to_millis(value, name)
    if ms <= 0:
        raise ValueError(f"{name} must be positive, got {ms} ms")
    return ms


class TimeWindows:
    """Fixed-size windows `[start, start + size)`: tumbling by default, hopping with `advance_by`."""

    __slots__ = ("size", "advance", "grace")

    def __init__(self, size: int, advance: int, grace: int) -> None:
        self.size = size
        self.advance = advance
        self.grace = grace

    @classmethod
    def of_size_with_no_grace(cls, size: Duration) -> TimeWindows:
        size_ms = _positive(size, "window size")
        return cls(size_ms, size_ms, 0)

    @classmethod
    def of_size_and_grace(cls, size: Duration, grace: Duration) -> TimeWindows:
        size_ms = _positive(size, "window size")
        return cls(size_ms, size_ms, _non_negative(grace, "grace period"))

    def advance_by(self, advance: Duration) -> TimeWindows:
        advance_ms = to_millis(advance, "advance")
        if advance_ms <= 0 or advance_ms > self.size:
            raise ValueError(f"advance must be in (0, size={self.size}] ms, got {advance_ms} ms")
        return TimeWindows(self.size, advance_ms, self.grace)

    def grace_period_ms(self) -> int:
        return self.grace

    def size_ms(self) -> int:
        return self.size

    def windows_for(self, timestamp: int) -> Iterator[tuple[int, int]]:
        """The windows containing `timestamp`, ascending by start."""
        size, advance = self.size, self.advance
        start = max(0, timestamp - size + advance) // advance * advance
        while start <= timestamp:
            yield start, start + size
            start += advance

    def pairs(
        self, timestamps: np.ndarray, observed: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`windows_for` and the closing rule (docs/semantics.md 4.1, 4.2) over a batch: per (record, window)
        pair, by record then ascending start, the record's index, the window's start and whether the window
        is still open, `end + grace > observed` where `observed[i]` is the operator's time at record i
        (int64 arrays; timestamps non-negative and at most INT64_MAX - size - grace)."""
        size, advance = self.size, self.advance
        last = (
            timestamps - timestamps % advance
        )  # the windows of ts start at first, first + advance, .., last
        first = timestamps - (size - advance)
        first = np.where(first < 0, 0, first - first % advance)
        per_record = -(-size // advance)
        if per_record == 1:
            rec, start = np.arange(len(timestamps)), last
        else:
            start = (first[:, None] + np.arange(per_record) * advance).ravel()
            rec = np.repeat(np.arange(len(timestamps)), per_record)
            valid = start <= last[rec]
            if not valid.all():
                rec, start = rec[valid], start[valid]
        return rec, start, self.is_open(start, observed[rec])

    def is_open(self, start: Any, observed: Any) -> Any:
        """Whether the window starting at `start` is still open at the operator time `observed`:
        `closes_at(start) > observed`, written so that int64 arrays cannot overflow."""
        return start > self.last_closed_start(observed)

    def last_closed_start(self, observed: Any) -> Any:
        """The latest start of a window closed at the operator time `observed`: the windows starting at or
        before it are closed, the later ones open (`is_open`)."""
        return observed - (self.size + self.grace)

    def closes_at(self, start: Any) -> Any:
        """When the window starting at `start` closes: an operator whose time reaches it drops the window's
        records (docs/semantics.md 4.2). An int, or an int64 array of starts."""
        return start + self.size + self.grace

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TimeWindows) and (self.size, self.advance, self.grace) == (
            other.size,
            other.advance,
            other.grace,
        )

    def __hash__(self) -> int:
        return hash((self.size, self.advance, self.grace))

    def __repr__(self) -> str:
        return f"TimeWindows(size={self.size}, advance={self.advance}, grace={self.grace})"


class SessionWindows:
    """Sessions of activity separated by at least `gap` ms of inactivity; windows are `[start, end]`."""

    __slots__ = ("gap", "grace")

    def __init__(self, gap: int, grace: int) -> None:
        self.gap = gap
        self.grace = grace

    @classmethod
    def of_inactivity_gap_with_no_grace(cls, gap: Duration) -> SessionWindows:
        return cls(_positive(gap, "inactivity gap"), 0)

    @classmethod
    def of_inactivity_gap_and_grace(cls, gap: Duration, grace: Duration) -> SessionWindows:
        return cls(_positive(gap, "inactivity gap"), _non_negative(grace, "grace period"))

    def grace_period_ms(self) -> int:
        return self.grace

    def inactivity_gap(self) -> int:
        return self.gap

    def __repr__(self) -> str:
        return f"SessionWindows(gap={self.gap}, grace={self.grace})"


class SlidingWindows:
    """Record-driven windows `[ts - time_difference, ts]` (Kafka 3.5+ semantics); windows are inclusive."""

    __slots__ = ("time_difference", "grace")

    def __init__(self, time_difference: int, grace: int) -> None:
        self.time_difference = time_difference
        self.grace = grace

    @classmethod
    def of_time_difference_and_grace(cls, time_difference: Duration, grace: Duration) -> SlidingWindows:
        return cls(_non_negative(time_difference, "time difference"), _non_negative(grace, "grace period"))

    @classmethod
    def of_time_difference_with_no_grace(cls, time_difference: Duration) -> SlidingWindows:
        return cls(_non_negative(time_difference, "time difference"), 0)

    def grace_period_ms(self) -> int:
        return self.grace

    def __repr__(self) -> str:
        return f"SlidingWindows(time_difference={self.time_difference}, grace={self.grace})"


class JoinWindows:
    """Stream-stream join windows: a record at `ts` joins the other side's records in
    `[ts - before, ts + after]`; `before == after == time_difference` unless changed."""

    __slots__ = ("before", "after", "grace")

    def __init__(self, before: int, after: int, grace: int) -> None:
        if before + after < 0:
            raise ValueError(
                f"join window size (before + after) must not be negative, got {before + after} ms"
            )
        self.before = before
        self.after = after
        self.grace = grace

    @classmethod
    def of_time_difference_and_grace(cls, time_difference: Duration, grace: Duration) -> JoinWindows:
        d = _non_negative(time_difference, "time difference")
        return cls(d, d, _non_negative(grace, "grace period"))

    @classmethod
    def of_time_difference_with_no_grace(cls, time_difference: Duration) -> JoinWindows:
        d = _non_negative(time_difference, "time difference")
        return cls(d, d, 0)

    def with_before(self, before: Duration) -> JoinWindows:
        """Kafka's `before(Duration)`: how far back the other side's records may lie."""
        return JoinWindows(to_millis(before, "before"), self.after, self.grace)

    def with_after(self, after: Duration) -> JoinWindows:
        """Kafka's `after(Duration)`: how far ahead the other side's records may lie."""
        return JoinWindows(self.before, to_millis(after, "after"), self.grace)

    def size(self) -> int:
        return self.before + self.after

    def grace_period_ms(self) -> int:
        return self.grace

    def __repr__(self) -> str:
        return f"JoinWindows(before={self.before}, after={self.after}, grace={self.grace})"


AnyWindows = TimeWindows | SessionWindows | SlidingWindows  # what `windowed_by` accepts
