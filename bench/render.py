"""Figures from the benchmark records: the tables of docs/performance.md and the charts in docs/img/.

    python bench/render.py [--results-dir bench/results] [--doc docs/performance.md --doc README.md]
                           [--img docs/img]

Reads every record (`bench/results/*.jsonl`, see bench/results.py) and keeps, per benchmark, shape, side
and key count, the figure of the latest run. In each document, the text between `<!-- generated: NAME -->`
and `<!-- end generated: NAME -->` is replaced by the table NAME (engine, spark, enrichment, and summary:
the README's digest of the latest figures); everything else is left as written. Each table row of
docs/performance.md points to its run, listed under the table with its date, commit, load and the command
that reproduces it. Charts are SVG, written directly: records/s
against key count (log scale), one line per side.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.results import DEFAULT_RESULTS_DIR, REPO_ROOT, read_records  # noqa: E402

SIDE_LABELS = {
    "ours": "ours",
    "native": "native Spark (our query's settings)",
    "native_untuned": "native Spark (session defaults)",
    "peer": "bytewax",
    "bare_loop": "bare loop",
}
# Spark charts: each side in the same style on every chart, native dashed.
SIDE_STYLES = {
    SIDE_LABELS["ours"]: ("#1f77b4", False),
    SIDE_LABELS["native"]: ("#d62728", True),
    SIDE_LABELS["native_untuned"]: ("#7f7f7f", True),
}
COLORS = ["#1f77b4", "#d62728", "#7f7f7f", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2"]


@dataclass(frozen=True)
class Figure:
    """One figure row of one record, with the record it comes from."""

    row: dict
    record: dict

    @property
    def key(self) -> tuple:
        return (self.row.get("shape"), self.row.get("side", "ours"), self.row.get("keys"))


def latest(records: list[dict], benchmark: str) -> list[Figure]:
    """Per shape, side and key count, the figure of the latest record (by date) that has one."""
    chosen: dict[tuple, Figure] = {}
    for record in sorted((r for r in records if r.get("benchmark") == benchmark), key=lambda r: r["date"]):
        for row in record.get("figures", []):
            figure = Figure(row, record)
            chosen[figure.key] = figure
    return sorted(
        chosen.values(), key=lambda f: (_shape_order(f.key[0]), f.key[2] or 0, _side_order(f.key[1]))
    )


SHAPE_ORDER = [
    "count",
    "hopping_user",
    "hopping_builtin",
    "running_count",
    "session_count",
    "stream_table_join",
    "stream_stream_join",
    "enrichment",
]


SIDE_ORDER = ["ours", "native", "native_untuned", "peer", "bare_loop", "enrichment", "one_input"]


def _side_order(side: str) -> tuple[int, str]:
    return (SIDE_ORDER.index(side) if side in SIDE_ORDER else len(SIDE_ORDER), side)


def _shape_order(shape: str | None) -> int:
    return SHAPE_ORDER.index(shape) if shape in SHAPE_ORDER else len(SHAPE_ORDER)


class RunIndex:
    """Numbers the records a table cites, in order of first citation."""

    def __init__(self):
        self.records: list[dict] = []

    def ref(self, record: dict) -> str:
        for i, known in enumerate(self.records):
            if known is record:
                return f"[{i + 1}]"
        self.records.append(record)
        return f"[{len(self.records)}]"

    def lines(self) -> list[str]:
        out = []
        for i, r in enumerate(self.records):
            commit = (r.get("commit") or "unknown")[:10] + (" (dirty tree)" if r.get("dirty") else "")
            load = f"{r['load_average_start'][0]:.1f} → {r['load_average_end'][0]:.1f}"
            out.append(
                f"- [{i + 1}] {r['date']}, commit {commit}, {r.get('cores')} cores, load {load}, "
                f"Python {r.get('python')}, Spark {r.get('spark')}: `{r['command']}`"
            )
        return out


def _rate(value) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _ratio(a, b) -> str:
    return "–" if not a or not b else f"{a / b:.2f}"


def engine_table(records: list[dict]) -> list[str]:
    figures = latest(records, "engine")
    if not figures:
        return ["No engine run recorded yet: `python bench/engine_bench.py`."]
    runs = RunIndex()
    ours = {(f.key[0], f.key[2]): f for f in figures if f.key[1] == "ours"}
    peers = {(f.key[0], f.key[2]): f for f in figures if f.key[1] == "peer"}
    bare = {(f.key[0], f.key[2]): f for f in figures if f.key[1] == "bare_loop"}
    lines = [
        "| shape | keys | records/s (CPU) | export share (largest micro-batch) | vs fewest keys "
        "| bare loop records/s (vs fewest keys) | bytewax records/s | run |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    fewest: dict[str, float] = {}
    fewest_bare: dict[str, float] = {}
    for (shape, keys), f in sorted(ours.items(), key=lambda item: (_shape_order(item[0][0]), item[0][1])):
        rate = f.row["records_per_s"]
        base = fewest.setdefault(shape, rate)
        peer = peers.get((shape, keys))
        loop = bare.get((shape, keys))
        share = f"{f.row.get('export_share', 0):.1%} ({f.row.get('export_share_max_micro_batch', 0):.1%})"
        loop_cell = "–"
        if loop:
            loop_rate = loop.row["records_per_s"]
            loop_cell = f"{_rate(loop_rate)} ({_ratio(loop_rate, fewest_bare.setdefault(shape, loop_rate))})"
        cited = [f.record] + [other.record for other in (loop, peer) if other]
        refs = " ".join(dict.fromkeys(runs.ref(record) for record in cited))
        lines.append(
            f"| {shape} | {keys:,} | {_rate(rate)} | {share} | {_ratio(rate, base)} | {loop_cell} | "
            f"{_rate(peer.row['records_per_s']) if peer else '–'} | {refs} |"
        )
    return [*lines, "", *runs.lines()]


def spark_table(records: list[dict]) -> list[str]:
    figures = latest(records, "spark")
    if not figures:
        return ["No Spark run recorded yet: `python bench/spark_bench.py`."]
    runs = RunIndex()
    cells: dict[tuple, dict[str, Figure]] = {}
    for f in figures:
        cells.setdefault((f.key[0], f.key[2]), {})[f.key[1]] = f
    lines = [
        "| shape | keys | events | ours events/s | native events/s | ours / native | native untuned events/s "
        "| ours / untuned | peak MB ours / native | peak PSS MB ours / native | run |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for (shape, keys), sides in sorted(
        cells.items(), key=lambda item: (_shape_order(item[0][0]), item[0][1])
    ):
        rate = {side: f.row.get("events_per_s") for side, f in sides.items()}
        peak = {side: f.row.get("peak_rss_mb") for side, f in sides.items()}
        refs = " ".join(dict.fromkeys(runs.ref(f.record) for f in sides.values()))
        memory = f"{_rate(peak.get('ours'))} / {_rate(peak.get('native'))}"
        pss = {side: f.row.get("peak_pss_mb") for side, f in sides.items()}
        shared_counted_once = f"{_rate(pss.get('ours'))} / {_rate(pss.get('native'))}"
        datasets = " / ".join(dict.fromkeys(_dataset(f.record) for f in sides.values()))
        lines.append(
            f"| {shape} | {keys:,} | {datasets} | {_rate(rate.get('ours'))} | {_rate(rate.get('native'))} | "
            f"{_ratio(rate.get('ours'), rate.get('native'))} | {_rate(rate.get('native_untuned'))} | "
            f"{_ratio(rate.get('ours'), rate.get('native_untuned'))} | {memory} | {shared_counted_once} | {refs} |"
        )
    return [*lines, "", *runs.lines()]


def _dataset(record: dict) -> str:
    """A Spark record's input: its events, and the event time they span when the run set it (else the
    generator's sensor rates set it: less as keys grow)."""
    settings = record.get("settings", {})
    events = settings.get("events")
    minutes = settings.get("minutes")
    text = f"{events:,}" if events else "?"
    return text if minutes is None else f"{text} over {minutes:g} min"


