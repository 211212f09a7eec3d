"""Several input topics per job: Kafka's record selection, independent of micro-batching (docs/semantics.md
rule 1 and section 7), on the in-memory runtime (many generated interleavings, fast) and on Spark (a job
the project never saw: tests/spark/jobs/orders_enriched.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_jobs.spark import task_state
from spark_jobs.spark.cli import parse_inputs
from spark_jobs.spark.errors import UserError
from spark_jobs.spark.in_memory import InMemoryRuntime, landing_files, last_landed_files, run_directory
from spark_jobs.spark.job import JobSpec
from spark_jobs.spark.runtime import input_dirs
from spark_jobs.spark.task_runner import INITIAL_WALL_CLOCK_MS, WAITING
from tests.spark.jobs import orders_enriched as job
from tests.spark.multi_input_support import BASE_MTIME_S, frame_rows, land, rule1_driver_rows

MODULE = job.__name__


def _value(topic: str, draw_int: int):
    if topic == job.CUSTOMERS:  # a table: some updates are tombstones
        return None if draw_int % 4 == 0 else {"tier": draw_int % 3}
    return {"n": draw_int}


@st.composite
def landings(draw, topics=job.INPUT_TOPICS):
    """Per topic, files of records (keys from a few, timestamps from a small range so that they tie), each
    file with its own modification time; files of one topic land in order, topics interleave freely."""
    plan = {}
    for topic in topics:
        files = draw(
            st.lists(
                st.lists(
                    st.tuples(st.sampled_from("abcde"), st.integers(0, 99), st.integers(0, 40)),
                    min_size=0,
                    max_size=6,
                ),
                min_size=0,
                max_size=4,
            )
        )
        gaps = draw(st.lists(st.integers(1, 5), min_size=len(files), max_size=len(files)))
        mtime, landed = BASE_MTIME_S, []
        for records, gap in zip(files, gaps, strict=True):
            mtime += gap
            landed.append(([(k, _value(topic, n), ts) for k, n, ts in records], mtime))
        plan[topic] = landed
    return plan


def _land_all(root: Path, plan) -> None:
    for topic in job.INPUT_TOPICS:
        (root / topic).mkdir(parents=True, exist_ok=True)
        for index, (records, mtime) in enumerate(plan[topic]):
            land(root, topic, index, records, mtime)


def _outputs(runtime: InMemoryRuntime) -> dict[str, dict[int, list[tuple]]]:
    out = {}
    for topic in job.OUTPUT_TOPICS:
        rows = frame_rows(runtime.topic(topic))
        if rows:
            out[topic] = rows
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=landings(), partitions=st.integers(1, 3), per_trigger=st.sampled_from([None, 1, 2]))
def test_in_memory_equals_the_driver_fed_the_rule1_merge_for_any_batching(plan, partitions, per_trigger):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _land_all(root, plan)
        spec = JobSpec(MODULE, {}, partitions)
        runtime = run_directory(spec, {t: root / t for t in job.INPUT_TOPICS}, per_trigger)
        assert _outputs(runtime) == rule1_driver_rows(MODULE, root, partitions)
        for store in runtime.stores.values():  # every landed record was taken: nothing waits at the end
            state, _ = task_state.load(store, spec.topology(), 0, INITIAL_WALL_CLOCK_MS)
            assert not state.runtime.get(WAITING)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=landings(), second=landings(), per_trigger=st.sampled_from([None, 1]))
def test_a_restart_with_more_files_continues_the_rule1_merge(first, second, per_trigger):
    """Two runs on one state, the second with files landed after the first: each run takes the rule-1
    merge of the files landed before it (what the first run took is not taken back)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _land_all(root, first)
        spec = JobSpec(MODULE, {}, 2)
        runtime = run_directory(spec, {t: root / t for t in job.INPUT_TOPICS}, per_trigger)
        seen = {t: {p for p, _ in landing_files(root / t)} for t in job.INPUT_TOPICS}
        first_paths = {p for files in seen.values() for p in files}
        shift = 100  # later modification times than every first-run file
        for topic in job.INPUT_TOPICS:
            offset = len(first[topic])
            for index, (records, mtime) in enumerate(second[topic]):
                land(root, topic, offset + index, records, mtime + shift)
        files = {t: [f for f in landing_files(root / t) if f[0] not in seen[t]] for t in job.INPUT_TOPICS}
        # A new query: the same stores and outputs, its own listing of what landed.
        runtime.last_landed = last_landed_files({t: landing_files(root / t) for t in job.INPUT_TOPICS})
        step = per_trigger or max(1, *(len(f) for f in files.values()))
        for start in range(0, max(len(f) for f in files.values()), step):
            runtime.run_batch([(p, m, t) for t, f in files.items() for p, m in f[start : start + step]])
        paths = {p for t in job.INPUT_TOPICS for p, _ in landing_files(root / t)}
        assert _outputs(runtime) == rule1_driver_rows(MODULE, root, 2, [first_paths, paths - first_paths])


