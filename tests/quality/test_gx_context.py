"""The GX project in expectations/: every suite loads strictly, and one naming an unknown rule fails."""

from __future__ import annotations

import json
import shutil
import uuid

import pytest

from spark_jobs.quality import gx_context
from spark_jobs.quality.validate import SENSOR_ALERTS_CHECKS
from tests.quality.support import files_under

UNKNOWN_RULE = "expect_timestamps_to_be_monotonic_by_magic"


@pytest.fixture
def context_copy(tmp_path):
    """A copy of expectations/ whose window-finals suite names an expectation no module defines."""
    root = tmp_path / "expectations"
    shutil.copytree(gx_context.DEFAULT_CONTEXT_ROOT, root, ignore=shutil.ignore_patterns("uncommitted"))
    suite_file = root / "expectations" / "window-finals.json"
    suite = json.loads(suite_file.read_text())
    suite["expectations"].append(
        {"type": UNKNOWN_RULE, "kwargs": {}, "meta": {}, "id": str(uuid.uuid4()), "severity": "critical"}
    )
    suite_file.write_text(json.dumps(suite, indent=2))
    return root, len(suite["expectations"])


def test_every_committed_suite_loads_with_all_its_expectations(tmp_path):
    context = gx_context.open_context(reports_dir=tmp_path, root=gx_context.DEFAULT_CONTEXT_ROOT)
    for check in SENSOR_ALERTS_CHECKS:
        suite = gx_context.load_suite(context, check.suite)
        stored = json.loads(
            (gx_context.DEFAULT_CONTEXT_ROOT / "expectations" / f"{check.suite}.json").read_text()
        )
        assert len(suite.expectations) == len(stored["expectations"]) > 0


def test_each_topic_has_a_checkpoint_running_its_suite_on_its_asset(tmp_path):
    context = gx_context.open_context(reports_dir=tmp_path, root=gx_context.DEFAULT_CONTEXT_ROOT)
    for check in SENSOR_ALERTS_CHECKS:
        checkpoint = gx_context.load_checkpoint(context, check.suite)
        [definition] = checkpoint.validation_definitions
        assert definition.suite.name == check.suite
        assert definition.data.data_asset.name == check.topic
        # Failing rows are kept in the result only in the COMPLETE format.
        assert checkpoint.result_format["result_format"] == "COMPLETE"
        assert [a.type for a in checkpoint.actions] == ["update_data_docs"]


def test_results_and_docs_go_to_the_reports_folder_given(tmp_path):
    context = gx_context.open_context(reports_dir=tmp_path / "reports", root=gx_context.DEFAULT_CONTEXT_ROOT)
    sites = context.get_docs_sites_urls(only_if_exists=False)
    assert sites[0]["site_url"] == (tmp_path / "reports" / "data_docs" / "index.html").resolve().as_uri()


def test_gx_alone_would_drop_an_unknown_expectation_and_pass_without_it(context_copy, tmp_path):
    # Why load_suite exists: GX logs the error and leaves the expectation out of the suite.
    root, stored_count = context_copy
    context = gx_context.open_context(reports_dir=tmp_path / "reports", root=root)
    suite = context.suites.get("window-finals")
    assert len(suite.expectations) == stored_count - 1
    assert UNKNOWN_RULE not in {e.expectation_type for e in suite.expectations}


def test_a_suite_naming_an_unknown_expectation_fails_loudly(context_copy, tmp_path):
    root, _ = context_copy
    context = gx_context.open_context(reports_dir=tmp_path / "reports", root=root)
    with pytest.raises(gx_context.SuiteIntegrityError, match=UNKNOWN_RULE):
        gx_context.load_suite(context, "window-finals")
    with pytest.raises(gx_context.SuiteIntegrityError, match=UNKNOWN_RULE):
        gx_context.load_checkpoint(context, "window-finals")
    gx_context.load_suite(context, "window-counts")  # the others are untouched


def test_a_suite_with_invalid_arguments_for_a_known_rule_fails_loudly(context_copy, tmp_path):
    root, _ = context_copy
    suite_file = root / "expectations" / "summaries.json"
    suite = json.loads(suite_file.read_text())
    rule = next(e for e in suite["expectations"] if e["type"] == "expect_timestamps_on_aligned_grid")
    rule["kwargs"]["timestamp_column"] = "timestamp; DROP TABLE x"
    suite_file.write_text(json.dumps(suite))
    context = gx_context.open_context(reports_dir=tmp_path / "reports", root=root)
    with pytest.raises(gx_context.SuiteIntegrityError, match="expect_timestamps_on_aligned_grid"):
        gx_context.load_suite(context, "summaries")
    with pytest.raises(gx_context.SuiteIntegrityError, match="plain identifiers"):
        gx_context.load_checkpoint(context, "summaries")


def test_a_missing_suite_is_an_error(tmp_path):
    context = gx_context.open_context(reports_dir=tmp_path, root=gx_context.DEFAULT_CONTEXT_ROOT)
    with pytest.raises(gx_context.SuiteIntegrityError, match="not in the expectations store"):
        gx_context.load_suite(context, "no-such-suite")


def test_opening_the_context_writes_nothing_into_the_repository(tmp_path):
    before = files_under(gx_context.DEFAULT_CONTEXT_ROOT)
    context = gx_context.open_context(reports_dir=tmp_path, root=gx_context.DEFAULT_CONTEXT_ROOT)
    gx_context.load_checkpoint(context, "window-finals")
    assert files_under(gx_context.DEFAULT_CONTEXT_ROOT) == before
