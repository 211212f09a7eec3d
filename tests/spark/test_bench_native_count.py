"""The Spark benchmark counts native's output from its file sink's log, not with a Spark job (which
would add seconds to native's end-to-end time): the count must be the one Spark reads."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from spark_jobs.jobs import generate_events

pytestmark = pytest.mark.spark


def _bench():
    path = Path(__file__).resolve().parents[2] / "bench" / "spark_bench.py"
    spec = importlib.util.spec_from_file_location("spark_bench", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_native_finals_are_counted_as_spark_reads_them(spark, tmp_path):
    bench = _bench()
    generate_events.main(
        ["--output", str(tmp_path / "in"), "--events", "4000", "--sensors", "20", "--files", "3"]
    )
    (tmp_path / "run").mkdir()
    result = bench.run_native(spark, tmp_path / "in", tmp_path / "run", 1, 60_000)
    assert result["batches"] >= 3
    assert result["finals"] == spark.read.parquet(str(tmp_path / "run" / "out")).count() > 0
