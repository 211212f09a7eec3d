"""The three-input join job against the one-input path, on the same readings, in one warm Spark session.

    python bench/enrichment_bench.py [--events N] [--sensors N] [--files N] [--max-files-per-trigger N]

Generates `generate_enrichment` folders under var/bench/enrichment, then runs (after a warm-up of each on
a small input) `sensor_enrichment` (readings + registry table + maintenance visits, stream-table and
stream-stream joins, Kafka's record selection across the three topics) and `window_finals` (the one-input
windowed count + suppress) over the same readings, each with a fresh checkpoint. Prints events/s of each
(input records read / wall time of the run) and the ratio enrichment / one-input.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from spark_jobs.jobs import generate_enrichment
from spark_jobs.jobs import sensor_enrichment as enrichment
from spark_jobs.spark.job import JobSpec
from spark_jobs.spark.runtime import RunConfig, run_job
from spark_jobs.spark.session import local_spark_session, stop_session

ROOT = Path("var/bench/enrichment")
ONE_INPUT = "spark_jobs.jobs.window_finals"


def _generate(root: Path, events: int, sensors: int, files: int) -> None:
    shutil.rmtree(root, ignore_errors=True)
    generate_enrichment.main(
        ["--output", str(root), "--events", str(events), "--sensors", str(sensors), "--files", str(files)]
    )


def _run(spark, module: str, inputs, work: Path, per_trigger: int | None) -> tuple[float, int]:
    shutil.rmtree(work, ignore_errors=True)
    config = RunConfig(inputs, str(work / "out"), str(work / "ckpt"), max_files_per_trigger=per_trigger)
    start = time.perf_counter()
    summary = run_job(spark, JobSpec(module, {}, 4), config).to_dict()
    return time.perf_counter() - start, summary["records"]["read"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=500_000)
    parser.add_argument("--sensors", type=int, default=200)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--max-files-per-trigger", type=int, default=None)
    args = parser.parse_args(argv)
    spark = local_spark_session(
        "enrichment-bench", master="local[2]", extra_conf={"spark.ui.enabled": "false"}
    )
    try:
        _generate(ROOT / "warm", 2_000, 10, 2)
        _generate(ROOT / "in", args.events, args.sensors, args.files)
        results = {}
        for name, module, inputs in (
            ("enrichment", enrichment.JOB_MODULE, {t: str(ROOT / "in" / t) for t in enrichment.INPUT_TOPICS}),
            ("one-input", ONE_INPUT, str(ROOT / "in" / enrichment.READINGS)),
        ):
            warm = (
                inputs
                if isinstance(inputs, str)
                else {t: d.replace("/in/", "/warm/") for t, d in inputs.items()}
            )
            _run(
                spark,
                module,
                warm.replace("/in/", "/warm/") if isinstance(warm, str) else warm,
                ROOT / "w",
                None,
            )
            seconds, read = _run(spark, module, inputs, ROOT / name, args.max_files_per_trigger)
            results[name] = {
                "seconds": round(seconds, 2),
                "records": read,
                "events_per_s": round(read / seconds),
            }
            print(json.dumps({name: results[name]}), flush=True)
        ratio = results["enrichment"]["events_per_s"] / results["one-input"]["events_per_s"]
        print(json.dumps({"ratio_enrichment_over_one_input": round(ratio, 2), **vars(args)}))
    finally:
        stop_session(spark)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
