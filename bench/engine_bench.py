"""Throughput of the engine, shape by shape, at 200 and at 250k keys per task, as the Spark runtime drives it.

    python bench/engine_bench.py [--shapes count,hopping_user,...] [--records N] [--keys 200,250000]
                                 [--micro-batch M] [--batch B] [--repeat R] [--peer] [--results-dir DIR]
                                 [--profile SHAPE:KEYS]

One StreamTask on one core (this process), fed `--records` records in micro-batches of `--micro-batch`
(each in calls of `--batch` records to `process_batch`, or in one call to `process_topics` where it holds
several topics, each call followed by `drain_output` and `drain_late`), and after each micro-batch
`export_state()`, as the Spark runtime exports what changed before it keeps the live task for the next
micro-batch; the cyclic garbage collector is paused over the micro-batch
and runs once after it (counted as processing), as in a Spark worker. Printed per shape and key count:
records/s of CPU time (processing plus exports), the export's share of that time (over the run, and the
largest of one micro-batch), and the rate at the largest key count over the rate at the smallest. The key
counts take turns `--repeat` times and the run with the least CPU time counts: a slow spell of a shared
machine then does not decide a ratio.

Each shape that has one also runs its bare loop (`bench/bare_loops.py`: the state updates alone in a dict,
record by record, the shape's user functions included) over the same records, recorded as side
"bare_loop": what the per-record work and the memory hierarchy cost plain Python, before any engine work.

Records: K sensor keys drawn at random, each key getting ~4 readings per 2 minutes of event time (the
event-time step per record is 2 min / 4K), values `{"temperature": t}`, up to 5 s of out-of-order jitter
and ~1% late records (4 to 10 minutes behind). Generation is not timed, and the records are out of the
cyclic garbage collector's reach during the timed runs (`freeze_inputs`), as a worker does not hold them.
With many keys the same records span little event time, so most windows are still open at the end: the
state the key count makes a task hold is what the benchmark measures.

Shapes (the topologies are the ones `bench/spark_bench.py` runs on Spark, from `spark_jobs/jobs` and
`bench/jobs`):

- count: `spark_jobs.jobs.window_finals`, tumbling 10-minute windows, 2 minutes grace, count, suppressed
  until the window closes;
- hopping_user: `bench.jobs.hopping_stats`, 10-minute windows advancing by 5, a user `aggregate(init,
  adder)` computing count, sum and max of the temperature, suppressed until the window closes;
- hopping_builtin: the same with declared aggregations (`bench.jobs.hopping_builtin`);
- running_count: `bench.jobs.running_count`, `group_by_key().count()` without windows (a KTable);
- session_count: `bench.jobs.session_count`, session windows (1-minute inactivity gap, 2 minutes grace),
  count;
- stream_table_join: a table of one record per key is processed first (not timed), then the readings
  join it;
- stream_stream_join: readings joined with a second stream (one record for every nine readings) within
  1 minute, 2 minutes grace; each micro-batch's records of both topics are taken by Kafka's record
  selection (`StreamTask.process_topics`, in runs of one topic, whatever `--batch`), as the Spark runtime
  takes a multi-input task's records (spark/task_runner.py): fed a topic whole after the other, a
  micro-batch's second-stream records would come hours of event time behind at 200 keys and almost none
  would join.

`--peer`: bytewax's tumbling-window `count_window` (same window, allowed lateness = grace, one worker, in
process) on the count shape's records at each key count, without any export.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import pstats
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bare_loops import bare_loop, enrich, registry  # noqa: E402
from bench.jobs import hopping_stats, running_count, session_count  # noqa: E402
from bench.results import Recorder  # noqa: E402
from spark_jobs.jobs import window_finals  # noqa: E402
from spark_jobs.streams import JoinWindows, StreamsBuilder, StreamTask  # noqa: E402
from spark_jobs.streams.runtime.gc_pause import no_cyclic_gc  # noqa: E402

READINGS = "sensor-readings"
REGISTRY = "sensor-registry"
VISITS = "maintenance"
WINDOW_MS = 600_000
GRACE_MS = 120_000
SESSION_GAP_MS = 60_000
JOIN_WINDOW_MS = 60_000
READINGS_PER_VISIT = 9
RATE_WINDOW_MS = 120_000  # each key gets READINGS_PER_KEY readings per RATE_WINDOW_MS of event time
READINGS_PER_KEY = 4


def generate(n: int, keys: int, seed: int = 7) -> tuple[list[str], list[dict], list[int]]:
    rng = random.Random(seed)
    names = [f"sensor-{i:07d}" for i in range(keys)]
    out_keys = [names[rng.randrange(keys)] for _ in range(n)]
    values = [{"temperature": round(rng.uniform(10.0, 30.0), 2)} for _ in range(n)]
    base = 1_700_000_000_000
    step = RATE_WINDOW_MS / (READINGS_PER_KEY * keys)  # ms of event time per record
    timestamps = []
    for i in range(n):
        ts = base + int(i * step) - rng.randrange(5000)  # out-of-order jitter up to 5 s
        if rng.random() < 0.01:
            ts -= rng.randrange(240_000, 600_000)  # late
        timestamps.append(ts)
    return out_keys, values, timestamps


@dataclass
class Feed:
    """What a shape processes: `before` (topic, keys, values, timestamps) untimed, then the timed micro-batches,
    each a list of (topic, keys, values, timestamps)."""

    before: list[tuple] = field(default_factory=list)
    micro_batches: list[list[tuple]] = field(default_factory=list)
    records: int = 0


def readings_feed(data, micro: int) -> Feed:
    keys, values, timestamps = data
    feed = Feed(records=len(keys))
    for lo in range(0, len(keys), micro):
        hi = lo + micro
        feed.micro_batches.append([(READINGS, keys[lo:hi], values[lo:hi], timestamps[lo:hi])])
    return feed


def table_then_readings(data, micro: int) -> Feed:
    """The registry (one record per key, timestamped before every reading), then the readings."""
    keys, _, timestamps = data
    table = registry(keys)
    first = min(timestamps) - 1
    feed = readings_feed(data, micro)
    feed.before = [(REGISTRY, list(table), list(table.values()), [first] * len(table))]
    return feed


def readings_and_visits(data, micro: int) -> Feed:
    """Every READINGS_PER_VISIT+1-th record becomes a maintenance visit; each micro-batch holds its readings
    and its visits (each in offset order), which the task takes by record selection (`process_topics`)."""
    keys, values, timestamps = data
    feed = Feed(records=len(keys))
    period = READINGS_PER_VISIT + 1
    for lo in range(0, len(keys), micro):
        hi = min(lo + micro, len(keys))
        readings = [i for i in range(lo, hi) if i % period]
        visits = [i for i in range(lo, hi) if not i % period]
        feed.micro_batches.append(
            [
                (
                    READINGS,
                    [keys[i] for i in readings],
                    [values[i] for i in readings],
                    [timestamps[i] for i in readings],
                ),
                (
                    VISITS,
                    [keys[i] for i in visits],
                    [{"duration_ms": 60_000}] * len(visits),
                    [timestamps[i] for i in visits],
                ),
            ]
        )
    return feed


def session_count_topology():
    return session_count.build_topology(gap=SESSION_GAP_MS, grace=GRACE_MS)


def stream_table_join_topology():
    builder = StreamsBuilder()
    registry = builder.table(REGISTRY)
    builder.stream(READINGS).join(registry, enrich).to("enriched")
    return builder.build()


def stream_stream_join_topology():
    builder = StreamsBuilder()
    visits = builder.stream(VISITS)
    windows = JoinWindows.of_time_difference_and_grace(JOIN_WINDOW_MS, GRACE_MS)
    builder.stream(READINGS).join(visits, lambda reading, visit: {**reading, **visit}, windows).to(
        "correlated"
    )
    return builder.build()


def hopping_builtin_topology():
    from bench.jobs import hopping_builtin

    return hopping_builtin.build_topology()


@dataclass
class Shape:
    topology: Callable[[], object]
    feed: Callable[[tuple, int], Feed]
    note: str


SHAPES: dict[str, Shape] = {
    "count": Shape(
        lambda: window_finals.build_topology(window_size=WINDOW_MS, grace=GRACE_MS),
        readings_feed,
        "tumbling 10 min, grace 2 min, count, suppress until the window closes",
    ),
    "hopping_user": Shape(
        hopping_stats.build_topology,
        readings_feed,
        "hopping 10 min by 5, user aggregate count/sum/max, suppress until the window closes",
    ),
    "hopping_builtin": Shape(
        hopping_builtin_topology,
        readings_feed,
        "hopping 10 min by 5, declared Count/Sum/Max, suppress until the window closes",
    ),
    "running_count": Shape(running_count.build_topology, readings_feed, "group_by_key().count(), no windows"),
    "session_count": Shape(
        session_count_topology, readings_feed, "session windows, gap 1 min, grace 2 min, count"
    ),
    "stream_table_join": Shape(
        stream_table_join_topology, table_then_readings, "table of every key first (untimed), then readings"
    ),
    "stream_stream_join": Shape(
        stream_stream_join_topology, readings_and_visits, "readings x visits (1 per 9 readings), within 1 min"
    ),
}


class Timer:
    """Wall time and this process's CPU time: the machine is shared, so CPU time is the steadier figure."""

    def __enter__(self) -> Timer:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu


