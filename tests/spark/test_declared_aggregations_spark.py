"""A job of declared aggregations (tests/quality/jobs/hopping_stats.py) on Spark: struct values in
Parquet equal to the engine's own tasks', and the suites derived from its topology pass on them."""

from __future__ import annotations

import pyarrow as pa
import pytest

from spark_jobs.jobs import generate_events
from spark_jobs.quality.derived import topic_suites
from spark_jobs.quality.validate import validate_output
from spark_jobs.spark.job import recorded_job
from spark_jobs.spark.topics import TopicSchema, aggregate_struct, topic_tables
from spark_jobs.streams import Count, Max, Mean, StreamsBuilder, Sum
from spark_jobs.streams.runtime.task import StreamTask
from tests.spark.support import all_committed, ordered_files, reference_rows, run_in_process

JOB = "tests.quality.jobs.hopping_stats"
TOPICS = ["reading-stats", "stats-finals", "sensor-totals"]
PARTITIONS = 2


def test_struct_values_become_an_arrow_struct_column() -> None:
    declared = {"n": Count(), "total": Sum("v", dtype="int64"), "top": Max("v"), "avg": Mean("v")}
    assert aggregate_struct(declared) == pa.struct(
        [
            pa.field("n", pa.int64(), nullable=False),
            pa.field("total", pa.int64()),
            pa.field("top", pa.float64()),
            pa.field("avg", pa.float64()),
        ]
    )
    builder = StreamsBuilder()
    builder.stream("in").group_by_key().agg(**declared).to_stream().to("out")
    task = StreamTask(builder.build())
    task.process_batch("in", ["a", "a", "b"], [{"v": 2}, {"x": 1}, {"v": 2.5}], [1, 2, 3])
    schema = {"out": TopicSchema(pa.string(), aggregate_struct(declared))}
    table = topic_tables(task.drain_output(), 0, schema)["out"]
    assert table.schema.field("value").type == aggregate_struct(declared)
    assert table.column("value").to_pylist() == [
        {"n": 1, "total": 2, "top": 2.0, "avg": 2.0},
        {"n": 2, "total": 2, "top": 2.0, "avg": 2.0},
        {"n": 1, "total": None, "top": 2.5, "avg": 2.5},
    ]


@pytest.fixture(scope="module")
def landed(spark, tmp_path_factory):
    work = tmp_path_factory.mktemp("hopping-stats")
    generate_events.main(
        ["--output", str(work / "input"), "--events", "1500", "--sensors", "8", "--files", "3",
         "--late-fraction", "0.05", "--seed", "3"]
    )  # fmt: skip
    run_in_process(
        spark, work / "input", work / "output", work / "checkpoint", module=JOB, partitions=PARTITIONS,
        max_files_per_trigger=1,
    )  # fmt: skip
    return work


@pytest.mark.spark
def test_the_spark_output_equals_the_engine_tasks(landed) -> None:
    expected = reference_rows(JOB, {}, PARTITIONS, [(ordered_files(landed / "input"), None)])
    actual = all_committed(landed / "output", TOPICS)
    assert set(expected) == set(TOPICS) == set(actual)
    for topic in TOPICS:
        assert len(actual[topic]) == len(expected[topic]) > 20, topic
        # bit for bit: the struct's floats go through Parquet as float64
        assert actual[topic] == expected[topic], topic


@pytest.mark.spark
def test_the_derived_suites_know_the_declared_aggregations_and_pass(spark, landed, tmp_path) -> None:
    suites = {s.suite: s for s in topic_suites(recorded_job(landed / "output"))}
    stats = {
        (r["type"], r["kwargs"].get("column"), r["kwargs"].get("column_A"))
        for r in suites["reading-stats"].expectations
    }
    assert ("expect_column_values_to_be_between", "value.readings", None) in stats
    assert ("expect_values_to_never_decrease_per_key", "value.high", None) in stats
    assert ("expect_column_pair_values_a_to_be_greater_than_b", None, "value.high") in stats
    finals = {r["type"] for r in suites["stats-finals"].expectations}
    assert "expect_emitted_at_most_once_per_key_and_window" in finals
    assert "expect_values_to_never_decrease_per_key" not in finals  # finals are not updates
    verdicts = validate_output(spark, landed / "output", tmp_path / "reports")
    assert all(v.success for v in verdicts), [v.line() for v in verdicts]
    assert all(v.rows for v in verdicts if v.suite in TOPICS), [v.line() for v in verdicts]
