"""Clicks per page in hopping windows, their suppressed finals, and the busy windows among them.

A job module the project itself never ships: the validation of its output must come from its contract
alone (tests/quality/test_own_job.py).
"""

from __future__ import annotations

import sys

import pyarrow as pa

from spark_jobs.spark.job import JobOption, with_option_defaults
from spark_jobs.spark.topics import TopicSchema
from spark_jobs.streams import BufferConfig, StreamsBuilder, Suppressed, TimeWindows, Topology

JOB_MODULE = "tests.quality.jobs.hopping_clicks"
INPUT_TOPICS = ("clicks",)
OPTIONS = [
    JobOption("window_size", 180_000, "hopping window size, ms"),
    JobOption("advance", 60_000, "hop, ms"),
    JobOption("grace", 30_000, "grace, ms"),
    JobOption("busy_at", 5, "a final count at or above this is a busy window", "int"),
]
_COUNT = TopicSchema(key=pa.string(), value=pa.int64())
OUTPUT_TOPICS = {"click-counts": _COUNT, "click-finals": _COUNT, "busy-windows": _COUNT}


@with_option_defaults(OPTIONS)
def build_topology(*, window_size, advance, grace, busy_at) -> Topology:
    builder = StreamsBuilder()
    windows = TimeWindows.of_size_and_grace(window_size, grace).advance_by(advance)
    counts = builder.stream("clicks").group_by_key().windowed_by(windows).count()
    counts.to_stream().to("click-counts")
    finals = counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream()
    finals.to("click-finals")
    finals.filter(lambda _key, count: count >= busy_at).to("busy-windows")
    return builder.build()


def main(argv: list[str] | None = None) -> int:
    from spark_jobs.spark.cli import run_cli

    return run_cli(JOB_MODULE, __doc__.split("\n")[0], OPTIONS, argv)


if __name__ == "__main__":
    sys.exit(main())
