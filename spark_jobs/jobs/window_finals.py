"""The windowed count + suppress path of sensor alerts alone: one final count per sensor and window.

It is what Spark's native `withWatermark + groupBy(window) + count` in append mode computes, so the
benchmark (`bench/spark_bench.py`) runs both on the same files. Same options and command line as
sensor_alerts for the two figures it has.
"""

from __future__ import annotations

import sys

from spark_jobs.jobs.sensor_alerts import (
    INPUT_TOPIC,
    WINDOW_FINALS,
    final_counts,
    windowed_counts,
)
from spark_jobs.jobs.sensor_alerts import (
    OUTPUT_TOPICS as _SENSOR_ALERTS_TOPICS,
)
from spark_jobs.spark.job import JobOption, with_option_defaults
from spark_jobs.streams import StreamsBuilder, Topology
from spark_jobs.streams.timeutil import to_millis

JOB_MODULE = "spark_jobs.jobs.window_finals"

__all__ = ["INPUT_TOPIC", "OUTPUT_TOPICS", "OPTIONS", "build_topology"]

OPTIONS = [
    JobOption("window_size", 120_000, "tumbling window size, ms"),
    JobOption("grace", 120_000, "how long a window accepts late readings after it ends, ms"),
]
OUTPUT_TOPICS = {WINDOW_FINALS: _SENSOR_ALERTS_TOPICS[WINDOW_FINALS]}


@with_option_defaults(OPTIONS)
def build_topology(*, window_size, grace) -> Topology:
    builder = StreamsBuilder()
    counts = windowed_counts(builder.stream(INPUT_TOPIC), to_millis(window_size), to_millis(grace))
    final_counts(counts).to_stream().to(WINDOW_FINALS)
    return builder.build()


def main(argv: list[str] | None = None) -> int:
    from spark_jobs.spark.cli import run_cli

    return run_cli(JOB_MODULE, __doc__.split("\n")[0], OPTIONS, argv)


if __name__ == "__main__":
    sys.exit(main())
