"""Sensor alerts: the alerting application of Kafka's Suppress design (KIP-328), on the project's engine.

Topics, from the readings of `sensor-readings` (key = sensor id):

- `window-counts`: readings per sensor in tumbling windows (2 min, 2 min grace), every update;
- `window-finals`: the same counts, suppressed until the window closes: one final count per window;
- `low-activity-alerts`: the final counts below 4;
- `summaries`: per task, at every 10-minute boundary of stream time (aligned STREAM_TIME punctuation),
  what the task saw since its previous summary, stamped with the boundary;
- `silent-sensors`: at every minute of wall-clock time (aligned WALL_CLOCK_TIME punctuation), the
  sensors whose latest event time is more than 5 minutes older than the wall clock, once per silence
  episode (a reading within the horizon ends the episode).

Every figure is an option (`build_topology(**options)` and the same `--flag`).

    python -m spark_jobs.jobs.sensor_alerts --input DIR --output DIR --checkpoint DIR \\
        [--trigger available-now|continuous] [--max-files-per-trigger N] [--wall-clock ISO8601] ...
    spark-submit spark_jobs/jobs/sensor_alerts.py ...   (with PYTHONPATH = the repository root)
"""

from __future__ import annotations

import sys

import pyarrow as pa

from spark_jobs.spark.job import JobOption, with_option_defaults
from spark_jobs.spark.topics import TopicSchema
from spark_jobs.streams import (
    BufferConfig,
    Processor,
    PunctuationType,
    Record,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    To,
    Topology,
)
from spark_jobs.streams.timeutil import previous_aligned, to_millis

# Executors import the job by this name, also when spark-submit runs this file as __main__.
JOB_MODULE = "spark_jobs.jobs.sensor_alerts"

INPUT_TOPIC = "sensor-readings"
WINDOW_COUNTS = "window-counts"
WINDOW_FINALS = "window-finals"
LOW_ACTIVITY_ALERTS = "low-activity-alerts"
SUMMARIES = "summaries"
SILENT_SENSORS = "silent-sensors"

OPTIONS = [
    JobOption("window_size", 120_000, "tumbling window size, ms"),
    JobOption("grace", 120_000, "how long a window accepts late readings after it ends, ms"),
    JobOption("low_activity_threshold", 4, "a final count below this raises a low-activity alert", "int"),
    JobOption("summary_interval", 600_000, "stream-time interval of the per-task summaries, ms"),
    JobOption("summary_shift", 0, "shift of the summaries' boundaries from the epoch grid, ms"),
    JobOption("silence_check_interval", 60_000, "wall-clock interval of the silence check, ms"),
    JobOption("silence_check_shift", 0, "shift of the silence checks from the epoch grid, ms"),
    JobOption(
        "silence_horizon", 300_000, "a sensor is silent when its latest reading is older than this, ms"
    ),
]

# Rules across topics that the topology cannot state (alerts are finals below the threshold, one alert
# per silence episode, summaries strictly ordered per task); validation adds them to the derived ones.
QUALITY_RULES = "sensor_alerts_rules.json"

_COUNT = TopicSchema(key=pa.string(), value=pa.int64())
OUTPUT_TOPICS = {
    WINDOW_COUNTS: _COUNT,
    WINDOW_FINALS: _COUNT,
    LOW_ACTIVITY_ALERTS: _COUNT,
    SUMMARIES: TopicSchema(
        key=pa.string(),
        value=pa.struct(
            [
                ("partition", pa.int64()),
                ("period_start", pa.int64()),
                ("period_end", pa.int64()),
                ("records", pa.int64()),
                ("sensors", pa.int64()),
                ("max_event_time", pa.int64()),
            ]
        ),
    ),
    SILENT_SENSORS: TopicSchema(
        key=pa.string(),
        value=pa.struct(
            [("last_event_time", pa.int64()), ("silent_for", pa.int64()), ("wall_clock", pa.int64())]
        ),
    ),
}


