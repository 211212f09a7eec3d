"""Soak: N scheduled runs of the sensor-alerts pipeline, job then validation, each its own process.

    python bench/soak.py [--runs 8] [--events 300000] [--sensors 2000] [--files 4] [--root var/soak]

Each run is what a scheduled DAG run pays: new readings land (the next `--events`, later in event time
than the previous run's), the job runs once over them (`--trigger available-now`, its own Python process
and JVM), then `python -m spark_jobs.quality.validate` validates what that run published (its own process
too, with the context earlier validations kept). Printed per run: seconds of job and of validation
(process start included), validation / job, rows validated; then the validation time of the last run
against the second (the first run builds the context from nothing) and the worst validation / job.
The figures go to `<root>/soak.json` too. `<root>` is emptied first.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env


def _timed(command: list[str], log: Path) -> float:
    """Seconds the command took, process start included; its output goes to `log`."""
    started = time.perf_counter()
    with log.open("wb") as out:
        done = subprocess.run(command, cwd=REPO_ROOT, env=_env(), stdout=out, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])} ... failed ({done.returncode}); see {log}")
    return seconds


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat().replace("+00:00", "Z")


def soak(root: Path, runs: int, events: int, sensors: int, files: int) -> list[dict]:
    shutil.rmtree(root, ignore_errors=True)
    inputs, output, checkpoint, reports, logs = (
        root / n for n in ("input", "output", "cp", "reports", "logs")
    )
    logs.mkdir(parents=True)
    start_ms = 1_735_689_600_000  # 2025-01-01T00:00:00Z
    figures = []
    for run in range(1, runs + 1):
        generated = subprocess.run(
            [sys.executable, "-m", "spark_jobs.jobs.generate_events", "--output", str(inputs),
             "--events", str(events), "--sensors", str(sensors), "--files", str(files),
             "--seed", str(run), "--start", _iso(start_ms)],
            cwd=REPO_ROOT, env=_env(), check=True, capture_output=True, text=True,
        )  # fmt: skip
        last_event_ms = json.loads(generated.stdout)["last_event_ms"]
        job_s = _timed(
            [sys.executable, "-m", "spark_jobs.jobs.sensor_alerts", "--input", str(inputs),
             "--output", str(output), "--checkpoint", str(checkpoint), "--trigger", "available-now",
             "--wall-clock", _iso(last_event_ms + 60_000)],
            logs / f"job-{run}.log",
        )  # fmt: skip
        validation_s = _timed(
            [sys.executable, "-m", "spark_jobs.quality.validate", "--output", str(output),
             "--reports", str(reports), "--run-name", f"soak-{run}"],
            logs / f"validate-{run}.log",
        )  # fmt: skip
        summary = json.loads((output / "_runs" / "latest.json").read_text())
        verdicts = json.loads((reports / "verdicts.json").read_text())
        figures.append(
            {
                "run": run,
                "events": summary["records"]["read"],
                "batches": len(summary["batches"]),
                "job_s": round(job_s, 1),
                "validation_s": round(validation_s, 1),
                "validation_per_job": round(validation_s / job_s, 2),
                "rows_validated": sum(s.get("rows", 0) for s in verdicts["suites"]),
                "verdict": "passed" if verdicts["success"] else "FAILED",
            }
        )
        row = figures[-1]
        print(
            f"run {run}: {row['events']:,} events, job {job_s:.1f} s, validation {validation_s:.1f} s "
            f"({row['validation_per_job']:.2f}x the job), {row['rows_validated']:,} rows validated, "
            f"{row['verdict']}",
            flush=True,
        )
        start_ms = last_event_ms + 1_000
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/soak.py", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--events", type=int, default=300_000, help="readings landed per run")
    parser.add_argument("--sensors", type=int, default=2_000)
    parser.add_argument("--files", type=int, default=4, help="files landed per run")
    parser.add_argument("--root", type=Path, default=REPO_ROOT / "var" / "soak")
    args = parser.parse_args(argv)
    if args.runs < 2:
        parser.error("--runs >= 2 (the last run is compared with the second)")
    figures = soak(args.root, args.runs, args.events, args.sensors, args.files)
    growth = figures[-1]["validation_s"] / figures[1]["validation_s"]
    worst = max(f["validation_per_job"] for f in figures)
    failed = [f["run"] for f in figures if f["verdict"] != "passed"]
    print(
        f"\nvalidation, last run / second run: {growth:.2f}x; validation / job, worst run: {worst:.2f}x"
        + (f"; runs that FAILED validation: {failed}" if failed else "; every run passed")
    )
    (args.root / "soak.json").write_text(json.dumps({"args": vars(args) | {"root": str(args.root)},
                                                     "runs": figures, "growth": growth}, indent=1))  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