@dataclass
class Run:
    processing_cpu: float = 0.0
    export_cpu: float = 0.0
    wall: float = 0.0
    export_shares: list[float] = field(default_factory=list)
    output_records: int = 0
    dropped: int = 0

    @property
    def cpu(self) -> float:
        return self.processing_cpu + self.export_cpu


def run_shape(topology, feed: Feed, batch: int) -> Run:
    task = StreamTask(topology)
    for topic, keys, values, timestamps in feed.before:
        task.process_batch(topic, keys, values, timestamps)
        task.drain_output()
    task.export_state()
    run = Run()
    for micro_batch in feed.micro_batches:
        # As a Spark worker runs a task's micro-batch (spark/task_processor.py, spark/runtime.py): the cyclic
        # collector paused over the whole of it, export included, and one collection after it, which the
        # processing time counts.
        with Timer() as processing, no_cyclic_gc():
            if len(micro_batch) > 1:  # several topics: taken by record selection, as the runtime does
                task.process_topics({topic: (keys, values, ts) for topic, keys, values, ts in micro_batch})
                run.output_records += len(task.drain_output())
                task.drain_late()
            else:
                topic, keys, values, timestamps = micro_batch[0]
                for lo in range(0, len(keys), batch):
                    hi = lo + batch
                    task.process_batch(topic, keys[lo:hi], values[lo:hi], timestamps[lo:hi])
                    run.output_records += len(task.drain_output())
                    task.drain_late()  # as the runtime drains them with the output (else every export keeps them)
        with Timer() as exporting, no_cyclic_gc():
            task.export_state()
        with Timer() as collecting:
            gc.collect()
        processing.cpu += collecting.cpu
        processing.wall += collecting.wall
        run.processing_cpu += processing.cpu
        run.export_cpu += exporting.cpu
        run.wall += processing.wall + exporting.wall
        run.export_shares.append(exporting.cpu / max(processing.cpu + exporting.cpu, 1e-9))
    metrics = task.metrics()
    run.dropped = int(metrics.get("dropped-records-total", 0))
    return run


