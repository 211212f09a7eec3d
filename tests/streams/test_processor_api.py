"""Processor API: records, forwarding rules (docs/semantics.md section 3) and build-time validation."""

from __future__ import annotations

import datetime as dt

import pytest

from spark_jobs.streams import (
    BufferConfig,
    JoinWindows,
    Processor,
    Record,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    To,
    Topology,
    TopologyTestDriver,
)

from .helpers import read, run_task


def test_record_is_immutable_and_copies_on_with() -> None:
    record = Record("k", "v", 5)
    with pytest.raises(AttributeError):
        record.value = "x"  # type: ignore[misc]
    assert record.with_key("k2") == Record("k2", "v", 5)
    assert record.with_value("v2") == Record("k", "v2", 5)
    assert record.with_timestamp(9) == Record("k", "v", 9)
    assert record == Record("k", "v", 5)
    with pytest.raises(ValueError):
        record.with_timestamp(-1)


class ExplicitOnce(Processor):
    """Forwards each record three times: plain, with an explicit timestamp, plain again."""

    def process(self, record: Record) -> None:
        self.context.forward(record.with_value("first"))
        self.context.forward(record.with_value("explicit"), To.all().with_timestamp(record.timestamp + 100))
        self.context.forward(record.with_value("again"))


def test_explicit_timestamp_applies_to_one_forward_and_what_it_reaches() -> None:
    builder = StreamsBuilder()
    (builder.stream("input").process(ExplicitOnce).map_values(lambda v: v.upper()).to("output"))
    driver = TopologyTestDriver(builder.build())
    driver.create_input_topic("input").pipe_input("k", "v", 7)
    assert read(driver, "output") == [["k", "FIRST", 7], ["k", "EXPLICIT", 107], ["k", "AGAIN", 7]]


def test_negative_explicit_timestamp_raises() -> None:
    class Negative(Processor):
        def process(self, record: Record) -> None:
            self.context.forward(record, To.all().with_timestamp(-3))

    topology = Topology().add_source("s", "input").add_processor("p", Negative, "s").add_sink("o", "out", "p")
    driver = TopologyTestDriver(topology)
    with pytest.raises(ValueError, match="negative"):
        driver.create_input_topic("input").pipe_input("k", "v", 1)


def test_forward_to_one_child_by_name() -> None:
    class Router(Processor):
        def process(self, record: Record) -> None:
            self.context.forward(record, To.child("odd" if record.value % 2 else "even"))
            self.context.forward(record.with_value(-record.value), "even")

    topology = (
        Topology()
        .add_source("s", "input")
        .add_processor("router", Router, "s")
        .add_sink("odd", "odd-topic", "router")
        .add_sink("even", "even-topic", "router")
    )
    driver = TopologyTestDriver(topology)
    topic = driver.create_input_topic("input")
    topic.pipe_input("a", 1, 10)
    topic.pipe_input("b", 2, 11)
    assert read(driver, "odd-topic") == [["a", 1, 10]]
    assert read(driver, "even-topic") == [["a", -1, 10], ["b", 2, 11], ["b", -2, 11]]


def test_forward_to_unknown_child_raises() -> None:
    class Lost(Processor):
        def process(self, record: Record) -> None:
            self.context.forward(record, To.child("nowhere"))

    topology = Topology().add_source("s", "input").add_processor("p", Lost, "s").add_sink("o", "out", "p")
    driver = TopologyTestDriver(topology)
    with pytest.raises(ValueError, match="nowhere"):
        driver.create_input_topic("input").pipe_input("k", "v", 1)


def test_depth_first_order_across_sinks() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("input")
    stream.to("a")
    stream.flat_map_values(lambda v: [v, v + "!"]).to("b")
    stream.to("a2")
    expected = [
        ("a", "x"),
        ("b", "x"),
        ("b", "x!"),
        ("a2", "x"),
        ("a", "y"),
        ("b", "y"),
        ("b", "y!"),
        ("a2", "y"),
    ]
    for per_record in (True, False):  # one batch of two records must interleave as record by record
        rows = run_task(builder.build(), [("k", "x", 1), ("k", "y", 2)], topic="input", per_record=per_record)
        assert [(r[1], r[3]) for r in rows] == expected
        assert [r[0] for r in rows] == list(range(8))


