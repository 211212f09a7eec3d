"""Realistic sensor readings for the sensor-alerts job, as a landing directory of many files.

    python -m spark_jobs.jobs.generate_events --output DIR [--events N] [--sensors N] [--files N]
        [--late-fraction F] [--bad-fraction F] [--seed S] [--format jsonl|parquet] [--start ISO8601]
        [--minutes M]

- Sensors emit at different rates (log-uniform, from one reading every few minutes to several per
  minute), so some 2-minute windows hold fewer than 4 readings; about one sensor in eight goes silent
  for good partway through. `--minutes` spreads the events over that much event time instead (every
  sensor's rate scaled alike), so that many sensors still span many windows.
- Records arrive (= file order) by event time plus a small random delay, so they are out of order by up
  to ~30 s; a `--late-fraction` of them arrive 6 to 20 minutes late, beyond window plus grace.
- A `--bad-fraction` of extra lines are bad records, cycling through every kind the job quarantines.
- Files are written in name order, each atomically (hidden temporary name, then rename), with strictly
  increasing modification times, which is the order Spark's file source admits them. Run it again on the
  same directory to append more files after the existing ones.

Everything is a pure function of the arguments (and `--seed`), except the files' modification times.
`<output>/_generated.json` (ignored by Spark: leading underscore) describes what was generated.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

DEFAULT_START = "2025-01-01T00:00:00Z"
LATE_DELAY_MS = (6 * 60_000, 20 * 60_000)
JITTER_MEAN_MS = 5_000
JITTER_MAX_MS = 30_000
SILENT_SENSOR_FRACTION = 0.125
RATE_PER_MIN = (0.3, 12.0)

FILE_NAME = re.compile(r"^events-(\d{6})\.(jsonl|parquet)$")

# Each kind of bad record the job must quarantine, as raw JSON-lines text (ts: a valid timestamp).
BAD_JSON_LINES = {
    "unparseable JSON": lambda ts: '{"key": "sensor-0001", "value": {"temperature": 20.1}, "timestamp": ',
    "not a JSON object": lambda ts: f'["sensor-0001", {ts}]',
    "missing key": lambda ts: f'{{"value": {{"temperature": 20.1}}, "timestamp": {ts}}}',
    "null key": lambda ts: f'{{"key": null, "value": {{"temperature": 20.1}}, "timestamp": {ts}}}',
    "ill-typed key": lambda ts: f'{{"key": 1001, "value": {{"temperature": 20.1}}, "timestamp": {ts}}}',
    "missing timestamp": lambda ts: '{"key": "sensor-0001", "value": {"temperature": 20.1}}',
    "ill-typed timestamp": lambda ts: (
        f'{{"key": "sensor-0001", "value": {{"temperature": 20.1}}, "timestamp": "{ts}"}}'
    ),
    "fractional timestamp": lambda ts: (
        f'{{"key": "sensor-0001", "value": {{"temperature": 20.1}}, "timestamp": {ts}.5}}'
    ),
    "negative timestamp": lambda ts: (
        '{"key": "sensor-0001", "value": {"temperature": 20.1}, "timestamp": -5}'
    ),
    "ill-typed partition": lambda ts: (
        f'{{"key": "sensor-0001", "value": null, "timestamp": {ts}, "partition": "p0"}}'
    ),
    "partition out of range": lambda ts: (
        f'{{"key": "sensor-0001", "value": null, "timestamp": {ts}, "partition": 9999}}'
    ),
    "ill-typed offset": lambda ts: (
        f'{{"key": "sensor-0001", "value": null, "timestamp": {ts}, "offset": -1}}'
    ),
}
INVALID_UTF8 = b'{"key": "sensor-\xff\xfe", "value": null, "timestamp": 1}'


def parse_start(text: str) -> int:
    moment = dt.datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


def generate(
    events: int,
    sensors: int,
    late_fraction: float,
    seed: int,
    start_ms: int,
    minutes: float | None = None,
) -> dict:
    """Columns of the valid readings in arrival order, plus facts about them; `minutes`: the event time
    they span (default: what the sensors' rates give for `events`)."""
    rng = np.random.default_rng(seed)
    names = np.array([f"sensor-{i:04d}" for i in range(1, sensors + 1)])
    rates = np.exp(rng.uniform(np.log(RATE_PER_MIN[0]), np.log(RATE_PER_MIN[1]), sensors))  # per minute
    silent = rng.random(sensors) < SILENT_SENSOR_FRACTION
    # Span such that the expected count matches `events` (or as asked: the rates scale alike); silent
    # sensors stop between 30% and 80% of it.
    span_min = events / rates.sum() if minutes is None else minutes
    stop_at = np.where(silent, rng.uniform(0.3, 0.8, sensors), 1.0) * span_min
    weights = rates * stop_at
    per_sensor = rng.multinomial(events, weights / weights.sum())
    sensor_idx = np.repeat(np.arange(sensors), per_sensor)
    event_time = start_ms + (rng.random(events) * stop_at[sensor_idx] * 60_000).astype(np.int64)
    delay = np.minimum(rng.exponential(JITTER_MEAN_MS, events), JITTER_MAX_MS).astype(np.int64)
    late = rng.random(events) < late_fraction
    delay[late] = rng.integers(*LATE_DELAY_MS, late.sum())
    order = np.lexsort((sensor_idx, event_time + delay))
    temperature = np.round(rng.normal(20 + sensor_idx % 7, 1.5), 2)
    return {
        "keys": names[sensor_idx][order],
        "timestamps": event_time[order],
        "temperatures": temperature[order],
        "late_injected": int(late.sum()),
        "silent_sensors": sorted(names[silent].tolist()),
        "last_event_by_sensor": _last_event_by_sensor(names, per_sensor, sensor_idx, event_time),
        "end_ms": int(event_time.max()) if events else start_ms,
    }


def _last_event_by_sensor(names, per_sensor, sensor_idx, event_time) -> dict[str, int]:
    last = np.full(len(names), -1, dtype=np.int64)
    np.maximum.at(last, sensor_idx, event_time)
    return {str(names[i]): int(last[i]) for i in range(len(names)) if per_sensor[i]}


def _json_lines(keys, timestamps, temperatures) -> list[str]:
    return [
        f'{{"key": "{k}", "value": {{"temperature": {t}}}, "timestamp": {ts}}}\n'
        for k, ts, t in zip(keys.tolist(), timestamps.tolist(), temperatures.tolist(), strict=True)
    ]


def _bad_lines(first: int, count: int, rng: np.random.Generator, timestamp: int) -> list[bytes]:
    """`count` bad lines, kinds cycling on from the `first`-th bad record of the run (all kinds show up)."""
    kinds = list(BAD_JSON_LINES) + ["invalid UTF-8"]
    out = []
    for i in range(first, first + count):
        kind = kinds[i % len(kinds)]
        out.append(
            INVALID_UTF8 + b"\n"
            if kind == "invalid UTF-8"
            else (BAD_JSON_LINES[kind](timestamp) + "\n").encode()
        )
    rng.shuffle(out)
    return out


def _existing(directory: Path) -> tuple[int, float]:
    """(next file number, newest modification time) of a landing directory."""
    numbers = [int(m.group(1)) for p in directory.iterdir() if (m := FILE_NAME.match(p.name))]
    newest = max(
        (p.stat().st_mtime for p in directory.iterdir() if not p.name.startswith((".", "_"))), default=0.0
    )
    return (max(numbers) + 1 if numbers else 1), newest


def _write_atomically(path: Path, data: bytes, mtime: float) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.utime(tmp, (mtime, mtime))
    os.rename(tmp, path)  # rename keeps the modification time


def _parquet_bytes(keys, timestamps, temperatures, bad: int) -> bytes:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    keys = keys.tolist()
    timestamps = timestamps.tolist()
    # Bad rows that a typed Parquet file can hold: missing key, missing timestamp, negative timestamp.
    for i in range(bad):
        kind = i % 3
        keys.append(None if kind == 0 else "sensor-0001")
        timestamps.append(None if kind == 1 else (-5 if kind == 2 else 1))
    values = [{"temperature": t} for t in temperatures.tolist()] + [{"temperature": 20.1}] * bad
    table = pa.table(
        {"key": pa.array(keys, pa.string()), "value": values, "timestamp": pa.array(timestamps, pa.int64())}
    )
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def write_files(
    output: Path,
    generated: dict,
    files: int,
    bad_fraction: float,
    fmt: str,
    seed: int,
) -> dict:
    rng = np.random.default_rng(seed + 1)
    output.mkdir(parents=True, exist_ok=True)
    first, newest = _existing(output)
    # Strictly increasing mtimes after anything already there, 10 ms apart (Spark compares milliseconds).
    base_mtime = max(time.time() - files * 0.01, newest + 0.01)
    n = len(generated["keys"])
    bounds = np.linspace(0, n, files + 1).astype(int)
    bad_total = int(round(n * bad_fraction)) if bad_fraction > 0 else 0
    bad_per_file = np.diff(np.linspace(0, bad_total, files + 1).astype(int))
    written = []
    for i in range(files):
        lo, hi = bounds[i], bounds[i + 1]
        keys, ts, temps = (generated[c][lo:hi] for c in ("keys", "timestamps", "temperatures"))
        name = f"events-{first + i:06d}.{fmt}"
        valid_ts = int(ts[0]) if len(ts) else 1
        if fmt == "jsonl":
            lines = [line.encode() for line in _json_lines(keys, ts, temps)] + _bad_lines(
                int(bad_per_file[:i].sum()), int(bad_per_file[i]), rng, valid_ts
            )
            if bad_per_file[i]:
                # Bad lines anywhere in the file; valid lines keep their order.
                slots = set(rng.choice(len(lines), int(bad_per_file[i]), replace=False).tolist())
                good, bad = iter(lines[: hi - lo]), iter(lines[hi - lo :])
                lines = [next(bad) if j in slots else next(good) for j in range(len(lines))]
            data = b"".join(lines)
        else:
            data = _parquet_bytes(keys, ts, temps, int(bad_per_file[i]))
        _write_atomically(output / name, data, base_mtime + i * 0.01)
        written.append(name)
    extra_bad = 0
    if fmt == "parquet" and bad_total:
        # Kinds a well-formed typed file cannot hold: wrong column types, and an unreadable file.
        import io

        import pyarrow as pa
        import pyarrow.parquet as pq

        sink = io.BytesIO()
        pq.write_table(
            pa.table(
                {
                    "key": pa.array([1001], pa.int64()),
                    "value": [None],
                    "timestamp": pa.array(["1"], pa.string()),
                }
            ),
            sink,
        )
        name = f"events-{first + files:06d}.parquet"
        _write_atomically(output / name, sink.getvalue(), base_mtime + files * 0.01)
        name2 = f"events-{first + files + 1:06d}.parquet"
        _write_atomically(output / name2, b"PAR1 this is not a parquet file", base_mtime + (files + 1) * 0.01)
        written += [name, name2]
        extra_bad = 2
    return {"files": written, "bad_records": bad_total + extra_bad}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m spark_jobs.jobs.generate_events", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--output", required=True, type=Path)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--sensors", type=int, default=50)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--late-fraction", type=float, default=0.01)
    parser.add_argument("--bad-fraction", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--format", choices=["jsonl", "parquet"], default="jsonl")
    parser.add_argument(
        "--start", default=DEFAULT_START, help=f"first event time, ISO 8601 (default {DEFAULT_START})"
    )
    parser.add_argument(
        "--minutes", type=float, help="event time the events span (default: as the sensors' rates give)"
    )
    args = parser.parse_args(argv)
    if args.events < 0 or args.sensors < 1 or args.files < 1:
        parser.error("--events >= 0, --sensors >= 1 and --files >= 1")
    if args.minutes is not None and not args.minutes > 0:
        parser.error("--minutes > 0")
    start_ms = parse_start(args.start)
    generated = generate(args.events, args.sensors, args.late_fraction, args.seed, start_ms, args.minutes)
    written = write_files(args.output, generated, args.files, args.bad_fraction, args.format, args.seed)
    facts = {
        "events": args.events,
        "bad_records": written["bad_records"],
        "late_injected": generated["late_injected"],
        "sensors": args.sensors,
        "silent_sensors": generated["silent_sensors"],
        "first_event_ms": start_ms,
        "last_event_ms": generated["end_ms"],
        "last_event_by_sensor": generated["last_event_by_sensor"],
        "files": written["files"],
        "format": args.format,
        "seed": args.seed,
    }
    manifest = args.output / "_generated.json"
    tmp = args.output / "._generated.json.tmp"
    tmp.write_text(json.dumps(facts, indent=1) + "\n")
    os.replace(tmp, manifest)
    print(json.dumps(summary(facts, manifest)))
    return 0


# Examples of silent sensors printed; the manifest lists them all.
SILENT_EXAMPLES = 5


def summary(facts: dict, manifest: Path) -> dict:
    """What the command prints: counts and a few examples, whatever the number of sensors (the whole
    list of silent sensors grows with them; it stays in the manifest)."""
    silent = facts["silent_sensors"]
    short = {k: v for k, v in facts.items() if k not in ("files", "last_event_by_sensor", "silent_sensors")}
    return {
        **short,
        "files_written": len(facts["files"]),
        "silent_sensors": len(silent),
        "silent_sensor_examples": silent[:SILENT_EXAMPLES],
        "manifest": str(manifest),
    }


if __name__ == "__main__":
    sys.exit(main())