def run_bytewax(keys, timestamps) -> tuple[Timer, int]:
    from datetime import UTC, datetime, timedelta

    import bytewax.operators as op
    import bytewax.operators.windowing as win
    from bytewax.dataflow import Dataflow
    from bytewax.testing import TestingSink, TestingSource, run_main

    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    flow = Dataflow("sensor_counts")
    stream = op.input(
        "readings", flow, TestingSource(list(zip(keys, timestamps, strict=True)), batch_size=10_000)
    )
    clock = win.EventClock(
        lambda item: epoch + timedelta(milliseconds=item[1]),
        wait_for_system_duration=timedelta(milliseconds=GRACE_MS),
    )
    windower = win.TumblingWindower(length=timedelta(milliseconds=WINDOW_MS), align_to=epoch)
    counts = win.count_window("count", stream, clock, windower, lambda item: item[0])
    out: list = []
    op.output("out", counts.down, TestingSink(out))
    with Timer() as timer:
        run_main(flow)
    return timer, len(out)


def peer_figures(data: dict[int, tuple], repeat: int) -> list[dict]:
    try:
        import importlib.metadata

        version = importlib.metadata.version("bytewax")
    except Exception:  # noqa: BLE001 - any failure to find it means: no peer
        print("peer: bytewax is not installed, skipped")
        return []
    rows = []
    for k, (keys, _, timestamps) in data.items():
        best = min((run_bytewax(keys, timestamps) for _ in range(repeat)), key=lambda r: r[0].cpu)
        timer, finals = best
        rate = len(keys) / timer.cpu
        print(
            f"peer  count {k:>9,} keys: {rate:>11,.0f} records/s of CPU time (bytewax {version}, {finals:,} finals)"
        )
        rows.append(
            {
                "shape": "count",
                "side": "peer",
                "peer": f"bytewax {version} count_window",
                "keys": k,
                "records": len(keys),
                "records_per_s": round(rate),
                "cpu_s": round(timer.cpu, 3),
                "wall_s": round(timer.wall, 3),
            }
        )
    return rows


