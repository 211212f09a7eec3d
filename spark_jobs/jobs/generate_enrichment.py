"""Landing folders for the sensor-enrichment job: readings, a sensor registry that changes, maintenance.

    python -m spark_jobs.jobs.generate_enrichment --output ROOT [--events N] [--sensors N] [--files N]
        [--registry-updates N] [--visits N] [--bad-fraction F] [--seed S] [--start ISO8601]

- `ROOT/sensor-readings`: the readings of `generate_events` (same options).
- `ROOT/sensor-registry`: every sensor registered at the start (a site, an alert threshold near its
  usual temperature), then `--registry-updates` changes over the readings' span: a new threshold, a move
  to another site, or a retirement (a null value: a tombstone).
- `ROOT/maintenance`: `--visits` maintenance visits at random sensors and times, each `{"duration_ms": d}`.

Registry and maintenance files land interleaved with the reading files (same modification times), so a
job reading the three folders meets files of every topic in every micro-batch size. Each record's value
carries nothing of its timestamp. `ROOT/_generated.json` describes what was generated. A pure function of
the arguments, except the files' modification times.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

from spark_jobs.jobs import generate_events
from spark_jobs.jobs.sensor_enrichment import MAINTENANCE, READINGS, REGISTRY

SITES = ("north", "south", "east", "west")


def _write(path: Path, records: list[tuple[str, object, int]], mtime: float) -> None:
    data = "".join(json.dumps({"key": k, "value": v, "timestamp": t}) + "\n" for k, v, t in records)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(data)
    os.utime(tmp, (mtime, mtime))
    os.rename(tmp, path)


def _spread(records: list[tuple], files: int) -> list[list[tuple]]:
    """Records sorted by timestamp, cut into `files` consecutive runs (some may be empty)."""
    records = sorted(records, key=lambda r: r[2])
    bounds = np.linspace(0, len(records), files + 1).astype(int)
    return [records[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m spark_jobs.jobs.generate_enrichment", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--output", required=True, type=Path)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--sensors", type=int, default=50)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--registry-updates", type=int, default=40)
    parser.add_argument("--visits", type=int, default=30)
    parser.add_argument("--bad-fraction", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--start", default=generate_events.DEFAULT_START)
    args = parser.parse_args(argv)
    if args.registry_updates < 0 or args.visits < 0:
        parser.error("--registry-updates and --visits must be >= 0")
    readings_dir = args.output / READINGS
    generate_events.main(
        [
            "--output", str(readings_dir), "--events", str(args.events), "--sensors", str(args.sensors),
            "--files", str(args.files), "--bad-fraction", str(args.bad_fraction), "--seed", str(args.seed),
            "--start", args.start,
        ]
    )  # fmt: skip
    facts = json.loads((readings_dir / "_generated.json").read_text())
    start, end = facts["first_event_ms"], max(facts["last_event_ms"], facts["first_event_ms"] + 1)
    rng = np.random.default_rng(args.seed + 1)
    names = [f"sensor-{i:04d}" for i in range(1, args.sensors + 1)]
    registered = max(0, start - 1)  # before the first reading: a tie would go to the readings topic
    # Readings are around 20 + (index % 7) degrees (generate_events): thresholds a little above.
    registry = [
        (
            name,
            {"site": SITES[i % len(SITES)], "threshold": round(22.0 + i % 7 + rng.uniform(0, 2), 1)},
            registered,
        )
        for i, name in enumerate(names)
    ]
    retired = 0
    for _ in range(args.registry_updates):
        i = int(rng.integers(len(names)))
        when = int(rng.integers(start, end))
        kind = rng.random()
        if kind < 0.1:
            value = None
            retired += 1
        else:
            site = SITES[int(rng.integers(len(SITES)))] if kind < 0.3 else SITES[i % len(SITES)]
            value = {"site": site, "threshold": round(20.0 + i % 7 + rng.uniform(0, 4), 1)}
        registry.append((names[i], value, when))
    visits = [
        (names[int(rng.integers(len(names)))], {"duration_ms": int(rng.integers(5, 30)) * 60_000}, int(t))
        for t in rng.integers(start, end, args.visits)
    ]
    reading_mtimes = sorted(
        p.stat().st_mtime for p in readings_dir.iterdir() if not p.name.startswith((".", "_"))
    )
    for topic, records in ((REGISTRY, registry), (MAINTENANCE, visits)):
        for index, chunk in enumerate(_spread(records, args.files)):
            mtime = reading_mtimes[min(index, len(reading_mtimes) - 1)] if reading_mtimes else None
            _write(args.output / topic / f"{topic}-{index + 1:06d}.jsonl", chunk, mtime or 0.0)
    summary = {
        "readings": args.events,
        "sensors": args.sensors,
        "registry_records": len(registry),
        "retirements": retired,
        "maintenance_visits": len(visits),
        "first_event_ms": start,
        "last_event_ms": facts["last_event_ms"],
        "inputs": {topic: str(args.output / topic) for topic in (READINGS, REGISTRY, MAINTENANCE)},
    }
    (args.output / "_generated.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
