"""The pipeline health page: each job's run history as inline SVG charts (no script, nothing fetched).

Data: the job's run summaries, `<output>/_runs/<run id>.json` (spark_jobs.spark.summary), and its
validations' history, `<reports>/history.jsonl` (spark_jobs.quality.history). Plain functions, so the page
is tested without a server; `pipeline_health_plugin.py` only serves `health_page()`.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from pipeline_airflow.paths import JobPaths

RUNS_DIR = "_runs"  # spark_jobs.spark.summary.RUNS_DIR, not imported: that module needs pyspark
RUNS_SHOWN = 200
CHART_WIDTH, CHART_HEIGHT = 560, 200
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 16, 28, 40


@dataclass
class RunPoint:
    """One job run, as the charts need it."""

    time: dt.datetime
    run_id: str
    read: int
    late: int
    quarantined: int
    events_per_s: float | None
    batch_durations_s: list[float] = field(default_factory=list)
    # The tasks' state at the end of the run (summary "state"): None in a summary without it
    state: dict[str, int] | None = None


def run_time(run_id: str, fallback: float) -> dt.datetime:
    """The start of a run from its id (`20261122T100200Z-<pid>`), else `fallback` (a file's mtime)."""
    try:
        return dt.datetime.strptime(run_id[:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC)
    except ValueError:
        return dt.datetime.fromtimestamp(fallback, dt.UTC)


def read_runs(output: Path, limit: int = RUNS_SHOWN) -> list[RunPoint]:
    """The job's newest `limit` run summaries, oldest first; `latest.json` (a copy) and unreadable files
    are skipped."""
    folder = Path(output) / RUNS_DIR
    if not folder.is_dir():
        return []
    runs = []
    for path in folder.glob("*.json"):
        if path.name == "latest.json" or not path.is_file():
            continue
        try:
            summary = json.loads(path.read_text(encoding="utf-8"))
            records = summary["records"]
            progress = summary.get("progress") or []
            durations_ms = [int(p["duration_ms"]) for p in progress if p.get("duration_ms") is not None]
            records_in_batches = sum(int(p.get("records") or 0) for p in progress)
            runs.append(
                RunPoint(
                    time=run_time(str(summary.get("run_id", path.stem)), path.stat().st_mtime),
                    run_id=str(summary.get("run_id", path.stem)),
                    read=int(records["read"]),
                    late=int(records["dropped_late"]),
                    quarantined=int(records["quarantined"]),
                    events_per_s=records_in_batches * 1000 / sum(durations_ms) if sum(durations_ms) else None,
                    batch_durations_s=[ms / 1000 for ms in durations_ms],
                    state=_state_size(summary.get("state")),
                )
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a summary being written, or not one
    return sorted(runs, key=lambda r: r.time)[-limit:]


def _state_size(state) -> dict[str, int] | None:
    """entries, windows and bytes of a summary's "state", None without one."""
    if not isinstance(state, dict):
        return None
    return {name: int(state[name]) for name in ("entries", "windows", "bytes")}


def nice_step(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 times a power of ten that is >= value."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * power * (1 + 1e-9):
            return step * power
    return 10 * power


def axis_ticks(highest: float) -> list[float]:
    """Round y-axis ticks from 0 up to at least `highest`, about four steps."""
    step = nice_step(highest / 4) if highest > 0 else 1.0
    count = max(1, math.ceil(highest / step - 1e-9))
    return [step * i for i in range(count + 1)]


def _number(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


def _time_label(moment: dt.datetime, span: dt.timedelta) -> str:
    return moment.strftime("%H:%M" if span < dt.timedelta(days=1) else "%m-%d %H:%M")


def _frame(title: str, unit: str, ticks: list[float], start: dt.datetime, end: dt.datetime) -> list[str]:
    """Title, axes, y ticks (with `unit`) and x ticks (UTC dates) of a chart."""
    plot_w, plot_h = CHART_WIDTH - _LEFT - _RIGHT, CHART_HEIGHT - _TOP - _BOTTOM
    parts = [
        f'<text x="{_LEFT}" y="16" class="title">{html.escape(title)} ({html.escape(unit)})</text>',
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{_TOP + plot_h}" class="axis"/>',
        f'<line x1="{_LEFT}" y1="{_TOP + plot_h}" x2="{_LEFT + plot_w}" y2="{_TOP + plot_h}" class="axis"/>',
    ]
    for value in ticks:
        y = _y(value, ticks[-1])
        parts.append(f'<line x1="{_LEFT - 4}" y1="{y:.1f}" x2="{_LEFT + plot_w}" y2="{y:.1f}" class="grid"/>')
        parts.append(f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" class="ytick">{_number(value)}</text>')
    span = end - start
    ticks = 1 if span.total_seconds() == 0 else 3
    for i in range(ticks):
        moment = start + span * (i / (ticks - 1) if ticks > 1 else 0)
        x = _LEFT + (plot_w * i / (ticks - 1) if ticks > 1 else plot_w / 2)
        parts.append(
            f'<text x="{x:.1f}" y="{_TOP + plot_h + 16}" class="xtick">{_time_label(moment, span)}</text>'
        )
    parts.append(
        f'<text x="{_LEFT + plot_w / 2}" y="{CHART_HEIGHT - 4}" class="xlabel">run start (UTC, '
        f"{start:%Y-%m-%d}{'' if start.date() == end.date() else f' to {end:%Y-%m-%d}'})</text>"
    )
    return parts


def _x(moment: dt.datetime, start: dt.datetime, end: dt.datetime) -> float:
    plot_w = CHART_WIDTH - _LEFT - _RIGHT
    span = (end - start).total_seconds()
    return _LEFT + (plot_w / 2 if span == 0 else plot_w * (moment - start).total_seconds() / span)


def _y(value: float, top: float) -> float:
    plot_h = CHART_HEIGHT - _TOP - _BOTTOM
    return _TOP + plot_h - plot_h * value / top


def _svg(label: str, parts: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" aria-label="{html.escape(label)}" '
        f'width="{CHART_WIDTH}" height="{CHART_HEIGHT}" viewBox="0 0 {CHART_WIDTH} {CHART_HEIGHT}">'
        + "".join(parts)
        + "</svg>"
    )


def _empty_chart(title: str, message: str) -> str:
    return _svg(
        title,
        [
            f'<text x="{_LEFT}" y="16" class="title">{html.escape(title)}</text>',
            f'<text x="{CHART_WIDTH / 2}" y="{CHART_HEIGHT / 2}" class="empty">{html.escape(message)}</text>',
        ],
    )


def line_chart(title: str, unit: str, points: list[tuple[dt.datetime, float]]) -> str:
    """A line through `points` (time, value), with a dot and a tooltip per point."""
    points = sorted(points)
    if not points:
        return _empty_chart(title, "no data yet")
    start, end = points[0][0], points[-1][0]
    ticks = axis_ticks(max(v for _, v in points))
    top = ticks[-1]
    parts = _frame(title, unit, ticks, start, end)
    xy = [(_x(t, start, end), _y(v, top), t, v) for t, v in points]
    if len(xy) > 1:
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y, _, _ in xy)
        parts.append(f'<polyline points="{path}" class="line"/>')
    for x, y, t, v in xy:
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" class="dot"><title>{t:%Y-%m-%d %H:%M:%S} UTC: '
            f"{v:,.6g} {html.escape(unit)}</title></circle>"
        )
    return _svg(title, parts)


def verdict_chart(history: list[dict]) -> str:
    """One row per suite, one cell per validation: green passed, red failed, grey not run."""
    title = "Suite verdicts per validation"
    if not history:
        return _empty_chart(title, "no validation yet")
    suites = sorted({suite for line in history for suite in line["suites"]})
    label_w, row_h = 170, 18
    width = CHART_WIDTH
    cell_w = max(2.0, (width - label_w - _RIGHT) / len(history))
    height = _TOP + row_h * len(suites) + 36
    parts = [f'<text x="{_LEFT}" y="16" class="title">{title} (green passed, red failed)</text>']
    for row, suite in enumerate(suites):
        y = _TOP + row * row_h
        parts.append(f'<text x="{label_w - 6}" y="{y + 13}" class="ytick">{html.escape(suite)}</text>')
        for column, line in enumerate(history):
            verdict = line["suites"].get(suite)
            css = {True: "pass", False: "fail"}.get(verdict, "none")
            state = {True: "passed", False: "FAILED"}.get(verdict, "not run")
            x = label_w + column * cell_w
            parts.append(
                f'<rect x="{x:.1f}" y="{y}" width="{max(cell_w - 1, 1):.1f}" height="{row_h - 2}" '
                f'class="{css}"><title>{html.escape(str(line.get("run_name")))} '
                f"({html.escape(str(line['run_time']))}): {html.escape(suite)} {state}</title></rect>"
            )
    bottom = _TOP + row_h * len(suites)
    first, last = str(history[0]["run_time"])[:16], str(history[-1]["run_time"])[:16]
    parts.append(f'<text x="{label_w}" y="{bottom + 14}" class="xstart">{html.escape(first)} UTC</text>')
    parts.append(f'<text x="{width - _RIGHT}" y="{bottom + 14}" class="xend">{html.escape(last)} UTC</text>')
    parts.append(
        f'<text x="{(label_w + width) / 2}" y="{bottom + 30}" class="xlabel">validation time, '
        f"{len(history)} validations</text>"
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" aria-label="{title}" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">' + "".join(parts) + "</svg>"
    )


def state_charts(runs: list[RunPoint]) -> list[str]:
    """The tasks' state at the end of each run: entries, open windows and bytes in the state store."""
    sized = [r for r in runs if r.state is not None]
    return [
        line_chart("State entries at run end", "entries", [(r.time, r.state["entries"]) for r in sized]),
        line_chart("Open windows at run end", "windows", [(r.time, r.state["windows"]) for r in sized]),
        line_chart("State size at run end", "MB", [(r.time, r.state["bytes"] / 1e6) for r in sized]),
    ]


def job_section(job: str, paths: JobPaths) -> str:
    """A job's figures and charts, or what to do when it has not run yet."""
    from spark_jobs.quality.history import read_history

    runs = read_runs(paths.output)
    history = read_history(paths.reports)[-RUNS_SHOWN:]
    name = html.escape(job)
    if not runs and not history:
        return (
            f'<section class="job" id="{name}"><h2>{name}</h2><p class="empty-state">No runs yet. Trigger '
            f"the <code>{name}_pipeline</code> DAG (unpause it, or Trigger in its page): each run of the job writes "
            f"a summary to <code>{html.escape(str(paths.output / RUNS_DIR))}</code> and each validation adds "
            f"a line to <code>{html.escape(str(paths.reports))}/history.jsonl</code>.</p></section>"
        )
    figures = []
    if runs:
        last = runs[-1]
        rate = "n/a" if last.events_per_s is None else f"{last.events_per_s:,.0f} events/s"
        figures.append(
            f"<li>Latest run <code>{html.escape(last.run_id)}</code> ({last.time:%Y-%m-%d %H:%M} UTC): "
            f"{last.read:,} records read, {last.late:,} late, {last.quarantined:,} quarantined, {rate}</li>"
            f"<li>Late records are kept in <code>{html.escape(str(paths.output / '_late'))}</code></li>"
        )
    if history:
        latest = history[-1]
        failed = sorted(s for s, ok in latest["suites"].items() if not ok)
        verdict = "all suites passed" if not failed else "FAILED: " + ", ".join(failed)
        figures.append(
            f"<li>Latest validation {html.escape(str(latest.get('run_name')))}: {html.escape(verdict)}</li>"
        )
    charts = [
        line_chart(
            "Throughput", "events/s", [(r.time, r.events_per_s) for r in runs if r.events_per_s is not None]
        ),
        line_chart("Records dropped as late", "records per run", [(r.time, r.late) for r in runs]),
        line_chart("Records quarantined", "records per run", [(r.time, r.quarantined) for r in runs]),
        line_chart(
            "Micro-batch durations", "s per batch", [(r.time, s) for r in runs for s in r.batch_durations_s]
        ),
        *state_charts(runs),
        verdict_chart(history),
    ]
    return (
        f'<section class="job" id="{name}"><h2>{name}</h2><ul class="figures">{"".join(figures)}</ul>'
        f'<div class="charts">{"".join(charts)}</div></section>'
    )


STYLE = """
body{font-family:sans-serif;margin:1.5em;color:#222}
.charts{display:flex;flex-wrap:wrap;gap:12px}
.chart{border:1px solid #ddd;background:#fff}
.title{font-size:13px;font-weight:bold}
.axis{stroke:#444}.grid{stroke:#eee}
.ytick{font-size:11px;text-anchor:end;fill:#444}
.xtick,.xlabel,.empty{font-size:11px;text-anchor:middle;fill:#444}
.xstart{font-size:11px;fill:#444}.xend{font-size:11px;text-anchor:end;fill:#444}
.line{fill:none;stroke:#1f77b4;stroke-width:1.5}.dot{fill:#1f77b4}
.pass{fill:#2ca02c}.fail{fill:#d62728}.none{fill:#ccc}
.empty-state{background:#f6f6f6;padding:1em;border-left:4px solid #999}
"""


def health_page(jobs: list[str], paths_of=JobPaths.for_job) -> str:
    """The whole page for `jobs` (job names), each from the folders `paths_of(job)` gives."""
    sections = "".join(job_section(job, paths_of(job)) for job in jobs)
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Pipeline health</title>"
        f"<style>{STYLE}</style></head><body><h1>Pipeline health</h1>{sections}</body></html>"
    )


def pipeline_job_names() -> list[str]:
    """The jobs with a pipeline DAG (spark_jobs.jobs.PIPELINE_JOBS), by name, without importing them."""
    from spark_jobs.jobs import PIPELINE_JOBS

    return [module.rsplit(".", 1)[-1] for module in PIPELINE_JOBS]