def enrichment_table(records: list[dict]) -> list[str]:
    figures = latest(records, "enrichment")
    if not figures:
        return ["No enrichment run recorded yet: `python bench/enrichment_bench.py`."]
    runs = RunIndex()
    cells: dict[int, dict[str, Figure]] = {}
    for f in figures:
        cells.setdefault(f.key[2], {})[f.key[1]] = f
    lines = [
        "| keys | enrichment events/s | one-input events/s | enrichment / one-input | peak MB enrichment / one-input | run |",
        "|---:|---:|---:|---:|---:|---|",
    ]
    for keys, sides in sorted(cells.items()):
        rate = {side: f.row.get("events_per_s") for side, f in sides.items()}
        peak = {side: f.row.get("peak_rss_mb") for side, f in sides.items()}
        refs = " ".join(dict.fromkeys(runs.ref(f.record) for f in sides.values()))
        lines.append(
            f"| {keys:,} | {_rate(rate.get('enrichment'))} | {_rate(rate.get('one_input'))} | "
            f"{_ratio(rate.get('enrichment'), rate.get('one_input'))} | "
            f"{_rate(peak.get('enrichment'))} / {_rate(peak.get('one_input'))} | {refs} |"
        )
    return [*lines, "", *runs.lines()]


def summary_table(records: list[dict]) -> list[str]:
    """The README's digest: per shape, the engine's records/s at its fewest and most keys, and on Spark
    ours over tuned native at each key count; the full tables are in docs/performance.md."""
    engine = {
        (f.key[0], f.key[2]): f.row["records_per_s"] for f in latest(records, "engine") if f.key[1] == "ours"
    }
    spark: dict[tuple, dict[str, float]] = {}
    for f in latest(records, "spark"):
        spark.setdefault((f.key[0], f.key[2]), {})[f.key[1]] = f.row.get("events_per_s")
    shapes = sorted({shape for shape, _ in [*engine, *spark]}, key=_shape_order)
    if not shapes:
        return ["No benchmark run recorded yet: `python bench/engine_bench.py`."]
    engine_keys = sorted({keys for _, keys in engine})
    spark_keys = sorted({keys for _, keys in spark})
    header = ["shape"]
    header += [f"engine records/s (CPU), {keys:,} keys" for keys in engine_keys]
    header += [f"Spark ours / native, {keys:,} keys" for keys in spark_keys]
    lines = ["| " + " | ".join(header) + " |", "|---" + "|---:" * (len(header) - 1) + "|"]
    for shape in shapes:
        cells = [shape]
        cells += [_rate(engine.get((shape, keys))) for keys in engine_keys]
        for keys in spark_keys:
            sides = spark.get((shape, keys), {})
            cells.append(_ratio(sides.get("ours"), sides.get("native")))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


