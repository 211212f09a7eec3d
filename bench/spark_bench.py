"""Spark benchmark, end to end: our jobs on the Spark runtime against native Spark Structured Streaming.

    python bench/spark_bench.py [--shapes count,hopping_user,hopping_builtin,running_count]
                                [--keys 200 100000 1000000] [--events N] [--minutes M]
                                [--max-files-per-trigger N]
                                [--partitions N] [--driver-memory SIZE] [--java-options=OPTIONS]
                                [--untuned] [--repeat N]
                                [--results-dir DIR]

Each run is its own process (`python bench/spark_bench.py --one SIDE ...`: its own local[2] JVM and
Python workers), timed from launch to exit, as a scheduled spark-submit pays it, with the peak of the
summed RSS of its process tree (driver, JVM, Python workers), sampled every 200 ms, the peak of its summed
PSS from the same samples (a page shared by several processes of the tree counted once, not once per
process), each split by kind of process, and where its time outside the run went
(`session_start_seconds`: imports and the session's start; `stop_seconds`: stopping the session). Every
side of a shape reads the same generated files (`generate_events`, 100k events a file,
`--max-files-per-trigger` files a micro-batch) and writes Parquet.

Shapes (ours: a job module run by `TopologyRuntime`, exactly once; native: the query Spark offers for it):

- count: `spark_jobs.jobs.window_finals` (tumbling 10 minutes, 2 minutes grace, one final count per key
  and window) / `withWatermark(2 minutes) + groupBy(window(10 minutes), key).count()`, append mode;
- hopping_user: `bench.jobs.hopping_stats` (10-minute windows advancing by 5, a user aggregate computing
  count, sum and max of the temperature, one final row per window) / `groupBy(window(ts, 10 minutes,
  5 minutes), key).agg(count, sum, max)` after the same watermark, append mode;
- hopping_builtin: the same with declared aggregations (`bench.jobs.hopping_builtin`) / the same native query (run once for both hopping shapes);
- running_count: `bench.jobs.running_count` (`group_by_key().count()`, every update) / `groupBy(key)
  .count()` in update mode into `foreachBatch`, which appends each micro-batch's updated counts to Parquet.

Where native differs: its watermark is global (the largest event time seen, minus the delay, across every
partition) and moves only between micro-batches, ours is per task and per record (stream time); native
drops a record older than the watermark, ours one whose window has closed (kept in `_late/`). Native's
running count writes one row per updated key and micro-batch, ours one per record; its foreachBatch sink
is at-least-once.

Every side's JVM runs with the same heap (`--driver-memory`, `spark.driver.memory`: in local mode the one
JVM is driver and executor). Spark's default (1 GB) lets G1 grow the heap with short-lived garbage up to
its cap; both sides run as fast with 512 MB (the state lives in RocksDB, off the heap), and a heap, once
grown, stays with the JVM. `--java-options` gives every side's JVM the same further options.

Native's settings: every setting our query gives itself (`TopologyRuntime.query_settings`, taken from the
same code, not copied), on top of the same session defaults (RocksDB state store). `--untuned` also runs
native without them (the session defaults alone, as the earlier benchmarks ran it), so a record shows how
the ratios moved. Prints events/s of each side and ours / native per shape and key count, and appends
one record to `bench/results/spark.jsonl` (`--results-dir`, or $BENCH_RESULTS_DIR).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
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

from bench.results import Recorder  # noqa: E402

WORK = REPO_ROOT / "var" / "bench" / "spark"
SHUFFLE_PARTITIONS = 2
# The JVM heap of every side (see the module docstring); Spark refuses less than 450 MB.
DRIVER_MEMORY = "512m"
NATIVE_SCHEMA = "key string, value struct<temperature: double>, timestamp long"
GRACE = "2 minutes"
WINDOW = "10 minutes"
ADVANCE = "5 minutes"

# shape -> (our job module, its options, the native query's name)
SHAPES = {
    "count": ("spark_jobs.jobs.window_finals", {"window_size": 600_000, "grace": 120_000}, "windowed_count"),
    "hopping_user": ("bench.jobs.hopping_stats", {}, "hopping_stats"),
    "hopping_builtin": ("bench.jobs.hopping_builtin", {}, "hopping_stats"),
    "running_count": ("bench.jobs.running_count", {}, "running_count"),
}
SIDES = ("ours", "native", "native_untuned")
# The module of the Python process that names a stateful processor's state variables (process_role).
STATEFUL_DRIVER_WORKER = "transform_with_state_driver_worker"


def process_role(process, root) -> str | None:
    """What a process of a run's tree is: the driver (the run's own process), the JVM, pyspark's daemon
    (a Python child of the JVM, forking the workers), the Python process in which the driver's JVM has a
    `transformWithStateInPandas` query's processor name its state variables as the query starts (another
    child of the JVM, gone once it has) or a Python worker (the daemon's child); None for a
    command the JVM runs (Hadoop's local file system runs chmod for the checkpoint's files): until it
    executes, such a child shares the JVM's memory and reports the JVM's resident size as its own, after
    that it takes a megabyte. Not counted (on either side), so a sample taken at that moment does not count
    the JVM twice."""
    if process.pid == root.pid:
        return "driver"
    name = process.name()
    parent = process.ppid()
    parent_is_jvm = False
    with contextlib.suppress(psutil.Error):
        parent_is_jvm = psutil.Process(parent).name().startswith("java")
    if parent_is_jvm and not name.startswith("python"):
        return None
    if name.startswith("java"):
        return "jvm"
    if parent_is_jvm:
        if any(part.endswith(STATEFUL_DRIVER_WORKER) for part in process.cmdline()):
            return "python_driver_worker"
        return "python_daemon"
    return "python_workers"


def proportional_set_size(pid: int) -> int | None:
    """A process's PSS in bytes (`Pss:` of /proc/<pid>/smaps_rollup): its private pages, plus each page it
    shares with other processes divided by how many map it (a worker forked from pyspark's daemon shares
    the modules the daemon imported, copy on write, and every Python process the same shared libraries).
    Summed over a tree, a shared page counts once, where a sum of RSS counts it once per process. None
    where the kernel offers no smaps_rollup (not Linux, or before 4.14)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as rollup:
            for line in rollup:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class PeakMemory:
    """Peak summed RSS of a process and all its descendants, sampled every 200 ms, with the share of each
    kind of process at that peak (`process_role`) and the most processes of each kind seen at once; and,
    from the same samples, the peak summed PSS (`proportional_set_size`) with its share by kind (its own
    sample: the two peaks need not be at the same moment). `pss_peak` is None if a sample could not read
    some process's PSS."""

    def __init__(self, pid: int):
        self.root = psutil.Process(pid)
        self.peak = 0
        self.breakdown: dict[str, int] = {}
        self.pss_peak: int | None = 0
        self.pss_breakdown: dict[str, int] = {}
        self.most_processes: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> tuple[dict[str, int], dict[str, int] | None]:
        """Summed RSS and PSS of each kind of process (PSS: None if some process's was unreadable)."""
        rss_by_role: dict[str, int] = {}
        pss_by_role: dict[str, int] | None = {}
        processes: dict[str, int] = {}
        with contextlib.suppress(psutil.Error):
            for process in [self.root, *self.root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):  # a worker may exit between listing and sampling
                    role = process_role(process, self.root)  # not kept: spark-submit's shell becomes the JVM
                    if role is None:
                        continue
                    rss = process.memory_info().rss
                    pss = proportional_set_size(process.pid)
                    if pss is None and rss and process.is_running():  # not gone, nor a zombie (no pages)
                        pss_by_role = None
                    rss_by_role[role] = rss_by_role.get(role, 0) + rss
                    if pss_by_role is not None and pss is not None:
                        pss_by_role[role] = pss_by_role.get(role, 0) + pss
                    processes[role] = processes.get(role, 0) + 1
        for role, count in processes.items():
            self.most_processes[role] = max(self.most_processes.get(role, 0), count)
        return rss_by_role, pss_by_role

    def _run(self):
        while not self._stop.is_set():
            rss_by_role, pss_by_role = self._sample()
            total = sum(rss_by_role.values())
            if total > self.peak:
                self.peak, self.breakdown = total, rss_by_role
            if pss_by_role is None:
                self.pss_peak = None
            elif self.pss_peak is not None and sum(pss_by_role.values()) > self.pss_peak:
                self.pss_peak, self.pss_breakdown = sum(pss_by_role.values()), pss_by_role
            self._stop.wait(0.2)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def dataset(events: int, keys: int, files: int, minutes: float | None = None) -> Path:
    """Generated once per size, then reused: the same files for every run. `minutes`: the event time the
    events span (default: what the generator's sensor rates give, which shrinks as keys grow)."""
    from spark_jobs.jobs import generate_events

    span = "" if minutes is None else f"-minutes-{minutes:g}"
    directory = WORK / f"events-{events}-sensors-{keys}-files-{files}{span}"
    facts = directory / "_generated.json"
    if facts.exists() and json.loads(facts.read_text())["events"] == events:
        return directory
    shutil.rmtree(directory, ignore_errors=True)
    started = time.monotonic()
    generate_events.main(
        ["--output", str(directory), "--events", str(events), "--sensors", str(keys), "--files", str(files)]
        + ["--late-fraction", "0.01"]
        + ([] if minutes is None else ["--minutes", str(minutes)])
    )
    print(f"  generated {events:,} events in {files} files in {time.monotonic() - started:.0f} s", flush=True)
    return directory


def tuned_settings(spark, checkpoint_dir: str) -> dict[str, str]:
    """The SQL settings our own query gives itself (`TopologyRuntime.query_settings`), for native."""
    from spark_jobs.spark.job import JobSpec
    from spark_jobs.spark.runtime import RunConfig, TopologyRuntime

    config = RunConfig("unused", "unused", checkpoint_dir, shuffle_partitions=SHUFFLE_PARTITIONS)
    return TopologyRuntime(spark, JobSpec(SHAPES["count"][0], {}, 1), config).query_settings()


def run_ours(
    spark, shape: str, input_dir: Path, scratch: Path, max_files: int | None, partitions: int
) -> dict:
    from spark_jobs.spark.job import JobSpec
    from spark_jobs.spark.runtime import RunConfig, TopologyRuntime

    module, options, _ = SHAPES[shape]
    config = RunConfig(
        str(input_dir),
        str(scratch / "out"),
        str(scratch / "ckpt"),
        max_files_per_trigger=max_files,
        shuffle_partitions=SHUFFLE_PARTITIONS,
    )
    started = time.monotonic()
    summary = TopologyRuntime(spark, JobSpec(module, options, partitions), config, shape).run()
    return {
        "seconds": time.monotonic() - started,
        "events": summary.read,
        "output_rows": sum(summary.emitted.values()),
        "batches": len(summary.batches),
        "late": summary.late,
    }


def native_query(spark, name: str, input_dir: Path, max_files: int | None):
    """The native streaming DataFrame of a shape, and its output mode."""
    from pyspark.sql import functions as F

    reader = spark.readStream.schema(NATIVE_SCHEMA)
    if max_files:
        reader = reader.option("maxFilesPerTrigger", max_files)
    readings = reader.json(str(input_dir))
    if name == "running_count":
        return readings.groupBy("key").count(), "update"
    timed = readings.withColumn("event_time", F.timestamp_millis("timestamp")).withWatermark(
        "event_time", GRACE
    )
    if name == "windowed_count":
        return timed.groupBy(F.window("event_time", WINDOW), "key").count(), "append"
    if name == "hopping_stats":
        temperature = F.col("value.temperature")
        return (
            timed.groupBy(F.window("event_time", WINDOW, ADVANCE), "key").agg(
                F.count(F.lit(1)).alias("count"),
                F.sum(temperature).alias("sum"),
                F.max(temperature).alias("max"),
            ),
            "append",
        )
    raise ValueError(f"no native query {name!r}")


def run_native(
    spark, name: str, input_dir: Path, scratch: Path, max_files: int | None, settings: dict[str, str]
) -> dict:
    """Timed from building the query, as ours is (TopologyRuntime.run builds its query)."""
    started = time.monotonic()
    frame, mode = native_query(spark, name, input_dir, max_files)
    for key, value in settings.items():
        spark.conf.set(key, value)
    out = scratch / "out"
    writer = frame.writeStream.outputMode(mode).option("checkpointLocation", str(scratch / "ckpt"))
    if mode == "update":  # a file sink takes append only: each micro-batch's updated rows, appended

        def write_batch(batch, _batch_id):
            batch.write.mode("append").parquet(str(out))

        writer = writer.foreachBatch(write_batch)
    else:
        writer = writer.format("parquet").option("path", str(out))
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    seconds = time.monotonic() - started
    rows = file_sink_rows(out) if mode == "append" else parquet_rows(out)
    return {
        "seconds": seconds,
        "events": sum(p["numInputRows"] for p in query.recentProgress),
        "output_rows": rows,
        "batches": len(query.recentProgress),
    }


def file_sink_rows(output: Path) -> int:
    """Rows of a Spark file sink's output, counted from the Parquet footers of the files its
    `_spark_metadata` log commits: a Spark job to count them would add seconds to native's end-to-end time
    (its process is timed until it exits)."""
    files: set[str] = set()
    log = output / "_spark_metadata"
    if not log.exists():
        return 0
    batches = [p for p in log.iterdir() if not p.name.startswith(".")]  # N or N.compact, not .N.crc
    for entry_file in sorted(batches, key=lambda p: int(p.name.split(".")[0])):
        for line in entry_file.read_text().splitlines()[1:]:  # the first line is the log's version
            entry = json.loads(line)
            if entry["action"] == "add":
                files.add(entry["path"])
            else:
                files.discard(entry["path"])
    return sum(pq.ParquetFile(unquote(urlparse(path).path)).metadata.num_rows for path in files)


def parquet_rows(output: Path) -> int:
    """Rows of the Parquet files under `output` (foreachBatch appends: no log), from their footers."""
    if not output.exists():
        return 0
    return sum(pq.ParquetFile(path).metadata.num_rows for path in output.rglob("*.parquet"))


def submit_args(driver_memory: str, java_options: str) -> str:
    """PYSPARK_SUBMIT_ARGS of a run: the JVM's heap and options are fixed when it starts, from
    spark-submit's arguments (a SparkConf given to the session is read only once the JVM runs)."""
    words = ["--driver-memory", driver_memory]
    if java_options:
        words += ["--driver-java-options", java_options]
    return shlex.join([*words, "pyspark-shell"])


def one_run(args) -> int:
    """--one SIDE: a single run in this process's own local[2] session; prints its result as JSON."""
    began = time.monotonic()
    from spark_jobs.spark.session import local_spark_session, stop_session

    os.environ["PYSPARK_SUBMIT_ARGS"] = submit_args(args.driver_memory, args.java_options)

    spark = local_spark_session(
        f"spark-bench-{args.one}",
        master="local[2]",
        shuffle_partitions=SHUFFLE_PARTITIONS,
        extra_conf={"spark.ui.enabled": "false"},
    )
    session_s = time.monotonic() - began
    scratch = Path(args.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        if args.one == "ours":
            result = run_ours(
                spark, args.shape, Path(args.input), scratch, args.max_files_per_trigger, args.partitions
            )
        else:
            settings = tuned_settings(spark, str(scratch / "ckpt")) if args.one == "native" else {}
            name = SHAPES[args.shape][2]
            result = run_native(spark, name, Path(args.input), scratch, args.max_files_per_trigger, settings)
            result["settings"] = settings
    finally:
        stopping = time.monotonic()
        stop_session(spark)  # both sides: what our jobs call (spark_jobs.spark.cli)
    # Where the process's time outside the run went: imports and the session's start, and its stop.
    result["session_start_seconds"] = round(session_s, 2)
    result["stop_seconds"] = round(time.monotonic() - stopping, 2)
    print(json.dumps(result))
    return 0


def run_in_own_process(side: str, shape: str, input_dir: Path, args) -> dict:
    """One run as its own process, timed from launch to exit, with the peak RSS of its process tree."""
    scratch = WORK / "scratch" / f"{shape}-{side}"
    command = [sys.executable, str(Path(__file__).resolve()), "--one", side, "--shape", shape]
    command += ["--input", str(input_dir), "--scratch", str(scratch), "--partitions", str(args.partitions)]
    command += ["--driver-memory", args.driver_memory]
    if args.java_options:
        command.append(f"--java-options={args.java_options}")
    return timed_process(command, scratch, args.max_files_per_trigger, f"{shape} {side}")


def timed_process(command: list[str], scratch: Path, max_files_per_trigger: int | None, what: str) -> dict:
    """Run a benchmark's `--one` command (its last stdout line: JSON with `seconds` in process and
    `events`) in a fresh scratch folder; its result with the wall time from launch to exit, the peak RSS
    of its process tree and the events per second."""
    shutil.rmtree(scratch, ignore_errors=True)
    if max_files_per_trigger:
        command = [*command, "--max-files-per-trigger", str(max_files_per_trigger)]
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with PeakMemory(process.pid) as memory:
        stdout, stderr = process.communicate()
    seconds = time.monotonic() - started
    shutil.rmtree(scratch, ignore_errors=True)
    if process.returncode != 0:
        raise RuntimeError(f"{what} run failed ({process.returncode}):\n{stderr[-4000:]}")
    result = json.loads(stdout.strip().splitlines()[-1])
    result["in_process_seconds"] = round(result.pop("seconds"), 2)
    result["seconds"] = round(seconds, 2)
    result["peak_rss_mb"] = round(memory.peak / 2**20)
    result["peak_rss_mb_by_process"] = {
        role: round(rss / 2**20) for role, rss in sorted(memory.breakdown.items())
    }
    if memory.pss_peak is not None:
        result["peak_pss_mb"] = round(memory.pss_peak / 2**20)
        result["peak_pss_mb_by_process"] = {
            role: round(pss / 2**20) for role, pss in sorted(memory.pss_breakdown.items())
        }
    result["most_processes"] = dict(sorted(memory.most_processes.items()))
    result["events_per_s"] = round(result["events"] / seconds)
    return result


def available(shape: str) -> str | None:
    """None if our side of the shape can run, else why not (the engine lacks what its job imports)."""
    import importlib

    try:
        importlib.import_module(SHAPES[shape][0])
    except ImportError as error:
        return f"not available in this engine ({error})"
    return None


def compare(shape: str, keys: int, input_dir: Path, sides: list[str], args, native_cache: dict) -> list[dict]:
    """Every side of one shape at one key count; with --repeat the sides take turns and each one's best
    run counts. Native runs a query shared by two shapes once (cached by query name and key count)."""
    runs: dict[str, list[dict]] = {side: [] for side in sides}
    for i in range(args.repeat):
        for side in sides if i % 2 == 0 else reversed(sides):
            cache_key = (side, SHAPES[shape][2], keys, i)
            if side != "ours" and cache_key in native_cache:
                runs[side].append(native_cache[cache_key])
                continue
            result = run_in_own_process(side, shape, input_dir, args)
            if side != "ours":
                native_cache[cache_key] = result
            runs[side].append(result)
    best = {side: max(results, key=lambda r: r["events_per_s"]) for side, results in runs.items()}
    rows = []
    for side in sides:
        result = dict(best[side])
        settings = result.pop("settings", None)
        row = {"shape": shape, "side": side, "keys": keys, "events": args.events, **result}
        row["all_runs_events_per_s"] = [r["events_per_s"] for r in runs[side]]
        if settings is not None:
            row["settings"] = settings
        if side != "ours" and "ours" in best:
            row["ratio_ours_over_this"] = round(best["ours"]["events_per_s"] / result["events_per_s"], 3)
        rows.append(row)
    for side in sides:
        print(f"  {shape} {keys:,} keys {side}: {memory_split(best[side])}")
    line = " | ".join(
        f"{side} {best[side]['events_per_s']:>9,} ev/s ({best[side]['seconds']:.0f} s, "
        f"{best[side]['output_rows']:,} rows, peak {best[side]['peak_rss_mb']:,} MB"
        f"{pss_text(best[side])})"
        for side in sides
    )
    ratios = ", ".join(
        f"ours/{row['side']} {row['ratio_ours_over_this']}" for row in rows if "ratio_ours_over_this" in row
    )
    print(f"{shape:16s} {keys:>9,} keys | {line} | {ratios}", flush=True)
    return rows


def pss_text(result: dict) -> str:
    return f", PSS {result['peak_pss_mb']:,} MB" if "peak_pss_mb" in result else ""


def memory_split(result: dict) -> str:
    """A run's peak RSS and PSS by kind of process, and the most processes of each kind at once."""
    rss = ", ".join(f"{role} {mb:,}" for role, mb in result["peak_rss_mb_by_process"].items())
    text = f"peak RSS MB {rss}"
    if "peak_pss_mb" in result:
        pss = ", ".join(f"{role} {mb:,}" for role, mb in result["peak_pss_mb_by_process"].items())
        text += f"; peak PSS {result['peak_pss_mb']:,} MB: {pss}"
    return f"{text}; processes at most {result['most_processes']}"


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated, of {', '.join(SHAPES)}")
    parser.add_argument(
        "--keys", type=int, nargs="+", default=[200], help="key counts (e.g. 200 100000 1000000)"
    )
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument(
        "--minutes",
        type=float,
        help="event time the events span (default: the generator's sensor rates; at 100k keys and more "
        "that is under one 10-minute window, so no window closes)",
    )
    parser.add_argument(
        "--max-files-per-trigger",
        type=int,
        default=10,
        help="files (100k events each) per micro-batch, both sides",
    )
    parser.add_argument("--partitions", type=int, default=4, help="ours: the job's partitions (tasks)")
    parser.add_argument(
        "--driver-memory",
        default=DRIVER_MEMORY,
        help=f"every side's JVM heap, spark.driver.memory (default {DRIVER_MEMORY}; at least 450m)",
    )
    parser.add_argument(
        "--java-options",
        default="",
        help="every side's JVM options (spark-submit --driver-java-options), e.g. -XX:+UseSerialGC",
    )
    parser.add_argument("--untuned", action="store_true", help="also run native without our query's settings")
    parser.add_argument(
        "--sides",
        default="ours,native",
        help=f"comma-separated, of {', '.join(SIDES)}: the sides to run (--untuned adds native_untuned)",
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each side, taking turns; the best counts"
    )
    parser.add_argument(
        "--results-dir", help="where to append the record (default: bench/results, or $BENCH_RESULTS_DIR)"
    )
    parser.add_argument("--one", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--shape", choices=list(SHAPES), help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--scratch", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.shape_names = [s for s in args.shapes.split(",") if s]
    unknown = [s for s in args.shape_names if s not in SHAPES]
    if unknown:
        parser.exit(2, f"error: unknown shapes {unknown}; known: {', '.join(SHAPES)}\n")
    args.side_names = [s for s in args.sides.split(",") if s]
    if not args.side_names or set(args.side_names) - set(SIDES):
        parser.exit(2, f"error: --sides takes some of {', '.join(SIDES)}, got {args.sides!r}\n")
    if min([*args.keys, args.events, args.repeat, args.partitions]) < 1:
        parser.exit(2, "error: --keys, --events, --repeat and --partitions must be at least 1\n")
    if args.minutes is not None and not args.minutes > 0:
        parser.exit(2, "error: --minutes must be more than 0\n")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.one:
        return one_run(args)
    recorder = Recorder("spark", argv, args.results_dir)
    WORK.mkdir(parents=True, exist_ok=True)
    sides = args.side_names + (
        ["native_untuned"] if args.untuned and "native_untuned" not in args.side_names else []
    )
    files = max(1, args.events // 100_000)
    figures: list[dict] = []
    skipped = {}
    native_cache: dict = {}
    for shape in args.shape_names:
        reason = available(shape)
        if reason:
            skipped[shape] = reason
            print(f"{shape}: skipped, {reason}", flush=True)
    for keys in args.keys:
        input_dir = dataset(args.events, keys, files, args.minutes)
        for shape in args.shape_names:
            if shape not in skipped:
                figures += compare(shape, keys, input_dir, sides, args, native_cache)
    settings = {
        "events": args.events,
        "minutes": args.minutes,
        "files": files,
        "max_files_per_trigger": args.max_files_per_trigger,
        "keys": args.keys,
        "repeat": args.repeat,
        "master": "local[2]",
        "shuffle_partitions": SHUFFLE_PARTITIONS,
        "driver_memory": args.driver_memory,
        "java_options": args.java_options,
        "ours": {
            "partitions": args.partitions,
            "jobs": {s: [SHAPES[s][0], SHAPES[s][1]] for s in args.shape_names},
        },
        "native": {
            "window": WINDOW,
            "advance": ADVANCE,
            "watermark": GRACE,
            "queries": {s: SHAPES[s][2] for s in args.shape_names},
        },
        "sides": sides,
        "skipped": skipped,
    }
    recorder.write(settings, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
