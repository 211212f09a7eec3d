"""Time arithmetic shared by the engine, the Spark runtime and the Airflow plugins.

This module is the one implementation of epoch alignment in the project: the aligned punctuation
schedules, the Airflow timetable and the wall-clock sensor all call `next_aligned`.
"""

from __future__ import annotations

import datetime as _dt

INT64_MAX = 2**63 - 1

Duration = int | _dt.timedelta


def to_millis(duration: Duration, name: str = "duration") -> int:
    """Return a duration in milliseconds; accepts an int (ms) or a `datetime.timedelta`."""
    if isinstance(duration, bool):
        raise TypeError(f"{name} must be an int of milliseconds or a timedelta, not bool")
    if isinstance(duration, int):
        return duration
    if isinstance(duration, _dt.timedelta):
        # Integer arithmetic: timedelta's float conversions lose precision for large values.
        return (duration.days * 86_400_000) + duration.seconds * 1000 + duration.microseconds // 1000
    raise TypeError(f"{name} must be an int of milliseconds or a timedelta, got {type(duration).__name__}")


def normalize_shift(interval: int, shift: int) -> int:
    """The shift as the project defines it: `time_shift mod interval`, always in `[0, interval)`."""
    if interval < 1:
        raise ValueError(f"interval must be at least 1 ms, got {interval}")
    return shift % interval


def next_aligned(t: int, interval: Duration, shift: Duration = 0) -> int:
    """The smallest boundary `k * interval + shift` that is `>= t`.

    `shift` is taken modulo `interval`, so negative shifts and shifts of an interval or more name the same
    grid. Python integers do not overflow; callers that must stay within int64 clamp with `INT64_MAX`.
    """
    interval_ms = to_millis(interval, "interval")
    shift_ms = normalize_shift(interval_ms, to_millis(shift, "shift"))
    # -((shift - t) // interval) is ceil((t - shift) / interval) in exact integer arithmetic.
    return -((shift_ms - t) // interval_ms) * interval_ms + shift_ms


def previous_aligned(t: int, interval: Duration, shift: Duration = 0) -> int:
    """The largest boundary `k * interval + shift` that is `<= t`."""
    interval_ms = to_millis(interval, "interval")
    shift_ms = normalize_shift(interval_ms, to_millis(shift, "shift"))
    return (t - shift_ms) // interval_ms * interval_ms + shift_ms
