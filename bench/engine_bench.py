"""Throughput of the engine on the sensor-alerts shape, against a peer on the same records.

    python bench/engine_bench.py [--records N] [--batch B] [--profile]

Records: 1000 sensor keys, event time moving forward ~1 ms per record with up to 5 s of out-of-order
jitter, and ~1% late records (4 to 10 minutes behind; the grace is 2 minutes). Generation is not timed.

Ours: per-key 2-minute tumbling windows with 2 minutes grace, count(), raw counts to one topic, and
suppress(until_window_closes(unbounded())) -> filter(count < 4) -> another topic; fed to one StreamTask in
micro-batches of B records, each followed by drain_output() (the columnar output a runtime would write).

Peer: bytewax's tumbling-window count_window with the same window and allowed lateness, run in process
(bytewax.testing.run_main, one worker). If bytewax is missing, a plain dictionary loop doing the same
windowed count with grace is the floor. Both run on one core, in this process, one after the other.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from datetime import UTC

from spark_jobs.streams import BufferConfig, StreamsBuilder, Suppressed, TimeWindows  # noqa: E402
from spark_jobs.streams.task import StreamTask  # noqa: E402

WINDOW_MS = 120_000
GRACE_MS = 120_000
THRESHOLD = 4
SENSORS = 1000
TOPIC = "sensor-readings"


def generate(n: int, seed: int = 7) -> tuple[list[str], list[float], list[int]]:
    rng = random.Random(seed)
    names = [f"sensor-{i:04d}" for i in range(SENSORS)]
    keys = [names[rng.randrange(SENSORS)] for _ in range(n)]
    values = [round(rng.uniform(10.0, 30.0), 2) for _ in range(n)]
    base = 1_700_000_000_000
    timestamps = []
    for i in range(n):
        ts = base + i - rng.randrange(5000)  # out-of-order jitter up to 5 s
        if rng.random() < 0.01:
            ts -= rng.randrange(240_000, 600_000)  # late: beyond the 2-minute grace
        timestamps.append(ts)
    return keys, values, timestamps


def sensor_alerts_topology():
    builder = StreamsBuilder()
    counts = (
        builder.stream(TOPIC)
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(WINDOW_MS, GRACE_MS))
        .count()
    )
    counts.to_stream().to("window-counts")
    (
        counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .filter(lambda window, count: count < THRESHOLD)
        .to("low-activity-alerts")
    )
    return builder.build()


class Timer:
    """Wall time and this process's CPU time: the machine is shared, so CPU time is the steadier figure."""

    def __enter__(self) -> Timer:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu


def run_ours(keys, values, timestamps, batch: int) -> tuple[Timer, int, int]:
    task = StreamTask(sensor_alerts_topology())
    emitted = 0
    with Timer() as timer:
        for lo in range(0, len(keys), batch):
            hi = lo + batch
            task.process_batch(TOPIC, keys[lo:hi], values[lo:hi], timestamps[lo:hi])
            emitted += len(task.drain_output())
    return timer, emitted, int(task.metrics()["dropped-records-total"])


def run_bytewax(keys, values, timestamps) -> tuple[Timer, int]:
    from datetime import datetime, timedelta

    import bytewax.operators as op
    import bytewax.operators.windowing as win
    from bytewax.dataflow import Dataflow
    from bytewax.testing import TestingSink, TestingSource, run_main

    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    items = list(zip(keys, timestamps, strict=False))
    flow = Dataflow("sensor_counts")
    stream = op.input("readings", flow, TestingSource(items, batch_size=10_000))
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


def run_dict_floor(keys, values, timestamps) -> tuple[Timer, int]:
    """The same windowed count with grace in a plain loop: per-window counts, closed windows flushed."""
    with Timer() as timer:
        finals = _dict_loop(keys, timestamps)
    return timer, finals


def _dict_loop(keys, timestamps) -> int:
    counts: dict[tuple[str, int], int] = {}
    observed = -1
    finals = 0
    next_flush = None
    for key, ts in zip(keys, timestamps, strict=False):
        if ts > observed:
            observed = ts
        window = ts - ts % WINDOW_MS
        if window + WINDOW_MS + GRACE_MS <= observed:
            continue
        counts[(key, window)] = counts.get((key, window), 0) + 1
        if next_flush is None or observed >= next_flush:
            closed = [k for k in counts if k[1] + WINDOW_MS + GRACE_MS <= observed]
            for k in closed:
                del counts[k]
            finals += len(closed)
            next_flush = observed - observed % WINDOW_MS + WINDOW_MS
    return finals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--batch", type=int, default=100_000, help="records per process_batch call")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile our engine instead of the comparison"
    )
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    keys, values, timestamps = generate(args.records)
    print(f"generated {args.records:,} records in {time.perf_counter() - t0:.1f} s (not timed)")

    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        run_ours(keys, values, timestamps, args.batch)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
        return 0

    n = args.records
    ours, emitted, dropped = run_ours(keys, values, timestamps, args.batch)
    print(
        f"ours:  {n / ours.cpu:,.0f} records/s of CPU time, {n / ours.wall:,.0f} records/s of wall time "
        f"({ours.cpu:.2f} s CPU, {ours.wall:.2f} s wall; {emitted:,} output records, {dropped:,} dropped late)"
    )

    try:
        peer, peer_out = run_bytewax(keys, values, timestamps)
        import importlib.metadata

        peer_name = (
            f"bytewax {importlib.metadata.version('bytewax')} count_window (tumbling, event clock, 1 worker)"
        )
    except ImportError:
        peer, peer_out = run_dict_floor(keys, values, timestamps)
        peer_name = "plain dict loop (bytewax not installed)"
    print(
        f"peer:  {n / peer.cpu:,.0f} records/s of CPU time, {n / peer.wall:,.0f} records/s of wall time "
        f"({peer.cpu:.2f} s CPU, {peer.wall:.2f} s wall; {peer_out:,} final window counts) -- {peer_name}"
    )
    print(
        f"ratio: {peer.cpu / ours.cpu:.2f}x by CPU time, {peer.wall / ours.wall:.2f}x by wall time (ours / peer)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
