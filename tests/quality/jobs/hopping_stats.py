"""Temperature statistics per sensor in hopping windows (declared aggregations), their suppressed finals,
and each sensor's totals without windows.

A job module the project itself never ships: its output's suites come from its contract alone
(tests/spark/test_declared_aggregations_spark.py).
"""

from __future__ import annotations

import sys

import pyarrow as pa

from spark_jobs.spark.job import JobOption, with_option_defaults
from spark_jobs.spark.topics import TopicSchema, aggregate_struct
from spark_jobs.streams import (
    BufferConfig,
    Count,
    Max,
    Mean,
    Min,
    StreamsBuilder,
    Sum,
    Suppressed,
    TimeWindows,
    Topology,
)

JOB_MODULE = "tests.quality.jobs.hopping_stats"
INPUT_TOPIC = "readings"
OPTIONS = [
    JobOption("window_size", 120_000, "hopping window size, ms"),
    JobOption("advance", 40_000, "hop, ms"),
    JobOption("grace", 20_000, "grace, ms"),
]
STATS = {
    "readings": Count(),
    "total": Sum("temperature"),
    "low": Min("temperature"),
    "high": Max("temperature"),
    "mean": Mean("temperature"),
}
TOTALS = {"readings": Count(), "high": Max("temperature")}
_STATS = TopicSchema(key=pa.string(), value=aggregate_struct(STATS))
OUTPUT_TOPICS = {
    "reading-stats": _STATS,
    "stats-finals": _STATS,
    "sensor-totals": TopicSchema(key=pa.string(), value=aggregate_struct(TOTALS)),
}


@with_option_defaults(OPTIONS)
def build_topology(*, window_size, advance, grace) -> Topology:
    builder = StreamsBuilder()
    readings = builder.stream(INPUT_TOPIC)
    windows = TimeWindows.of_size_and_grace(window_size, grace).advance_by(advance)
    stats = readings.group_by_key().windowed_by(windows).agg(**STATS)
    stats.to_stream().to("reading-stats")
    finals = stats.suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream()
    finals.to("stats-finals")
    readings.group_by_key().agg(**TOTALS).to_stream().to("sensor-totals")
    return builder.build()


def main(argv: list[str] | None = None) -> int:
    from spark_jobs.spark.cli import run_cli

    return run_cli(JOB_MODULE, __doc__.split("\n")[0], OPTIONS, argv)


if __name__ == "__main__":
    sys.exit(main())
