"""AlignedIntervalTimetable: runs on the epoch-aligned grid `k * interval + shift`, with an injected clock.

Expected boundaries are written out by hand (worked out from the epoch, not from the code under test):
every 7 minutes at +3 the boundaries around 2024-01-01 are 23:57, 00:04, 00:11, 00:18, ...; every
90 minutes at +20 they are 22:50, 00:20, 01:50, 03:20, ...; every 25 hours, 2023-12-31T22:00 then
2024-01-01T23:00.
"""

from __future__ import annotations

import datetime as dt
import json

import pendulum
import pytest
from airflow.timetables.base import DagRunInfo, DataInterval, TimeRestriction
from pipeline_airflow.timetables import AlignedIntervalTimetable

MIN = dt.timedelta(minutes=1)


def at(text: str) -> pendulum.DateTime:
    return pendulum.parse(text, tz="UTC")


def interval(start: str, end: str) -> DataInterval:
    return DataInterval(at(start), at(end))


def timetable(every: dt.timedelta, shift: dt.timedelta = dt.timedelta(0), now: str = "2024-01-01T00:15:30"):
    return AlignedIntervalTimetable(every, shift, clock=lambda: at(now))


def next_run(tt, last: DataInterval | None, *, catchup: bool, start: str | None = "2023-06-01", end=None):
    restriction = TimeRestriction(
        earliest=at(start) if start else None, latest=at(end) if end else None, catchup=catchup
    )
    return tt.next_dagrun_info(last_automated_data_interval=last, restriction=restriction)


def runs(tt, count: int, *, catchup: bool, start: str) -> list[DataInterval]:
    """The data intervals of the first `count` scheduled runs, as the scheduler would ask for them."""
    found, last = [], None
    for _ in range(count):
        info = next_run(tt, last, catchup=catchup, start=start)
        found.append(info.data_interval)
        last = info.data_interval
    return found


class TestFirstRun:
    def test_without_catchup_covers_the_latest_complete_interval(self):
        info = next_run(timetable(7 * MIN, 3 * MIN, now="2024-01-01T00:15:30"), None, catchup=False)
        assert info == DagRunInfo.interval(at("2024-01-01T00:04"), at("2024-01-01T00:11"))
        assert info.run_after == at("2024-01-01T00:11")

    def test_without_catchup_at_a_boundary_covers_the_interval_ending_there(self):
        info = next_run(timetable(7 * MIN, 3 * MIN, now="2024-01-01T00:11:00"), None, catchup=False)
        assert info.data_interval == interval("2024-01-01T00:04", "2024-01-01T00:11")

    def test_without_catchup_or_start_date_still_starts(self):
        info = next_run(timetable(7 * MIN, 3 * MIN), None, catchup=False, start=None)
        assert info.data_interval == interval("2024-01-01T00:04", "2024-01-01T00:11")

    def test_with_catchup_starts_at_the_first_boundary_after_the_start_date(self):
        info = next_run(timetable(7 * MIN, 3 * MIN), None, catchup=True, start="2024-01-01T00:00")
        assert info.data_interval == interval("2024-01-01T00:04", "2024-01-01T00:11")

    def test_with_catchup_and_no_start_date_nothing_is_scheduled(self):
        assert next_run(timetable(7 * MIN, 3 * MIN), None, catchup=True, start=None) is None

    def test_start_date_in_the_future_is_honoured_without_catchup(self):
        info = next_run(timetable(7 * MIN, 3 * MIN), None, catchup=False, start="2024-01-01T00:30")
        assert info.data_interval == interval("2024-01-01T00:32", "2024-01-01T00:39")


class TestFollowingRuns:
    def test_each_run_starts_where_the_last_ended(self):
        last = interval("2024-01-01T00:04", "2024-01-01T00:11")
        info = next_run(timetable(7 * MIN, 3 * MIN, now="2024-01-01T00:11:01"), last, catchup=False)
        assert info.data_interval == interval("2024-01-01T00:11", "2024-01-01T00:18")

    def test_after_a_pause_without_catchup_missed_intervals_collapse_into_the_latest(self):
        last = interval("2024-01-01T00:04", "2024-01-01T00:11")
        resumed = timetable(7 * MIN, 3 * MIN, now="2024-01-01T03:00:10")
        info = next_run(resumed, last, catchup=False)
        assert info.data_interval == interval("2024-01-01T02:52", "2024-01-01T02:59")

    def test_after_a_pause_with_catchup_every_missed_interval_runs(self):
        last = interval("2024-01-01T00:04", "2024-01-01T00:11")
        resumed = timetable(7 * MIN, 3 * MIN, now="2024-01-01T03:00:10")
        info = next_run(resumed, last, catchup=True)
        assert info.data_interval == interval("2024-01-01T00:11", "2024-01-01T00:18")

    def test_nothing_after_the_end_date(self):
        last = interval("2024-01-01T00:04", "2024-01-01T00:11")
        tt = timetable(7 * MIN, 3 * MIN)
        assert next_run(tt, last, catchup=True, end="2024-01-01T00:10") is None
        assert next_run(tt, last, catchup=True, end="2024-01-01T00:11") is not None

    def test_after_a_schedule_change_runs_realign_and_keep_moving_forward(self):
        # The last run was made every 10 minutes; now the grid is every hour: previous_aligned(00:10)
        # would be 00:00, the last run's own start, so the next run starts at the next boundary.
        last = interval("2024-01-01T00:00", "2024-01-01T00:10")
        info = next_run(timetable(60 * MIN, now="2024-01-01T00:10:30"), last, catchup=True)
        assert info.data_interval == interval("2024-01-01T01:00", "2024-01-01T02:00")
        # From 10 minutes to 7 at +3: the interval ending at 00:11 overlaps the last one rather than
        # leaving 00:10-00:11 uncovered.
        info = next_run(timetable(7 * MIN, 3 * MIN, now="2024-01-01T00:11:30"), last, catchup=True)
        assert info.data_interval == interval("2024-01-01T00:04", "2024-01-01T00:11")