TABLES = {
    "engine": engine_table,
    "spark": spark_table,
    "enrichment": enrichment_table,
    "summary": summary_table,
}


def chart_links(name: str, chart_names: list[str]) -> list[str]:
    """Markdown images of the charts that belong to table `name` (docs/img/ seen from docs/)."""
    if name == "summary":
        mine = []
    elif name == "engine":
        mine = [c for c in chart_names if c == "engine.svg"]
    elif name == "enrichment":
        mine = [c for c in chart_names if c == "spark-enrichment.svg"]
    else:
        mine = [c for c in chart_names if c.startswith("spark-") and c != "spark-enrichment.svg"]
    return [f"![{c.removesuffix('.svg')}](img/{c})" for c in mine]


def fill(document: str, records: list[dict]) -> str:
    """The document with each generated block replaced by its table and the links to its charts."""
    chart_names = list(charts(records))

    def replace(match: re.Match) -> str:
        name = match.group(1)
        if name not in TABLES:
            return match.group(0)
        links = chart_links(name, chart_names)
        body = "\n".join(TABLES[name](records) + ([""] + links if links else []))
        return f"<!-- generated: {name} -->\n{body}\n<!-- end generated: {name} -->"

    return re.sub(
        r"<!-- generated: (\w+) -->.*?<!-- end generated: \1 -->", replace, document, flags=re.DOTALL
    )


# -- charts -------------------------------------------------------------------------------------------------


def _nice_max(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above value."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if step * power >= value:
            return step * power
    return 10 * power


def _si(value: float) -> str:
    for factor, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:g}{suffix}"
    return f"{value:g}"


