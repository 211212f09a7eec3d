"""Pure-Python parts of the quality layer: rule construction, verdicts, durations, self-contained docs."""

from __future__ import annotations

import pytest
from great_expectations.compatibility.pydantic import ValidationError

from spark_jobs.quality import expectations as rules
from spark_jobs.quality.data_docs import ASSETS_DIR, LOCAL_COPIES, external_resources, make_self_contained
from spark_jobs.quality.validate import SuiteVerdict, build_parser

GX_PAGE = """<html><head>
<link rel="stylesheet" href="https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css"/>
<link rel="stylesheet" href="https://cdn.jsdelivr.net/npm/@forevolve/bootstrap-dark@1.1.0/dist/css/bootstrap-prefers-dark.css" />
<script src="https://cdn.jsdelivr.net/npm/vega@5"></script>
<script src="https://code.jquery.com/jquery-3.7.1.min.js"></script>
<script src="https://stackpath.bootstrapcdn.com/bootstrap/4.3.1/js/bootstrap.min.js" integrity="sha384-x" crossorigin="anonymous"></script>
</head><body>
<img src="https://great-expectations-web-assets.s3.us-east-2.amazonaws.com/logo-long.png?d=20261122T024420Z">
<a href="https://greatexpectations.io">a link, not a load</a>
</body></html>"""


def test_rules_name_only_identifiers_so_a_suite_cannot_inject_sql():
    with pytest.raises(ValidationError):
        rules.ExpectTimestampsToNeverGoBackwardsPerKey(key_columns=["key) OR (1=1"])
    with pytest.raises(ValidationError):
        rules.ExpectColumnValuesToBeNonBlank(column="reason`; DROP")
    with pytest.raises(ValidationError):
        rules.ExpectRowsToAppearInTopic(topic="window-finals` x", columns=["key"])
    rule = rules.ExpectValuesToNeverDecreasePerKey(column="value.last_event_time")
    assert "`value`.`last_event_time`" in rule.rows_query()


def test_rules_never_take_sql_from_a_suite():
    with pytest.raises(ValidationError, match="builds its own query"):
        rules.ExpectColumnValuesToBeNonBlank(column="reason", unexpected_rows_query="SELECT 1")
    # The stored configuration names the rule and its fields only.
    config = rules.ExpectTimestampsOnAlignedGrid(interval_ms=600_000).configuration
    assert config.type == "expect_timestamps_on_aligned_grid"
    assert config.kwargs == {"interval_ms": 600_000}


def test_order_rules_compare_in_emission_order_within_each_key():
    query = rules.ExpectTimestampsToNeverGoBackwardsPerKey(key_columns=["key", "window_start"]).rows_query()
    assert "PARTITION BY `key`, `window_start` ORDER BY `partition`, `seq`" in query
    assert "`timestamp` < `previous_timestamp`" in query
    strict = rules.ExpectTimestampsToNeverGoBackwardsPerKey(
        key_columns=["partition"], order_columns=["seq"], strictly=True
    )
    assert "`timestamp` <= `previous_timestamp`" in strict.rows_query()
    with pytest.raises(ValidationError):
        rules.ExpectTimestampsToNeverGoBackwardsPerKey(order_columns=[])


def test_the_grid_shift_is_taken_modulo_the_interval():
    assert (
        "pmod(`timestamp` - 5, 10)"
        in rules.ExpectTimestampsOnAlignedGrid(interval_ms=10, shift_ms=-5).rows_query()
    )
    with pytest.raises(ValueError):
        rules.ExpectTimestampsOnAlignedGrid(interval_ms=0).rows_query()


def test_abstract_base_is_not_a_registered_expectation():
    from great_expectations.exceptions import ExpectationNotFoundError
    from great_expectations.expectations.registry import get_expectation_impl

    for rule in rules.CUSTOM_EXPECTATIONS:
        assert get_expectation_impl(rule.expectation_type) is rule
    with pytest.raises(ExpectationNotFoundError):
        get_expectation_impl("rows_rule_expectation")


def test_the_command_line_takes_no_job_figures():
    """Figures come from the output folder's job record, never from the validation's command line."""
    args = build_parser().parse_args(["--output", "o", "--reports", "r"])
    assert not {"window_size", "grace", "low_activity_threshold"} & set(vars(args))
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--output", "o", "--reports", "r", "--window-size", "5min"])


