"""A node's state size (`Node.state_size`, in the task metrics) is what its `state_rows()` list, kept by the
stores of windows, sessions, sliding windows and joins rather than counted over their rows; a user
processor's rows are its snapshotted state; a stream-stream join lists both sides and its waiting
records. (tests/streams/test_stores.py checks the sizes on every store topology it runs.)"""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_jobs.jobs import sensor_alerts
from spark_jobs.streams import (
    JoinWindows,
    Processor,
    Record,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TimeWindows,
    TopologyTestDriver,
)
from spark_jobs.streams.nodes import window_stores
from spark_jobs.streams.nodes.base import StateRow
from spark_jobs.streams.records import Window, Windowed

records = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.integers(-3, 3), st.integers(0, 1_200_000)),
    max_size=60,
)


def _reduce_topology():
    """A windowed aggregate whose aggregator returns None for some values: Kafka deletes those rows."""
    builder = StreamsBuilder()
    grouped = builder.stream("in").group_by_key().windowed_by(TimeWindows.of_size_and_grace(300_000, 60_000))
    grouped.aggregate(lambda: 0, lambda key, value, total: None if total + value == 0 else total + value)
    return builder.build()


def _counted(node) -> tuple[int, int]:
    rows = list(node.state_rows())
    return len(rows), len({r.window for r in rows if r.window is not None})


@settings(max_examples=25, deadline=None)
@given(records=records, wall_clock=st.integers(0, 2_000_000))
def test_state_size_counts_what_state_rows_list(records, wall_clock):
    for topology, topic in (
        (sensor_alerts.build_topology(), sensor_alerts.INPUT_TOPIC),
        (_reduce_topology(), "in"),
    ):
        driver = TopologyTestDriver(topology, initial_wall_clock_ms=0)
        source = driver.create_input_topic(topic)
        for key, value, timestamp in records:
            source.pipe_input(key, value, timestamp)
        driver.advance_wall_clock_time(wall_clock)
        for node in driver.task.nodes.values():
            assert node.state_size() == _counted(node), node.name


class Seen(Processor):
    def __init__(self):
        self.latest: dict = {}
        self.alerted: set = set()
        self.per_window: dict = {}
        self.records = 0

    def process(self, record: Record) -> None:
        self.records += 1
        self.latest[record.key] = record.timestamp
        self.alerted.add(record.key)
        self.per_window[Windowed(record.key, Window(0, 60_000))] = record.value


class Hooked(Seen):
    def snapshot_state(self):
        return [self.records]

    def restore_state(self, state):
        (self.records,) = state


def _user_node(processor):
    builder = StreamsBuilder()
    builder.stream("in").process(lambda: processor)
    driver = TopologyTestDriver(builder.build())
    source = driver.create_input_topic("in")
    source.pipe_input("b", 1, 5)
    source.pipe_input("a", 2, 7)
    (node,) = [n for n in driver.task.nodes.values() if type(n).__name__ == "UserProcessorNode"]
    return node


def test_user_processor_rows_are_its_attributes():
    node = _user_node(Seen())
    assert list(node.state_rows()) == [
        StateRow("latest", "b", None, None, 5, None),
        StateRow("latest", "a", None, None, 7, None),
        StateRow("alerted", "a", None, None, None, None),
        StateRow("alerted", "b", None, None, None, None),
        StateRow("per_window", "b", 0, 60_000, 1, None),
        StateRow("per_window", "a", 0, 60_000, 2, None),
        StateRow("records", None, None, None, 2, None),
    ]
    assert node.state_size() == (7, 1)


def test_a_hooks_state_is_one_store():
    node = _user_node(Hooked())
    assert list(node.state_rows()) == [StateRow("state", None, None, None, [2], None)]
    assert node.state_size() == (1, 0)


def _left_join(driver_records):
    builder = StreamsBuilder()
    left, right = builder.stream("left"), builder.stream("right")
    left.left_join(right, lambda x, y: (x, y), JoinWindows.of_time_difference_and_grace(10, 5)).to("out")
    driver = TopologyTestDriver(builder.build())
    for topic, key, value, timestamp in driver_records:
        driver.create_input_topic(topic).pipe_input(key, value, timestamp)
    (node,) = [n for n in driver.task.nodes.values() if getattr(n, "side", None) == 0]  # the state's owner
    return node


