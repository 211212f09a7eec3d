"""Topology inspection: which inputs have values that something looks at."""

from __future__ import annotations

import pytest

from spark_jobs.streams import SessionWindows, StreamsBuilder, TimeWindows, TopologyTestDriver

from .helpers import pipe_all, read

WINDOWS = TimeWindows.of_size_and_grace(60_000, 10_000)


def _topology(build):
    builder = StreamsBuilder()
    build(builder, builder.stream("input"))
    return builder.build()


def test_a_windowed_count_does_not_read_values():
    topology = _topology(lambda b, s: s.group_by_key().windowed_by(WINDOWS).count().to_stream().to("out"))
    assert topology.reads_values("input") is False


@pytest.mark.parametrize(
    "build",
    [
        lambda b, s: s.group_by_key().windowed_by(WINDOWS).reduce(lambda a, v: a + v),
        lambda b, s: s.group_by_key().count(),  # skips null values: it looks at them
        lambda b, s: s.group_by(lambda k, v: v).windowed_by(WINDOWS).count(),
        lambda b, s: s.group_by_key().windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(5)).count(),
        lambda b, s: (s.peek(lambda k, v: None), s.group_by_key().windowed_by(WINDOWS).count()),
        lambda b, s: s.to("copy"),
    ],
    ids=["windowed reduce", "non-windowed count", "re-keyed by value", "session count", "a peek too", "sink"],
)
def test_anything_else_on_the_stream_reads_them(build):
    assert _topology(build).reads_values("input") is True


def test_a_topic_that_is_not_an_input_is_an_error():
    with pytest.raises(ValueError, match="not an input"):
        _topology(lambda b, s: s.to("out")).reads_values("other")


def test_the_count_is_the_same_whatever_the_values():
    """What `reads_values` promises: a runtime may pass None for every value and change nothing."""
    topology = _topology(lambda b, s: s.group_by_key().windowed_by(WINDOWS).count().to_stream().to("out"))
    records = [("a", {"t": 1}, 1_000), ("b", None, 2_000), ("a", [1, 2], 61_000), ("a", "x", 75_000)]
    outputs = []
    for values in ([v for _, v, _ in records], [None] * len(records)):
        driver = TopologyTestDriver(topology)
        pipe_all(driver, "input", [(k, v, t) for (k, _, t), v in zip(records, values, strict=True)])
        outputs.append(read(driver, "out"))
    assert outputs[0] == outputs[1] and len(outputs[0]) == 4
