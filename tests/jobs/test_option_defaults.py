"""A job's option defaults are written once, in OPTIONS: build_topology takes them from there, and a
literal default of its own that disagrees is refused."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

import spark_jobs.jobs
from spark_jobs.spark.job import (
    ContractError,
    JobContract,
    JobOption,
    default_conflicts,
    with_option_defaults,
)

OPTIONS = [JobOption("window_size", 120_000, "size"), JobOption("busy_at", 5, "threshold", "int")]

TESTS = Path(__file__).resolve().parents[1]


def _job_modules() -> list[str]:
    """Every module of spark_jobs/jobs/, the tests' jobs/ folders and bench/jobs/ that has a build_topology."""
    shipped = [f"spark_jobs.jobs.{m.name}" for m in pkgutil.iter_modules(spark_jobs.jobs.__path__)]
    tests = [
        f"tests.{folder.parent.name}.jobs.{m.name}"
        for folder in sorted(TESTS.glob("*/jobs"))
        for m in pkgutil.iter_modules([str(folder)])
    ]
    bench = [f"bench.jobs.{m.name}" for m in pkgutil.iter_modules([str(TESTS.parent / "bench" / "jobs")])]
    return [
        name for name in shipped + tests + bench if hasattr(importlib.import_module(name), "build_topology")
    ]


def test_the_job_modules_are_found():
    found = set(_job_modules())
    assert {"spark_jobs.jobs.sensor_alerts", "spark_jobs.jobs.window_finals"} <= found
    assert {"spark_jobs.jobs.sensor_enrichment", "tests.quality.jobs.hopping_clicks"} <= found
    assert "tests.spark.jobs.orders_enriched" in found
    assert {"bench.jobs.hopping_stats", "bench.jobs.hopping_builtin"} <= found


@pytest.mark.parametrize("module", _job_modules())
def test_no_job_writes_a_default_that_disagrees_with_its_options(module):
    job = importlib.import_module(module)
    assert default_conflicts(job.build_topology, job.OPTIONS) == []
    JobContract.of(module)  # refuses a job whose build_topology disagrees with OPTIONS
    job.build_topology()  # the defaults alone build the topology, as the command line without flags


def test_missing_keywords_take_the_options_defaults():
    @with_option_defaults(OPTIONS)
    def build_topology(*, window_size, busy_at):
        return {"window_size": window_size, "busy_at": busy_at}

    assert build_topology() == {"window_size": 120_000, "busy_at": 5}
    assert build_topology(busy_at=2) == {"window_size": 120_000, "busy_at": 2}
    with pytest.raises(TypeError, match="window_sise"):
        build_topology(window_sise=1)


def test_a_literal_default_that_disagrees_is_refused():
    def build_topology(*, window_size=60_000, busy_at=5):
        raise AssertionError("never built")

    assert default_conflicts(build_topology, OPTIONS) == ["window_size=60000, OPTIONS says 120000"]
    with pytest.raises(ContractError, match="window_size=60000, OPTIONS says 120000"):
        with_option_defaults(OPTIONS)(build_topology)


def test_a_keyword_that_is_no_option_is_refused():
    def build_topology(*, window_size, busy_at, hidden=3):
        raise AssertionError("never built")

    with pytest.raises(ContractError, match="hidden is not in OPTIONS"):
        with_option_defaults(OPTIONS)(build_topology)


def test_the_contract_refuses_a_job_whose_defaults_disagree(tmp_path, monkeypatch):
    (tmp_path / "drifting_job.py").write_text(
        "from spark_jobs.spark.job import JobOption\n"
        "INPUT_TOPIC = 'in'\n"
        "OPTIONS = [JobOption('window_size', 120_000, 'size')]\n"
        "def build_topology(window_size=60_000):\n"
        "    raise AssertionError('never built')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ContractError, match="drifting_job.build_topology disagrees with OPTIONS"):
        JobContract.of("drifting_job")
