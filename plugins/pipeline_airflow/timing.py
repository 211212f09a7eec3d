"""Time conversions of the aligned schedules: durations checked and printed, datetimes as epoch ms.

Durations are whole milliseconds, as in the engine (`spark_jobs.streams.timeutil`); both an int of
milliseconds and a `datetime.timedelta` are accepted.
"""

from __future__ import annotations

import calendar
import datetime as dt

import pendulum
from pendulum import DateTime

from spark_jobs.streams.timeutil import Duration, normalize_shift, to_millis

# Airflow's scheduler works in seconds at best; a finer schedule would only queue runs up.
MIN_INTERVAL_MS = 1000

_EPOCH = pendulum.datetime(1970, 1, 1, tz="UTC")

_UNITS_MS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1))


def _whole_millis(value: Duration, name: str) -> int:
    if isinstance(value, dt.timedelta) and value % dt.timedelta(milliseconds=1):
        raise ValueError(f"{name} must be a whole number of milliseconds, got {value}")
    return to_millis(value, name)


def interval_millis(interval: Duration, name: str = "interval") -> int:
    """The interval in milliseconds; refuses anything shorter than a second."""
    interval_ms = _whole_millis(interval, name)
    if interval_ms < MIN_INTERVAL_MS:
        raise ValueError(
            f"{name} must be at least 1 second (Airflow cannot schedule more finely), got {interval_ms} ms"
        )
    return interval_ms


def shift_millis(interval_ms: int, shift: Duration, name: str = "shift") -> int:
    """The shift in milliseconds, normalised into `[0, interval)` as the engine does."""
    return normalize_shift(interval_ms, _whole_millis(shift, name))


def format_duration(ms: int) -> str:
    """A compact duration for people: 420000 -> '7m', 5400000 -> '1h30m', 0 -> '0s'."""
    if ms == 0:
        return "0s"
    sign, ms = ("-", -ms) if ms < 0 else ("", ms)
    parts = []
    for unit, size in _UNITS_MS:
        count, ms = divmod(ms, size)
        if count:
            parts.append(f"{count}{unit}")
    return sign + "".join(parts)


def epoch_millis(moment: dt.datetime) -> int:
    """Milliseconds since the Unix epoch of an aware datetime, in exact integer arithmetic."""
    if moment.tzinfo is None:
        raise ValueError(f"naive datetime {moment}: Airflow's datetimes are timezone-aware")
    return calendar.timegm(moment.utctimetuple()) * 1000 + moment.microsecond // 1000


def from_epoch_millis(ms: int) -> DateTime:
    """The UTC datetime (pendulum, as Airflow uses) at `ms` milliseconds since the Unix epoch."""
    return _EPOCH + dt.timedelta(milliseconds=ms)
