"""Task state in small entries: any size (many chunks), only changed parts written, the live task reused
while the store holds its version and caught up when the store holds a later version of its history, and a
checkpoint of an older layout refused."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
        counts = [count for count, _ in json.loads(manifest)["parts"].values()]
        assert max(counts) > 3  # a part spread over many entries
        assert max(len(data) for data in store.chunks.values()) <= TINY_CHUNK_BYTES


def test_a_store_version_other_than_the_cached_one_restores_from_the_store():
    spec = JobSpec(SENSOR_ALERTS, {}, 1)
    store = task_state.DictPartStore()
    live = task_state.LiveTasks()
    key = ("ckpt-test", 0)
    state, loaded = task_state.load(store, spec.topology(), 0, INITIAL_WALL_CLOCK_MS, key, live)
    assert loaded.source == task_state.NEW and store.read_meta() is None
    run_task_batch(spec, 0, state, _inputs([("a", {"temperature": 1.0}, 1_000)]))
    task_state.save(store, state, key, live=live)
    older = (store.read_meta(), dict(store.chunks))

    again, loaded = task_state.load(store, spec.topology(), 0, INITIAL_WALL_CLOCK_MS, key, live)
    assert again is state and loaded.source == task_state.LIVE  # the live task, store at its version
    run_task_batch(spec, 0, again, _inputs([("b", {"temperature": 2.0}, 2_000)]))
    task_state.save(store, again, key, live=live)

    # A replay: the store is back at the older version; the cache holds the newer task.
    store.meta, store.chunks = older
    replayed, loaded = task_state.load(store, spec.topology(), 0, INITIAL_WALL_CLOCK_MS, key, live)
    assert loaded.restored and replayed is not again and replayed.version == older[0][0]

    # A batch that fails leaves no cached task behind: the next load restores.
    with pytest.raises(AttributeError):
        run_task_batch(spec, 0, replayed, None)
    _, loaded = task_state.load(store, spec.topology(), 0, INITIAL_WALL_CLOCK_MS, key, live)
    assert loaded.restored


def _run_on_workers(spec, batches, workers_of_batches, workers: int):
    """Each micro-batch of one partition on the worker given (a LiveTasks each, one store): the output
    tables' rows and the task's metrics after each batch, and how each batch got its task state."""
    store = task_state.DictPartStore()
    lives = [task_state.LiveTasks() for _ in range(workers)]
    key = ("ckpt-workers", 0)
    outputs, sources = [], []
    for records, worker in zip(batches, workers_of_batches, strict=True):
        state, loaded = task_state.load(store, spec.topology(), 0, INITIAL_WALL_CLOCK_MS, key, lives[worker])
        result = run_task_batch(spec, 0, state, _inputs(records))
        task_state.save(store, result.state, key, live=lives[worker])
        tables = {topic: table.to_pylist() for topic, table in sorted(result.tables.items())}
        outputs.append((tables, result.state.task.metrics()))  # metrics: the state's counters too
        sources.append((loaded.source, loaded.bytes_read))
    return outputs, sources


WINDOW_FINALS = "spark_jobs.jobs.window_finals"
SHORT_WINDOWS = {"window_size": 10_000, "grace": 5_000}


def _window_records(draw_batch):
    return [(f"k{k}", 1, ts) for k, ts in draw_batch]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.lists(st.tuples(st.integers(0, 30), st.integers(0, 4_000)), max_size=25),
            st.integers(0, 2),
            st.integers(0, 6_000),
        ),
        min_size=1,
        max_size=14,
    )
)
def test_any_assignment_of_micro_batches_to_workers_gives_the_output_of_one_worker(plan):
    """Spark may run each micro-batch of a partition on any Python worker: a worker catches its copy up
    from the parts written since it last ran the partition (windows opened, rebased, closed meanwhile),
    and the output is the output of one worker that always had the task live."""
    spec = JobSpec(WINDOW_FINALS, SHORT_WINDOWS, 1)
    batches, clock = [], 0
    for records, _, advance in plan:
        batches.append(_window_records([(k, clock + ts) for k, ts in records]))
        clock += advance  # time moves on by batches, so windows open and close; records may be late
    one, _ = _run_on_workers(spec, batches, [0] * len(plan), 1)
    many, _ = _run_on_workers(spec, batches, [worker for _, worker, _ in plan], 3)
    assert many == one


def test_a_worker_catches_up_reading_only_the_changes_since_its_copy():
    """Two workers alternate on one partition of 2,000 keys: after the first round each catches its copy
    up, reading the parts the other wrote (a small part of the state), and the output is one worker's."""
    spec = JobSpec(WINDOW_FINALS, {"window_size": 600_000, "grace": 60_000}, 1)
    batches = [_window_records([(i, i % 50) for i in range(2_000)])]
    batches += [_window_records([(i, 1_000 * b + i) for i in range(20)]) for b in range(1, 8)]
    one, _ = _run_on_workers(spec, batches, [0] * len(batches), 1)
    many, sources = _run_on_workers(spec, batches, [b % 2 for b in range(len(batches))], 2)
    assert many == one
    assert [source for source, _ in sources] == [task_state.NEW, task_state.RESTORED] + [
        task_state.CAUGHT_UP
    ] * (len(batches) - 2)
    restored_bytes = sources[1][1]
    assert all(read < restored_bytes / 5 for _, read in sources[2:])


