"""The sensor-alerts topology on the TopologyTestDriver: what each topic gets, and when."""

from __future__ import annotations

import datetime as dt

import pytest

from spark_jobs.jobs import sensor_alerts
from spark_jobs.spark.cli import build_parser
from spark_jobs.streams import TopologyTestDriver

MIN = 60_000
T0 = 1_735_689_600_000  # 2025-01-01T00:00Z, on every grid used below


def _driver(**options) -> TopologyTestDriver:
    return TopologyTestDriver(sensor_alerts.build_topology(**options), initial_wall_clock_ms=T0)


def _pipe(driver, *readings):
    topic = driver.create_input_topic(sensor_alerts.INPUT_TOPIC)
    for key, ts in readings:
        topic.pipe_input(key, {"temperature": 20.0}, ts)


def _read(driver, topic):
    return driver.create_output_topic(topic).read_records_to_list()


def _windowed(records):
    return [(r.key.key, r.key.window.start, r.value, r.timestamp) for r in records]


def test_counts_every_update_and_finals_once_after_window_plus_grace():
    d = _driver()
    _pipe(d, ("a", T0 + 1000), ("a", T0 + 2000), ("b", T0 + 3000), ("a", T0 + 119_000))
    assert _windowed(_read(d, "window-counts")) == [
        ("a", T0, 1, T0 + 1000),
        ("a", T0, 2, T0 + 2000),
        ("b", T0, 1, T0 + 3000),
        ("a", T0, 3, T0 + 119_000),
    ]
    # Window [T0, T0+2min) closes when stream time reaches its end + 2 min grace, not before.
    _pipe(d, ("c", T0 + 4 * MIN - 1))
    assert _read(d, "window-finals") == []
    _pipe(d, ("c", T0 + 4 * MIN))
    assert _windowed(_read(d, "window-finals")) == [("a", T0, 3, T0 + 119_000), ("b", T0, 1, T0 + 3000)]
    # Both counts are below 4: both raise a low-activity alert, with the final count.
    assert _windowed(_read(d, "low-activity-alerts")) == [("a", T0, 3, T0 + 119_000), ("b", T0, 1, T0 + 3000)]


def test_busy_window_is_final_without_alert_and_late_reading_is_dropped():
    d = _driver()
    _pipe(d, *[("a", T0 + i * 1000) for i in range(5)], ("z", T0 + 4 * MIN))
    assert _windowed(_read(d, "window-finals")) == [("a", T0, 5, T0 + 4000)]
    assert _read(d, "low-activity-alerts") == []
    _pipe(d, ("a", T0 + 10))  # its window closed: dropped, counted, no update
    assert [r.value for r in _read(d, "window-counts")][-1] == 1  # z's count, nothing after it
    assert d.metrics()["dropped-records-total"] == 1


def test_summaries_fire_on_the_aligned_stream_time_grid_stamped_with_the_boundary():
    d = _driver(summary_interval=10 * MIN, summary_shift=2 * MIN)
    _pipe(
        d,
        ("a", T0 + 1 * MIN),
        ("b", T0 + 5 * MIN),
        ("a", T0 + 13 * MIN),
        ("a", T0 + 14 * MIN),
        ("c", T0 + 35 * MIN),
    )
    summaries = _read(d, "summaries")
    # Boundaries T0+2min+k*10min: the first due is the first boundary >= the first record (T0+2min).
    assert [r.timestamp for r in summaries] == [T0 + 2 * MIN, T0 + 12 * MIN, T0 + 32 * MIN]
    assert [r.value["records"] for r in summaries] == [2, 1, 2]  # b at 5 crossed the first boundary
    assert [r.value["period_end"] for r in summaries] == [r.timestamp for r in summaries]
    assert [r.value["period_start"] for r in summaries] == [None, T0 + 2 * MIN, T0 + 12 * MIN]
    assert {r.key for r in summaries} == {"partition-0"}


def test_silent_sensor_is_reported_once_per_episode():
    d = _driver(silence_check_interval=MIN, silence_horizon=5 * MIN)
    _pipe(d, ("a", T0), ("b", T0 + 4 * MIN))
    d.advance_wall_clock_time(6 * MIN)  # T0+6min: a is 6 min old, b 2 min
    first = _read(d, "silent-sensors")
    assert [(r.key, r.value["last_event_time"], r.timestamp) for r in first] == [("a", T0, T0 + 6 * MIN)]
    for _ in range(4):  # more checks: a is still silent, no new page; b goes silent once, when strictly older
        d.advance_wall_clock_time(MIN)
    assert [(r.key, r.timestamp) for r in _read(d, "silent-sensors")] == [("b", T0 + 10 * MIN)]
    _pipe(d, ("a", T0 + 2 * MIN))  # a late reading from long ago does not end a's episode
    d.advance_wall_clock_time(MIN)
    assert _read(d, "silent-sensors") == []
    _pipe(d, ("a", T0 + 10 * MIN))  # a is back ...
    d.advance_wall_clock_time(MIN)
    assert _read(d, "silent-sensors") == []
    d.advance_wall_clock_time(6 * MIN)  # ... and silent again: a new episode, a new alert
    alerts = _read(d, "silent-sensors")
    assert [(r.key, r.value["last_event_time"]) for r in alerts] == [("a", T0 + 10 * MIN)]
    assert alerts[0].value["silent_for"] == alerts[0].timestamp - (T0 + 10 * MIN)


def test_every_figure_is_an_option_with_the_same_default_on_the_command_line():
    parser = build_parser("sensor_alerts", "", sensor_alerts.OPTIONS)
    args = parser.parse_args(["--input", "i", "--output", "o", "--checkpoint", "c"])
    defaults = {o.name: getattr(args, o.name) for o in sensor_alerts.OPTIONS}
    assert defaults == {
        "window_size": 120_000,
        "grace": 120_000,
        "low_activity_threshold": 4,
        "summary_interval": 600_000,
        "summary_shift": 0,
        "silence_check_interval": 60_000,
        "silence_check_shift": 0,
        "silence_horizon": 300_000,
    }
    args = parser.parse_args(
        [
            "--input",
            "i",
            "--output",
            "o",
            "--checkpoint",
            "c",
            "--window-size",
            "5min",
            "--summary-shift",
            "-5",
            "--low-activity-threshold",
            "2",
        ]
    )
    assert (args.window_size, args.summary_shift, args.low_activity_threshold) == (300_000, -5, 2)


def test_options_accept_timedeltas_and_reject_unknown_names():
    d = TopologyTestDriver(sensor_alerts.build_topology(window_size=dt.timedelta(minutes=1), grace=0))
    _pipe(d, ("a", T0), ("a", T0 + MIN))
    assert _windowed(_read(d, "window-finals")) == [("a", T0, 1, T0)]
    with pytest.raises(TypeError, match="window_sise"):
        sensor_alerts.build_topology(window_sise=1)
