"""Late records (runtime/late.py): every (record, window) pair a node drops as late is kept once, with the
input record it descends from, whatever the batching, and the test driver reads them."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as hs

from spark_jobs.streams import (
    BufferConfig,
    Count,
    Processor,
    PunctuationType,
    Record,
    SessionWindows,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    Topology,
)
from spark_jobs.streams.nodes.final_window_count import MIN_ROWS
from spark_jobs.streams.runtime.late import LateRecord
from spark_jobs.streams.runtime.task import StreamTask
from spark_jobs.streams.testing import TopologyTestDriver

from .helpers import sensor_topology

COUNT = "KSTREAM-AGGREGATE-0000000003"  # sensor_topology's windowed count


class _Ticking(Processor):
    """Forwards its records, with a stream-time punctuation that does nothing: a batch is cut into
    chunks where it is due."""

    def init(self, context) -> None:
        self.context = context
        context.schedule(25, PunctuationType.STREAM_TIME, lambda now: None)

    def process(self, record: Record) -> None:
        self.context.forward(record)


def _late_topology() -> Topology:
    """Windowed counts under a fan-out after a flat_map (rows whose src is not the identity): a hopping
    one with little grace, a tumbling one with more and a final suppress under it, a declared
    aggregation (which drops null keys before its windows), and a count under a user processor whose
    stream-time punctuation cuts batches into chunks."""
    builder = StreamsBuilder()
    source = builder.stream("readings")
    readings = source.filter(lambda k, v: v % 7 != 3)
    doubled = readings.flat_map(lambda k, v: [(k, v), (f"{k}+", v + 1)] if v % 2 else [(k, v)])
    hopping = TimeWindows.of_size_and_grace(40, 5).advance_by(10)
    doubled.group_by_key().windowed_by(hopping).count().to_stream().to("hopping")
    counts = readings.group_by_key().windowed_by(TimeWindows.of_size_and_grace(30, 20)).count()
    counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream().to("finals")
    declared = readings.group_by_key().windowed_by(TimeWindows.of_size_and_grace(20, 0)).agg(n=Count())
    declared.to_stream().to("declared")
    ticked = source.process(_Ticking).group_by_key().windowed_by(TimeWindows.of_size_and_grace(25, 0))
    ticked.count().to_stream().to("ticked")
    return builder.build()


def _records(rng: random.Random, n: int) -> list[tuple[str, int, int]]:
    """Mostly in order, some far behind (late for some or all of their windows)."""
    out = []
    for i in range(n):
        ts = i * 3 - (rng.choice([60, 90, 200]) if rng.random() < 0.15 else rng.randrange(4))
        key = None if rng.random() < 0.03 else f"k{rng.randrange(6)}"  # a null key is dropped, not late
        out.append((key, rng.randrange(50), max(ts, 0)))
    return out


def _run(topology: Topology, records: list[tuple], cuts: list[int], snapshot_at: int | None = None):
    """Records in batches cut at `cuts` (each record's origin: its index); late records and output."""
    task = StreamTask(topology)
    late: list[LateRecord] = []
    bounds = sorted({0, len(records), *cuts})
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        if snapshot_at is not None and lo == snapshot_at:
            task = StreamTask.restore(topology, task.snapshot())
        chunk = records[lo:hi]
        task.process_batch(
            "readings",
            [r[0] for r in chunk],
            [r[1] for r in chunk],
            [r[2] for r in chunk],
            origins=range(lo, hi),
        )
        late += task.drain_late()
    out = task.drain_output()
    return late, list(zip(out.topics, out.keys, out.values, out.timestamps, strict=True))


def _per_record(topology: Topology, records: list[tuple]) -> list[LateRecord]:
    with TopologyTestDriver(topology) as driver:
        topic = driver.create_input_topic("readings")
        for key, value, ts in records:
            topic.pipe_input(key, value, ts)
        return driver.read_late_records()


def _sort_key(r: LateRecord) -> tuple:
    return (r.origin, r.node, str(r.key), r.window_start, r.timestamp)


def test_driver_reads_late_records_with_their_window_offset_and_stream_time() -> None:
    topology = sensor_topology(size=10, grace=5)
    with TopologyTestDriver(topology) as driver:
        readings = driver.create_input_topic("readings")
        readings.pipe_input("a", 1, 3)
        readings.pipe_input("a", 1, 30)  # window [0, 10) closes at 15
        readings.pipe_input("b", 2, 22)  # window [20, 30) open until 35
        readings.pipe_input("b", 3, 9)  # window [0, 10): late
        late = driver.read_late_records()
        assert late == [LateRecord(COUNT, "readings", 0, 3, "b", 6, 9, 0, 10, 30)]
        assert driver.read_late_records() == []  # read once
        assert driver.metrics()["dropped-records-total"] == 1


def test_a_hopping_record_is_late_for_its_closed_windows_only() -> None:
    builder = StreamsBuilder()
    windows = TimeWindows.of_size_and_grace(30, 0).advance_by(10)
    builder.stream("in").group_by_key().windowed_by(windows).count().to_stream().to("out")
    with TopologyTestDriver(builder.build()) as driver:
        source = driver.create_input_topic("in")
        out = driver.create_output_topic("out")
        source.pipe_input("k", None, 45)
        out.read_records_to_list()
        source.pipe_input("k", None, 25)  # windows [0,30) [10,40) closed at 45; [20,50) open
        late = driver.read_late_records()
        assert [(r.window_start, r.window_end, r.origin, r.stream_time) for r in late] == [
            (0, 30, 1, 45),
            (10, 40, 1, 45),
        ]
        assert [r.key.window.start for r in out.read_records_to_list()] == [20]


class _Replay(Processor):
    """Forwards its records, and a record stamped 0 at every wall-clock tick."""

    def init(self, context) -> None:
        self.context = context
        context.schedule(100, PunctuationType.WALL_CLOCK_TIME, self.replay)

    def process(self, record: Record) -> None:
        self.context.forward(record)

    def replay(self, now: int) -> None:
        self.context.forward(Record("old", 1, 0))


def test_a_punctuators_late_record_has_no_topic_nor_origin() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("in").process(_Replay)
    stream.group_by_key().windowed_by(TimeWindows.of_size_and_grace(10, 0)).count().to_stream().to("out")
    with TopologyTestDriver(builder.build()) as driver:
        driver.create_input_topic("in").pipe_input("k", 1, 50)
        driver.advance_wall_clock_time(100)
        late = driver.read_late_records()
        assert [(r.topic, r.origin, r.key, r.timestamp, r.window_start) for r in late] == [
            (None, None, "old", 0, 0)
        ]


def test_fused_final_count_keeps_the_same_late_records_as_record_by_record() -> None:
    rng = random.Random(5)
    records = _records(rng, 4 * MIN_ROWS)
    topology = sensor_topology(size=30, grace=10)
    batched, _ = _run(topology, records, [])
    assert batched, "the records must have late ones"
    assert batched == _per_record(topology, records)


def test_late_records_wait_in_a_snapshot_until_drained() -> None:
    topology = sensor_topology(size=10, grace=0)
    task = StreamTask(topology)
    task.process_batch("readings", ["a", "a"], [1, 1], [50, 3], origins=["x", "y"])
    restored = StreamTask.restore(topology, task.snapshot())
    assert restored.drain_late() == task.drain_late() != []
    assert restored.drain_late() == []


@settings(max_examples=40, deadline=None)
@given(seed=hs.integers(0, 10_000), n=hs.integers(1, 300), cuts=hs.lists(hs.integers(0, 300), max_size=8))
def test_late_records_are_the_same_whatever_the_batching(seed: int, n: int, cuts: list[int]) -> None:
    topology = _late_topology()
    records = _records(random.Random(seed), n)
    whole, whole_out = _run(topology, records, [])
    cut, cut_out = _run(topology, records, cuts, snapshot_at=cuts[0] if cuts else None)
    one_by_one = _per_record(topology, records)
    assert sorted(whole, key=_sort_key) == sorted(cut, key=_sort_key) == sorted(one_by_one, key=_sort_key)
    assert whole_out == cut_out
    # in the order of the records they descend from, and every one points at a record that is late there
    assert [r.origin for r in whole] == sorted(r.origin for r in whole)
    for r in whole:
        key, _, ts = records[r.origin]
        assert r.timestamp == ts and r.key in (key, f"{key}+")
        grace = {40: 5, 30: 20, 20: 0, 25: 0}[r.window_end - r.window_start]
        assert r.window_start <= ts < r.window_end <= r.stream_time - grace
    # every late pair counts as dropped; null keys are dropped too, but not as late
    nulls = any(k is None for k, _, _ in records)
    assert (
        (len(whole) <= _dropped(topology, records)) if nulls else (len(whole) == _dropped(topology, records))
    )


def _dropped(topology: Topology, records: list[tuple]) -> int:
    task = StreamTask(topology)
    task.process_batch("readings", *map(list, zip(*records, strict=True)))
    return task.metrics()["dropped-records-total"]


def test_a_session_record_after_its_session_closed_is_kept_with_its_session() -> None:
    builder = StreamsBuilder()
    sessions = SessionWindows.of_inactivity_gap_and_grace(10, 0)
    builder.stream("in").group_by_key().windowed_by(sessions).count().to_stream().to("out")
    with TopologyTestDriver(builder.build()) as driver:
        source = driver.create_input_topic("in")
        source.pipe_input("k", None, 100)
        source.pipe_input("k", None, 5)  # its session [5, 5] closed at 5 + 10 + 0 <= 100
        source.pipe_input("k", None, 95)  # merges with [100, 100]: not late
        late = driver.read_late_records()
        assert [(r.origin, r.window_start, r.window_end, r.stream_time) for r in late] == [(1, 5, 5, 100)]