@pytest.mark.parametrize(
    ("every", "shift", "expected_ends"),
    [
        # 7 minutes does not divide an hour: the grid runs through hours unbroken.
        (7 * MIN, 3 * MIN, ["00:11", "00:18", "00:25", "00:32", "00:39", "00:46", "00:53", "01:00", "01:07"]),
        # 90 minutes does not divide an hour: "every 90 minutes at +20".
        (90 * MIN, 20 * MIN, ["01:50", "03:20", "04:50"]),
    ],
)
def test_intervals_that_do_not_divide_an_hour_stay_on_the_epoch_grid(every, shift, expected_ends):
    found = runs(timetable(every, shift), len(expected_ends), catchup=True, start="2024-01-01T00:00:01")
    assert [i.end.strftime("%H:%M") for i in found] == expected_ends
    assert all(i.end - i.start == every for i in found)


def test_an_interval_that_does_not_divide_a_day_stays_on_the_epoch_grid():
    found = runs(timetable(dt.timedelta(hours=25)), 3, catchup=True, start="2023-12-31T21:00")
    assert [i.start for i in found] == [
        at("2023-12-31T22:00"),
        at("2024-01-01T23:00"),
        at("2024-01-03T00:00"),
    ]


class TestShift:
    @pytest.mark.parametrize("shift", [12 * MIN, 22 * MIN, -8 * MIN, -18 * MIN])
    def test_shifts_of_an_interval_or_more_and_negative_shifts_are_normalised(self, shift):
        normalised = timetable(10 * MIN, 2 * MIN)
        tt = timetable(10 * MIN, shift)
        assert tt == normalised
        assert tt.shift == 2 * MIN
        assert tt.summary == "every 10m, +2m"
        assert next_run(tt, None, catchup=False) == next_run(normalised, None, catchup=False)

    def test_a_shift_of_exactly_one_interval_is_no_shift(self):
        assert timetable(10 * MIN, 10 * MIN).summary == "every 10m"

    def test_milliseconds_are_accepted_like_timedeltas(self):
        assert AlignedIntervalTimetable(420_000, 180_000) == AlignedIntervalTimetable(7 * MIN, 3 * MIN)


class TestManualRuns:
    def test_a_manual_run_covers_the_latest_complete_interval(self):
        tt = timetable(7 * MIN, 3 * MIN)
        expected = interval("2024-01-01T00:04", "2024-01-01T00:11")
        assert tt.infer_manual_data_interval(run_after=at("2024-01-01T00:15:30")) == expected
        assert tt.infer_manual_data_interval(run_after=at("2024-01-01T00:11:00")) == expected

    def test_times_in_other_zones_are_the_same_instants(self):
        tt = timetable(7 * MIN, 3 * MIN)
        paris = pendulum.parse("2024-01-01T01:15:30", tz="Europe/Paris")
        assert tt.infer_manual_data_interval(run_after=paris) == interval(
            "2024-01-01T00:04", "2024-01-01T00:11"
        )


class TestDescription:
    @pytest.mark.parametrize(
        ("every", "shift", "summary"),
        [
            (7 * MIN, 3 * MIN, "every 7m, +3m"),
            (90 * MIN, 20 * MIN, "every 1h30m, +20m"),
            (10 * MIN, dt.timedelta(0), "every 10m"),
            (dt.timedelta(days=1), dt.timedelta(hours=6), "every 1d, +6h"),
            (dt.timedelta(seconds=90), dt.timedelta(milliseconds=1500), "every 1m30s, +1s500ms"),
        ],
    )
    def test_summary(self, every, shift, summary):
        assert timetable(every, shift).summary == summary

    def test_description_names_the_grid(self):
        description = timetable(7 * MIN, 3 * MIN).description
        assert "k × 7m + 3m" in description and "epoch" in description


class TestSerialization:
    def test_round_trip_through_json(self):
        tt = AlignedIntervalTimetable(90 * MIN, -70 * MIN)
        data = json.loads(json.dumps(tt.serialize()))
        assert data == {"interval_ms": 5_400_000, "shift_ms": 1_200_000}
        back = AlignedIntervalTimetable.deserialize(data)
        assert back == tt and back.summary == "every 1h30m, +20m"


class TestInvalidArguments:
    @pytest.mark.parametrize(
        ("every", "error", "message"),
        [
            (dt.timedelta(0), ValueError, "interval must be at least 1 second"),
            (-10 * MIN, ValueError, "interval must be at least 1 second"),
            (999, ValueError, "interval must be at least 1 second"),
            (dt.timedelta(seconds=1, microseconds=500), ValueError, "whole number of milliseconds"),
            ("10m", TypeError, "interval must be an int of milliseconds or a timedelta"),
            (600.0, TypeError, "interval must be an int of milliseconds or a timedelta"),
            (True, TypeError, "interval must be an int of milliseconds or a timedelta"),
            (None, TypeError, "interval must be an int of milliseconds or a timedelta"),
        ],
    )
    def test_bad_intervals_are_refused(self, every, error, message):
        with pytest.raises(error, match=message):
            AlignedIntervalTimetable(every)

    def test_bad_shifts_are_refused(self):
        with pytest.raises(TypeError, match="shift must be an int of milliseconds or a timedelta"):
            AlignedIntervalTimetable(10 * MIN, "2m")
