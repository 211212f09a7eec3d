"""Punctuation (docs/semantics.md section 2): legacy and aligned schedules on stream time and wall clock."""

from __future__ import annotations

import datetime as dt

import pytest

from spark_jobs.streams import Processor, PunctuationType, Record, To, Topology, TopologyTestDriver
from spark_jobs.streams.timeutil import INT64_MAX

from .helpers import recorder_topology

STREAM, WALL = PunctuationType.STREAM_TIME, PunctuationType.WALL_CLOCK_TIME


def fired_after_each(driver: TopologyTestDriver, recorder, timestamps) -> list[list[int]]:
    topic = driver.create_input_topic("input")
    fired = []
    for ts in timestamps:
        before = len(recorder.punctuations)
        topic.pipe_input("k", "v", ts)
        fired.append(recorder.punctuations[before:])
    return fired


def test_aligned_stream_time_example_of_the_spec() -> None:
    topology, made = recorder_topology(interval=10, shift=5)
    driver = TopologyTestDriver(topology)
    assert fired_after_each(driver, made[0], [12, 14, 15, 16, 26]) == [[], [], [15], [], [26]]


def test_aligned_wall_clock_example_of_the_spec() -> None:
    topology, made = recorder_topology(interval=10, shift=5, type_=WALL)
    driver = TopologyTestDriver(topology)
    for _ in range(40):
        driver.advance_wall_clock_time(1)
    assert made[0].punctuations == [5, 15, 25, 35]


@pytest.mark.parametrize("shift", [5, -5, 15, dt.timedelta(milliseconds=-5)])
def test_shift_is_taken_modulo_the_interval(shift) -> None:
    topology, made = recorder_topology(interval=10, shift=shift)
    driver = TopologyTestDriver(topology)
    assert fired_after_each(driver, made[0], [12, 15, 26]) == [[], [15], [26]]


def test_aligned_stream_time_scheduled_when_stream_time_is_known_uses_it() -> None:
    class LateScheduler(Processor):
        fired: list[int] = []

        def process(self, record: Record) -> None:
            if record.value == "schedule":
                self.context.schedule(10, STREAM, LateScheduler.fired.append, time_shift=0)

    topology = Topology().add_source("s", "input").add_processor("p", LateScheduler, "s")
    driver = TopologyTestDriver(topology)
    topic = driver.create_input_topic("input")
    topic.pipe_input("k", "x", 23)
    topic.pipe_input("k", "schedule", 24)  # next_aligned(24) = 30
    topic.pipe_input("k", "x", 29)
    assert LateScheduler.fired == []
    topic.pipe_input("k", "x", 31)
    assert LateScheduler.fired == [31]


def test_legacy_stream_time_fires_after_the_first_record_and_collapses_missed_intervals() -> None:
    topology, made = recorder_topology(interval=10)
    driver = TopologyTestDriver(topology)
    # first due time 0: fires after the first record; a jump over many intervals fires once
    assert fired_after_each(driver, made[0], [3, 9, 10, 500, 505, 510]) == [[3], [], [10], [500], [], [510]]


def test_legacy_wall_clock_starts_one_interval_after_schedule() -> None:
    topology, made = recorder_topology(interval=10, type_=WALL)
    driver = TopologyTestDriver(topology, initial_wall_clock_ms=1000)
    driver.advance_wall_clock_time(9)
    assert made[0].punctuations == []
    driver.advance_wall_clock_time(dt.timedelta(milliseconds=1))
    assert made[0].punctuations == [1010]
    driver.advance_wall_clock_time(100)  # ten intervals missed: one call, with the current time
    assert made[0].punctuations == [1010, 1110]


def test_nothing_fires_while_stream_time_is_unknown() -> None:
    topology, made = recorder_topology(interval=10)
    driver = TopologyTestDriver(topology)
    driver.create_input_topic("input").pipe_input("k", "v", -5)  # dropped at the source
    assert made[0].punctuations == []
    assert driver.metrics()["dropped-records-total"] == 1


def test_wall_clock_punctuation_does_not_fire_on_records() -> None:
    topology, made = recorder_topology(interval=10, type_=WALL)
    driver = TopologyTestDriver(topology)
    driver.create_input_topic("input").pipe_input("k", "v", 1_000_000)
    assert made[0].punctuations == []


class CancelInside(Processor):
    def init(self, context) -> None:
        self.context = context
        self.calls: list[int] = []
        self.handle = context.schedule(10, STREAM, self.punctuate)

    def punctuate(self, now: int) -> None:
        self.calls.append(now)
        self.handle.cancel()

    def process(self, record: Record) -> None:
        pass


def test_cancel_from_inside_the_punctuator_stops_rescheduling() -> None:
    made: list[CancelInside] = []
    topology = (
        Topology()
        .add_source("s", "input")
        .add_processor("p", lambda: made.append(CancelInside()) or made[-1], "s")
    )
    driver = TopologyTestDriver(topology)
    topic = driver.create_input_topic("input")
    for ts in (1, 20, 40, 60):
        topic.pipe_input("k", "v", ts)
    assert made[0].calls == [1]


