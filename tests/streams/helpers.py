"""Shared helpers of the engine tests: topology builders and runners."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from spark_jobs.streams import (
    BufferConfig,
    Processor,
    PunctuationType,
    Record,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    Topology,
    TopologyTestDriver,
)
from spark_jobs.streams.nodes import kv_rows
from spark_jobs.streams.runtime.task import StreamTask

REPO_ROOT = Path(__file__).resolve().parents[2]
# Worked examples transcribed from Kafka Streams' own tests (data, kept with the tests that replay them).
VECTORS_PATH = Path(__file__).resolve().parent / "vectors" / "kafka_streams_reference.json"


def load_vectors() -> list[dict[str, Any]]:
    """The reference vectors. A missing file is an error, never a reason to skip them."""
    if not VECTORS_PATH.is_file():
        raise FileNotFoundError(f"reference vectors not found at {VECTORS_PATH}")
    return json.loads(VECTORS_PATH.read_text())


def pipe_all(driver: TopologyTestDriver, topic: str, records: Iterable[Sequence[Any]]) -> None:
    input_topic = driver.create_input_topic(topic)
    for key, value, timestamp in records:
        input_topic.pipe_input(key, value, timestamp)


def read(driver: TopologyTestDriver, topic: str, stringify_keys: bool = False) -> list[list[Any]]:
    return [
        [str(r.key) if stringify_keys else r.key, r.value, r.timestamp]
        for r in driver.create_output_topic(topic).read_records_to_list()
    ]


class Recorder(Processor):
    """Records what it sees and the punctuations it gets; forwards nothing."""

    def __init__(
        self,
        interval: int = 10,
        type_: PunctuationType = PunctuationType.STREAM_TIME,
        shift: int | None = None,
    ) -> None:
        self.interval, self.type, self.shift = interval, type_, shift
        self.punctuations: list[int] = []
        self.seen: list[int] = []

    def init(self, context) -> None:
        self.context = context
        self.cancellable = context.schedule(self.interval, self.type, self.punctuations.append, self.shift)

    def process(self, record: Record) -> None:
        self.seen.append(record.timestamp)


def recorder_topology(**kwargs: Any) -> tuple[Topology, list[Recorder]]:
    made: list[Recorder] = []

    def supplier() -> Recorder:
        made.append(Recorder(**kwargs))
        return made[-1]

    topology = Topology().add_source("source", "input").add_processor("recorder", supplier, "source")
    return topology, made


def sensor_topology(
    size: int = 10, grace: int = 5, advance: int | None = None, threshold: int = 3
) -> Topology:
    """The hot path: filter, map_values, windowed count, raw counts, suppressed finals, filtered alerts."""
    windows = TimeWindows.of_size_and_grace(size, grace)
    if advance is not None:
        windows = windows.advance_by(advance)
    builder = StreamsBuilder()
    readings = (
        builder.stream("readings")
        .filter(lambda k, v: v is None or v >= 0)
        .map_values(lambda v: None if v is None else v * 2)
    )
    counts = readings.group_by_key().windowed_by(windows).count()
    counts.to_stream().to("counts")
    finals = counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream()
    finals.to("finals")
    finals.filter(lambda k, v: v < threshold).to("alerts")
    return builder.build()


def run_task(
    topology: Topology,
    records: Sequence[tuple],
    cuts: Sequence[int] = (),
    topic: str = "readings",
    snapshot_at: Sequence[int] = (),
    per_record: bool = False,
) -> list[tuple]:
    """Run records through one StreamTask, in batches cut at `cuts`, restoring from a snapshot at every
    index of `snapshot_at`; returns every output as (seq, topic, key, value, timestamp, start, end)."""
    task = StreamTask(topology)
    outputs: list[tuple] = []
    bounds = sorted(set([0, len(records), *cuts, *snapshot_at]))
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        if lo in snapshot_at:
            outputs += drain(task)
            task = StreamTask.restore(topology, task.snapshot())
        chunk = records[lo:hi]
        if per_record:
            for key, value, ts in chunk:
                task.process(topic, key, value, ts)
        else:
            task.process_batch(topic, [r[0] for r in chunk], [r[1] for r in chunk], [r[2] for r in chunk])
    return outputs + drain(task)


def drain(task: StreamTask) -> list[tuple]:
    out = task.drain_output()
    return list(
        zip(
            out.seqs,
            out.topics,
            out.keys,
            out.values,
            out.timestamps,
            out.window_starts,
            out.window_ends,
            strict=False,
        )
    )


class WorkerCopies:
    """The copies of one task that Spark's Python workers hold (by owner), and the part store they share: a
    copy new to the task imports the store, one that ran it before catches up with the parts written and
    the names removed since its last export (StreamTask.apply_state)."""

    def __init__(self, topology: Topology, partition: int = 0) -> None:
        self.topology, self.partition = topology, partition
        self.store: dict[str, bytes] = {}
        self.written: list[set[str]] = []  # part names each export wrote
        self.names_after: list[set[str]] = [set()]  # the store's part names after each export
        self.copies: dict[int, tuple[StreamTask, int]] = {}  # owner -> (task, exports it has seen)

    def task_for(self, owner: int) -> StreamTask:
        if owner in self.copies:
            task, seen = self.copies[owner]
            since = set().union(*self.written[seen:])
            store = self.store
            task.apply_state(
                {n: store[n] for n in since if n in store}, sorted(self.names_after[seen] - set(store))
            )
            return task
        if self.written:
            return StreamTask.import_state(self.topology, self.store)
        return StreamTask(self.topology, self.partition)

    def export(self, owner: int, task: StreamTask) -> None:
        export = task.export_state()
        for name in export.removed:
            del self.store[name]
        self.store.update(export.parts)
        self.written.append(set(export.parts))
        self.names_after.append(set(self.store))
        self.copies[owner] = (task, len(self.written))


def check_any_batching(in_batches, record_by_record, inputs, property_settings) -> None:
    """Hypothesis: inputs drawn from `inputs`, cut into batches anywhere and run by worker copies taking
    turns (`in_batches(records, cuts, owners)`), give what `record_by_record(records)` gives."""
    from hypothesis import given
    from hypothesis import strategies as st

    @property_settings
    @given(
        data=st.data(),
        cuts=st.lists(st.integers(0, 80), max_size=6),
        owners=st.lists(st.integers(0, 2), min_size=1, max_size=4),
    )
    def check(data, cuts, owners):
        records = data.draw(inputs)
        assert in_batches(records, cuts, owners) == record_by_record(records)

    check()


# -- batch against record by record, for whole topologies (test_every_shape.py, test_islands.py) ----------


def record_stream(topics: Sequence[str], values):
    """Hypothesis strategy: (topic, key, value, timestamp) records whose timestamps drift upwards with jumps
    back (late records), null keys among them; `values` draws the values."""
    from hypothesis import strategies as st

    @st.composite
    def draw_records(draw):
        out, now = [], 0
        for _ in range(draw(st.integers(0, 80))):
            now += draw(st.integers(0, 6))
            ts = max(0, now - draw(st.sampled_from([0, 0, 0, 2, 9, 40])))
            key = draw(st.sampled_from(["a", "b", "c", None]))
            out.append((draw(st.sampled_from(list(topics))), key, draw(values), ts))
        return out

    return draw_records()


def observed(task: StreamTask) -> tuple[list, list]:
    """What the task emitted since the last call: output rows and late records (with their origins)."""
    out = task.drain_output()
    rows = list(zip(out.seqs, out.topics, out.keys, out.values, out.timestamps, out.window_starts,
                    out.window_ends, out.headers, strict=True))  # fmt: skip
    late = [
        (r.node, r.topic, r.origin, r.key, r.value, r.timestamp, r.window_start, r.window_end, r.stream_time)
        for r in task.drain_late()
    ]
    return rows, late


def state_of(task: StreamTask) -> list:
    return sorted(repr(row) for node in task.nodes.values() for row in node.state_rows())


def plain_task(topology: Topology, serial: bool = False) -> StreamTask:
    """A task without the optimizer's rewrites; `serial`: every source on the serial path too."""
    from spark_jobs.streams.runtime import task as task_module

    original_rewrites, original_can_batch = task_module.rewrites, task_module._can_batch
    task_module.rewrites = lambda nodes: {}
    if serial:
        task_module._can_batch = lambda source, nodes: False
    try:
        task = StreamTask(topology)
    finally:
        task_module.rewrites, task_module._can_batch = original_rewrites, original_can_batch
    if serial:
        assert not any(task._columnar.values())
    return task


