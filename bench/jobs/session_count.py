"""Readings counted per sensor and session (a session closes after a minute without readings): every
update of a session's count goes to the output topic, and a session merged into a later one is retracted
with a tombstone (a null count), as Kafka Streams' session windows emit them.
"""

from __future__ import annotations

import sys

import pyarrow as pa

from spark_jobs.spark.job import JobOption, with_option_defaults
from spark_jobs.spark.topics import TopicSchema
from spark_jobs.streams import SessionWindows, StreamsBuilder, Topology
from spark_jobs.streams.timeutil import to_millis

JOB_MODULE = "bench.jobs.session_count"
INPUT_TOPIC = "sensor-readings"
SESSION_COUNTS = "session-counts"

OPTIONS = [
    JobOption("gap", 60_000, "inactivity that closes a session, ms"),
    JobOption("grace", 120_000, "how long a session accepts late readings after it ends, ms"),
]
OUTPUT_TOPICS = {SESSION_COUNTS: TopicSchema(key=pa.string(), value=pa.int64())}


@with_option_defaults(OPTIONS)
def build_topology(*, gap, grace) -> Topology:
    builder = StreamsBuilder()
    windows = SessionWindows.of_inactivity_gap_and_grace(to_millis(gap), to_millis(grace))
    builder.stream(INPUT_TOPIC).group_by_key().windowed_by(windows).count().to_stream().to(SESSION_COUNTS)
    return builder.build()


def main(argv: list[str] | None = None) -> int:
    from spark_jobs.spark.cli import run_cli

    return run_cli(JOB_MODULE, __doc__.split("\n")[0], OPTIONS, argv)


if __name__ == "__main__":
    sys.exit(main())
