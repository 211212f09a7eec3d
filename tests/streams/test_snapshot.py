"""StreamTask.snapshot() / restore(): restarts change no output."""

from __future__ import annotations

import copy

import pytest

from spark_jobs.streams import (
    Processor,
    PunctuationType,
    Record,
    StreamsBuilder,
    TimeWindows,
    Topology,
)
from spark_jobs.streams.runtime.task import StreamTask

from .helpers import drain, run_task, sensor_topology


class Stateful(Processor):
    """Keeps counts per key, a schedule in init (aligned) and one made later from a bound method."""

    def init(self, context) -> None:
        self.context = context
        self.counts: dict[str, int] = {}
        self.ticks = 0
        self.every_ten = context.schedule(10, PunctuationType.STREAM_TIME, self.report, time_shift=0)
        self.late = None

    def report(self, now: int) -> None:
        self.ticks += 1
        self.context.forward(Record("report", (now, dict(self.counts), self.ticks)))
        if self.ticks == 3:
            self.every_ten.cancel()

    def extra(self, now: int) -> None:
        self.context.forward(Record("extra", now))

    def process(self, record: Record) -> None:
        self.counts[record.key] = self.counts.get(record.key, 0) + 1
        if record.value == "start-extra" and self.late is None:
            self.late = self.context.schedule(7, PunctuationType.STREAM_TIME, self.extra)
        self.context.forward(record.with_value(self.counts[record.key]))


class Hooked(Stateful):
    restored_with: list = []

    def snapshot_state(self):
        return {"counts": self.counts, "ticks": self.ticks}

    def restore_state(self, state) -> None:
        Hooked.restored_with.append(copy.deepcopy(state))
        self.counts, self.ticks = state["counts"], state["ticks"]


def processor_topology(processor=Stateful) -> Topology:
    return (
        Topology()
        .add_source("s", "readings")
        .add_processor("p", processor, "s")
        .add_sink("out", "output", "p")
    )


RECORDS = [
    ("a", "x", 1),
    ("b", "x", 4),
    ("a", "start-extra", 12),
    ("c", "x", 15),
    ("a", "x", 9),
    ("b", "x", 23),
    ("a", "x", 31),
    ("c", "x", 44),
    ("a", "x", 45),
    ("b", "x", 60),
]


@pytest.mark.parametrize("processor", [Stateful, Hooked])
@pytest.mark.parametrize("split", range(1, len(RECORDS)))
def test_user_processor_state_and_schedules_survive_a_restore(processor, split: int) -> None:
    topology = processor_topology(processor)
    expected = run_task(topology, RECORDS, per_record=True)
    assert run_task(topology, RECORDS, snapshot_at=[split]) == expected
    assert any(row[2] == "report" for row in expected) and any(row[2] == "extra" for row in expected)


def test_hooks_are_used_when_defined() -> None:
    Hooked.restored_with.clear()
    run_task(processor_topology(Hooked), RECORDS, snapshot_at=[3])
    # after a@1, b@4, a@12: one punctuation (at 12, the first aligned boundary 10 passed)
    assert Hooked.restored_with == [{"counts": {"a": 2, "b": 1}, "ticks": 1}]


def test_a_late_schedule_that_cannot_be_recreated_refuses_to_snapshot() -> None:
    class Lambda(Processor):
        def process(self, record: Record) -> None:
            self.context.schedule(5, PunctuationType.STREAM_TIME, lambda now: None)

    task = StreamTask(Topology().add_source("s", "in").add_processor("p", Lambda, "s"))
    task.process("in", "k", "v", 1)
    with pytest.raises(ValueError, match="created after init"):
        task.snapshot()


def test_snapshot_keeps_undrained_output_and_seqs() -> None:
    topology = sensor_topology(size=10, grace=0)
    task = StreamTask(topology)
    task.process_batch("readings", ["a", "b"], [1, 2], [1, 2])
    restored = StreamTask.restore(topology, task.snapshot())
    assert drain(restored) == drain(task)
    restored.process("readings", "a", 3, 3)
    assert restored.drain_output().seqs == [2]


def test_snapshot_is_compact() -> None:
    topology = sensor_topology(size=120_000, grace=120_000)
    task = StreamTask(topology)
    keys = [f"sensor-{i:04d}" for i in range(1000)]
    task.process_batch("readings", keys, [1] * 1000, list(range(1000)))
    task.drain_output()
    blob, compressed = task.snapshot(), task.snapshot(compress=True)
    # 1000 windowed counts and 1000 buffered finals, columnar: a key's pickled bytes and its int64 fields,
    # under 50 bytes per entry (no pickled object per entry)
    assert len(blob) < 2000 * 50
    assert len(compressed) < len(blob) / 3
    for saved in (blob, compressed):
        restored = StreamTask.restore(topology, saved)
        restored.process_batch("readings", keys, [1] * 1000, [240_000 + i for i in range(1000)])
        assert len([t for t in restored.drain_output().topics if t == "finals"]) == 1000


