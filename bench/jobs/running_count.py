"""A running count per sensor without windows (`group_by_key().count()`, a KTable): every update of a
sensor's count goes to the output topic.

Native Spark's counterpart (bench/spark_bench.py): `groupBy(key).count()` in update mode into
`foreachBatch`, which writes each micro-batch's updated counts to Parquet.
"""

from __future__ import annotations

import sys

import pyarrow as pa

from spark_jobs.spark.topics import TopicSchema
from spark_jobs.streams import StreamsBuilder, Topology

JOB_MODULE = "bench.jobs.running_count"
INPUT_TOPIC = "sensor-readings"
RUNNING_COUNTS = "running-counts"
OPTIONS: list = []
OUTPUT_TOPICS = {RUNNING_COUNTS: TopicSchema(key=pa.string(), value=pa.int64())}


def build_topology() -> Topology:
    builder = StreamsBuilder()
    builder.stream(INPUT_TOPIC).group_by_key().count().to_stream().to(RUNNING_COUNTS)
    return builder.build()


def main(argv: list[str] | None = None) -> int:
    from spark_jobs.spark.cli import run_cli

    return run_cli(JOB_MODULE, __doc__.split("\n")[0], OPTIONS, argv)


if __name__ == "__main__":
    sys.exit(main())