def time_bare_loop(loop: Callable[[], object]) -> Timer:
    """One run of a bare loop (bench/bare_loops.py), the cyclic collector off (its state is freed, and
    collected, after the timer stops)."""
    with no_cyclic_gc():
        with Timer() as timer:
            state = loop()
        del state
    gc.collect()
    return timer


def bare_loop_figures(name: str, data: dict[int, tuple], repeat: int) -> list[dict]:
    """Per key count, the best of `repeat` runs of the shape's bare loop over the same records; none for a
    shape without one."""
    rows = []
    rates = {}
    for k, (keys, values, timestamps) in data.items():
        loop = bare_loop(name, keys, values, timestamps)
        if loop is None:
            return []
        best = min((time_bare_loop(loop) for _ in range(repeat)), key=lambda timer: timer.cpu)
        rates[k] = len(keys) / best.cpu
        print(f"{name:18s} {k:>9,} keys: {rates[k]:>11,.0f} records/s of CPU time, bare loop", flush=True)
        rows.append(
            {
                "shape": name,
                "side": "bare_loop",
                "keys": k,
                "records": len(keys),
                "records_per_s": round(rates[k]),
                "cpu_s": round(best.cpu, 3),
            }
        )
    if len(rates) > 1:
        lo, hi = min(rates), max(rates)
        print(f"{name:18s} bare loop's rate at {hi:,} keys / at {lo:,} keys: {rates[hi] / rates[lo]:.2f}")
    return rows


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated, of {', '.join(SHAPES)}")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", default="200,250000", help="key counts per task, comma-separated")
    parser.add_argument(
        "--micro-batch", type=int, default=100_000, help="records per micro-batch (an export after each)"
    )
    parser.add_argument("--batch", type=int, default=100_000, help="records per process_batch call")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs per key count, taking turns; the best counts"
    )
    parser.add_argument("--peer", action="store_true", help="also run bytewax on the count shape")
    parser.add_argument(
        "--results-dir", help="where to append the record (default: bench/results, or $BENCH_RESULTS_DIR)"
    )
    parser.add_argument(
        "--profile", metavar="SHAPE:KEYS", help="cProfile one run of SHAPE at KEYS, record nothing"
    )
    args = parser.parse_args(argv)
    shapes = [s for s in args.shapes.split(",") if s]
    unknown = [s for s in shapes if s not in SHAPES]
    if unknown:
        parser.exit(2, f"error: unknown shapes {unknown}; known: {', '.join(SHAPES)}\n")
    try:
        args.key_counts = [int(k) for k in args.keys.split(",")]
    except ValueError:
        parser.exit(2, f"error: --keys takes comma-separated integers, got {args.keys!r}\n")
    if min(args.key_counts + [args.records, args.micro_batch, args.batch, args.repeat]) < 1:
        parser.exit(2, "error: --keys, --records, --micro-batch, --batch and --repeat must be at least 1\n")
    args.shape_names = shapes
    return args


def warm_up(shape: Shape, data: tuple) -> None:
    """What a Spark worker has done before it runs our tasks, so that no timed run pays it: pandas imported
    (the worker's pandas UDF machinery imports it; the engine's key tables import its hash table lazily, at
    the first large window), and one small run of the shape, not counted (the first run of a shape in a
    process pays its first calls)."""
    with contextlib.suppress(ImportError):  # the engine runs without pandas too: then nothing to warm
        import pandas._libs.hashtable  # noqa: F401
    run_shape(shape.topology(), shape.feed(tuple(column[:2000] for column in data), 1000), 1000)