class TaskSummary(Processor):
    """What one task saw since its previous summary, forwarded at each aligned stream-time boundary.

    The punctuation fires at the first stream time >= a boundary; the summary is stamped with that
    boundary (the largest boundary <= the punctuation time), and covers the records processed since the
    previous summary, including the one that moved stream time past the boundary.
    """

    def __init__(self, interval: int, shift: int):
        self.interval = interval
        self.shift = shift
        self.period_start: int | None = None
        self.records = 0
        self.sensors: set[str] = set()
        self.max_event_time = -1

    def init(self, context) -> None:
        self.context = context
        context.schedule(self.interval, PunctuationType.STREAM_TIME, self.emit_summary, time_shift=self.shift)

    def promised_timestamp_grid(self) -> tuple[int, int]:
        return self.interval, self.shift

    def process(self, record: Record) -> None:
        self.records += 1
        self.sensors.add(record.key)
        if record.timestamp > self.max_event_time:
            self.max_event_time = record.timestamp

    def emit_summary(self, now: int) -> None:
        boundary = previous_aligned(now, self.interval, self.shift)
        partition = self.context.partition()
        summary = {
            "partition": partition,
            "period_start": self.period_start,
            "period_end": boundary,
            "records": self.records,
            "sensors": len(self.sensors),
            "max_event_time": self.max_event_time,
        }
        self.context.forward(Record(f"partition-{partition}", summary), To.all().with_timestamp(boundary))
        self.period_start = boundary
        self.records = 0
        self.sensors = set()


class SilenceDetector(Processor):
    """Alerts once per silence episode for each sensor whose latest event time is older than the horizon.

    Checked at aligned wall-clock times. An episode ends when a reading arrives that is within the
    horizon of the wall clock at that moment; a late reading from long ago does not end it, so on-call is
    not paged again for a sensor that never came back.
    """

    def __init__(self, interval: int, shift: int, horizon: int):
        self.interval = interval
        self.shift = shift
        self.horizon = horizon
        self.latest: dict[str, int] = {}
        self.alerted: set[str] = set()

    def init(self, context) -> None:
        self.context = context
        context.schedule(self.interval, PunctuationType.WALL_CLOCK_TIME, self.check, time_shift=self.shift)

    def process(self, record: Record) -> None:
        sensor, timestamp = record.key, record.timestamp
        if timestamp > self.latest.get(sensor, -1):
            self.latest[sensor] = timestamp
        if sensor in self.alerted and timestamp >= self.context.wall_clock_time() - self.horizon:
            self.alerted.discard(sensor)

    def check(self, now: int) -> None:
        cutoff = now - self.horizon
        for sensor in sorted(self.latest):  # sorted: output order must not depend on dict history
            last = self.latest[sensor]
            if last < cutoff:
                if sensor not in self.alerted:
                    self.alerted.add(sensor)
                    self.context.forward(
                        Record(sensor, {"last_event_time": last, "silent_for": now - last, "wall_clock": now})
                    )
            else:
                self.alerted.discard(sensor)


def windowed_counts(readings, window_size: int, grace: int):
    """Readings per sensor and tumbling window (a KTable with Windowed keys); shared with the benchmark."""
    return readings.group_by_key().windowed_by(TimeWindows.of_size_and_grace(window_size, grace)).count()


def final_counts(counts):
    """The windowed counts, suppressed until their window closes (Kafka's KIP-328 pattern)."""
    return counts.suppress(
        Suppressed.until_window_closes(BufferConfig.unbounded()).with_name("window-finals-buffer")
    )


@with_option_defaults(OPTIONS)
def build_topology(
    *,
    window_size,
    grace,
    low_activity_threshold,
    summary_interval,
    summary_shift,
    silence_check_interval,
    silence_check_shift,
    silence_horizon,
) -> Topology:
    builder = StreamsBuilder()
    readings = builder.stream(INPUT_TOPIC)
    counts = windowed_counts(readings, to_millis(window_size, "window_size"), to_millis(grace, "grace"))
    counts.to_stream().to(WINDOW_COUNTS)
    finals = final_counts(counts).to_stream()
    finals.to(WINDOW_FINALS)
    finals.filter(lambda _window, count: count is not None and count < low_activity_threshold).to(
        LOW_ACTIVITY_ALERTS
    )
    summary = to_millis(summary_interval, "summary_interval"), to_millis(summary_shift, "summary_shift")
    readings.process(lambda: TaskSummary(*summary)).to(SUMMARIES)
    silence = (
        to_millis(silence_check_interval, "silence_check_interval"),
        to_millis(silence_check_shift, "silence_check_shift"),
        to_millis(silence_horizon, "silence_horizon"),
    )
    readings.process(lambda: SilenceDetector(*silence)).to(SILENT_SENSORS)
    return builder.build()


def main(argv: list[str] | None = None) -> int:
    from spark_jobs.spark.cli import run_cli

    return run_cli(JOB_MODULE, __doc__.split("\n")[0], OPTIONS, argv)


if __name__ == "__main__":
    sys.exit(main())