def test_a_copy_from_an_attempt_the_store_did_not_keep_is_not_caught_up():
    """Worker A saves version 2 in an attempt whose state the store aborts; worker B runs the batch again
    and saves its own version 2. A's copy is not B's history (another token): A restores whole."""
    spec = JobSpec(SENSOR_ALERTS, {}, 1)
    store = task_state.DictPartStore()
    a, b = task_state.LiveTasks(), task_state.LiveTasks()
    key = ("ckpt-attempts", 0)
    first = [("x", {"temperature": 1.0}, 1_000)]
    second = [("y", {"temperature": 2.0}, 2_000)]
    state, _ = task_state.load(store, spec.topology(), 0, INITIAL_WALL_CLOCK_MS, key, a)
    run_task_batch(spec, 0, state, _inputs(first))
    task_state.save(store, state, key, live=a)
    kept = (store.meta, dict(store.chunks))
    state, _ = task_state.load(store, spec.topology(), 0, INITIAL_WALL_CLOCK_MS, key, a)
    run_task_batch(spec, 0, state, _inputs(second))
    task_state.save(store, state, key, live=a)
    store.meta, store.chunks = kept  # the attempt's state is aborted
    state, loaded = task_state.load(store, spec.topology(), 0, INITIAL_WALL_CLOCK_MS, key, b)
    assert loaded.restored
    run_task_batch(spec, 0, state, _inputs(second))
    task_state.save(store, state, key, live=b)
    state, loaded = task_state.load(store, spec.topology(), 0, INITIAL_WALL_CLOCK_MS, key, a)
    assert loaded.restored and state.version == 2


def test_a_manifest_without_part_versions_is_restored():
    """A store written before part versions (manifest {part: chunk count}) is read whole, then saved in
    the current manifest."""
    spec = JobSpec(SENSOR_ALERTS, {}, 1)
    store = task_state.DictPartStore()
    state, _ = task_state.load(store, spec.topology(), 0, INITIAL_WALL_CLOCK_MS)
    run_task_batch(spec, 0, state, _inputs([("a", {"temperature": 1.0}, 1_000)]))
    task_state.save(store, state)
    version, manifest = store.meta
    parts = json.loads(manifest)["parts"]
    store.meta = (version, json.dumps({part: count for part, (count, _) in parts.items()}).encode())
    state, loaded = task_state.load(store, spec.topology(), 0, INITIAL_WALL_CLOCK_MS)
    assert loaded.restored and state.version == version
    run_task_batch(spec, 0, state, _inputs([("a", {"temperature": 3.0}, 2_000)]))
    task_state.save(store, state)
    assert "history" in json.loads(store.meta[1])


def test_a_worker_keeps_the_live_tasks_of_its_limit_and_drops_the_least_recently_saved():
    """With `live_tasks` = 2 a worker that ran the partitions {0, 2} and then {1, 3} keeps 1 and 3; the
    limit is per checkpoint."""
    spec = JobSpec(SENSOR_ALERTS, {}, 4)
    stores = {p: task_state.DictPartStore() for p in range(4)}
    live = task_state.LiveTasks()
    checkpoint = "ckpt-lru"
    for partitions in ([0, 2], [1, 3]):
        for p in partitions:
            state, _ = task_state.load(
                stores[p], spec.topology(), p, INITIAL_WALL_CLOCK_MS, (checkpoint, p), live
            )
            run_task_batch(spec, p, state, _inputs([("a", {"temperature": 1.0}, 1_000)]))
            task_state.save(stores[p], state, (checkpoint, p), live_tasks=2, live=live)
        assert sorted(live.held()) == [(checkpoint, p) for p in partitions]
    task_state.save(task_state.DictPartStore(), state, ("other checkpoint", 0), live_tasks=1, live=live)
    assert (checkpoint, 3) in live.held()  # the bound is per checkpoint