def noop() -> Processor:
    class Noop(Processor):
        def process(self, record: Record) -> None:
            pass

    return Noop()


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda t: t.add_source("s", "a").add_source("s", "b"), "already exists"),
        (lambda t: t.add_source("s", "a").add_source("s2", "a"), "already read"),
        (lambda t: t.add_source("s", "a").add_processor("p", noop, "missing"), "unknown parent"),
        (lambda t: t.add_source("s", "a").add_sink("o", "out", "s").add_processor("p", noop, "o"), "sink"),
        (lambda t: t.add_source("s"), "at least one topic"),
        (lambda t: t.add_source("s", "a").add_processor("p", noop), "at least one parent"),
        (lambda t: t.add_source("s", "a").add_processor("p", "not callable", "s"), "supplier"),
    ],
)
def test_topology_misuse_raises_at_once(build, message) -> None:
    with pytest.raises(ValueError, match=message):
        build(Topology())


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: TimeWindows.of_size_and_grace(10, -1), "grace"),
        (lambda: TimeWindows.of_size_with_no_grace(0), "size"),
        (lambda: TimeWindows.of_size_with_no_grace(-5), "size"),
        (lambda: TimeWindows.of_size_with_no_grace(10).advance_by(11), "advance"),
        (lambda: TimeWindows.of_size_with_no_grace(10).advance_by(0), "advance"),
        (lambda: SessionWindows.of_inactivity_gap_and_grace(5, -1), "grace"),
        (lambda: SessionWindows.of_inactivity_gap_with_no_grace(0), "gap"),
        (lambda: SlidingWindows.of_time_difference_and_grace(10, -1), "grace"),
        (lambda: JoinWindows.of_time_difference_and_grace(10, -2), "grace"),
        (lambda: Suppressed.until_window_closes(BufferConfig.max_records(5)), "strict"),
        (lambda: Suppressed.until_window_closes(BufferConfig.max_bytes(5).emit_early_when_full()), "strict"),
        (lambda: Suppressed.until_time_limit(-1, BufferConfig.unbounded()), "negative"),
        (lambda: BufferConfig.max_records(-1), "max_records"),
    ],
)
def test_dsl_misuse_raises_when_written(make, message) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_until_window_closes_on_a_table_without_windows_raises() -> None:
    builder = StreamsBuilder()
    counts = builder.stream("input").group_by_key().count().filter(lambda k, v: True)
    with pytest.raises(ValueError, match="windowed"):
        counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))


def test_strict_bounded_config_is_accepted_and_durations_take_timedeltas() -> None:
    suppressed = Suppressed.until_window_closes(BufferConfig.max_records(3).shut_down_when_full())
    assert suppressed.buffer_config.records_limit == 3
    windows = TimeWindows.of_size_and_grace(dt.timedelta(minutes=2), dt.timedelta(seconds=1))
    assert (windows.size, windows.grace) == (120_000, 1_000)
    assert Suppressed.until_time_limit(dt.timedelta(seconds=2), BufferConfig.unbounded()).time_limit == 2000


def test_duplicate_suppress_name_raises() -> None:
    builder = StreamsBuilder()
    counts = builder.stream("input").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10)).count()
    config = Suppressed.until_window_closes(BufferConfig.unbounded()).with_name("finals")
    counts.suppress(config)
    with pytest.raises(ValueError, match="finals"):
        counts.suppress(config)


def test_session_aggregate_needs_a_merger() -> None:
    grouped = (
        StreamsBuilder()
        .stream("input")
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(5))
    )
    with pytest.raises(ValueError, match="merger"):
        grouped.aggregate(lambda: 0, lambda k, v, a: a + 1)


def test_stream_stream_join_needs_windows() -> None:
    builder = StreamsBuilder()
    with pytest.raises(ValueError, match="JoinWindows"):
        builder.stream("a").join(builder.stream("b"), lambda left, right: (left, right))


@pytest.mark.parametrize("partition", [0, 5])
def test_the_driver_plays_the_partition_it_is_given(partition) -> None:
    class Tag(Processor):
        def init(self, context):
            self.context = context

        def process(self, record):
            self.context.forward(record.with_value(self.context.partition()))

    topology = (
        Topology().add_source("in", "input").add_processor("tag", Tag, "in").add_sink("out", "output", "tag")
    )
    driver = TopologyTestDriver(topology, partition=partition)
    driver.create_input_topic("input").pipe_input("k", "v", 1)
    assert [r.value for r in driver.create_output_topic("output").read_records_to_list()] == [partition]


@pytest.mark.parametrize("partition", [-1, True, 1.0])
def test_the_driver_rejects_a_partition_that_is_not_a_non_negative_integer(partition) -> None:
    with pytest.raises(ValueError, match="partition"):
        TopologyTestDriver(Topology().add_source("in", "input"), partition=partition)
