"""Benchmark results as data: one JSON record per run, appended to `bench/results/<benchmark>.jsonl`.

Every benchmark records through `Recorder`: it notes the load average when the run starts, and `write`
adds what identifies the run (UTC date, git commit and whether the tree was dirty, cores, load average at
start and end, Python and Spark versions, the command line) to the benchmark's own settings and figures.
`bench/render.py` reads the records back into `docs/performance.md` and `docs/img/`.

The directory is `--results-dir` of the benchmark, else `$BENCH_RESULTS_DIR`, else `bench/results/`:
smoke runs point it elsewhere so that only real runs are committed.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_RESULTS_DIR = REPO_ROOT / "bench" / "results"
RESULTS_DIR_ENV = "BENCH_RESULTS_DIR"


def results_dir(option: str | None = None) -> Path:
    """Where records go: the benchmark's `--results-dir`, else $BENCH_RESULTS_DIR, else bench/results."""
    chosen = option or os.environ.get(RESULTS_DIR_ENV)
    return Path(chosen) if chosen else DEFAULT_RESULTS_DIR


# What benchmark runs and their rendering write into the tree (bench/render.py's outputs).
WRITTEN_BY_BENCHMARKS = ("bench/results", "docs/performance.md", "docs/img", "README.md")


def git_state(root: Path = REPO_ROOT) -> dict[str, Any]:
    """The commit the run measured and whether its code had changes: tracked files only, and not those the
    benchmarks and bench/render.py write (`WRITTEN_BY_BENCHMARKS`), so that a second run recorded before
    the first is committed still measures a clean tree."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(root), *args], capture_output=True, text=True, check=False, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git(
        "status",
        "--porcelain",
        "--untracked-files=no",
        "--",
        ".",
        *map(":(exclude){}".format, WRITTEN_BY_BENCHMARKS),
    )
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def spark_version() -> str | None:
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover - stdlib since 3.8
        return None
    try:
        return version("pyspark")
    except PackageNotFoundError:
        return None


def command_line(argv: list[str] | None) -> str:
    """The command that reproduces the run, relative to the repository root."""
    script = Path(sys.argv[0]).resolve()
    try:
        script_name = str(script.relative_to(REPO_ROOT))
    except ValueError:
        script_name = str(script)
    args = sys.argv[1:] if argv is None else argv
    return shlex.join(["python", script_name, *args])


class Recorder:
    """One benchmark run's record: create it when the run starts, `write` it when the run ends."""

    def __init__(self, benchmark: str, argv: list[str] | None = None, directory: str | Path | None = None):
        self.benchmark = benchmark
        self.directory = results_dir(str(directory) if directory else None)
        self.started = dt.datetime.now(dt.UTC)
        self.load_start = list(os.getloadavg())
        self.git = git_state()  # the code that runs: taken at the start, the tree may change meanwhile
        self.command = command_line(argv)

    @property
    def path(self) -> Path:
        return self.directory / f"{self.benchmark}.jsonl"

    def record(self, settings: dict[str, Any], figures: list[dict[str, Any]]) -> dict[str, Any]:
        """The record of this run: identification, then `settings` (of both sides) and `figures` (one
        row per shape and key count)."""
        return {
            "benchmark": self.benchmark,
            "date": self.started.isoformat(timespec="seconds").replace("+00:00", "Z"),
            "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
            **self.git,
            "cores": os.cpu_count(),
            "load_average_start": self.load_start,
            "load_average_end": list(os.getloadavg()),
            "python": platform.python_version(),
            "spark": spark_version(),
            "command": self.command,
            "settings": settings,
            "figures": figures,
        }

    def write(self, settings: dict[str, Any], figures: list[dict[str, Any]]) -> dict[str, Any]:
        """Append the record as one JSON line; returns it."""
        record = self.record(settings, figures)
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as f:
            f.write(json.dumps(record, sort_keys=False) + "\n")
        print(f"recorded in {self.path}")
        return record


def read_records(directory: str | Path | None = None) -> list[dict[str, Any]]:
    """Every record of every benchmark in `directory`, in file then line order."""
    records = []
    for path in sorted(results_dir(str(directory) if directory else None).glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                records.append(json.loads(line))
    return records
