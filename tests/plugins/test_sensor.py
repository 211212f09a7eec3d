"""WallClockPunctuationSensor on the real clock, with 1-second intervals so each wait is under a second.

Poke mode polls from the worker; deferrable mode hands the wait to the standard DateTimeTrigger, which
is run here for real (its event is what resumes the task, as in the triggerer and in `dag.test()`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time

import pytest
from airflow.providers.standard.triggers.temporal import DateTimeTrigger
from airflow.sdk import timezone
from airflow.sdk.exceptions import TaskDeferred
from pipeline_airflow.sensors import WallClockPunctuationSensor


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def assert_boundary(result: dict, *, interval_ms: int, shift_ms: int, waited_from: int, woke_at: int):
    boundary = result["boundary_ms"]
    assert boundary % interval_ms == shift_ms, "on the grid k * interval + shift"
    assert waited_from <= boundary < waited_from + interval_ms, "the next boundary, not a later one"
    assert woke_at >= boundary, "did not return before the boundary"
    assert timezone.parse(result["boundary"]) == dt.datetime.fromtimestamp(boundary / 1000, dt.UTC)


async def first_event(trigger: DateTimeTrigger):
    async for event in trigger.run():
        return event
    raise AssertionError("the trigger ended without an event")


def test_poke_mode_returns_at_the_next_boundary():
    sensor = WallClockPunctuationSensor(
        task_id="wait", interval=1000, shift=dt.timedelta(milliseconds=250), poke_interval=0.02
    )
    started = now_ms()
    result = sensor.execute(context={})
    assert_boundary(result, interval_ms=1000, shift_ms=250, waited_from=started, woke_at=now_ms())


def test_deferrable_mode_defers_to_a_datetime_trigger_and_resumes_from_its_event():
    sensor = WallClockPunctuationSensor(
        task_id="wait", interval=dt.timedelta(seconds=1), shift=-400, deferrable=True
    )
    started = now_ms()
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute(context={})
    trigger = deferred.value.trigger
    assert isinstance(trigger, DateTimeTrigger)
    assert deferred.value.method_name == "execute_complete"
    assert now_ms() < trigger.moment.timestamp() * 1000, "deferred without waiting in the worker"

    event = asyncio.run(first_event(trigger))  # the real trigger: sleeps until its moment
    woke_at = now_ms()
    result = sensor.execute_complete(context={}, event=event.payload)
    assert_boundary(result, interval_ms=1000, shift_ms=600, waited_from=started, woke_at=woke_at)


def test_an_event_that_came_back_as_text_is_read_as_well():
    sensor = WallClockPunctuationSensor(task_id="wait", interval=60_000, deferrable=True)
    result = sensor.execute_complete(context={}, event="2024-01-01T00:10:00+00:00")
    assert result == {"boundary": "2024-01-01T00:10:00+00:00", "boundary_ms": 1_704_067_800_000}


def test_reschedule_mode_is_refused():
    with pytest.raises(ValueError, match="mode must be one of"):
        WallClockPunctuationSensor(task_id="wait", interval=60_000, mode="reschedule")


@pytest.mark.parametrize("interval", [0, 500, dt.timedelta(seconds=-1)])
def test_intervals_under_a_second_are_refused(interval):
    with pytest.raises(ValueError, match="interval must be at least 1 second"):
        WallClockPunctuationSensor(task_id="wait", interval=interval)
