"""A job the project never saw (tests/quality/jobs/hopping_clicks.py) runs on Spark and is validated by
its own contract: the suites come from its topology and the options it ran with, and corrupted copies of
its output fail on the promise they break."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_jobs.jobs import generate_events
from spark_jobs.quality.derived import topic_suites
from spark_jobs.quality.validate import validate_output
from spark_jobs.spark.job import recorded_job
from tests.quality.support import (
    consecutive_pair,
    copy_output,
    failing_rows,
    read_topic,
    rewrite_topic,
    stored_results,
)
from tests.spark.support import run_in_process

pytestmark = pytest.mark.spark

JOB = "tests.quality.jobs.hopping_clicks"
# Not the defaults: validation must take the figures the job ran with from the output folder.
OPTIONS = {"window_size": 120_000, "advance": 40_000, "grace": 20_000, "busy_at": 4}


@pytest.fixture(scope="module")
def output(spark, tmp_path_factory):
    work = tmp_path_factory.mktemp("hopping-clicks")
    generate_events.main(
        ["--output", str(work / "input"), "--events", "1200", "--sensors", "6", "--files", "3",
         "--late-fraction", "0.03", "--bad-fraction", "0.01"]
    )  # fmt: skip
    run_in_process(
        spark, work / "input", work / "output", work / "checkpoint", module=JOB, options=OPTIONS,
        partitions=2, max_files_per_trigger=1,
    )  # fmt: skip
    return work / "output"


def test_the_output_records_its_job_and_every_topic_passes_its_derived_suite(spark, output, tmp_path):
    spec = recorded_job(output)
    assert spec.module == JOB and {k: spec.options[k] for k in OPTIONS} == OPTIONS
    verdicts = validate_output(spark, output, tmp_path / "reports")
    assert [v.suite for v in verdicts] == [
        "click-counts",
        "click-finals",
        "busy-windows",
        "quarantine",
        "late",
    ]
    assert all(v.success for v in verdicts), [v.line() for v in verdicts]
    assert all(v.rows for v in verdicts), [v.line() for v in verdicts]  # checked on real rows


def test_the_suites_use_the_recorded_figures_and_only_true_promises(output):
    suites = {s.suite: s for s in topic_suites(recorded_job(output))}
    finals = {r["type"]: r["kwargs"] for r in suites["click-finals"].expectations}
    assert finals["expect_window_length_to_equal"] == {"size_ms": 120_000}
    assert finals["expect_emitted_after_window_closes"] == {"topic": "click-counts", "grace_ms": 20_000}
    # Hopping windows: a later window's final may carry an earlier timestamp, so no such rule per key.
    assert "expect_timestamps_to_never_go_backwards_per_key" not in finals
    counts = {r["type"]: r["kwargs"] for r in suites["click-counts"].expectations}
    assert counts["expect_no_updates_after_window_closes"] == {"grace_ms": 20_000}
    assert counts["expect_timestamps_to_never_go_backwards_per_key"] == {
        "key_columns": ["key", "window_start"]
    }
    busy = {r["type"] for r in suites["busy-windows"].expectations}
    assert "expect_emitted_at_most_once_per_key_and_window" in busy  # a filter keeps the promise


def test_a_final_emitted_twice_fails(spark, output, tmp_path):
    broken = copy_output(output, tmp_path / "output")
    finals = read_topic(broken, "click-finals")
    again = dict(
        finals[0], seq=max(r["seq"] for r in finals if r["partition"] == finals[0]["partition"]) + 1000
    )
    rewrite_topic(broken, "click-finals", [*finals, again])

    [verdict] = validate_output(spark, broken, tmp_path / "reports", only=["click-finals"])
    [result] = stored_results(tmp_path / "reports", "click-finals")

    assert not verdict.success
    twice = failing_rows(result, "expect_emitted_at_most_once_per_key_and_window")
    assert {(r["key"], r["window_start"]) for r in twice} == {(finals[0]["key"], finals[0]["window_start"])}


def test_an_update_going_back_in_time_fails(spark, output, tmp_path):
    broken = copy_output(output, tmp_path / "output")
    counts = read_topic(broken, "click-counts")
    first, second = consecutive_pair(counts, ("key", "window_start"))
    moved = [dict(r, timestamp=first["timestamp"] - 1) if r is second else r for r in counts]
    rewrite_topic(broken, "click-counts", moved)

    [verdict] = validate_output(spark, broken, tmp_path / "reports", only=["click-counts"])
    [result] = stored_results(tmp_path / "reports", "click-counts")

    assert not verdict.success
    [row] = failing_rows(result, "expect_timestamps_to_never_go_backwards_per_key")
    assert (row["key"], row["seq"]) == (second["key"], second["seq"])


def test_each_run_validates_its_own_batches_with_a_small_context(spark, output, tmp_path):
    reports = tmp_path / "reports"
    published = sorted(int(p.name.split("=")[1]) for p in (output / "click-finals").iterdir())
    assert len(published) >= 3  # one landing file per micro-batch
    total = {v.suite: 0 for v in validate_output(spark, output, tmp_path / "full", batches=None)}
    for batch in published:
        verdicts = validate_output(spark, output, reports, batches=[batch], run_name=f"batch-{batch}")
        assert all(v.success for v in verdicts), [v.line() for v in verdicts]
        for v in verdicts:
            total[v.suite] += v.rows
    every_row = {v.suite: v.rows for v in validate_output(spark, output, tmp_path / "again", batches=None)}
    assert total == every_row  # each row validated once, by the run that published it
    kept = pq.read_table(reports / "context" / "click-counts").num_rows
    assert 0 < kept < every_row["click-counts"]


def test_a_final_repeated_in_a_later_run_is_caught_through_the_context(spark, output, tmp_path):
    broken = copy_output(output, tmp_path / "output")
    published = sorted(int(p.name.split("=")[1]) for p in (broken / "click-finals").iterdir())
    earlier, last = published[-2], published[-1]
    table = pq.read_table(broken / "click-finals" / f"batch_id={earlier}")
    rows = table.to_pylist()
    final = max(rows, key=lambda r: (r["partition"], r["seq"]))
    every = (
        pq.read_table(broken / "click-finals").to_pylist()
        + pq.read_table(broken / "click-counts").to_pylist()
    )
    again = dict(final, seq=1 + max(r["seq"] for r in every if r["partition"] == final["partition"]))
    pq.write_table(
        pa.Table.from_pylist([again], schema=table.schema),
        broken / "click-finals" / f"batch_id={last}" / "dup.parquet",
    )

    reports = tmp_path / "reports"
    for batch in published[:-1]:
        assert all(v.success for v in validate_output(spark, broken, reports, batches=[batch]))
    verdicts = {v.suite: v for v in validate_output(spark, broken, reports, batches=[last])}

    assert not verdicts["click-finals"].success
    [result] = [r for r in stored_results(reports, "click-finals") if not r["success"]]
    twice = failing_rows(result, "expect_emitted_at_most_once_per_key_and_window")
    assert [(r["key"], r["seq"]) for r in twice] == [(again["key"], again["seq"])]  # not the earlier one
    # Without the context of the earlier runs, the repeat goes unseen (and the finals' updates, emitted in
    # earlier batches, look missing): the context is what makes a run's validation sound.
    alone = {v.suite: v for v in validate_output(spark, broken, tmp_path / "fresh", batches=[last])}
    assert not any("at_most_once" in failure for failure in alone["click-finals"].failures)