def table_topology() -> Topology:
    """The nodes that keep a key -> (value, timestamp) store: a table source, a grouped table
    aggregation (subtract then add), and a non-windowed stream aggregation."""
    from spark_jobs.streams import StreamsBuilder

    builder = StreamsBuilder()
    table = builder.table("readings")
    table.group_by(lambda k, v: (v, k)).count().to_stream().to("per-value")
    table.to_stream().group_by_key().count().to_stream().to("per-key")
    return builder.build()


TABLE_RECORDS = [
    ("a", "x", 1), ("b", "x", 2), ("a", "y", 3), ("c", "y", 2), ("b", None, 5), ("a", "x", 4),
    ("c", "z", 7), ("d", "x", 6),
]  # fmt: skip


@pytest.mark.parametrize("split", range(1, len(TABLE_RECORDS)))
def test_table_and_aggregation_stores_survive_a_restore_at_any_split(split):
    straight = run_task(table_topology(), TABLE_RECORDS)
    restarted = run_task(table_topology(), TABLE_RECORDS, snapshot_at=[split])
    assert restarted == straight
    # The stores matter: the grouped counts depend on earlier rows (a key moving between groups).
    assert any(topic == "per-value" and value == 0 for _, topic, _, value, *_ in straight)


def test_bool_aggregates_stay_bools_through_snapshot_and_export() -> None:
    """Stores pack int values into int64 arrays when saved; a bool is an int to Python, but must not come
    back as 1 (a reduce of flags: "any", a windowed "all")."""
    builder = StreamsBuilder()
    grouped = builder.stream("readings").group_by_key()
    grouped.reduce(lambda a, b: a or b).to_stream().to("any")
    windowed = grouped.windowed_by(TimeWindows.of_size_and_grace(100, 0))
    windowed.reduce(lambda a, b: a and b).to_stream().to("all")
    topology = builder.build()
    task = StreamTask(topology)
    task.process_batch("readings", ["a", "b", "a"], [False, True, True], [1, 2, 3])
    task.drain_output()
    copies = [StreamTask.restore(topology, task.snapshot())]
    copies.append(StreamTask.import_state(topology, task.export_state().parts))
    outputs = []
    for each in [task, *copies]:
        each.process_batch("readings", ["a", "b"], [False, False], [4, 5])
        outputs.append([(topic, r.value, type(r.value)) for topic, r in each.drain_output().records()])
    assert outputs[0] == [
        ("any", True, bool),
        ("all", False, bool),
        ("any", True, bool),
        ("all", False, bool),
    ]
    assert outputs[1] == outputs[0] and outputs[2] == outputs[0]


@pytest.mark.parametrize("compress", [False, True])
def test_a_snapshot_leaves_the_export_history_alone(compress: bool) -> None:
    """A snapshot between two exports changes nothing the second export writes; a restored task's first
    export writes every part, as a new task's does, and a task imported from it goes on as the original."""
    topology = sensor_topology(size=100, grace=20)
    keys = [f"k{i % 37}" for i in range(600)]
    twins = [StreamTask(topology), StreamTask(topology)]
    for task in twins:
        task.process_batch("readings", keys[:200], [1] * 200, list(range(200)))
        task.export_state()
        task.process_batch("readings", keys[200:400], [1] * 200, list(range(200, 400)))
    blob = twins[0].snapshot(compress=compress)
    assert twins[0].export_state() == twins[1].export_state()
    first_export = StreamTask.restore(topology, blob).export_state()
    assert first_export.removed == []
    imported = StreamTask.import_state(topology, first_export.parts)
    outputs = []
    for each in (imported, twins[1]):
        each.process_batch("readings", keys[400:], [1] * 200, list(range(400, 600)))
        outputs.append(drain(each))
    assert outputs[0] == outputs[1] and any(topic == "finals" for _, topic, *_ in outputs[0])


def test_a_cut_or_foreign_snapshot_is_refused() -> None:
    topology = sensor_topology()
    task = StreamTask(topology)
    task.process_batch("readings", ["a", "b"], [1, 2], [1, 2])
    blob = task.snapshot()
    for damaged in (blob[:-1], blob + b"\0", blob[:9]):
        with pytest.raises(ValueError, match="cut or padded"):
            StreamTask.restore(topology, damaged)
    with pytest.raises(ValueError, match="not a StreamTask snapshot"):
        StreamTask.restore(topology, b"PK\x03\x04" + blob[4:])
