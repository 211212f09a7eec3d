"""Task state in small entries: any size (many chunks), only changed parts written, the live task reused
only while the store holds its version, and a checkpoint of the single-snapshot layout refused."""

from __future__ import annotations

import json

import pytest

from spark_jobs.jobs import generate_events, sensor_alerts
from spark_jobs.spark import task_state
from spark_jobs.spark.in_memory import run_directory
from spark_jobs.spark.job import JobSpec
from spark_jobs.spark.runtime import IdentityMismatch, RunConfig, TopologyRuntime
from spark_jobs.spark.task_runner import INITIAL_WALL_CLOCK_MS, run_task_batch
from spark_jobs.spark.transport import OrderedInput
from tests.spark.support import (
    SENSOR_ALERTS,
    all_committed,
    copy_files,
    ordered_files,
    reference_rows,
    run_in_process,
)

PARTITIONS = 2
TOPICS = list(sensor_alerts.OUTPUT_TOPICS)
TINY_CHUNK_BYTES = 200


@pytest.fixture(scope="module")
def landing(tmp_path_factory):
    directory = tmp_path_factory.mktemp("landing")
    generate_events.main(
        ["--output", str(directory), "--events", "1200", "--sensors", "10", "--files", "6", "--seed", "5"]
    )
    facts = json.loads((directory / "_generated.json").read_text())
    return directory, facts["last_event_ms"] + 180_000


@pytest.fixture
def tiny_chunks(monkeypatch):
    monkeypatch.setattr(task_state, "STATE_CHUNK_BYTES", TINY_CHUNK_BYTES)


def _inputs(records):
    return OrderedInput(
        keys=[k for k, _, _ in records],
        values=[v for _, v, _ in records],
        timestamps=[t for _, _, t in records],
        wall_clocks=[],
    )


def test_in_memory_runtime_with_tiny_chunks_equals_stream_tasks(landing, tiny_chunks):
    directory, wall_clock = landing
    runtime = run_directory(JobSpec(SENSOR_ALERTS, {}, PARTITIONS), directory, 2, wall_clock)
    expected = reference_rows(SENSOR_ALERTS, {}, PARTITIONS, [(ordered_files(directory), wall_clock)])
    for topic, rows in expected.items():
        frame = runtime.topic(topic)
        actual = [tuple(r) for r in frame[["partition", "seq"]].itertuples(index=False)]
        assert actual == [(r[5], r[6]) for r in rows], topic
    for store in runtime.stores.values():
        _, manifest = store.read_meta()
        assert max(json.loads(manifest).values()) > 3  # a part spread over many entries
        assert max(len(data) for data in store.chunks.values()) <= TINY_CHUNK_BYTES


def test_a_store_version_other_than_the_cached_one_restores_from_the_store():
    spec = JobSpec(SENSOR_ALERTS, {}, 1)
    store = task_state.DictPartStore()
    key = ("ckpt-test", 0)
    state, restored = task_state.load(store, spec.topology(), 0, INITIAL_WALL_CLOCK_MS, key)
    assert not restored and store.read_meta() is None
    run_task_batch(spec, 0, state, _inputs([("a", {"temperature": 1.0}, 1_000)]))
    task_state.save(store, state, key)
    older = (store.read_meta(), dict(store.chunks))

    again, restored = task_state.load(store, spec.topology(), 0, INITIAL_WALL_CLOCK_MS, key)
    assert again is state and not restored  # the live task, store at its version
    run_task_batch(spec, 0, again, _inputs([("b", {"temperature": 2.0}, 2_000)]))
    task_state.save(store, again, key)

    # A replay: the store is back at the older version; the cache holds the newer task.
    store.meta, store.chunks = older
    replayed, restored = task_state.load(store, spec.topology(), 0, INITIAL_WALL_CLOCK_MS, key)
    assert restored and replayed is not again and replayed.version == older[0][0]

    # A batch that fails leaves no cached task behind: the next load restores.
    with pytest.raises(AttributeError):
        run_task_batch(spec, 0, replayed, None)
    _, restored = task_state.load(store, spec.topology(), 0, INITIAL_WALL_CLOCK_MS, key)
    assert restored