def line_chart(
    title: str,
    series: dict[str, list[tuple[float, float]]],
    y_label: str,
    styles: dict[str, tuple[str, bool]] | None = None,
) -> str:
    """An SVG line chart: x (key count) on a log scale, y from zero; one line and legend entry per series,
    drawn in `styles[name]` = (color, dashed), by default the palette's next color, solid."""
    width, height = 640, 380
    left, right, top, bottom = 70, 20, 40, 110
    xs = sorted({x for points in series.values() for x, _ in points})
    ys = [y for points in series.values() for _, y in points]
    y_max = _nice_max(max(ys) if ys else 1)
    # rates far apart (over 20x) on a log scale, from the power of ten below the smallest
    y_log = bool(ys) and min(ys) > 0 and max(ys) / min(ys) > 20
    y_min = 10 ** math.floor(math.log10(min(ys))) if y_log else 0.0
    lo, hi = (math.log10(min(xs)), math.log10(max(xs))) if xs else (0, 1)
    if hi == lo:
        lo, hi = lo - 0.5, hi + 0.5
    plot_w, plot_h = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + (math.log10(x) - lo) / (hi - lo) * plot_w

    def py(y: float) -> float:
        if y_log:
            share = (math.log10(max(y, y_min)) - math.log10(y_min)) / (math.log10(y_max) - math.log10(y_min))
        else:
            share = y / y_max
        return top + plot_h - share * plot_h

    if y_log:
        decades = range(round(math.log10(y_min)), math.ceil(math.log10(y_max)) + 1)
        y_ticks = [m * 10**d for d in decades for m in (1, 2, 5) if y_min <= m * 10**d <= y_max]
    else:
        y_ticks = [y_max * i / 5 for i in range(6)]

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15">{escape(title)}</text>',
    ]
    for y in y_ticks:  # horizontal grid and y ticks
        out.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#ddd"/>'
            f'<text x="{left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{_si(y)}</text>'
        )
    for x in xs:  # x ticks at the measured key counts
        out.append(
            f'<line x1="{px(x):.1f}" x2="{px(x):.1f}" y1="{top}" y2="{top + plot_h}" stroke="#eee"/>'
            f'<text x="{px(x):.1f}" y="{top + plot_h + 16}" text-anchor="middle">{_si(x)}</text>'
        )
    out.append(
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#444"/>'
        f'<text x="{left + plot_w / 2}" y="{top + plot_h + 34}" text-anchor="middle">keys (log scale)</text>'
        f'<text transform="translate(16 {top + plot_h / 2}) rotate(-90)" text-anchor="middle">'
        f"{escape(y_label)}{' (log scale)' if y_log else ''}</text>"
    )
    legend_y = top + plot_h + 56
    for i, (name, points) in enumerate(series.items()):
        color, dashed = (styles or {}).get(name, (COLORS[i % len(COLORS)], False))
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in sorted(points))
        out.append(f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
        for x, y in points:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{color}"/>')
        column, row = i % 2, i // 2
        lx, ly = left + column * (plot_w / 2), legend_y + row * 18
        out.append(
            f'<line x1="{lx:.1f}" x2="{lx + 24:.1f}" y1="{ly - 4}" y2="{ly - 4}" stroke="{color}" '
            f'stroke-width="2"{dash}/><text x="{lx + 30:.1f}" y="{ly}">{escape(name)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def charts(records: list[dict]) -> dict[str, str]:
    """File name -> SVG: the engine's shapes in one chart, one chart per Spark shape, the enrichment's."""
    out = {}
    engine: dict[str, list] = {}
    styles: dict[str, tuple[str, bool]] = {}
    shape_colors: dict[str, str] = {}
    for f in latest(records, "engine"):
        shape, side, keys = f.key
        if side == "bare_loop":  # in the table: a chart of twelve lines would be unreadable
            continue
        color = shape_colors.setdefault(shape, COLORS[len(shape_colors) % len(COLORS)])
        name = shape if side == "ours" else f"{shape} ({SIDE_LABELS.get(side, side)})"
        styles[name] = (color, side != "ours")  # a peer: its shape's color, dashed
        engine.setdefault(name, []).append((keys, f.row["records_per_s"]))
    if engine:
        out["engine.svg"] = line_chart("Engine, one core: records/s of CPU time", engine, "records/s", styles)
    spark: dict[str, dict[str, list]] = {}
    for f in latest(records, "spark"):
        shape, side, keys = f.key
        spark.setdefault(shape, {}).setdefault(SIDE_LABELS.get(side, side), []).append(
            (keys, f.row["events_per_s"])
        )
    for shape, series in spark.items():
        out[f"spark-{shape}.svg"] = line_chart(
            f"Spark end to end, {shape}: events/s", series, "events/s", SIDE_STYLES
        )
    enrichment: dict[str, list] = {}
    for f in latest(records, "enrichment"):
        enrichment.setdefault(f.key[1], []).append((f.key[2], f.row["events_per_s"]))
    if enrichment:
        out["spark-enrichment.svg"] = line_chart(
            "Spark end to end: enrichment vs one-input job", enrichment, "events/s"
        )
    return out


def render(results_dir: Path, docs: list[Path], img: Path) -> list[Path]:
    records = read_records(results_dir)
    written = []
    for doc in docs:
        doc.write_text(fill(doc.read_text(), records))
        written.append(doc)
    img.mkdir(parents=True, exist_ok=True)
    for name, svg in charts(records).items():
        (img / name).write_text(svg)
        written.append(img / name)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS_DIR)
    parser.add_argument(
        "--doc",
        type=Path,
        action="append",
        help="a document to fill (repeatable; default docs/performance.md and README.md)",
    )
    parser.add_argument("--img", type=Path, default=REPO_ROOT / "docs" / "img")
    args = parser.parse_args(argv)
    docs = args.doc or [REPO_ROOT / "docs" / "performance.md", REPO_ROOT / "README.md"]
    for doc in docs:
        if not doc.exists():
            print(
                f"error: {doc} does not exist (its text around the generated tables is written by hand)",
                file=sys.stderr,
            )
            return 2
    for path in render(args.results_dir, docs, args.img):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
