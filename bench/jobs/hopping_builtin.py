"""The hopping-window statistics of `bench.jobs.hopping_stats` with declared (built-in) aggregations
instead of a user function: the engine computes them without calling Python per record.
"""

from __future__ import annotations

import sys

import pyarrow as pa

from bench.jobs.hopping_stats import FIELD, INPUT_TOPIC, OPTIONS, WINDOW_STATS, finals, hopping
from spark_jobs.spark.job import with_option_defaults
from spark_jobs.spark.topics import TopicSchema, aggregate_struct
from spark_jobs.streams import Count, Max, StreamsBuilder, Sum, Topology
from spark_jobs.streams.timeutil import to_millis

JOB_MODULE = "bench.jobs.hopping_builtin"

__all__ = ["INPUT_TOPIC", "OPTIONS", "OUTPUT_TOPICS", "build_topology"]


DECLARED = {"count": Count(), "sum": Sum(FIELD), "max": Max(FIELD)}
OUTPUT_TOPICS = {WINDOW_STATS: TopicSchema(key=pa.string(), value=aggregate_struct(DECLARED))}


def declared_stats(windowed):
    """count, sum and max of the temperature, as the engine's declared aggregations."""
    return windowed.agg(**DECLARED)


@with_option_defaults(OPTIONS)
def build_topology(*, window_size, advance, grace) -> Topology:
    builder = StreamsBuilder()
    windowed = hopping(
        builder.stream(INPUT_TOPIC), to_millis(window_size), to_millis(advance), to_millis(grace)
    )
    finals(declared_stats(windowed)).to_stream().to(WINDOW_STATS)
    return builder.build()


def main(argv: list[str] | None = None) -> int:
    from spark_jobs.spark.cli import run_cli

    return run_cli(JOB_MODULE, __doc__.split("\n")[0], OPTIONS, argv)


if __name__ == "__main__":
    sys.exit(main())