def test_a_worker_keeps_the_live_tasks_of_one_spark_task_and_drops_stale_ones():
    """Spark hands a micro-batch's Spark tasks to whichever Python worker is idle: a worker that ran the
    partitions {0, 2} and now runs {1, 3} holds copies of 0 and 2 that the other worker has moved on from.
    With `live_tasks` = 2 it keeps the two it saved last."""
    spec = JobSpec(SENSOR_ALERTS, {}, 4)
    stores = {p: task_state.DictPartStore() for p in range(4)}
    checkpoint = "ckpt-lru"
    try:
        for partitions in ([0, 2], [1, 3]):
            for p in partitions:
                state, _ = task_state.load(
                    stores[p], spec.topology(), p, INITIAL_WALL_CLOCK_MS, (checkpoint, p)
                )
                run_task_batch(spec, p, state, _inputs([("a", {"temperature": 1.0}, 1_000)]))
                task_state.save(stores[p], state, (checkpoint, p), live_tasks=2)
            assert sorted(k for k in task_state._LIVE if k[0] == checkpoint) == [
                (checkpoint, p) for p in partitions
            ]
        task_state.save(task_state.DictPartStore(), state, ("other checkpoint", 0), live_tasks=1)
        assert (checkpoint, 3) in task_state._LIVE  # the bound is per checkpoint
    finally:
        for key in [k for k in task_state._LIVE if k[0] in (checkpoint, "other checkpoint")]:
            del task_state._LIVE[key]


def test_missing_chunks_are_an_error_naming_the_part(tiny_chunks):
    spec = JobSpec(SENSOR_ALERTS, {}, 1)
    store = task_state.DictPartStore()
    state, _ = task_state.load(store, spec.topology(), 0, INITIAL_WALL_CLOCK_MS)
    run_task_batch(spec, 0, state, _inputs([(f"k{i}", {"temperature": 1.0}, 1_000 + i) for i in range(50)]))
    task_state.save(store, state)
    part, index = max(store.chunks)
    store.remove_chunk(part, index)
    with pytest.raises(task_state.StateCorrupt, match=part):
        task_state.load(store, spec.topology(), 0, INITIAL_WALL_CLOCK_MS)


@pytest.mark.spark
def test_many_chunks_on_spark_across_micro_batches_and_a_restart_equal_stream_tasks(
    spark, landing, tmp_path, tiny_chunks
):
    directory, wall_clock = landing
    files = ordered_files(directory)
    first_clock = wall_clock - 40 * 60_000
    inbox = tmp_path / "inbox"
    copy_files(files[:3], inbox)
    run = dict(partitions=PARTITIONS, max_files_per_trigger=2)
    first = run_in_process(
        spark, inbox, tmp_path / "out", tmp_path / "ckpt", wall_clock_ms=first_clock, **run
    )
    copy_files(files[3:], inbox)
    second = run_in_process(
        spark, inbox, tmp_path / "out", tmp_path / "ckpt", wall_clock_ms=wall_clock, **run
    )
    assert len(first.batches) == 3 and len(second.batches) == 3
    expected = reference_rows(
        SENSOR_ALERTS, {}, PARTITIONS, [(files[:3], first_clock), (files[3:], wall_clock)]
    )
    assert all_committed(tmp_path / "out", TOPICS) == expected
    for metrics in second.task_metrics.values():
        assert metrics["state_chunks_written"] > metrics["state_parts_written"] > 0


@pytest.mark.spark
def test_a_batch_without_input_rewrites_only_the_parts_that_changed(spark, landing, tmp_path):
    """The second run only moves the wall clock by 1 ms: every task is called, and writes its clocks (and the
    runtime's wall clock), not its windows and buffers."""
    directory, wall_clock = landing
    args = (spark, directory, tmp_path / "out", tmp_path / "ckpt")
    first = run_in_process(*args, partitions=PARTITIONS, wall_clock_ms=wall_clock)
    second = run_in_process(*args, partitions=PARTITIONS, wall_clock_ms=wall_clock + 1)
    assert len(second.batches) == 1 and sorted(second.task_metrics) == list(range(PARTITIONS))
    for metrics in second.task_metrics.values():
        assert metrics["state_parts_stored"] > 5  # windows and buffers in parts of their own
        assert metrics["state_parts_written"] == 2  # the engine's clocks part and the runtime part
    assert all(m["state_parts_written"] > 2 for m in first.task_metrics.values())


@pytest.mark.spark
@pytest.mark.parametrize("old_layout", [None, "task-parts-v1"], ids=["single snapshot", "key-bucket parts"])
def test_a_checkpoint_of_an_older_layout_is_refused_with_what_to_do(spark, tmp_path, old_layout):
    config = RunConfig(str(tmp_path / "in"), str(tmp_path / "out"), str(tmp_path / "ckpt"))
    spec = JobSpec(SENSOR_ALERTS, {}, 3)
    TopologyRuntime(spark, spec, config)._check_identity()
    record = json.loads((tmp_path / "ckpt" / "job.json").read_text())
    assert record["state_layout"] == task_state.STATE_LAYOUT == "task-parts-v2"
    if old_layout is None:
        del record["state_layout"]  # as the applyInPandasWithState runtime wrote it
    else:
        record["state_layout"] = old_layout
    (tmp_path / "ckpt" / "job.json").write_text(json.dumps(record))
    shown = old_layout or "single-snapshot"
    with pytest.raises(
        IdentityMismatch, match=f"{shown}.*task-parts-v2.*new checkpoint, with a new output folder"
    ):
        TopologyRuntime(spark, spec, config)._check_identity()
