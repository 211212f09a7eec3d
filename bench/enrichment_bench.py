"""The three-input join job against the one-input job, on the same readings, end to end.

    python bench/enrichment_bench.py [--events N] [--keys N [N ...]] [--files N] [--max-files-per-trigger N]
                                     [--repeat N] [--results-dir DIR]

Generates `generate_enrichment` folders under var/bench/enrichment (once per size), then runs
`sensor_enrichment` (readings + registry table + maintenance visits: stream-table and stream-stream joins,
Kafka's record selection across the three topics) and `window_finals` (the one-input windowed count +
suppress) over the same readings, each its own process (`--one NAME`: its own local[2] JVM and Python
workers) timed from launch to exit, with the peak summed RSS of its process tree, and a fresh checkpoint.
Prints events/s of each (input records read / wall time) and enrichment / one-input, and appends one
record to `bench/results/enrichment.jsonl` (`--results-dir`, or $BENCH_RESULTS_DIR).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.results import Recorder  # noqa: E402
from bench.spark_bench import timed_process  # noqa: E402
from spark_jobs.jobs import sensor_enrichment as enrichment  # noqa: E402

ROOT = REPO_ROOT / "var" / "bench" / "enrichment"
ONE_INPUT = "spark_jobs.jobs.window_finals"
SIDES = ("enrichment", "one_input")


def dataset(events: int, keys: int, files: int) -> Path:
    from spark_jobs.jobs import generate_enrichment

    root = ROOT / f"events-{events}-sensors-{keys}-files-{files}"
    done = root / "_complete"
    if done.exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    started = time.monotonic()
    generate_enrichment.main(
        ["--output", str(root), "--events", str(events), "--sensors", str(keys), "--files", str(files)]
    )
    done.write_text("")
    print(f"  generated {events:,} readings in {time.monotonic() - started:.0f} s", flush=True)
    return root


def inputs(side: str, root: Path):
    if side == "enrichment":
        return enrichment.JOB_MODULE, {t: str(root / t) for t in enrichment.INPUT_TOPICS}
    return ONE_INPUT, str(root / enrichment.READINGS)


def one_run(args) -> int:
    from spark_jobs.spark.job import JobSpec
    from spark_jobs.spark.runtime import RunConfig, run_job
    from spark_jobs.spark.session import local_spark_session, stop_session

    spark = local_spark_session(
        f"enrichment-bench-{args.one}", master="local[2]", extra_conf={"spark.ui.enabled": "false"}
    )
    scratch = Path(args.scratch)
    module, input_dirs = inputs(args.one, Path(args.input))
    try:
        config = RunConfig(
            input_dirs,
            str(scratch / "out"),
            str(scratch / "ckpt"),
            max_files_per_trigger=args.max_files_per_trigger,
        )
        started = time.monotonic()
        summary = run_job(spark, JobSpec(module, {}, args.partitions), config).to_dict()
        seconds = time.monotonic() - started
    finally:
        stop_session(spark)
    print(json.dumps({"seconds": seconds, "events": summary["records"]["read"]}))
    return 0


def run_in_own_process(side: str, root: Path, args) -> dict:
    scratch = ROOT / "scratch" / side
    command = [sys.executable, str(Path(__file__).resolve()), "--one", side, "--input", str(root)]
    command += ["--scratch", str(scratch), "--partitions", str(args.partitions)]
    return timed_process(command, scratch, args.max_files_per_trigger, side)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, nargs="+", default=[200])
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--max-files-per-trigger", type=int, default=None)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=1, help="runs of each, taking turns; the best counts")
    parser.add_argument("--results-dir", help="where to append the record (default: bench/results)")
    parser.add_argument("--one", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--scratch", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        return one_run(args)
    if min([*args.keys, args.events, args.files, args.repeat]) < 1:
        parser.exit(2, "error: --keys, --events, --files and --repeat must be at least 1\n")
    recorder = Recorder("enrichment", argv, args.results_dir)
    figures = []
    for keys in args.keys:
        root = dataset(args.events, keys, args.files)
        runs: dict[str, list[dict]] = {side: [] for side in SIDES}
        for i in range(args.repeat):
            for side in SIDES if i % 2 == 0 else reversed(SIDES):
                runs[side].append(run_in_own_process(side, root, args))
        best = {side: max(results, key=lambda r: r["events_per_s"]) for side, results in runs.items()}
        for side in SIDES:
            figures.append(
                {
                    "shape": "enrichment",
                    "side": side,
                    "keys": keys,
                    **best[side],
                    "all_runs_events_per_s": [r["events_per_s"] for r in runs[side]],
                }
            )
        ratio = best["enrichment"]["events_per_s"] / best["one_input"]["events_per_s"]
        print(
            f"{keys:>9,} keys | "
            + " | ".join(
                f"{side} {best[side]['events_per_s']:,} ev/s ({best[side]['seconds']:.0f} s, peak "
                f"{best[side]['peak_rss_mb']:,} MB)"
                for side in SIDES
            )
            + f" | enrichment / one-input {ratio:.2f}",
            flush=True,
        )
    settings = {
        "events": args.events,
        "files": args.files,
        "max_files_per_trigger": args.max_files_per_trigger,
        "keys": args.keys,
        "partitions": args.partitions,
        "repeat": args.repeat,
        "master": "local[2]",
        "jobs": {"enrichment": enrichment.JOB_MODULE, "one_input": ONE_INPUT},
    }
    recorder.write(settings, figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
