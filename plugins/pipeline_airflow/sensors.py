"""A sensor that waits for the next epoch-aligned wall-clock boundary.

It is the Airflow side of WALL_CLOCK_TIME punctuation with `time_shift`: the boundary it waits for is
`next_aligned(now, interval, shift)`, the engine's own computation. Deferrable, it hands the wait to a
`DateTimeTrigger` in the triggerer and holds no worker slot; in poke mode it holds one and polls.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.providers.standard.triggers.temporal import DateTimeTrigger
from airflow.sdk import BaseSensorOperator, PokeReturnValue, timezone

from pipeline_airflow.timing import (
    epoch_millis,
    format_duration,
    from_epoch_millis,
    interval_millis,
    shift_millis,
)
from spark_jobs.streams.timeutil import Duration, next_aligned


def boundary_xcom(boundary_ms: int) -> dict[str, Any]:
    """What the sensor returns (and so pushes to XCom): the boundary as ISO 8601 text and epoch ms."""
    return {"boundary": from_epoch_millis(boundary_ms).isoformat(), "boundary_ms": boundary_ms}


class WallClockPunctuationSensor(BaseSensorOperator):
    """Succeeds at the first boundary `k * interval + shift` (epoch milliseconds) at or after its start.

    :param interval: `timedelta` or int milliseconds, at least one second.
    :param shift: `timedelta` or int milliseconds; taken modulo `interval`.
    :param deferrable: wait in the triggerer (a `DateTimeTrigger`) instead of poking from a worker.

    Returns `{"boundary": ISO 8601 text, "boundary_ms": epoch ms}`, pushed to XCom as `return_value`.
    """

    # Reschedule mode would lose the boundary between tries; deferrable mode is the slot-free wait.
    valid_modes = ["poke"]
    ui_color = "#d8e9f5"

    def __init__(
        self,
        *,
        interval: Duration,
        shift: Duration = 0,
        deferrable: bool = False,
        poke_interval: dt.timedelta | float = 1.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(poke_interval=poke_interval, **kwargs)
        self.interval_ms = interval_millis(interval)
        self.shift_ms = shift_millis(self.interval_ms, shift)
        self.deferrable = deferrable
        self._boundary_ms: int | None = None

    def execute(self, context: Any) -> Any:
        # The boundary is fixed once, when the task starts; every poke compares the clock with it.
        self._boundary_ms = next_aligned(epoch_millis(timezone.utcnow()), self.interval_ms, self.shift_ms)
        boundary = from_epoch_millis(self._boundary_ms)
        self.log.info(
            "Waiting for the wall-clock boundary %s (every %s, +%s)",
            boundary.isoformat(),
            format_duration(self.interval_ms),
            format_duration(self.shift_ms),
        )
        if self.deferrable:
            self.defer(
                trigger=DateTimeTrigger(moment=boundary),
                method_name="execute_complete",
                timeout=dt.timedelta(seconds=self.timeout),
            )
        return super().execute(context)

    def poke(self, context: Any) -> bool | PokeReturnValue:
        if self._boundary_ms is None:
            raise RuntimeError("poke() before execute(): the boundary is fixed when the task starts")
        if epoch_millis(timezone.utcnow()) < self._boundary_ms:
            return False
        return PokeReturnValue(is_done=True, xcom_value=boundary_xcom(self._boundary_ms))

    def execute_complete(self, context: Any, event: Any = None) -> dict[str, Any]:
        """Resumed after the trigger fired; its event is the boundary (`dag.test()` passes no kwargs)."""
        if isinstance(event, str):
            event = timezone.parse(event)
        if not isinstance(event, dt.datetime):
            raise TypeError(f"expected the trigger's moment as the event, got {event!r}")
        boundary_ms = epoch_millis(event)
        self.log.info("Wall-clock boundary %s reached", from_epoch_millis(boundary_ms).isoformat())
        return boundary_xcom(boundary_ms)