def test_schedules_due_together_fire_in_creation_order() -> None:
    order: list[str] = []

    class Two(Processor):
        def __init__(self, tag: str) -> None:
            self.tag = tag

        def init(self, context) -> None:
            context.schedule(10, STREAM, lambda now: order.append(f"{self.tag}-a"), time_shift=0)
            context.schedule(10, STREAM, lambda now: order.append(f"{self.tag}-b"), time_shift=0)

        def process(self, record: Record) -> None:
            pass

    topology = (
        Topology()
        .add_source("s", "input")
        .add_processor("first", lambda: Two("first"), "s")
        .add_processor("second", lambda: Two("second"), "s")
    )
    driver = TopologyTestDriver(topology)
    topic = driver.create_input_topic("input")
    topic.pipe_input("k", "v", 1)
    topic.pipe_input("k", "v", 10)  # all four schedules are due at 10
    assert order == ["first-a", "first-b", "second-a", "second-b"]


def test_records_forwarded_from_a_punctuator_get_its_now() -> None:
    class Ticker(Processor):
        def init(self, context) -> None:
            self.context = context
            context.schedule(10, WALL, self.tick, time_shift=0)

        def tick(self, now: int) -> None:
            self.context.forward(Record("tick", now))  # no timestamp set: the punctuation's now
            self.context.forward(Record("explicit", now, 7))
            self.context.forward(Record("to", now), To.all().with_timestamp(3))

        def process(self, record: Record) -> None:
            pass

    topology = (
        Topology().add_source("s", "input").add_processor("p", Ticker, "s").add_sink("out", "output", "p")
    )
    driver = TopologyTestDriver(topology, initial_wall_clock_ms=5)
    driver.advance_wall_clock_time(8)
    records = driver.create_output_topic("output").read_records_to_list()
    assert [(r.key, r.value, r.timestamp) for r in records] == [
        ("tick", 13, 13),
        ("explicit", 13, 7),
        ("to", 13, 3),
    ]


@pytest.mark.parametrize("interval", [0, -1, dt.timedelta(microseconds=500)])
def test_interval_below_one_millisecond_raises(interval) -> None:
    class Bad(Processor):
        def init(self, context) -> None:
            context.schedule(interval, STREAM, print)

    topology = Topology().add_source("s", "input").add_processor("p", Bad, "s")
    with pytest.raises(ValueError, match="at least 1 ms"):
        TopologyTestDriver(topology)


def test_due_times_never_overflow_int64() -> None:
    topology, made = recorder_topology(interval=1000, shift=0, type_=WALL)
    driver = TopologyTestDriver(topology, initial_wall_clock_ms=INT64_MAX - 1500)
    last_boundary = INT64_MAX // 1000 * 1000  # the last k * 1000 within int64
    assert driver.task.punctuation.schedules[0].due == last_boundary
    driver.advance_wall_clock_time(500)
    driver.advance_wall_clock_time(1000)  # now INT64_MAX: fires; the next boundary is beyond int64
    driver.advance_wall_clock_time(0)
    assert made[0].punctuations == [INT64_MAX]
    assert driver.task.punctuation.schedules[0].due is None


def test_legacy_wall_clock_schedule_near_int64_max_never_fires() -> None:
    topology, made = recorder_topology(interval=10, type_=WALL)
    driver = TopologyTestDriver(topology, initial_wall_clock_ms=INT64_MAX - 5)  # first due beyond int64
    driver.advance_wall_clock_time(5)
    assert made[0].punctuations == []
    assert driver.task.punctuation.schedules[0].due is None


class Summaries(Processor):
    """Forwards, at every aligned 10 ms of stream time, how many records it saw since the last one."""

    def init(self, context) -> None:
        self.context = context
        self.seen = 0
        context.schedule(10, STREAM, self.emit, time_shift=0)

    def emit(self, now: int) -> None:
        self.context.forward(Record("summary", (self.seen, self.context.stream_time())))
        self.seen = 0

    def process(self, record: Record) -> None:
        self.seen += 1
        self.context.forward(record)


def test_batches_are_cut_where_stream_time_punctuation_is_due() -> None:
    from .helpers import run_task

    topology = (
        Topology()
        .add_source("s", "readings")
        .add_processor("p", Summaries, "s")
        .add_sink("out", "output", "p")
    )
    records = [("k", i, ts) for i, ts in enumerate([1, 5, 12, 11, 19, 33, 34, 2, 41, 50, 50, 61])]
    per_record = run_task(topology, records, per_record=True)
    batched = run_task(topology, records, cuts=[5])
    assert batched == per_record
    summaries = [row[3] for row in per_record if row[2] == "summary"]
    assert summaries[:3] == [(3, 12), (3, 33), (3, 41)]  # aligned at 10, 20, 30, 40: fired at 12, 33, 41
