"""The validation job on a correct output and on corrupted copies of it, one promise broken per copy.

Each corrupted copy must fail its suite on the rule it breaks, with the offending rows in the stored
result, while the correct output passes every suite.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from spark_jobs.jobs import sensor_alerts
from spark_jobs.quality import gx_context
from spark_jobs.quality.data_docs import external_resources
from spark_jobs.quality.validate import validate_output
from spark_jobs.spark.job import JobSpec, write_job_record
from spark_jobs.spark.topics import BUILT_IN_TOPICS
from tests.quality.support import (
    SENSOR_ALERTS_SUITES,
    consecutive_pair,
    copy_output,
    failing_rows,
    files_under,
    next_seq,
    read_topic,
    rewrite_topic,
    stored_results,
)

pytestmark = pytest.mark.spark


@pytest.fixture(params=["local", "spark"])
def engine(request) -> str:
    """Each corruption is caught by both engines: in process (every scheduled run) and on Spark (--full,
    large scopes)."""
    return request.param


def _validate_one(spark, output: Path, reports: Path, suite: str, **kwargs):
    # Every batch, as the run that published them all would validate them (no context before it).
    batches = sorted({int(folder.name.split("=")[1]) for folder in output.glob("*/batch_id=*")})
    [verdict] = validate_output(
        spark, output, reports, only=[suite], run_name=f"broken-{suite}", batches=batches, **kwargs
    )
    [result] = stored_results(reports, suite)
    return verdict, result


def test_the_correct_output_passes_every_suite(validated_correct_output):
    verdicts = validated_correct_output.verdicts
    assert [v.suite for v in verdicts] == [c.suite for c in SENSOR_ALERTS_SUITES]
    assert all(v.success for v in verdicts), [v.line() for v in verdicts]
    assert all(v.rows > 0 and v.evaluated > 0 for v in verdicts)
    assert all(v.line().startswith(f"PASSED {v.suite}: ") for v in verdicts)


def test_results_verdicts_and_self_contained_docs_are_stored(validated_correct_output):
    reports = validated_correct_output.reports
    for check in SENSOR_ALERTS_SUITES:
        [result] = stored_results(reports, check.suite)
        assert result["success"] is True and result["meta"]["run_id"]["run_name"] == "correct-output"
    summary = json.loads((reports / "verdicts.json").read_text())
    assert summary["success"] is True and len(summary["suites"]) == len(SENSOR_ALERTS_SUITES)
    pages = list((reports / "data_docs").rglob("*.html"))
    assert (reports / "data_docs" / "index.html") in pages and len(pages) > len(SENSOR_ALERTS_SUITES)
    assert {str(p): external_resources(p.read_text()) for p in pages} == {str(p): [] for p in pages}


def test_a_window_emitted_twice_fails_window_finals(spark, correct_output, tmp_path, engine):
    output = copy_output(correct_output, tmp_path / "output")
    finals = read_topic(output, "window-finals")
    twice = finals[len(finals) // 2]
    finals.append(dict(twice, seq=next_seq(output, twice["partition"])))
    rewrite_topic(output, "window-finals", finals)

    verdict, result = _validate_one(spark, output, tmp_path / "reports", "window-finals", engine=engine)

    assert not verdict.success
    assert any(f.startswith("expect_emitted_at_most_once_per_key_and_window (2 ") for f in verdict.failures)
    rows = failing_rows(result, "expect_emitted_at_most_once_per_key_and_window")
    assert {(r["key"], r["window_start"], r["emissions"]) for r in rows} == {
        (twice["key"], twice["window_start"], 2)
    }
    assert len(rows) == 2


def test_a_timestamp_going_backwards_fails_window_finals(spark, correct_output, tmp_path, engine):
    output = copy_output(correct_output, tmp_path / "output")
    finals = read_topic(output, "window-finals")
    earlier, later = consecutive_pair(finals, ("key",))
    assert earlier["timestamp"] < later["timestamp"]
    earlier["seq"], later["seq"] = later["seq"], earlier["seq"]  # emitted in the wrong order
    rewrite_topic(output, "window-finals", finals)

    verdict, result = _validate_one(spark, output, tmp_path / "reports", "window-finals", engine=engine)

    assert not verdict.success
    [row] = failing_rows(result, "expect_timestamps_to_never_go_backwards_per_key")
    assert (row["key"], row["timestamp"], row["previous_timestamp"]) == (
        earlier["key"],
        earlier["timestamp"],
        later["timestamp"],
    )


def test_a_count_going_down_in_its_window_fails_window_counts(spark, correct_output, tmp_path, engine):
    output = copy_output(correct_output, tmp_path / "output")
    counts = read_topic(output, "window-counts")
    first, second = consecutive_pair(counts, ("key", "window_start"))
    first["value"], second["value"] = second["value"], first["value"]
    rewrite_topic(output, "window-counts", counts)

    verdict, result = _validate_one(spark, output, tmp_path / "reports", "window-counts", engine=engine)

    assert not verdict.success
    [row] = failing_rows(result, "expect_values_to_never_decrease_per_key")
    assert (row["key"], row["seq"], row["value"], row["previous_value"]) == (
        second["key"],
        second["seq"],
        second["value"],
        first["value"],
    )


def test_an_update_after_its_window_closed_fails_window_counts(spark, correct_output, tmp_path, engine):
    output = copy_output(correct_output, tmp_path / "output")
    counts = read_topic(output, "window-counts")
    first = counts[0]
    task = [r for r in counts if r["partition"] == first["partition"]]
    window = [r for r in task if (r["key"], r["window_start"]) == (first["key"], first["window_start"])]
    # A record for the task's first window accepted at the very end, long after window end + grace.
    late = dict(
        window[-1],
        value=window[-1]["value"] + 1,
        seq=next_seq(output, first["partition"]),
    )
    counts.append(late)
    rewrite_topic(output, "window-counts", counts)

    verdict, result = _validate_one(spark, output, tmp_path / "reports", "window-counts", engine=engine)

    assert not verdict.success
    [row] = failing_rows(result, "expect_no_updates_after_window_closes")
    assert row["seq"] == late["seq"] and row["task_time_before"] == max(r["timestamp"] for r in task)
    assert [f for f in verdict.failures if "expect_no_updates_after_window_closes" not in f] == []


def _spread_seqs(output: Path, factor: int = 10) -> None:
    """Multiply every seq of the output topics: room for a row between two emissions, order unchanged."""
    for check in SENSOR_ALERTS_SUITES:
        if check.topic not in BUILT_IN_TOPICS:
            rows = read_topic(output, check.topic)
            rewrite_topic(output, check.topic, [dict(r, seq=r["seq"] * factor) for r in rows])


def test_a_final_emitted_before_its_window_closed_fails_window_finals(
    spark, correct_output, tmp_path, engine
):
    output = copy_output(correct_output, tmp_path / "output")
    _spread_seqs(output)
    counts, finals = read_topic(output, "window-counts"), read_topic(output, "window-finals")
    final = finals[0]  # the first final of its task: moving it earlier breaks no other order
    ident = (final["key"], final["window_start"], final["partition"])
    last_update = [r for r in counts if (r["key"], r["window_start"], r["partition"]) == ident][-1]
    final["seq"] = last_update["seq"] + 5  # right after its window's last update, window still open
    rewrite_topic(output, "window-finals", finals)

    verdict, result = _validate_one(spark, output, tmp_path / "reports", "window-finals", engine=engine)

    assert not verdict.success
    [row] = failing_rows(result, "expect_emitted_after_window_closes")
    assert (row["key"], row["window_start"], row["seq"]) == (
        final["key"],
        final["window_start"],
        final["seq"],
    )
    assert row["task_time_before"] < final["window_end"] + 120_000
    assert [f for f in verdict.failures if "expect_emitted_after_window_closes" not in f] == []


def test_an_alert_that_is_not_low_or_twice_fails_low_activity_alerts(spark, correct_output, tmp_path, engine):
    output = copy_output(correct_output, tmp_path / "output")
    alerts, finals = read_topic(output, "low-activity-alerts"), read_topic(output, "window-finals")
    busy = next(f for f in finals if f["value"] >= 4)
    alerts.append(dict(busy, seq=next_seq(output, busy["partition"])))
    alerts.append(dict(alerts[0], seq=next_seq(output, alerts[0]["partition"]) + 1))
    rewrite_topic(output, "low-activity-alerts", alerts)

    verdict, result = _validate_one(spark, output, tmp_path / "reports", "low-activity-alerts", engine=engine)

    assert not verdict.success
    [index] = failing_rows(result, "expect_column_values_to_be_between")
    assert (index["partition"], index["seq"], index["value"]) == (
        busy["partition"],
        alerts[-2]["seq"],
        busy["value"],
    )
    twice = failing_rows(result, "expect_emitted_at_most_once_per_key_and_window")
    assert {(r["key"], r["window_start"]) for r in twice} == {(alerts[0]["key"], alerts[0]["window_start"])}


def test_an_alert_that_is_no_final_fails_low_activity_alerts(spark, correct_output, tmp_path, engine):
    output = copy_output(correct_output, tmp_path / "output")
    alerts = read_topic(output, "low-activity-alerts")
    alerts[0]["value"] -= 1 if alerts[0]["value"] > 1 else -1  # a count the window never had as final
    rewrite_topic(output, "low-activity-alerts", alerts)

    verdict, result = _validate_one(spark, output, tmp_path / "reports", "low-activity-alerts", engine=engine)

    assert not verdict.success
    # Both the hand-written rule (an alert is a final) and the derived one (a final is an update) see it.
    for topic in ("window-finals", "window-counts"):
        [row] = failing_rows(result, "expect_rows_to_appear_in_topic", topic=topic)
        assert (row["key"], row["seq"]) == (alerts[0]["key"], alerts[0]["seq"])


def test_a_summary_off_its_grid_fails_summaries(spark, correct_output, tmp_path, engine):
    output = copy_output(correct_output, tmp_path / "output")
    summaries = read_topic(output, "summaries")
    summaries[1]["timestamp"] += 1
    rewrite_topic(output, "summaries", summaries)

    verdict, result = _validate_one(spark, output, tmp_path / "reports", "summaries", engine=engine)

    assert not verdict.success
    [row] = failing_rows(result, "expect_timestamps_on_aligned_grid")
    assert (row["seq"], row["off_grid_by_ms"]) == (summaries[1]["seq"], 1)


def test_summaries_must_be_strictly_increasing_per_task(spark, correct_output, tmp_path, engine):
    output = copy_output(correct_output, tmp_path / "output")
    summaries = read_topic(output, "summaries")
    again = dict(summaries[0], seq=next_seq(output, summaries[0]["partition"]))
    summaries.append(again)  # the same boundary twice: not strictly increasing
    rewrite_topic(output, "summaries", summaries)

    verdict, result = _validate_one(spark, output, tmp_path / "reports", "summaries", engine=engine)

    assert not verdict.success
    rows = failing_rows(result, "expect_timestamps_to_never_go_backwards_per_key")
    assert [r["seq"] for r in rows] == [again["seq"]]


def test_a_second_alert_in_one_silence_episode_fails_silent_sensors(spark, correct_output, tmp_path, engine):
    output = copy_output(correct_output, tmp_path / "output")
    alerts = read_topic(output, "silent-sensors")
    repeat = dict(
        alerts[0], seq=next_seq(output, alerts[0]["partition"]), timestamp=alerts[0]["timestamp"] + 60_000
    )
    alerts.append(repeat)
    rewrite_topic(output, "silent-sensors", alerts)

    verdict, result = _validate_one(spark, output, tmp_path / "reports", "silent-sensors", engine=engine)

    assert not verdict.success
    [row] = failing_rows(result, "expect_values_to_never_decrease_per_key")
    assert (row["key"], row["seq"]) == (repeat["key"], repeat["seq"])


def test_a_quarantine_row_without_reason_fails_quarantine(spark, correct_output, tmp_path, engine):
    output = copy_output(correct_output, tmp_path / "output")
    rows = read_topic(output, "_quarantine")
    rows[1]["reason"] = None
    rows.append(dict(rows[0], reason="  ", line=99))
    rewrite_topic(output, "_quarantine", rows)

    verdict, result = _validate_one(spark, output, tmp_path / "reports", "quarantine", engine=engine)

    assert not verdict.success
    failing = failing_rows(result, "expect_column_values_to_be_non_blank")
    assert sorted((r["source_file"], r["line"], r["reason"]) for r in failing) == sorted(
        [(rows[1]["source_file"], rows[1]["line"], None), (rows[0]["source_file"], 99, "  ")]
    )


def test_a_late_record_whose_window_was_open_fails_late(spark, correct_output, tmp_path, engine):
    output = copy_output(correct_output, tmp_path / "output")
    rows = read_topic(output, "_late")
    assert rows, "the correct output must have late records"
    rows[0]["stream_time"] = rows[0]["window_end"] + 120_000 - 1  # one ms before its window closed
    rows[-1]["node"] = "KSTREAM-UNKNOWN"  # a node without a window's grace cannot show it
    rewrite_topic(output, "_late", rows)

    verdict, result = _validate_one(spark, output, tmp_path / "reports", "late", engine=engine)

    assert not verdict.success
    failing = failing_rows(result, "expect_dropped_only_after_window_closes")
    assert sorted((r["file"], r["line"]) for r in failing) == sorted(
        {(rows[0]["file"], rows[0]["line"]), (rows[-1]["file"], rows[-1]["line"])}
    )


def test_a_handwritten_rule_naming_an_unloaded_expectation_fails_the_run(
    spark, correct_output, tmp_path, monkeypatch
):
    """A job's own rules naming an expectation no module defines must fail, not pass without it."""
    rules = json.loads(Path(sensor_alerts.__file__).with_name(sensor_alerts.QUALITY_RULES).read_text())
    rules["window-finals"].append({"type": "expect_unheard_of_rule", "kwargs": {}})
    (tmp_path / "broken_rules.json").write_text(json.dumps(rules))
    (tmp_path / "job_with_broken_rules.py").write_text(
        "from spark_jobs.jobs.sensor_alerts import *  # noqa: F403\n"
        "from spark_jobs.jobs.sensor_alerts import OPTIONS, OUTPUT_TOPICS, build_topology  # noqa: F401\n"
        "QUALITY_RULES = 'broken_rules.json'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    output = copy_output(correct_output, tmp_path / "output")
    write_job_record(output, JobSpec("job_with_broken_rules", {}, 2), "test-checkpoint")

    [verdict] = validate_output(spark, output, tmp_path / "reports", only=["window-finals"])

    assert not verdict.success
    assert "expect_unheard_of_rule" in verdict.error and "not a registered expectation" in verdict.error


def test_an_absent_topic_is_validated_as_empty_and_an_unchecked_one_fails(spark, correct_output, tmp_path):
    output = copy_output(correct_output, tmp_path / "output")
    shutil.rmtree(output / "silent-sensors")  # the sink creates a topic's folder with its first row
    shutil.copytree(output / "summaries", output / "new-topic")

    verdicts = {v.suite: v for v in validate_output(spark, output, tmp_path / "reports")}

    assert verdicts["silent-sensors"].success and verdicts["silent-sensors"].rows == 0
    assert "no rows yet" in verdicts["silent-sensors"].line()
    assert (
        not verdicts["new-topic"].success
        and "'new-topic' is not an output topic of spark_jobs.jobs.sensor_alerts"
        in verdicts["new-topic"].error
    )
    assert all(v.success for name, v in verdicts.items() if name != "new-topic")


def test_a_missing_output_folder_fails(spark, tmp_path):
    [verdict] = validate_output(spark, tmp_path / "nowhere", tmp_path / "reports")
    assert not verdict.success and "no output folder" in verdict.error
    assert (tmp_path / "reports" / "data_docs" / "index.html").is_file()


def test_a_folder_no_job_wrote_fails_naming_the_missing_record(spark, tmp_path):
    (tmp_path / "output" / "window-finals").mkdir(parents=True)
    [verdict] = validate_output(spark, tmp_path / "output", tmp_path / "reports")
    assert not verdict.success and "_job.json" in verdict.error


def test_validation_writes_nothing_into_the_gx_project(spark, correct_output, tmp_path):
    before = files_under(gx_context.DEFAULT_CONTEXT_ROOT)
    validate_output(spark, correct_output, tmp_path / "reports", only=["summaries"])
    assert files_under(gx_context.DEFAULT_CONTEXT_ROOT) == before


def test_each_run_keeps_only_the_newest_results_asked_for(spark, correct_output, tmp_path):
    reports = tmp_path / "reports"
    for run in ("first", "second"):
        validate_output(spark, correct_output, reports, only=["summaries"], run_name=run, keep_results=1)
    [result] = stored_results(reports, "summaries")
    assert result["meta"]["run_id"]["run_name"] == "second"
    index = (reports / "data_docs" / "index.html").read_text()
    assert "second" in index and "'run_name': 'first'" not in index
