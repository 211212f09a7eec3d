"""Wall-clock markers: one line per partition, written once per value, atomically; the ticker."""

from __future__ import annotations

import time

from spark_jobs.spark import wall_clock
from spark_jobs.spark.cli import parse_wall_clock
from spark_jobs.spark.job import parse_duration_ms


def test_marker_names_every_partition_and_is_written_once(tmp_path):
    path = wall_clock.write_marker(tmp_path, 1_700_000_000_000, 3)
    assert path is not None
    assert wall_clock.parse_marker_file(path.read_bytes()) == {p: [1_700_000_000_000] for p in range(3)}
    # A restarted scheduled run writes the same value again: no second marker.
    assert wall_clock.write_marker(tmp_path, 1_700_000_000_000, 3) is None
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_marker_names_sort_in_time_order(tmp_path):
    names = [wall_clock.marker_path(tmp_path, t).name for t in (9, 10, 1_700_000_000_000)]
    assert names == sorted(names)


def test_ticker_writes_increasing_markers_until_stopped(tmp_path):
    clock = iter(range(1000, 10**6, 7))
    ticker = wall_clock.WallClockTicker(tmp_path, 2, tick_ms=20, clock=lambda: next(clock)).start()
    time.sleep(0.3)
    ticker.stop()
    count = len(list(tmp_path.iterdir()))
    assert count >= 3
    values = [wall_clock.parse_marker_file(p.read_bytes())[1][0] for p in sorted(tmp_path.iterdir())]
    assert values == sorted(values) and len(set(values)) == len(values)
    time.sleep(0.1)
    assert len(list(tmp_path.iterdir())) == count


def test_command_line_times_and_durations():
    assert parse_wall_clock("2025-01-01T00:10:00+00:00") == 1_735_690_200_000
    assert parse_wall_clock("2025-01-01T00:10:00Z") == 1_735_690_200_000
    assert parse_wall_clock("2025-01-01T00:10:00") == 1_735_690_200_000  # naive = UTC
    assert parse_wall_clock("1735690200000") == 1_735_690_200_000
    assert [parse_duration_ms(t) for t in ("120000", "120s", "2min", "2m", "1h", "-5")] == [
        120_000,
        120_000,
        120_000,
        120_000,
        3_600_000,
        -5,
    ]