def freeze_inputs() -> None:
    """Take the benchmark's own objects (every key count's records and micro-batches, built before the
    runs and held through them) out of the cyclic collector's reach (`gc.freeze`). A Spark worker holds one
    micro-batch's records at a time; here millions of them stay alive, and each full collection that falls
    in a timed run would rescan them all, charging the engine for the harness. The engine's own objects,
    and its state, are collected as ever: only what exists before the timed runs is frozen."""
    gc.collect()
    gc.freeze()


def profile(args) -> int:
    shape_name, _, keys = args.profile.partition(":")
    shape = SHAPES[shape_name]
    data = generate(args.records, int(keys or 200))
    feed = shape.feed(data, args.micro_batch)
    warm_up(shape, data)
    freeze_inputs()
    profiler = cProfile.Profile()
    profiler.enable()
    run_shape(shape.topology(), feed, args.batch)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.profile:
        return profile(args)
    recorder = Recorder("engine", argv, args.results_dir)
    n = args.records
    data = {}
    for k in args.key_counts:
        t0 = time.perf_counter()
        data[k] = generate(n, k)
        print(
            f"generated {n:,} records over {k:,} keys in {time.perf_counter() - t0:.1f} s (not timed)",
            flush=True,
        )
    figures: list[dict] = []
    skipped: dict[str, str] = {}
    for name in args.shape_names:
        shape = SHAPES[name]
        try:
            shape.topology()
        except ImportError as error:
            skipped[name] = f"not available in this engine ({error})"
            print(f"{name}: skipped, {skipped[name]}", flush=True)
            continue
        feeds = {k: shape.feed(data[k], args.micro_batch) for k in args.key_counts}
        warm_up(shape, data[args.key_counts[0]])
        freeze_inputs()
        runs: dict[int, list[Run]] = {k: [] for k in args.key_counts}
        for _ in range(args.repeat):
            for k in args.key_counts:
                runs[k].append(run_shape(shape.topology(), feeds[k], args.batch))
                print(f"  {name} run {len(runs[k])} at {k:,} keys: {runs[k][-1].cpu:.2f} s CPU", flush=True)
        rates = {}
        for k in args.key_counts:
            best = min(runs[k], key=lambda run: run.cpu)
            records = feeds[k].records
            rates[k] = records / best.cpu
            share = best.export_cpu / best.cpu
            print(
                f"{name:18s} {k:>9,} keys: {rates[k]:>11,.0f} records/s of CPU time, "
                f"{records / best.wall:,.0f} of wall ({best.cpu:.2f} s CPU, best of {args.repeat}); export "
                f"{share:.1%} of it (at most {max(best.export_shares):.1%} of a micro-batch); "
                f"{best.output_records:,} output records, {best.dropped:,} dropped",
                flush=True,
            )
            figures.append(
                {
                    "shape": name,
                    "side": "ours",
                    "keys": k,
                    "records": records,
                    "records_per_s": round(rates[k]),
                    "records_per_s_wall": round(records / best.wall),
                    "cpu_s": round(best.cpu, 3),
                    "export_cpu_s": round(best.export_cpu, 3),
                    "export_share": round(share, 4),
                    "export_share_max_micro_batch": round(max(best.export_shares), 4),
                    "output_records": best.output_records,
                    "dropped": best.dropped,
                    "runs_cpu_s": [round(r.cpu, 3) for r in runs[k]],
                }
            )
        if len(args.key_counts) > 1:
            lo, hi = min(args.key_counts), max(args.key_counts)
            print(
                f"{name:18s} rate at {hi:,} keys / rate at {lo:,} keys: {rates[hi] / rates[lo]:.2f}",
                flush=True,
            )
        figures += bare_loop_figures(name, data, args.repeat)
    if args.peer and "count" in args.shape_names:
        figures += peer_figures(data, args.repeat)
    settings = {
        "records": n,
        "keys": args.key_counts,
        "micro_batch": args.micro_batch,
        "batch": args.batch,
        "repeat": args.repeat,
        "shapes": {name: SHAPES[name].note for name in args.shape_names},
        "skipped": skipped,
        "cores_used": 1,
        "peer": "bytewax count_window, 1 worker, in process" if args.peer else None,
        "bare_loop": "the state updates alone in a dict, record by record (bench/bare_loops.py)",
    }
    recorder.write(settings, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