def one_by_one(task: StreamTask, records) -> tuple:
    """Each record alone (its index as origin); the outputs, late records, state and metrics."""
    rows, late = [], []
    for i, (topic, key, value, ts) in enumerate(records):
        task.process_batch(topic, [key], [value], [ts], origins=[i])
        more_rows, more_late = observed(task)
        rows += more_rows
        late += more_late
    return rows, late, state_of(task), task.metrics()


def topic_runs(chunk, first: int):
    """Consecutive records of one topic, each with its index in the input (its origin), as the runtime
    hands a task each input's run of records."""
    runs: list[tuple[str, list]] = []
    for i, record in enumerate(chunk, first):
        if runs and runs[-1][0] == record[0]:
            runs[-1][1].append((*record, i))
        else:
            runs.append((record[0], [(*record, i)]))
    return runs


def in_batches(topology: Topology, records, cuts, owners) -> tuple:
    """Batches cut at `cuts`, each run by a worker copy (owner) that catches up from the parts the previous
    batches exported; the outputs, late records, state and metrics."""
    copies = WorkerCopies(topology)
    bounds = sorted({0, len(records), *(c for c in cuts if c <= len(records))})
    rows, late, task = [], [], None
    for i, (lo, hi) in enumerate(zip(bounds, bounds[1:], strict=False)):
        owner = owners[i % len(owners)]
        task = copies.task_for(owner)
        for topic, run in topic_runs(records[lo:hi], lo):
            keys, values, timestamps = [r[1] for r in run], [r[2] for r in run], [r[3] for r in run]
            task.process_batch(topic, keys, values, timestamps, origins=[r[4] for r in run])
        more_rows, more_late = observed(task)
        rows += more_rows
        late += more_late
        copies.export(owner, task)
    if task is None:
        task = StreamTask(topology)
    return rows, late, state_of(task), task.metrics()


@pytest.fixture(autouse=True, scope="module")
def stores_of_few_rows_in_many_groups():
    """Imported by a test module whose stores hold a handful of rows: they get groups of one row each
    (nodes/kv_rows.py `group_count`), in blocks of one row (`row_groups`: row r in group r % G), so that its
    tests turn over the groups' bases and regroup a store as it grows, as stores of many thousands of rows
    do."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kv_rows, "MIN_GROUP_ROWS", 1)
        patch.setattr(kv_rows, "BLOCK_ROWS", 1)
        yield
