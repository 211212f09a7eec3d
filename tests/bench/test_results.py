"""Benchmark records (bench/results.py) and their rendering (bench/render.py): what a run writes, and the
tables and charts made from a small fixture of records."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import xml.etree.ElementTree as ET

import pytest

from bench import bare_loops, engine_bench, render
from bench.results import RESULTS_DIR_ENV, Recorder, git_state, read_records, results_dir

SVG = "{http://www.w3.org/2000/svg}"


def test_a_record_identifies_the_run_and_keeps_settings_and_figures(tmp_path):
    recorder = Recorder("engine", ["--records", "5", "--keys", "200,250000"], tmp_path)
    settings = {"records": 5, "native": {"spark.sql.shuffle.partitions": "2"}}
    figures = [{"shape": "count", "side": "ours", "keys": 200, "records_per_s": 10}]
    recorder.write(settings, figures)
    recorder.write(settings, figures)

    lines = (tmp_path / "engine.jsonl").read_text().splitlines()
    assert len(lines) == 2  # appended, one line per run
    record = json.loads(lines[0])
    assert record["benchmark"] == "engine"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", record["date"])
    assert re.fullmatch(r"[0-9a-f]{40}", record["commit"])
    assert isinstance(record["dirty"], bool)
    assert record["cores"] == os.cpu_count()
    assert len(record["load_average_start"]) == 3 and len(record["load_average_end"]) == 3
    assert record["python"] == platform.python_version()
    assert "spark" in record
    assert record["command"].endswith("--records 5 --keys 200,250000")
    assert record["settings"] == settings and record["figures"] == figures
    assert read_records(tmp_path) == [record, json.loads(lines[1])]


def test_a_tree_is_dirty_for_changed_code_not_for_what_benchmarks_write(tmp_path):
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "docs").mkdir()
    for name in ("code.py", "bench/results/engine.jsonl", "docs/performance.md", "README.md"):
        (tmp_path / name).write_text("x\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "start")
    assert git_state(tmp_path)["dirty"] is False
    for name in ("bench/results/engine.jsonl", "docs/performance.md", "README.md"):
        (tmp_path / name).write_text("a record, rendered\n")
    (tmp_path / "scratch.txt").write_text("untracked\n")
    assert git_state(tmp_path)["dirty"] is False
    (tmp_path / "code.py").write_text("y\n")
    assert git_state(tmp_path) == {"commit": git_head(tmp_path), "dirty": True}


def git_head(root):
    return subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()


def test_the_results_directory_is_the_option_then_the_environment_then_bench_results(tmp_path, monkeypatch):
    monkeypatch.setenv(RESULTS_DIR_ENV, str(tmp_path / "env"))
    assert results_dir(str(tmp_path / "option")) == tmp_path / "option"
    assert results_dir() == tmp_path / "env"
    monkeypatch.delenv(RESULTS_DIR_ENV)
    assert results_dir().parts[-2:] == ("bench", "results")


def _record(benchmark, date, figures, command="python bench/x.py", settings=None):
    return {
        "benchmark": benchmark,
        "date": date,
        "commit": "0123456789abcdef0123456789abcdef01234567",
        "dirty": False,
        "cores": 2,
        "load_average_start": [1.0, 1.0, 1.0],
        "load_average_end": [2.0, 1.0, 1.0],
        "python": "3.11.7",
        "spark": "4.0.0",
        "command": command,
        "settings": settings or {},
        "figures": figures,
    }


def _engine(shape, keys, rate, side="ours"):
    return {
        "shape": shape,
        "side": side,
        "keys": keys,
        "records_per_s": rate,
        "export_share": 0.1,
        "export_share_max_micro_batch": 0.2,
    }


def _spark(shape, side, keys, rate, peak=1000, pss=None):
    figure = {"shape": shape, "side": side, "keys": keys, "events_per_s": rate, "peak_rss_mb": peak}
    return figure if pss is None else {**figure, "peak_pss_mb": pss}


FIXTURE = [
    _record(
        "engine", "2026-01-01T00:00:00Z", [_engine("count", 200, 999), _engine("count", 250000, 1)], "old"
    ),
    _record(
        "engine",
        "2026-01-02T00:00:00Z",
        [
            _engine("count", 200, 1_000_000),
            _engine("count", 250000, 500_000),
            _engine("count", 200, 200_000, "peer"),
            _engine("count", 200, 4_000_000, "bare_loop"),
            _engine("count", 250000, 1_000_000, "bare_loop"),
        ],
        "python bench/engine_bench.py",
    ),
    _record(
        "spark",
        "2026-01-02T00:00:00Z",
        [
            _spark("count", "ours", 200, 300_000, 3000),
            _spark("count", "native", 200, 200_000, 2000),
            _spark("count", "native_untuned", 200, 100_000),
            _spark("count", "ours", 100000, 150_000),
            _spark("count", "native", 100000, 300_000),
        ],
        "python bench/spark_bench.py --untuned",
        {"events": 3_000_000, "minutes": None},
    ),
    _record(
        "spark",
        "2026-01-03T00:00:00Z",
        [
            _spark("hopping_user", "ours", 100000, 90_000, 1500, pss=1100),
            _spark("hopping_user", "native", 100000, 60_000, 1200, pss=1150),
        ],
        "python bench/spark_bench.py --minutes 60",
        {"events": 3_000_000, "minutes": 60},
    ),
]


def test_the_engine_table_shows_the_latest_run_per_shape_and_key_count():
    lines = render.engine_table(FIXTURE)
    rows = [line for line in lines if line.startswith("| count")]
    assert rows == [
        "| count | 200 | 1,000,000 | 10.0% (20.0%) | 1.00 | 4,000,000 (1.00) | 200,000 | [1] |",
        "| count | 250,000 | 500,000 | 10.0% (20.0%) | 0.50 | 1,000,000 (0.25) | – | [1] |",
    ]
    assert lines[-1].startswith("- [1] 2026-01-02T00:00:00Z, commit 0123456789, 2 cores, load 1.0 → 2.0")
    assert lines[-1].endswith("`python bench/engine_bench.py`")
    assert not any("old" in line for line in lines)


def test_the_spark_table_gives_ours_over_native_and_over_untuned_native_and_both_peaks():
    # A record from before PSS was measured shows none: "– / –".
    rows = [line for line in render.spark_table(FIXTURE) if line.startswith(("| count", "| hopping"))]
    assert rows == [
        "| count | 200 | 3,000,000 | 300,000 | 200,000 | 1.50 | 100,000 | 3.00 | 3,000 / 2,000 | – / – | [1] |",
        "| count | 100,000 | 3,000,000 | 150,000 | 300,000 | 0.50 | – | – | 1,000 / 1,000 | – / – | [1] |",
        "| hopping_user | 100,000 | 3,000,000 over 60 min | 90,000 | 60,000 | 1.50 | – | – | 1,500 / 1,200 "
        "| 1,100 / 1,150 | [2] |",
    ]


def test_the_summary_gives_engine_rates_and_spark_ratios_per_shape():
    lines = render.summary_table(FIXTURE)
    assert lines[0] == (
        "| shape | engine records/s (CPU), 200 keys | engine records/s (CPU), 250,000 keys "
        "| Spark ours / native, 200 keys | Spark ours / native, 100,000 keys |"
    )
    assert "| count | 1,000,000 | 500,000 | 1.50 | 0.50 |" in lines


def test_rendering_replaces_only_the_generated_blocks():
    document = (
        "# Title\nhand text\n<!-- generated: engine -->\nstale\n<!-- end generated: engine -->\n"
        "more hand text\n<!-- generated: spark -->\n<!-- end generated: spark -->\n"
    )
    filled = render.fill(document, FIXTURE)
    assert filled.startswith("# Title\nhand text\n<!-- generated: engine -->\n| shape |")
    assert "stale" not in filled and "more hand text\n" in filled
    assert "![engine](img/engine.svg)" in filled and "![spark-count](img/spark-count.svg)" in filled
    assert render.fill(filled, FIXTURE) == filled  # rendering again changes nothing


def test_charts_are_valid_svg_with_a_line_per_side():
    charts = render.charts(FIXTURE)
    assert sorted(charts) == ["engine.svg", "spark-count.svg", "spark-hopping_user.svg"]
    root = ET.fromstring(charts["spark-count.svg"])
    assert root.tag == f"{SVG}svg"
    lines = root.findall(f"{SVG}polyline")
    assert len(lines) == 3  # ours, native, untuned native
    assert len(root.findall(f"{SVG}circle")) == 5  # one per figure
    legend = [t.text for t in root.findall(f"{SVG}text")]
    assert {"ours", render.SIDE_LABELS["native"], render.SIDE_LABELS["native_untuned"]} <= set(legend)
    engine = ET.fromstring(charts["engine.svg"])
    assert len(engine.findall(f"{SVG}polyline")) == 2  # ours and the peer


def test_the_engine_benchmark_records_every_shape_and_key_count(tmp_path):
    assert (
        engine_bench.main(
            [
                "--records",
                "3000",
                "--keys",
                "20,300",
                "--micro-batch",
                "1000",
                "--batch",
                "500",
                "--repeat",
                "1",
                "--shapes",
                "count,running_count,stream_table_join",
                "--results-dir",
                str(tmp_path),
            ]
        )
        == 0
    )
    (record,) = read_records(tmp_path)
    shapes = ("count", "running_count", "stream_table_join")
    ours = [f for f in record["figures"] if f["side"] == "ours"]
    assert {(f["shape"], f["keys"]) for f in ours} == {(s, k) for s in shapes for k in (20, 300)}
    for figure in ours:
        assert figure["records"] == 3000 and figure["records_per_s"] > 0
        assert 0 <= figure["export_share"] <= figure["export_share_max_micro_batch"] <= 1
    bare = [f for f in record["figures"] if f["side"] == "bare_loop"]
    assert {(f["shape"], f["keys"]) for f in bare} == {(s, k) for s in shapes for k in (20, 300)}
    assert all(f["records"] == 3000 and f["records_per_s"] > 0 for f in bare)
    assert record["settings"]["micro_batch"] == 1000


def test_an_unknown_shape_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        engine_bench.main(["--shapes", "nope"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.startswith("error: unknown shapes ['nope']")


@pytest.mark.parametrize("shape", sorted(bare_loops.LOOPS) + ["stream_table_join"])
def test_a_bare_loop_keeps_the_state_the_shape_keeps(shape):
    # The reference must do the shape's work: every key's count, every window's user aggregate, every
    # reading joined; else its rate would flatter it.
    keys = ["a", "b", "a", "c", "a"]
    values = [{"temperature": t} for t in (10.0, 20.0, 30.0, 5.0, 1.0)]
    timestamps = [0, 299_999, 300_000, 600_000, 600_001]
    out = bare_loops.bare_loop(shape, keys, values, timestamps)()
    expected = {
        "count": {("a", 0): 2, ("b", 0): 1, ("c", 600_000): 1, ("a", 600_000): 1},
        "running_count": {"a": 3, "b": 1, "c": 1},
        "stream_table_join": [
            {"temperature": t, "site": site, "threshold": 25.0}
            for t, site in zip(
                (10.0, 20.0, 30.0, 5.0, 1.0), ("site-0", "site-1", "site-0", "site-2", "site-0"), strict=True
            )
        ],
    }
    if shape in expected:
        assert out == expected[shape]
        return
    # hopping: each reading in the windows [start, start + 10 min) of starts 5 minutes apart holding it
    stats = {key: (count, total, high) for key, (count, total, high) in _hopping_stats(out).items()}
    assert stats == {
        ("a", -300_000): (1, 10.0, 10.0),
        ("a", 0): (2, 40.0, 30.0),
        ("a", 300_000): (2, 31.0, 30.0),
        ("a", 600_000): (1, 1.0, 1.0),
        ("b", -300_000): (1, 20.0, 20.0),
        ("b", 0): (1, 20.0, 20.0),
        ("c", 300_000): (1, 5.0, 5.0),
        ("c", 600_000): (1, 5.0, 5.0),
    }


def _hopping_stats(state: dict) -> dict:
    """(count, sum, max) per window from a hopping bare loop's state (dicts for the user's, tuples else)."""
    return {
        window: (v["count"], v["sum"], v["max"]) if isinstance(v, dict) else v for window, v in state.items()
    }