def test_a_worker_with_no_live_tasks_keeps_none_and_reads_each_batch_from_the_store():
    """`live_tasks` = 0 (the runtime's default): a worker keeps no task state of the checkpoint between
    micro-batches, and the next micro-batch restores the state the store holds."""
    spec = JobSpec(SENSOR_ALERTS, {}, 2)
    store = task_state.DictPartStore()
    live = task_state.LiveTasks()
    key = ("ckpt-none", 1)
    sources = []
    for timestamp in (1_000, 2_000):
        state, loaded = task_state.load(store, spec.topology(), 1, INITIAL_WALL_CLOCK_MS, key, live)
        sources.append(loaded.source)
        run_task_batch(spec, 1, state, _inputs([("a", {"temperature": 1.0}, timestamp)]))
        task_state.save(store, state, key, live_tasks=0, live=live)
        assert live.held() == []
    assert sources == [task_state.NEW, task_state.RESTORED]
    assert RunConfig("in", "out", "ckpt").live_spark_tasks == 0


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
@pytest.mark.parametrize(
    "old_layout",
    [
        None,
        "task-parts-v1",
        "task-parts-v2",
        "task-parts-v3",
        "task-parts-v4",
        "task-parts-v5",
        "task-parts-v6",
        "task-parts-v7",
        "task-parts-v8",
        "task-parts-v9",
        "task-parts-v10",
        "task-parts-v11",
    ],
    ids=[
        "single snapshot",
        "key-bucket parts",
        "window parts",
        "join records by key",
        "aggregates by key group",
        "final buffers' own values",
        "declared values as dicts",
        "final buffers' unread old values, sessions by row",
        "row stores without generations, constant window columns row by row",
        "row store keys as lists",
        "join store keys as lists, tables in hash groups",
        "window aggregates gathered at the export",
    ],
)
def test_a_checkpoint_of_an_older_layout_is_refused_with_what_to_do(spark, tmp_path, old_layout):
    config = RunConfig(str(tmp_path / "in"), str(tmp_path / "out"), str(tmp_path / "ckpt"))
    spec = JobSpec(SENSOR_ALERTS, {}, 3)
    TopologyRuntime(spark, spec, config)._check_identity()
    record = json.loads((tmp_path / "ckpt" / "job.json").read_text())
    assert record["state_layout"] == task_state.STATE_LAYOUT == "task-parts-v13"
    if old_layout is None:
        del record["state_layout"]  # as the applyInPandasWithState runtime wrote it
    else:
        record["state_layout"] = old_layout
    (tmp_path / "ckpt" / "job.json").write_text(json.dumps(record))
    shown = old_layout or "single-snapshot"
    with pytest.raises(
        IdentityMismatch, match=f"{shown}.*task-parts-v13.*new checkpoint, with a new output folder"
    ):
        TopologyRuntime(spark, spec, config)._check_identity()


def test_the_run_summary_counts_how_the_tasks_got_their_state():
    """state_loads sums the task metrics of every micro-batch, not the last one's."""
    from spark_jobs.spark.summary import RunSummary

    def task(partition, restored, caught_up):
        loads = {"state_restored": restored, "state_caught_up": caught_up}
        return {
            "partition": partition,
            "processed": 1,
            "late": 0,
            "emitted": {},
            "wall_clock": 0,
            "task_metrics": loads,
        }

    summary = RunSummary(job="window_finals", trigger="available-now", partitions=2)
    summary.add_batch(0, [task(0, 0, 0), task(1, 0, 0)])
    summary.add_batch(1, [task(0, 1, 0), task(1, 0, 1)])
    summary.add_batch(2, [task(0, 0, 1), task(1, 0, 1)])
    assert summary.to_dict()["state_loads"] == {"restored": 1, "caught_up": 3}


def test_the_checkpoint_layout_names_the_engine_state_layout():
    from spark_jobs.streams.runtime.task import STATE_LAYOUT as ENGINE_LAYOUT

    assert f"task-parts-v{ENGINE_LAYOUT}" == task_state.STATE_LAYOUT