def test_a_left_joins_waiting_records_are_in_its_state_rows():
    node = _left_join(
        [
            ("left", "a", 1, 100),  # joins with the right record below: no longer waiting
            ("right", "a", 2, 104),
            ("left", "b", 3, 105),  # no partner yet: waiting
            ("left", "c", 4, 107),  # waiting
        ]
    )
    rows = sorted(node.state_rows(), key=lambda r: (r.store, r.timestamp))
    assert rows == [
        StateRow("join_waiting:left", "b", 105, 105, 3, 105),
        StateRow("join_waiting:left", "c", 107, 107, 4, 107),
        StateRow("join_window:left", "a", 100, 100, 1, 100),
        StateRow("join_window:left", "b", 105, 105, 3, 105),
        StateRow("join_window:left", "c", 107, 107, 4, 107),
        StateRow("join_window:right", "a", 104, 104, 2, 104),
    ]
    assert node.state_size() == (6, 4)
    # the window closes for "b" (105 + 10 + 5 < 121): emitted without a partner, no longer waiting
    node = _left_join([("left", "b", 3, 105), ("left", "d", 5, 121)])
    stores = sorted((r.store, r.key) for r in node.state_rows())
    assert stores == [
        ("join_waiting:left", "d"),
        ("join_window:left", "b"),
        ("join_window:left", "d"),
    ]
    assert node.state_size() == (3, 2)


def _fed_nodes(topology, records):
    driver = TopologyTestDriver(topology)
    for topic, key, value, timestamp in records:
        driver.create_input_topic(topic).pipe_input(key, value, timestamp)
    return [node for node in driver.task.nodes.values() if list(node.state_rows())]


def _session_sliding_and_join():
    builder = StreamsBuilder()
    stream = builder.stream("a")
    grouped = stream.group_by_key()
    grouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 2)).count()
    grouped.windowed_by(SlidingWindows.of_time_difference_and_grace(5, 2)).count()
    stream.outer_join(
        builder.stream("b"), lambda x, y: (x, y), JoinWindows.of_time_difference_and_grace(3, 1)
    ).to("out")
    return builder.build()


@pytest.mark.parametrize(
    "kind", ["SessionWindowAggregateNode", "SlidingWindowAggregateNode", "StreamStreamJoinNode"]
)
def test_the_size_is_kept_by_the_stores_not_counted_over_their_rows(kind, monkeypatch):
    records = [("a", "k", 1, t) for t in (1, 3, 20, 21)] + [("b", "k", 2, 22), ("a", "j", 1, 24)]
    (node,) = [n for n in _fed_nodes(_session_sliding_and_join(), records) if type(n).__name__ == kind]
    expected = (
        len(list(node.state_rows())),
        len({r.window for r in node.state_rows()}),
    )
    assert expected[0] > 1

    def no_pass_over_the_rows():
        raise AssertionError("state_size read the rows")

    monkeypatch.setattr(node, "state_rows", no_pass_over_the_rows)
    assert node.state_size() == expected


def test_a_session_is_a_window_of_its_key_alone():
    """Sessions of two keys with the same bounds are two windows; a time window is shared by its keys."""
    builder = StreamsBuilder()
    readings = builder.stream("a").group_by_key()
    readings.windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 100)).count()
    builder.stream("b").group_by_key().windowed_by(TimeWindows.of_size_and_grace(10, 100)).count()
    records = [("a", "k", 1, 1), ("a", "j", 1, 1), ("a", "k", 1, 20), ("b", "k", 1, 1), ("b", "j", 1, 2)]
    sessions, windows = [n for n in _fed_nodes(builder.build(), records) if n.state_size()[0]]
    assert sessions.state_size() == (3, 3)  # k [1, 1], j [1, 1], k [20, 20]
    assert windows.state_size() == (2, 1)  # k and j in [0, 10)


@pytest.mark.parametrize("fresh_run", [1, 3, window_stores.FRESH_RUN])
def test_a_joins_size_counted_from_its_stores_timestamp_runs_is_what_its_rows_list(fresh_run):
    """The join stores keep their timestamps in runs (FRESH_RUN at a time, merged as they pile up, cut as the
    clocks move on): after every record, the join's size is the rows it lists and their distinct times."""
    builder = StreamsBuilder()
    builder.stream("a").outer_join(
        builder.stream("b"), lambda x, y: (x, y), JoinWindows.of_time_difference_and_grace(5, 3)
    ).to("out")
    with mock.patch.object(window_stores, "FRESH_RUN", fresh_run):
        driver = TopologyTestDriver(builder.build())
        inputs = {topic: driver.create_input_topic(topic) for topic in "ab"}
        (node,) = [n for n in driver.task.nodes.values() if getattr(n, "side", None) == 0]
        for i in range(80):
            ts = i // 2 + (7 if i % 5 == 0 else 0) - (9 if i % 7 == 0 else 0)  # out of order, some late
            inputs["ab"[i % 3 == 0]].pipe_input("kjm"[i % 3], i, max(0, ts))
            rows = list(node.state_rows())
            assert node.state_size() == (len(rows), len({row.window for row in rows}))
