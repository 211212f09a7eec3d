"""Hopping windows with a user aggregation: count, sum and max of the temperature per sensor and window,
one final row per window (suppressed until it closes).

Native Spark's counterpart (bench/spark_bench.py): `groupBy(window(ts, size, advance), key)
.agg(count, sum, max)` in append mode after a watermark of the grace.
"""

from __future__ import annotations

import sys

import pyarrow as pa

from spark_jobs.spark.job import JobOption, with_option_defaults
from spark_jobs.spark.topics import TopicSchema
from spark_jobs.streams import BufferConfig, StreamsBuilder, Suppressed, TimeWindows, Topology
from spark_jobs.streams.timeutil import to_millis

JOB_MODULE = "bench.jobs.hopping_stats"
INPUT_TOPIC = "sensor-readings"
WINDOW_STATS = "window-stats"
FIELD = "temperature"

OPTIONS = [
    JobOption("window_size", 600_000, "hopping window size, ms"),
    JobOption("advance", 300_000, "how far each window starts after the previous one, ms"),
    JobOption("grace", 120_000, "how long a window accepts late readings after it ends, ms"),
]
STATS_SCHEMA = TopicSchema(
    key=pa.string(),
    value=pa.struct([("count", pa.int64()), ("sum", pa.float64()), ("max", pa.float64())]),
)
OUTPUT_TOPICS = {WINDOW_STATS: STATS_SCHEMA}


def _initial() -> dict:
    return {"count": 0, "sum": 0.0, "max": None}


def _add(_key, value, stats: dict) -> dict:
    reading = (value or {}).get(FIELD)
    if reading is None:
        return {**stats, "count": stats["count"] + 1}
    high = stats["max"]
    return {
        "count": stats["count"] + 1,
        "sum": stats["sum"] + reading,
        "max": reading if high is None or reading > high else high,
    }


def hopping(readings, window_size: int, advance: int, grace: int):
    """Readings grouped per sensor into hopping windows (the grouped, windowed stream)."""
    windows = TimeWindows.of_size_and_grace(window_size, grace).advance_by(advance)
    return readings.group_by_key().windowed_by(windows)


def finals(table):
    return table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))


@with_option_defaults(OPTIONS)
def build_topology(*, window_size, advance, grace) -> Topology:
    builder = StreamsBuilder()
    windowed = hopping(
        builder.stream(INPUT_TOPIC), to_millis(window_size), to_millis(advance), to_millis(grace)
    )
    finals(windowed.aggregate(_initial, _add)).to_stream().to(WINDOW_STATS)
    return builder.build()


def main(argv: list[str] | None = None) -> int:
    from spark_jobs.spark.cli import run_cli

    return run_cli(JOB_MODULE, __doc__.split("\n")[0], OPTIONS, argv)


if __name__ == "__main__":
    sys.exit(main())
