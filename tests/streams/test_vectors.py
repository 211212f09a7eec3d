"""Every worked example of tests/streams/vectors/kafka_streams_reference.json (transcribed from Kafka
Streams' own tests), loaded at test time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from spark_jobs.streams import (
    BufferConfig,
    JoinWindows,
    Processor,
    PunctuationType,
    Record,
    SessionWindows,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    Topology,
    TopologyTestDriver,
)
from spark_jobs.streams.runtime.punctuation import PunctuationQueue, PunctuationSchedule

from .helpers import load_vectors, pipe_all, read, recorder_topology

VECTORS = load_vectors()


def kind(vector: dict[str, Any]) -> str:
    config = vector["config"]
    if config.get("type") in ("STREAM_TIME", "WALL_CLOCK_TIME", "QUEUE"):
        return "punctuation-" + config["type"]
    if "modes" in config:
        return "windowed-aggregate"
    if "time_limit" in config:
        return "suppress-time-limit"
    if "gap" in config:
        return "final-results-session"
    if "size" in config:
        return "final-results-tumbling"
    if "before" in config and "after" in config:
        return "stream-stream-join"
    if "withTimestamp" in config.get("topology", ""):
        return "forward-with-timestamp"
    return "unknown"


def vectors_of(name: str) -> list:
    return [pytest.param(v, id=v["name"]) for v in VECTORS if kind(v) == name]


def test_every_vector_has_a_test() -> None:
    assert VECTORS, "the reference file holds no vectors"
    assert [v["name"] for v in VECTORS if kind(v) == "unknown"] == []


@pytest.mark.parametrize("vector", vectors_of("punctuation-STREAM_TIME"))
def test_punctuation_on_stream_time(vector: dict) -> None:
    topology, made = recorder_topology(interval=vector["config"]["interval"])
    driver = TopologyTestDriver(topology)
    topic = driver.create_input_topic("input")
    fired_per_record = []
    for ts in vector["input"]:
        before = len(made[0].punctuations)
        topic.pipe_input("k", "v", ts)
        fired_per_record.append(made[0].punctuations[before:])
    assert fired_per_record == vector["expected"]


@pytest.mark.parametrize("vector", vectors_of("punctuation-WALL_CLOCK_TIME"))
def test_punctuation_on_wall_clock(vector: dict) -> None:
    config = vector["config"]
    topology, made = recorder_topology(interval=config["interval"], type_=PunctuationType.WALL_CLOCK_TIME)
    driver = TopologyTestDriver(topology, initial_wall_clock_ms=config["initial_wall_clock"])
    fired_per_advance = []
    for advance in vector["input"]:
        before = len(made[0].punctuations)
        driver.advance_wall_clock_time(advance)
        fired_per_advance.append(made[0].punctuations[before:])
    assert fired_per_advance == vector["expected"]


@pytest.mark.parametrize("vector", vectors_of("punctuation-QUEUE"))
def test_punctuation_queue(vector: dict) -> None:
    config = vector["config"]
    fired: list[int] = []
    schedule = PunctuationSchedule(
        None, 0, "node", PunctuationType.STREAM_TIME, config["interval"], None, config["start"], fired.append
    )
    queue = PunctuationQueue()
    queue.add(schedule)
    observed = []
    for now in vector["input"]:
        before = len(fired)
        queue.maybe_punctuate(now, lambda s, t: s.punctuator(t))
        observed.append([fired[before:], queue.next_due()])
    assert observed == vector["expected"]


class ShiftTimestamp(Processor):
    def process(self, record: Record) -> None:
        self.context.forward(record.with_timestamp(record.timestamp + 10))


@pytest.mark.parametrize("vector", vectors_of("forward-with-timestamp"))
def test_forward_with_timestamp(vector: dict) -> None:
    ((topic, expected),) = vector["expected"].items()
    topology = (
        Topology()
        .add_source("source", "input")
        .add_processor("processor", ShiftTimestamp, "source")
        .add_sink("sink", topic, "processor")
    )
    driver = TopologyTestDriver(topology)
    pipe_all(driver, "input", vector["input"])
    assert read(driver, topic) == expected


def string_aggregate(config: dict) -> tuple[Callable[[], str], Callable[[Any, Any, str], str]]:
    init, sep = config["init"], config["sep"]
    return (lambda: init), (lambda key, value, agg: agg + sep + value)


@pytest.mark.parametrize(
    "vector,mode",
    [
        pytest.param(p.values[0], mode, id=f"{p.id}-{mode}")
        for p in vectors_of("windowed-aggregate")
        for mode in p.values[0]["config"]["modes"]
    ],
)
def test_windowed_aggregate(vector: dict, mode: str) -> None:
    """ON_WINDOW_UPDATE: every update; ON_WINDOW_CLOSE: the emit strategy as suppress(until_window_closes)."""
    config = vector["config"]
    windows = TimeWindows.of_size_and_grace(config["size"], config["grace"]).advance_by(config["advance"])
    builder = StreamsBuilder()
    aggregated = (
        builder.stream("input").group_by_key().windowed_by(windows).aggregate(*string_aggregate(config))
    )
    if mode == "ON_WINDOW_CLOSE":
        aggregated = aggregated.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    aggregated.to_stream().to("output")
    driver = TopologyTestDriver(builder.build())
    pipe_all(driver, "input", vector["input"])
    assert read(driver, "output", stringify_keys=True) == vector["expected"][mode]
    if "expected_dropped_window_updates" in config:
        assert driver.metrics()["dropped-records-total"] == config["expected_dropped_window_updates"]


def counts_topology(windows: Any) -> Topology:
    """Both the raw windowed counts and the final (suppressed) ones; keys written as [key@start/end]."""
    builder = StreamsBuilder()
    counts = builder.stream("input").group_by(lambda key, value: key).windowed_by(windows).count()
    counts.to_stream().map(lambda key, value: (str(key), value)).to("output-raw")
    (
        counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .map(lambda key, value: (str(key), value))
        .to("output-suppressed")
    )
    return builder.build()


@pytest.mark.parametrize("vector", vectors_of("final-results-tumbling"))
def test_final_results_tumbling(vector: dict) -> None:
    config = vector["config"]
    driver = TopologyTestDriver(
        counts_topology(TimeWindows.of_size_and_grace(config["size"], config["grace"]))
    )
    pipe_all(driver, "input", vector["input"])
    for topic, expected in vector["expected"].items():
        assert read(driver, topic) == expected, topic


@pytest.mark.parametrize("vector", vectors_of("final-results-session"))
def test_final_results_session(vector: dict) -> None:
    config = vector["config"]
    windows = SessionWindows.of_inactivity_gap_and_grace(config["gap"], config["grace"])
    driver = TopologyTestDriver(counts_topology(windows))
    pipe_all(driver, "input", vector["input"])
    for topic, expected in vector["expected"].items():
        assert read(driver, topic) == expected, topic


@pytest.mark.parametrize("vector", vectors_of("suppress-time-limit"))
def test_suppress_time_limit(vector: dict) -> None:
    config = vector["config"]
    builder = StreamsBuilder()
    counts = builder.table("input").group_by(lambda key, value: (value, key)).count()
    counts.to_stream().to("output-raw")
    (
        counts.suppress(Suppressed.until_time_limit(config["time_limit"], BufferConfig.unbounded()))
        .to_stream()
        .to("output-suppressed")
    )
    driver = TopologyTestDriver(builder.build())
    pipe_all(driver, "input", vector["input"])
    for topic, expected in vector["expected"].items():
        assert read(driver, topic) == expected, topic


@pytest.mark.parametrize("vector", vectors_of("stream-stream-join"))
def test_stream_stream_join(vector: dict) -> None:
    config = vector["config"]
    windows = JoinWindows.of_time_difference_with_no_grace(config["before"]).with_after(config["after"])
    builder = StreamsBuilder()
    builder.stream("left").join(builder.stream("right"), lambda left, right: f"{left}+{right}", windows).to(
        "output"
    )
    driver = TopologyTestDriver(builder.build())
    topics = {name: driver.create_input_topic(name) for name in ("left", "right")}
    for topic, key, value, ts in vector["input"]:
        topics[topic].pipe_input(key, value, ts)
    ((topic, expected),) = vector["expected"].items()
    assert read(driver, topic) == expected