def test_verdict_lines_say_what_failed_where():
    failed = SuiteVerdict(
        "window-finals",
        "window-finals",
        False,
        rows=35,
        evaluated=22,
        failures=["rule_a (2 unexpected rows)"],
    )
    assert (
        failed.line()
        == "FAILED window-finals: 1 of 22 expectations failed on 35 rows of window-finals: rule_a (2 unexpected rows)"
    )
    passed = SuiteVerdict("summaries", "summaries", True, rows=4, evaluated=17)
    assert passed.line() == "PASSED summaries: 17/17 expectations on 4 rows of summaries"
    absent = SuiteVerdict("silent-sensors", "silent-sensors", True, rows=0, evaluated=17, absent=True)
    assert "which has no rows yet" in absent.line()
    assert SuiteVerdict("x", "x", False, error="boom").line() == "FAILED x: boom"


def test_docs_pages_are_rewritten_to_load_only_vendored_files(tmp_path):
    site = tmp_path / "data_docs"
    (site / "validations" / "suite" / "run").mkdir(parents=True)
    (site / "index.html").write_text(GX_PAGE)
    (site / "validations" / "suite" / "run" / "result.html").write_text(GX_PAGE)
    assert len(external_resources(GX_PAGE)) == 6

    assert make_self_contained(site) == 2

    index = (site / "index.html").read_text()
    deep = (site / "validations" / "suite" / "run" / "result.html").read_text()
    assert external_resources(index) == [] and external_resources(deep) == []
    assert '<script src="./static/vendor/jquery.min.js"></script>' in index
    assert '<script src="../../../static/vendor/jquery.min.js"></script>' in deep
    assert "vega" not in index and "bootstrap-dark" not in index
    assert 'src="./static/vendor/../images/logo-long.png"' in index
    assert 'href="https://greatexpectations.io"' in index  # links stay links
    assert (site / "static" / "vendor" / "jquery.min.js").read_bytes() == (
        ASSETS_DIR / "jquery.min.js"
    ).read_bytes()


def test_every_vendored_file_named_exists_with_its_licence():
    for local in LOCAL_COPIES.values():
        if local and not local.startswith(".."):
            assert (ASSETS_DIR / local).is_file(), local
    licences = (ASSETS_DIR / "LICENSES.txt").read_text()
    for package in (
        "jquery@3.7.1",
        "bootstrap@4.3.1",
        "popper.js@1.12.9",
        "bootstrap-table@1.19.1",
        "bootstrap-datepicker@1.9.0",
        "fontawesome-free@6.6.0",
    ):
        assert package in licences


def test_old_results_and_their_pages_are_pruned_per_suite(tmp_path):
    from spark_jobs.quality.validate import prune_old_results

    def result(suite, run_name, run_time):
        for base in (tmp_path / "validations", tmp_path / "data_docs" / "validations"):
            folder = base / suite / run_name / run_time
            folder.mkdir(parents=True)
            (folder / "batch.json").write_text("{}")

    for i in range(4):
        result("window-finals", f"scheduled__{i}", f"2026010{i}T000000.000000Z")
    result("summaries", "manual", "20260101T000000.000000Z")

    assert prune_old_results(tmp_path, keep=2) == 2

    kept = sorted(p.name for p in (tmp_path / "validations" / "window-finals").iterdir())
    assert kept == ["scheduled__2", "scheduled__3"]
    assert (
        sorted(p.name for p in (tmp_path / "data_docs" / "validations" / "window-finals").iterdir()) == kept
    )
    assert (tmp_path / "validations" / "summaries" / "manual").is_dir()
    assert prune_old_results(tmp_path, keep=0) == 3
    assert not any((tmp_path / "validations" / "window-finals").iterdir())


def test_a_run_scope_is_validated_in_process_and_the_history_or_a_large_scope_on_spark(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from spark_jobs.quality import validate

    output, reports = tmp_path / "output", tmp_path / "reports"
    for batch, rows in ((0, 3), (1, 4)):
        folder = output / "counts" / f"batch_id={batch}"
        folder.mkdir(parents=True)
        pq.write_table(pa.table({"seq": list(range(rows))}), folder / "part-00000.parquet")

    assert validate.scope_rows(output, ["counts"], reports, [1]) == 4
    assert validate.choose_engine("auto", output, ["counts"], reports, [0, 1]) == "local"
    assert validate.choose_engine("auto", output, ["counts"], reports, None) == "spark"
    monkeypatch.setattr(validate, "LOCAL_ROW_LIMIT", 6)
    assert validate.choose_engine("auto", output, ["counts"], reports, [0, 1]) == "spark"
    assert validate.choose_engine("auto", output, ["counts"], reports, [1]) == "local"
    assert validate.choose_engine("spark", output, ["counts"], reports, [1]) == "spark"
    with pytest.raises(ValueError, match="on Spark"):
        validate.choose_engine("local", output, ["counts"], reports, None)
    with pytest.raises(SystemExit):
        validate.main(["--output", str(output), "--reports", str(reports), "--full", "--engine", "local"])