def test_a_task_waits_for_a_topic_with_landed_unread_files_and_keeps_what_waits(tmp_path):
    """One file per micro-batch: orders land first, customers later; the orders wait in the task state
    until the customers' files are read, so the enrichment sees the customer as the merge order says."""
    land(tmp_path, job.ORDERS, 0, [("a", {"n": 1}, 20)], BASE_MTIME_S + 1)
    land(tmp_path, job.CUSTOMERS, 0, [("a", {"tier": 1}, 10)], BASE_MTIME_S + 2)
    land(tmp_path, job.CUSTOMERS, 1, [("a", {"tier": 2}, 30)], BASE_MTIME_S + 3)
    (tmp_path / job.PAYMENTS).mkdir()
    spec = JobSpec(MODULE, {}, 1)
    dirs = {t: tmp_path / t for t in job.INPUT_TOPICS}
    files = {t: landing_files(d) for t, d in dirs.items()}
    runtime = InMemoryRuntime(spec, last_landed_files(files))
    runtime.run_batch([(*files[job.ORDERS][0], job.ORDERS)])
    state, _ = task_state.load(runtime.stores[0], spec.topology(), 0, INITIAL_WALL_CLOCK_MS)
    assert state.runtime[WAITING][job.ORDERS][2] == [20]  # waits: customers has landed, unread files
    assert runtime.topic(job.ENRICHED).empty
    runtime.run_batch([(*files[job.CUSTOMERS][0], job.CUSTOMERS)])
    assert runtime.topic(job.ENRICHED).empty  # customers still has a landed, unread file
    runtime.run_batch([(*files[job.CUSTOMERS][1], job.CUSTOMERS)])
    enriched = frame_rows(runtime.topic(job.ENRICHED))
    assert enriched == {0: [("a", {"order": {"n": 1}, "customer": {"tier": 1}}, 20)]}
    assert enriched == rule1_driver_rows(MODULE, tmp_path, 1)[job.ENRICHED]


def test_bad_records_of_any_topic_are_quarantined_with_their_topic(tmp_path):
    land(tmp_path, job.ORDERS, 0, [("a", {"n": 1}, 5)], BASE_MTIME_S + 1)
    land(tmp_path, job.CUSTOMERS, 0, [("a", None, 1)], BASE_MTIME_S + 1)  # a tombstone is a record
    (tmp_path / job.PAYMENTS).mkdir()
    (tmp_path / job.PAYMENTS / "bad.jsonl").write_text('{"key": "a", "timestamp": -1}\nnot json\n')
    runtime = run_directory(JobSpec(MODULE, {}, 2), {t: tmp_path / t for t in job.INPUT_TOPICS})
    quarantine = runtime.topic("_quarantine")
    assert sorted(zip(quarantine.topic, quarantine.line, strict=True)) == [
        (job.PAYMENTS, 1),
        (job.PAYMENTS, 2),
    ]
    assert list(quarantine.reason) == ["negative timestamp", "unparseable JSON"]


def test_table_sources_read_values():
    assert JobSpec(MODULE, {}, 1).topology().reads_values(job.CUSTOMERS)


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (["d"], "give TOPIC=DIR"),
        (["orders=o", "customers=c"], "no --input for topics payments"),
        (["orders=o", "customers=c", "payments=p", "orders=x"], "'orders' given twice"),
        (["orders=o", "customers=c", "payments=p", "refunds=r"], "'refunds' is not an input topic"),
        (["orders=", "customers=c", "payments=p"], "--input orders="),
    ],
)
def test_input_arguments_name_what_is_wrong(given, message):
    with pytest.raises(UserError, match=message):
        parse_inputs(given, job.INPUT_TOPICS)


def test_input_arguments():
    assert parse_inputs(["o=x", "c=y"], ("o", "c")) == {"o": "x", "c": "y"}
    assert parse_inputs(["dir=with=equals"], ("readings",)) == "dir=with=equals"
    assert parse_inputs(["readings=d"], ("readings",)) == {"readings": "d"}
    with pytest.raises(UserError, match="reads 3 topics"):
        input_dirs(JobSpec(MODULE, {}, 1), "one-folder")
