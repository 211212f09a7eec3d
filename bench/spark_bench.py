"""Spark benchmark: our windowed count + suppress (the sensor-alerts path) against Spark's native equivalent.

    python bench/spark_bench.py [--events N] [--sensors N [N ...]] [--window-size 10min] [--mode session|e2e|both]
                                [--scaling] [--partitions N] [--max-files-per-trigger N] [--repeat N]

On the same generated files (100k events each), with the same micro-batches (10 files = 1M events each by
default, so that every size runs with the same batch size):

- ours: `spark_jobs.jobs.window_finals` on the Spark runtime (tumbling windows of `--window-size`, 2 minutes
  grace, suppressed until the window closes: one final count per sensor and window), exactly once into
  Parquet;
- native: `withWatermark("2 minutes") + groupBy(window(--window-size), key).count()` in append mode into
  Parquet, Spark's own way to emit one final count per window.

`--sensors` is the key-cardinality axis (e.g. `--sensors 200 100000 1000000`): with windows of 10 minutes
most keys hold state across micro-batches. Two modes:

- session: both run in one warm local[2] session (a warm-up run of each on one file first: the first
  query of a JVM pays for class loading and JIT, which would otherwise go to whichever ran first);
- e2e: each run is its own process (`python bench/spark_bench.py --one ours|native ...`, its own local[2]
  JVM and Python workers), timed from launch to exit, as every scheduled spark-submit pays it.

Prints events/s for both and their ratio (ours / native; the goal is >= 1) per cardinality and mode, and
every run; `--repeat N` alternates N runs of each and keeps each one's best (the machine may be shared).
`--scaling` repeats at 1, 5 and 20 million events and adds the peak memory of the whole process tree
(driver, JVM, Python workers). Results are appended to var/bench/spark/results.jsonl.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import psutil
import pyarrow.parquet as pq

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from spark_jobs.jobs import generate_events  # noqa: E402
from spark_jobs.spark.job import JobSpec, parse_duration_ms  # noqa: E402
from spark_jobs.spark.runtime import RunConfig, TopologyRuntime  # noqa: E402
from spark_jobs.spark.session import local_spark_session, stop_session  # noqa: E402

WORK = REPO_ROOT / "var" / "bench" / "spark"
SHUFFLE_PARTITIONS = 2
NATIVE_SCHEMA = "key string, value struct<temperature: double>, timestamp long"
GRACE = "2 minutes"


class PeakMemory:
    """Peak total RSS of this process and all its descendants, sampled every 200 ms."""

    def __init__(self):
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> int:
        me = psutil.Process()
        total = 0
        for process in [me, *me.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):  # a worker may exit between listing and sampling
                total += process.memory_info().rss
        return total

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self._sample())
            self._stop.wait(0.2)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def dataset(events: int, sensors: int, files: int) -> Path:
    """Generated once per shape, then reused: the same files for every run."""
    directory = WORK / f"events-{events}-sensors-{sensors}-files-{files}"
    facts = directory / "_generated.json"
    if facts.exists() and json.loads(facts.read_text())["events"] == events:
        return directory
    shutil.rmtree(directory, ignore_errors=True)
    started = time.monotonic()
    generate_events.main(
        [
            "--output",
            str(directory),
            "--events",
            str(events),
            "--sensors",
            str(sensors),
            "--files",
            str(files),
            "--late-fraction",
            "0.01",
        ]
    )
    print(f"  generated {events:,} events in {files} files in {time.monotonic() - started:.0f} s", flush=True)
    return directory


def run_ours(
    spark,
    input_dir: Path,
    scratch: Path,
    partitions: int,
    max_files: int | None,
    window_ms: int,
    live_spark_tasks: int = 2,
) -> dict:
    spec = JobSpec("spark_jobs.jobs.window_finals", {"window_size": window_ms}, partitions)
    config = RunConfig(
        str(input_dir),
        str(scratch / "out"),
        str(scratch / "ckpt"),
        max_files_per_trigger=max_files,
        shuffle_partitions=SHUFFLE_PARTITIONS,
        live_spark_tasks=live_spark_tasks,
    )
    started = time.monotonic()
    summary = TopologyRuntime(spark, spec, config, "window_finals").run()
    seconds = time.monotonic() - started
    return {
        "seconds": seconds,
        "events": summary.read,
        "finals": summary.emitted.get("window-finals", 0),
        "batches": len(summary.batches),
        "late": summary.late,
        "state_loads": summary.state_loads,
    }


def run_native(spark, input_dir: Path, scratch: Path, max_files: int | None, window_ms: int) -> dict:
    from pyspark.sql import functions as F

    # timed from building the query, as ours is (TopologyRuntime.run builds its query): the first build in a
    # session costs about a second of the JVM's analysis
    started = time.monotonic()
    reader = spark.readStream.schema(NATIVE_SCHEMA)
    if max_files:
        reader = reader.option("maxFilesPerTrigger", max_files)
    counts = (
        reader.json(str(input_dir))
        .withColumn("event_time", F.timestamp_millis("timestamp"))
        .withWatermark("event_time", GRACE)
        .groupBy(F.window("event_time", f"{window_ms} milliseconds"), "key")
        .count()
    )
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
    try:
        query = (
            counts.writeStream.outputMode("append")
            .format("parquet")
            .option("path", str(scratch / "out"))
            .option("checkpointLocation", str(scratch / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)
    query.awaitTermination()
    seconds = time.monotonic() - started
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    finals = file_sink_rows(scratch / "out")
    return {"seconds": seconds, "events": rows, "finals": finals, "batches": len(query.recentProgress)}


def file_sink_rows(output: Path) -> int:
    """Rows of a Spark file sink's output, counted from the Parquet footers of the files its
    `_spark_metadata` log commits: a Spark job to count them would add seconds to native's end-to-end time
    (its process is timed until it exits)."""
    files: set[str] = set()
    log = output / "_spark_metadata"
    batches = [p for p in log.iterdir() if not p.name.startswith(".")]  # N or N.compact, not .N.crc
    for entry_file in sorted(batches, key=lambda p: int(p.name.split(".")[0])):
        for line in entry_file.read_text().splitlines()[1:]:  # the first line is the log's version
            entry = json.loads(line)
            if entry["action"] == "add":
                files.add(entry["path"])
            else:
                files.discard(entry["path"])
    return sum(pq.ParquetFile(unquote(urlparse(path).path)).metadata.num_rows for path in files)


def measure(spark, name: str, fn, *args) -> dict:
    scratch = WORK / "scratch" / name
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    with PeakMemory() as memory:
        result = fn(spark, *args[:1], scratch, *args[1:])
    result["peak_rss_mb"] = round(memory.peak / 2**20)
    result["events_per_s"] = round(result["events"] / result["seconds"])
    shutil.rmtree(scratch, ignore_errors=True)
    return result


def run_in_own_process(name: str, input_dir: Path, args, window_ms: int) -> dict:
    """One run as its own process (its own JVM and Python workers), timed from launch to exit."""
    scratch = WORK / "scratch" / f"e2e-{name}"
    shutil.rmtree(scratch, ignore_errors=True)
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--one",
        name,
        "--input",
        str(input_dir),
        "--scratch",
        str(scratch),
        "--partitions",
        str(args.partitions),
        "--window-size",
        str(window_ms),
        "--live-spark-tasks",
        str(args.live_spark_tasks),
    ]
    if args.max_files_per_trigger:
        command += ["--max-files-per-trigger", str(args.max_files_per_trigger)]
    started = time.monotonic()
    with PeakMemory() as memory:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"{name} run failed ({done.returncode}):\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["in_process_seconds"] = result["seconds"]
    result["seconds"] = seconds
    result["peak_rss_mb"] = round(memory.peak / 2**20)
    result["events_per_s"] = round(result["events"] / seconds)
    shutil.rmtree(scratch, ignore_errors=True)
    return result


def one_run(args) -> int:
    """--one: a single run in this process's own local[2] session; prints its result as JSON."""
    spark = local_spark_session(
        f"spark-bench-{args.one}",
        master="local[2]",
        shuffle_partitions=SHUFFLE_PARTITIONS,
        extra_conf={"spark.ui.enabled": "false"},
    )
    scratch = Path(args.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    window_ms = parse_duration_ms(args.window_size)
    try:
        if args.one == "ours":
            result = run_ours(
                spark,
                Path(args.input),
                scratch,
                args.partitions,
                args.max_files_per_trigger,
                window_ms,
                args.live_spark_tasks,
            )
        else:
            result = run_native(spark, Path(args.input), scratch, args.max_files_per_trigger, window_ms)
    finally:
        stop_session(spark)  # both sides: what our jobs call (spark_jobs.spark.cli)
    print(json.dumps(result))
    return 0


def compare(spark, events: int, sensors: int, mode: str, args) -> dict:
    """Both on the same files; with --repeat, alternately (ours first, then native first, ...), keeping
    each one's best run: the machine may be shared, and the fastest run is the least disturbed one."""
    files = max(args.files, events // 100_000)
    input_dir = dataset(events, sensors, files)
    max_files = args.max_files_per_trigger
    window_ms = parse_duration_ms(args.window_size)
    runs: dict[str, list[dict]] = {"ours": [], "native": []}
    for i in range(args.repeat):
        order = ["ours", "native"] if i % 2 == 0 else ["native", "ours"]
        for name in order:
            if mode == "e2e":
                runs[name].append(run_in_own_process(name, input_dir, args, window_ms))
            elif name == "ours":
                runs[name].append(
                    measure(
                        spark,
                        name,
                        run_ours,
                        input_dir,
                        args.partitions,
                        max_files,
                        window_ms,
                        args.live_spark_tasks,
                    )
                )
            else:
                runs[name].append(measure(spark, name, run_native, input_dir, max_files, window_ms))
    ours = max(runs["ours"], key=lambda r: r["events_per_s"])
    native = max(runs["native"], key=lambda r: r["events_per_s"])
    row = {
        "mode": mode,
        "events": events,
        "sensors": sensors,
        "window_ms": window_ms,
        "files": files,
        "max_files_per_trigger": max_files,
        "partitions": args.partitions,
        "live_spark_tasks": args.live_spark_tasks,
        "ours": ours,
        "native": native,
        "ratio": round(ours["events_per_s"] / native["events_per_s"], 2),
        "all_runs_events_per_s": {k: [r["events_per_s"] for r in v] for k, v in runs.items()},
        "load_average": os.getloadavg(),
    }
    print(
        f"{mode:>7} | {sensors:>9,} keys | {events:>11,} events | ours {ours['events_per_s']:>9,} ev/s "
        f"({ours['seconds']:.0f} s, {ours['finals']:,} finals, peak {ours['peak_rss_mb']:,} MB, state loads "
        f"{ours['state_loads']}) | native "
        f"{native['events_per_s']:>9,} ev/s ({native['seconds']:.0f} s, {native['finals']:,} finals, peak "
        f"{native['peak_rss_mb']:,} MB) | ratio {row['ratio']} | runs {row['all_runs_events_per_s']} | "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=5_000_000)
    parser.add_argument("--scaling", action="store_true", help="1, 5 and 20 million events")
    parser.add_argument("--sensors", type=int, nargs="+", default=[200], help="key cardinalities to run")
    parser.add_argument("--window-size", default="2min", help="tumbling window, both sides (e.g. 10min)")
    parser.add_argument("--mode", choices=["session", "e2e", "both"], default="session")
    parser.add_argument("--files", type=int, default=50, help="at least; one file per 100k events")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument(
        "--max-files-per-trigger",
        type=int,
        default=10,
        help="files per micro-batch, both sides (default 10 = 1M events)",
    )
    parser.add_argument(
        "--live-spark-tasks",
        type=int,
        default=2,
        help="ours: Spark tasks whose state a Python worker keeps live (1: restore whenever Spark hands a "
        "worker another task; 2, the default: catch up)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of each, alternating; the best counts")
    parser.add_argument("--one", choices=["ours", "native"], help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--scratch", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        return one_run(args)

    WORK.mkdir(parents=True, exist_ok=True)
    modes = ["session", "e2e"] if args.mode == "both" else [args.mode]
    sizes = [1_000_000, 5_000_000, 20_000_000] if args.scaling else [args.events]
    window_ms = parse_duration_ms(args.window_size)
    rows = []
    for mode in modes:
        spark = None
        if mode == "session":
            spark = local_spark_session(
                "spark-bench", master="local[2]", shuffle_partitions=SHUFFLE_PARTITIONS
            )
        try:
            if spark is not None:
                warmup = dataset(20_000, 200, 1)
                measure(spark, "warmup-ours", run_ours, warmup, args.partitions, None, window_ms)
                measure(spark, "warmup-native", run_native, warmup, None, window_ms)
            for sensors in args.sensors:
                rows += [compare(spark, events, sensors, mode, args) for events in sizes]
        finally:
            if spark is not None:
                stop_session(spark)
    with open(WORK / "results.jsonl", "a") as f:
        for row in rows:
            f.write(json.dumps({"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **row}) + "\n")
    print("ours / native:")
    for row in rows:
        print(
            f"  {row['mode']:>7} {row['sensors']:>9,} keys {row['events']:>11,} events: {row['ratio']}x "
            f"(runs ours {row['all_runs_events_per_s']['ours']}, native {row['all_runs_events_per_s']['native']})"
        )
    if args.scaling:
        print("growth (relative to 1M):")
        for row in rows:
            first = next(r for r in rows if r["mode"] == row["mode"] and r["sensors"] == row["sensors"])
            scale = row["events"] / first["events"]
            print(
                f"  {row['mode']} {row['sensors']:,} keys {row['events']:>12,}: x{scale:g} events -> ours "
                f"x{row['ours']['seconds'] / first['ours']['seconds']:.1f} time, {row['ours']['peak_rss_mb']:,} MB; "
                f"native x{row['native']['seconds'] / first['native']['seconds']:.1f} time, "
                f"{row['native']['peak_rss_mb']:,} MB"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
