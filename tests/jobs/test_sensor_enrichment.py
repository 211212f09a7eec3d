"""The sensor-enrichment job (three inputs: readings, a registry table, maintenance visits) on the
in-memory runtime equals the test driver fed the rule-1 merge of its generated inputs, whatever the
micro-batching, and its join outputs carry KIP-259 timestamps."""

from __future__ import annotations

import json

import pytest

from spark_jobs.jobs import generate_enrichment
from spark_jobs.jobs import sensor_enrichment as job
from spark_jobs.spark.in_memory import run_directory
from spark_jobs.spark.job import JobContract, JobSpec
from tests.spark.multi_input_support import frame_rows, rule1_driver_rows

PARTITIONS = 3


@pytest.fixture(scope="module")
def landing(tmp_path_factory):
    root = tmp_path_factory.mktemp("enrichment")
    generate_enrichment.main(
        ["--output", str(root), "--events", "1500", "--sensors", "12", "--files", "4", "--seed", "9"]
        + ["--registry-updates", "30", "--visits", "12"]
    )
    return root


def test_contract_declares_three_ordered_inputs():
    assert JobContract.of(job.JOB_MODULE).input_topics == (job.READINGS, job.REGISTRY, job.MAINTENANCE)


@pytest.mark.parametrize("per_trigger", [None, 1])
def test_in_memory_equals_the_driver_fed_the_rule1_merge(landing, per_trigger):
    runtime = run_directory(
        JobSpec(job.JOB_MODULE, {}, PARTITIONS), {t: landing / t for t in job.INPUT_TOPICS}, per_trigger
    )
    expected = rule1_driver_rows(job.JOB_MODULE, landing, PARTITIONS)
    assert set(expected) == set(job.OUTPUT_TOPICS)  # every output has rows
    for topic in job.OUTPUT_TOPICS:
        assert frame_rows(runtime.topic(topic)) == expected[topic], topic


def test_join_outputs_carry_kip259_timestamps_and_alerts_their_own_threshold(landing):
    runtime = run_directory(
        JobSpec(job.JOB_MODULE, {}, PARTITIONS), {t: landing / t for t in job.INPUT_TOPICS}
    )
    enriched = runtime.topic(job.ENRICHED)
    assert all(v["reading_time"] == ts for v, ts in zip(enriched.value, enriched.timestamp, strict=True))
    correlated = runtime.topic(job.MAINTENANCE_READINGS)
    assert all(
        ts == max(v["reading_time"], v["maintenance_time"])
        for v, ts in zip(correlated.value, correlated.timestamp, strict=True)
    )
    assert any(v["maintenance_time"] > v["reading_time"] for v in correlated.value)  # both orders occur
    assert any(v["maintenance_time"] < v["reading_time"] for v in correlated.value)
    alerts = runtime.topic(job.ALERTS)
    assert len(alerts) and all(v["temperature"] > v["threshold"] for v in alerts.value)
    # Thresholds change over time: a sensor is enriched with more than one threshold.
    thresholds = enriched.assign(t=[v["threshold"] for v in enriched.value]).groupby("key").t.nunique()
    assert (thresholds > 1).any()


def test_generator_lands_tombstones_and_interleaved_files(landing):
    registry = [
        json.loads(line)
        for path in sorted((landing / job.REGISTRY).glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    assert any(r["value"] is None for r in registry)
    mtimes = {t: sorted(p.stat().st_mtime for p in (landing / t).glob("*.jsonl")) for t in job.INPUT_TOPICS}
    assert mtimes[job.REGISTRY][-1] <= mtimes[job.READINGS][-1]


def test_hand_written_rules_name_existing_topics_and_columns():
    """A rule naming a column the topic does not have would not check what it says."""
    from pathlib import Path

    rules = json.loads((Path(job.__file__).parent / job.QUALITY_RULES).read_text())
    assert set(rules) == set(job.OUTPUT_TOPICS)
    for topic, topic_rules in rules.items():
        schema = job.OUTPUT_TOPICS[topic].arrow_schema()
        for rule in topic_rules:
            kwargs = rule["kwargs"]
            for name in [kwargs.get(k) for k in ("column", "column_A", "column_B")] + kwargs.get(
                "columns", []
            ):
                if name is None:
                    continue
                head, _, field = name.partition(".")
                assert head in schema.names, (topic, name)
                if field:
                    assert schema.field(head).type.get_field_index(field) >= 0, (topic, name)
    kip259 = {
        (r["kwargs"].get("column_A"), r["kwargs"].get("column_B")) for r in rules[job.MAINTENANCE_READINGS]
    }
    assert kip259 == {("timestamp", "value.reading_time"), ("timestamp", "value.maintenance_time")}
