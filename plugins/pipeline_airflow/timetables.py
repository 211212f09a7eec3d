"""A timetable that runs at epoch-aligned boundaries of any interval, with a shift.

Cron cannot say "every 7 minutes at +3" (7 does not divide an hour) and Airflow's delta timetables
align to the start date, not to the epoch. This timetable puts its runs on the same grid as the
engine's WALL_CLOCK_TIME punctuation: boundaries `k * interval + shift` milliseconds since the Unix
epoch, computed by `spark_jobs.streams.timeutil.next_aligned`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from airflow.timetables.base import DagRunInfo, DataInterval, TimeRestriction, Timetable
from pendulum import DateTime

from pipeline_airflow.timing import (
    epoch_millis,
    format_duration,
    from_epoch_millis,
    interval_millis,
    shift_millis,
)
from spark_jobs.streams.timeutil import Duration, next_aligned, previous_aligned


def _system_clock() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class AlignedIntervalTimetable(Timetable):
    """Runs at `k * interval + shift` from the epoch; each run covers `[boundary - interval, boundary)`.

    - `interval`: a `timedelta` or an int of milliseconds, at least one second. It need not divide an
      hour or a day.
    - `shift`: same types, any sign or size; it is taken modulo the interval, as the engine does.
    - With `catchup=False` the first run, and the first after a pause, covers the latest complete
      interval: missed intervals collapse into one run, as missed WALL_CLOCK_TIME punctuations do.
      With `catchup=True` every interval from the start date on gets its run.
    - `clock` (tests only, not serialized) returns the current time for `catchup=False`.
    """

    def __init__(
        self,
        interval: Duration,
        shift: Duration = 0,
        *,
        clock: Callable[[], dt.datetime] | None = None,
    ) -> None:
        self.interval_ms = interval_millis(interval)
        self.shift_ms = shift_millis(self.interval_ms, shift)
        self._clock = clock or _system_clock
        # Shown by the UI next to the summary.
        self.description = (
            f"Every {format_duration(self.interval_ms)} at the boundaries k × {format_duration(self.interval_ms)}"
            f" + {format_duration(self.shift_ms)} since the Unix epoch (UTC); each run covers the"
            " interval that ends at its boundary"
        )

    @property
    def interval(self) -> dt.timedelta:
        return dt.timedelta(milliseconds=self.interval_ms)

    @property
    def shift(self) -> dt.timedelta:
        return dt.timedelta(milliseconds=self.shift_ms)

    @property
    def summary(self) -> str:
        summary = f"every {format_duration(self.interval_ms)}"
        return f"{summary}, +{format_duration(self.shift_ms)}" if self.shift_ms else summary

    def __repr__(self) -> str:
        return f"{type(self).__name__}(interval={self.interval!r}, shift={self.shift!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AlignedIntervalTimetable):
            return NotImplemented
        return (self.interval_ms, self.shift_ms) == (other.interval_ms, other.shift_ms)

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.interval_ms, self.shift_ms))

    def serialize(self) -> dict[str, Any]:
        return {"interval_ms": self.interval_ms, "shift_ms": self.shift_ms}

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> AlignedIntervalTimetable:
        return cls(data["interval_ms"], data["shift_ms"])

    def _interval_ending_at(self, boundary_ms: int) -> DataInterval:
        return DataInterval(
            start=from_epoch_millis(boundary_ms - self.interval_ms), end=from_epoch_millis(boundary_ms)
        )

    def infer_manual_data_interval(self, *, run_after: DateTime) -> DataInterval:
        """A manual run covers the latest complete interval at the time it is triggered."""
        return self._interval_ending_at(
            previous_aligned(epoch_millis(run_after), self.interval_ms, self.shift_ms)
        )

    def next_dagrun_info(
        self,
        *,
        last_automated_data_interval: DataInterval | None,
        restriction: TimeRestriction,
    ) -> DagRunInfo | None:
        # Everything below is the start of a data interval, in epoch milliseconds.
        earliest = None
        if restriction.earliest is not None:
            earliest = next_aligned(epoch_millis(restriction.earliest), self.interval_ms, self.shift_ms)
        if not restriction.catchup:
            latest_complete = previous_aligned(epoch_millis(self._clock()), self.interval_ms, self.shift_ms)
            latest_complete -= self.interval_ms
            earliest = latest_complete if earliest is None else max(earliest, latest_complete)

        if last_automated_data_interval is None:
            if earliest is None:  # catchup without a start date: nothing to start from
                return None
            start = earliest
        else:
            last_start = epoch_millis(last_automated_data_interval.start)
            # Continue where the last run ended; previous_aligned re-aligns runs made under another
            # interval or shift, and the data intervals must keep moving forward.
            start = previous_aligned(
                epoch_millis(last_automated_data_interval.end), self.interval_ms, self.shift_ms
            )
            if start <= last_start:
                start = next_aligned(last_start + 1, self.interval_ms, self.shift_ms)
            if earliest is not None:
                start = max(start, earliest)

        if restriction.latest is not None and start > epoch_millis(restriction.latest):
            return None
        return DagRunInfo.interval(
            start=from_epoch_millis(start), end=from_epoch_millis(start + self.interval_ms)
        )
