"""Sensor enrichment: readings joined with a sensor registry (a table) and with maintenance windows.

Three input topics, co-partitioned by sensor id, taken by Kafka's record selection (docs/semantics.md
rule 1; the order below breaks timestamp ties):

- `sensor-readings` (stream): `{"temperature": x}`;
- `sensor-registry` (table, latest value per sensor): `{"site": s, "threshold": t}`, or null when the
  sensor is retired (a tombstone: its readings are no longer enriched);
- `maintenance` (stream): `{"duration_ms": d}`, a maintenance visit starting at the record's time.

Topics:

- `enriched-readings`: each reading of a registered sensor with its site and its threshold *as registered
  at the reading's time* (stream-table join: the reading's timestamp, KIP-259);
- `threshold-alerts`: the enriched readings above their sensor's own threshold;
- `maintenance-readings`: readings within `maintenance_window` of a maintenance visit of the same sensor
  (stream-stream join: the later of the two timestamps, KIP-259).

Each join output carries the timestamps of what it joined (`reading_time`, `maintenance_time`), which its
quality rules (`QUALITY_RULES`) check against the output timestamp.

    python -m spark_jobs.jobs.sensor_enrichment --input sensor-readings=DIR --input sensor-registry=DIR \\
        --input maintenance=DIR --output DIR --checkpoint DIR [--max-files-per-trigger N] ...
"""

from __future__ import annotations

import sys

import pyarrow as pa

from spark_jobs.spark.job import JobOption, with_option_defaults
from spark_jobs.spark.topics import TopicSchema
from spark_jobs.streams import JoinWindows, Processor, Record, StreamsBuilder, Topology
from spark_jobs.streams.timeutil import to_millis

JOB_MODULE = "spark_jobs.jobs.sensor_enrichment"

READINGS = "sensor-readings"
REGISTRY = "sensor-registry"
MAINTENANCE = "maintenance"
INPUT_TOPICS = (READINGS, REGISTRY, MAINTENANCE)

ENRICHED = "enriched-readings"
ALERTS = "threshold-alerts"
MAINTENANCE_READINGS = "maintenance-readings"

OPTIONS = [
    JobOption("maintenance_window", 600_000, "a reading this close to a maintenance visit is correlated, ms"),
    JobOption("maintenance_grace", 120_000, "how long the maintenance join accepts out-of-order records, ms"),
]

QUALITY_RULES = "sensor_enrichment_rules.json"

_ENRICHED = TopicSchema(
    key=pa.string(),
    value=pa.struct(
        [
            ("temperature", pa.float64()),
            ("site", pa.string()),
            ("threshold", pa.float64()),
            ("reading_time", pa.int64()),
        ]
    ),
)
OUTPUT_TOPICS = {
    ENRICHED: _ENRICHED,
    ALERTS: _ENRICHED,
    MAINTENANCE_READINGS: TopicSchema(
        key=pa.string(),
        value=pa.struct(
            [
                ("temperature", pa.float64()),
                ("reading_time", pa.int64()),
                ("maintenance_time", pa.int64()),
                ("duration_ms", pa.int64()),
            ]
        ),
    ),
}


class StampTime(Processor):
    """Adds the record's own timestamp to its value under `field`, so that a join's output shows which
    records it joined (the joiner sees values only)."""

    def __init__(self, field: str):
        self.field = field

    def init(self, context) -> None:
        self.context = context

    def process(self, record: Record) -> None:
        value = dict(record.value or {})
        value[self.field] = record.timestamp
        self.context.forward(Record(record.key, value, record.timestamp))


def _temperature(value) -> float | None:
    temperature = (value or {}).get("temperature")
    return (
        float(temperature)
        if isinstance(temperature, int | float) and not isinstance(temperature, bool)
        else None
    )


def _enrich(reading: dict, sensor: dict) -> dict:
    threshold = sensor.get("threshold")
    return {
        "temperature": _temperature(reading),
        "site": sensor.get("site"),
        "threshold": float(threshold) if isinstance(threshold, int | float) else None,
        "reading_time": reading["reading_time"],
    }


def _above_threshold(_key, enriched: dict) -> bool:
    t, limit = enriched["temperature"], enriched["threshold"]
    return t is not None and limit is not None and t > limit


def _correlate(reading: dict, visit: dict) -> dict:
    duration = visit.get("duration_ms")
    return {
        "temperature": _temperature(reading),
        "reading_time": reading["reading_time"],
        "maintenance_time": visit["maintenance_time"],
        "duration_ms": duration if isinstance(duration, int) and not isinstance(duration, bool) else None,
    }


@with_option_defaults(OPTIONS)
def build_topology(*, maintenance_window, maintenance_grace) -> Topology:
    builder = StreamsBuilder()
    readings = builder.stream(READINGS).process(lambda: StampTime("reading_time"))
    registry = builder.table(REGISTRY)
    visits = builder.stream(MAINTENANCE).process(lambda: StampTime("maintenance_time"))
    enriched = readings.join(registry, _enrich)
    enriched.to(ENRICHED)
    enriched.filter(_above_threshold).to(ALERTS)
    windows = JoinWindows.of_time_difference_and_grace(
        to_millis(maintenance_window), to_millis(maintenance_grace)
    )
    readings.join(visits, _correlate, windows).to(MAINTENANCE_READINGS)
    return builder.build()


def main(argv: list[str] | None = None) -> int:
    from spark_jobs.spark.cli import run_cli

    return run_cli(JOB_MODULE, __doc__.split("\n")[0], OPTIONS, argv)


if __name__ == "__main__":
    sys.exit(main())
