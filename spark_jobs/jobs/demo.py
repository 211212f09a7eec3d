"""`make demo`: generate sensor readings, run the sensor-alerts job once on Spark, show what came out.

    python -m spark_jobs.jobs.demo [--root var/demo] [--events N]

Starts from an empty `<root>` each time: `input/` (generated files, some bad), `output/` (one Parquet
dataset per topic, `_quarantine/`, `_runs/` summaries), `checkpoint/`. The run is a scheduled
(available-now) run whose wall clock is 3 minutes after the last reading, so the sensors that went
silent early are reported.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import pandas as pd

from spark_jobs.jobs import generate_events, sensor_alerts
from spark_jobs.spark.job import JobSpec
from spark_jobs.spark.runtime import RunConfig, run_job
from spark_jobs.spark.session import local_spark_session, stop_session
from spark_jobs.spark.sink import read_topic
from spark_jobs.spark.topics import QUARANTINE_TOPIC

REPO_ROOT = Path(__file__).resolve().parents[2]


def _time(ms: int) -> str:
    return pd.Timestamp(ms, unit="ms", tz="UTC").strftime("%Y-%m-%d %H:%M:%S")


def show_outputs(output: Path) -> None:
    """Print what a sensor_alerts run wrote to `output`: its summary, rows per topic, a few alerts."""
    report = json.loads((output / "_runs" / "latest.json").read_text())
    records = report["records"]
    print("\nWhat came out")
    print(
        f"   records read {records['read']:,} = processed {records['processed']:,} "
        f"(of which dropped as late {records['dropped_late']:,}) + quarantined {records['quarantined']:,}"
    )
    print(f"   {len(report['batches'])} micro-batches; run summary: {output / '_runs' / 'latest.json'}")
    print("   rows per topic:")
    for topic in [*sensor_alerts.OUTPUT_TOPICS, QUARANTINE_TOPIC]:
        print(f"     {topic:<22} {len(read_topic(output, topic)):>7,}   {output / topic}")

    alerts = read_topic(output, sensor_alerts.LOW_ACTIVITY_ALERTS)
    if len(alerts):
        print("\n   a few low-activity alerts (final count of a 2-minute window below 4):")
        for row in alerts.head(5).to_dict("records"):
            print(f"     {row['key']}  window {_time(row['window_start'])} +2min  count {row['value']}")
    silent = read_topic(output, sensor_alerts.SILENT_SENSORS)
    if len(silent):
        print("\n   silent sensors (no reading for more than 5 minutes of wall clock):")
        for row in silent.head(5).to_dict("records"):
            print(
                f"     {row['key']}  last reading {_time(row['value']['last_event_time'])}, "
                f"silent for {row['value']['silent_for'] // 60_000} min"
            )
    quarantine = read_topic(output, QUARANTINE_TOPIC)
    if len(quarantine):
        print("\n   quarantined records by reason:")
        for reason, count in quarantine["reason"].value_counts().items():
            print(f"     {reason:<24} {count}")
    print(f"\nRead a topic: pandas.read_parquet('{output / 'window-finals'}')")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m spark_jobs.jobs.demo", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--root", type=Path, default=REPO_ROOT / "var" / "demo")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument(
        "--show", type=Path, metavar="OUTPUT", help="only print what a finished run wrote to OUTPUT"
    )
    args = parser.parse_args(argv)
    if args.show:
        show_outputs(args.show.resolve())
        return 0

    root = args.root.resolve()
    shutil.rmtree(root, ignore_errors=True)
    paths = {name: root / name for name in ("input", "output", "checkpoint")}
    print(f"1. Generating {args.events:,} sensor readings into {paths['input']}")
    generate_events.main(
        [
            "--output",
            str(paths["input"]),
            "--events",
            str(args.events),
            "--sensors",
            "30",
            "--files",
            "10",
            "--late-fraction",
            "0.02",
            "--bad-fraction",
            "0.005",
            "--seed",
            "7",
        ]
    )
    facts = json.loads((paths["input"] / "_generated.json").read_text())
    wall_clock = facts["last_event_ms"] + 180_000

    print(
        f"\n2. Running sensor_alerts on Spark (local[2], {args.partitions} partitions, two files per micro-batch,"
        f" wall clock {_time(wall_clock)} UTC)"
    )
    spark = local_spark_session("sensor_alerts-demo")
    try:
        run_job(
            spark,
            JobSpec(sensor_alerts.JOB_MODULE, {}, args.partitions),
            RunConfig(
                str(paths["input"]),
                str(paths["output"]),
                str(paths["checkpoint"]),
                max_files_per_trigger=2,
                wall_clock_ms=wall_clock,
            ),
            "sensor_alerts",
        )
    finally:
        stop_session(spark)

    show_outputs(paths["output"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
