"""A validation run's GX context: built under the reports folder from the job's suites, every suite loads
strictly, and one naming an unknown rule, or a rule with invalid arguments, fails loudly."""

from __future__ import annotations

import json
import uuid

import pytest

from spark_jobs.quality import gx_context
from spark_jobs.quality.derived import topic_suites
from spark_jobs.spark.job import JobSpec
from tests.quality.support import files_under

UNKNOWN_RULE = "expect_timestamps_to_be_monotonic_by_magic"
SENSOR_ALERTS = JobSpec("spark_jobs.jobs.sensor_alerts", {}, 2)


@pytest.fixture(scope="module")
def suites():
    return topic_suites(SENSOR_ALERTS)


def test_every_suite_is_stored_and_loads_with_all_its_expectations(tmp_path, suites):
    context = gx_context.open_context(reports_dir=tmp_path)
    checkpoints = gx_context.add_suites(context, suites)
    assert list(checkpoints) == [s.suite for s in suites]
    for entry in suites:
        suite = gx_context.load_suite(context, entry.suite)
        assert len(suite.expectations) == len(entry.expectations) > 0


def test_each_topic_has_a_checkpoint_running_its_suite_on_its_asset(tmp_path, suites):
    context = gx_context.open_context(reports_dir=tmp_path)
    checkpoints = gx_context.add_suites(context, suites)
    for entry in suites:
        checkpoint = checkpoints[entry.suite]
        [definition] = checkpoint.validation_definitions
        assert definition.suite.name == entry.suite and definition.data.data_asset.name == entry.suite
        # Failing rows are kept in the result only in the COMPLETE format.
        assert checkpoint.result_format["result_format"] == "COMPLETE"
        # Data Docs are built once per validation run, after every suite ran, not by each checkpoint.
        assert checkpoint.actions == []


def test_results_and_docs_go_to_the_reports_folder_given(tmp_path):
    context = gx_context.open_context(reports_dir=tmp_path / "reports")
    sites = context.get_docs_sites_urls(only_if_exists=False)
    assert sites[0]["site_url"] == (tmp_path / "reports" / "data_docs" / "index.html").resolve().as_uri()


def test_each_run_starts_from_a_fresh_context(tmp_path, suites):
    """Suites of an earlier run (another job's, other options) must not linger in the next one."""
    gx_context.add_suites(gx_context.open_context(reports_dir=tmp_path), suites)
    context = gx_context.open_context(reports_dir=tmp_path)
    with pytest.raises(gx_context.SuiteIntegrityError, match="not in the expectations store"):
        gx_context.load_suite(context, suites[0].suite)


def _with_rule(suites, suite_name: str, rule: dict):
    from dataclasses import replace

    return [replace(s, expectations=(*s.expectations, rule)) if s.suite == suite_name else s for s in suites]


def test_gx_alone_would_drop_an_unknown_expectation_and_pass_without_it(tmp_path, suites):
    # Why load_suite exists: GX logs the error and leaves the expectation out of a stored suite.
    context = gx_context.open_context(reports_dir=tmp_path)
    gx_context.add_suites(context, suites)
    path = tmp_path / gx_context.RUN_CONTEXT_DIR / "expectations" / "window-finals.json"
    stored = json.loads(path.read_text())
    stored["expectations"].append(
        {"type": UNKNOWN_RULE, "kwargs": {}, "meta": {}, "id": str(uuid.uuid4()), "severity": "critical"}
    )
    path.write_text(json.dumps(stored))
    suite = context.suites.get("window-finals")
    assert UNKNOWN_RULE not in {e.expectation_type for e in suite.expectations}
    with pytest.raises(gx_context.SuiteIntegrityError, match=UNKNOWN_RULE):
        gx_context.load_suite(context, "window-finals")
    with pytest.raises(gx_context.SuiteIntegrityError, match=UNKNOWN_RULE):
        gx_context.load_checkpoint(context, "window-finals")
    gx_context.load_suite(context, "window-counts")  # the others are untouched


def test_a_suite_naming_an_unknown_expectation_fails_loudly(tmp_path, suites):
    broken = _with_rule(suites, "window-finals", {"type": UNKNOWN_RULE, "kwargs": {}})
    with pytest.raises(gx_context.SuiteIntegrityError, match=UNKNOWN_RULE):
        gx_context.add_suites(gx_context.open_context(reports_dir=tmp_path), broken)


def test_a_rule_with_invalid_arguments_fails_loudly(tmp_path, suites):
    rule = {
        "type": "expect_timestamps_on_aligned_grid",
        "kwargs": {"interval_ms": 10, "timestamp_column": "timestamp; DROP TABLE x"},
    }
    broken = _with_rule(suites, "summaries", rule)
    with pytest.raises(gx_context.SuiteIntegrityError, match="expect_timestamps_on_aligned_grid"):
        gx_context.add_suites(gx_context.open_context(reports_dir=tmp_path), broken)


def test_a_missing_suite_is_an_error(tmp_path):
    context = gx_context.open_context(reports_dir=tmp_path)
    with pytest.raises(gx_context.SuiteIntegrityError, match="not in the expectations store"):
        gx_context.load_suite(context, "no-such-suite")


def test_a_validation_run_writes_nothing_into_the_repository(tmp_path, suites):
    before = files_under(gx_context.DEFAULT_CONTEXT_ROOT)
    context = gx_context.open_context(reports_dir=tmp_path)
    gx_context.add_suites(context, suites)
    assert files_under(gx_context.DEFAULT_CONTEXT_ROOT) == before
