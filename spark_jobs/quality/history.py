"""What each validation leaves for the Airflow UI besides `verdicts.json` (no GX import here).

- `<reports>/history.jsonl`: one line per validation (run, time, verdict of each suite), oldest first, for
  the pipeline health page's verdicts over time; the newest `HISTORY_KEPT` lines are kept.
- `<reports>/runs/<quoted run name>.json`: that run's verdicts and the path of each suite's GX result
  page inside `data_docs/`, which the Data Docs plugin shows at `/data-docs/<job>/runs/<run name>`; the
  newest `RUNS_KEPT` are kept (a fixed number: `--keep-results` prunes GX's results, not these).

Run names are Airflow run ids (`scheduled__2026-11-22T10:02:00+00:00`): the file name quotes every
character but letters, digits and `_.-~`, so it is one plain path component.
"""

from __future__ import annotations

import glob
import json
from pathlib import Path
from urllib.parse import quote

HISTORY_FILE = "history.jsonl"
RUNS_FOLDER = "runs"
HISTORY_KEPT = 5000
RUNS_KEPT = 100
# GX's folder for a result's run time (great_expectations.core.run_identifier.RunIdentifier.to_tuple).
GX_RUN_TIME_FORMAT = "%Y%m%dT%H%M%S.%fZ"


def run_file_name(run_name: str) -> str:
    """`<run name, quoted>.json`: no `/`, no `:`, no `+`, never `.` or `..` alone."""
    return quote(run_name, safe="") + ".json"


def write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)  # readers never see half a file


def append_history(reports: Path, summary: dict, kept: int = HISTORY_KEPT) -> None:
    """Append one line for the validation `summary` (the content of `verdicts.json`)."""
    line = {
        "run_name": summary["run_name"],
        "run_time": summary["run_time"],
        "success": summary["success"],
        "suites": {s["suite"]: bool(s["success"]) for s in summary["suites"]},
    }
    path = Path(reports) / HISTORY_FILE
    with path.open("a", encoding="utf-8") as history:
        history.write(json.dumps(line) + "\n")
    if path.stat().st_size > kept * 400:  # cheap check first; lines are a few hundred bytes
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        if len(lines) > kept:
            write_atomically(path, "".join(lines[-kept:]))


def read_history(reports: Path) -> list[dict]:
    """The validations recorded in `<reports>/history.jsonl`, oldest first; unreadable lines are skipped
    (a line cut by a crash must not hide the others)."""
    path = Path(reports) / HISTORY_FILE
    if not path.is_file():
        return []
    found = []
    for text in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            line = json.loads(text)
        except ValueError:
            continue
        if isinstance(line, dict) and isinstance(line.get("suites"), dict) and "run_time" in line:
            found.append(line)
    return found


def result_pages(site: Path, run_name: str, run_time: str) -> dict[str, str]:
    """Suite -> path (relative to the Data Docs `site`) of its result page for this run."""
    validations = Path(site) / "validations"
    pattern = f"**/{glob.escape(run_name)}/{glob.escape(run_time)}/*.html"
    pages = {}
    for page in sorted(validations.glob(pattern)):
        relative = page.relative_to(validations)
        # validations/<suite, split at dots>/<run name>/<run time>/<batch>.html
        pages[".".join(relative.parts[:-3])] = page.relative_to(site).as_posix()
    return pages


def record_run(reports: Path, summary: dict, run_time_folder: str, kept: int = RUNS_KEPT) -> Path:
    """Write `<reports>/runs/<run>.json`: the summary's suites with their result pages; drop old ones."""
    reports = Path(reports)
    pages = result_pages(reports / "data_docs", summary["run_name"], run_time_folder)
    record = {
        "run_name": summary["run_name"],
        "run_time": summary["run_time"],
        "success": summary["success"],
        "suites": [
            {
                "suite": s["suite"],
                "topic": s["topic"],
                "success": bool(s["success"]),
                "line": s["line"],
                "page": pages.get(s["suite"]),
            }
            for s in summary["suites"]
        ],
    }
    folder = reports / RUNS_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / run_file_name(summary["run_name"])
    write_atomically(path, json.dumps(record, indent=2))
    records = sorted(
        (p for p in folder.glob("*.json") if p.is_file()), key=lambda p: p.stat().st_mtime, reverse=True
    )
    for old in records[max(kept, 1) :]:
        old.unlink(missing_ok=True)
    return path


def read_run(reports: Path, run_name: str) -> dict | None:
    """The record of `run_name`, or None when no such run was recorded (or its file is not a plain one
    inside `<reports>/runs`)."""
    folder = Path(reports) / RUNS_FOLDER
    path = folder / run_file_name(run_name)
    if path.is_symlink() or not path.is_file() or path.parent != folder:
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("run_name") == run_name else None
