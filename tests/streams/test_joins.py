"""Joins and their timestamps (docs/semantics.md section 6)."""

from __future__ import annotations

import pytest

from spark_jobs.streams import JoinWindows, StreamsBuilder, TopologyTestDriver

from .helpers import read


def joined(left, right) -> str:
    return f"{left}+{right}"


def stream_stream(mode: str, windows: JoinWindows):
    builder = StreamsBuilder()
    left, right = builder.stream("left"), builder.stream("right")
    getattr(left, mode)(right, joined, windows).to("output")
    driver = TopologyTestDriver(builder.build())
    return driver, driver.create_input_topic("left"), driver.create_input_topic("right")


def test_inner_join_result_has_the_max_timestamp_and_respects_the_window() -> None:
    driver, left, right = stream_stream("join", JoinWindows.of_time_difference_and_grace(10, 0))
    left.pipe_input("k", "A", 100)
    right.pipe_input("k", "a", 95)  # within 10 before: joins, stamped 100
    right.pipe_input("k", "b", 111)  # 11 after: no join
    left.pipe_input("k", "B", 110)  # joins a? 110 - 95 = 15: no; joins b (111): stamped 111
    assert read(driver, "output") == [["k", "A+a", 100], ["k", "B+b", 111]]


def test_left_join_emits_unmatched_records_when_their_window_closes() -> None:
    driver, left, right = stream_stream("left_join", JoinWindows.of_time_difference_and_grace(10, 0))
    left.pipe_input("k", "A", 0)
    right.pipe_input("k", "r", 5)  # A found its partner: no A+None later
    left.pipe_input("k2", "B", 100)  # waits for a partner until 100 + 10
    assert read(driver, "output") == [["k", "A+r", 5]]
    left.pipe_input("k3", "C", 200)  # stream time 200: B's window closed
    assert read(driver, "output") == [["k2", "B+None", 100]]
    right.pipe_input("k9", "z", 150)  # a right record without partner: the inner side, nothing
    assert read(driver, "output") == []


def test_outer_join_emits_both_sides_unmatched() -> None:
    driver, left, right = stream_stream("outer_join", JoinWindows.of_time_difference_and_grace(10, 0))
    right.pipe_input("k", "R", 0)
    left.pipe_input("other", "L", 50)
    left.pipe_input("late", "X", 20)  # its window (20 + 10 < 50) closed already: emitted at once
    assert read(driver, "output") == [["k", "None+R", 0], ["late", "X+None", 20]]


def test_stream_table_join_uses_the_stream_timestamp() -> None:
    for mode, expected in (
        ("join", [["k", "s+v1", 5]]),
        ("left_join", [["k", "s+v1", 5], ["x", "t+None", 6]]),
    ):
        builder = StreamsBuilder()
        table = builder.table("table")
        getattr(builder.stream("stream"), mode)(table, joined).to("output")
        driver = TopologyTestDriver(builder.build())
        driver.create_input_topic("table").pipe_input("k", "v1", 50)
        stream = driver.create_input_topic("stream")
        stream.pipe_input("k", "s", 5)
        stream.pipe_input("x", "t", 6)
        assert read(driver, "output") == expected, mode


def table_table(mode: str):
    builder = StreamsBuilder()
    getattr(builder.table("left"), mode)(builder.table("right"), joined).to_stream().to("output")
    driver = TopologyTestDriver(builder.build())
    return driver, driver.create_input_topic("left"), driver.create_input_topic("right")


def test_table_inner_join_tombstone_only_when_there_was_a_result() -> None:
    driver, left, right = table_table("join")
    left.pipe_input("k", "a", 1)
    right.pipe_input("k", "b", 2)
    left.pipe_input("k", None, 3)  # had a result: tombstone
    left.pipe_input("k", None, 4)  # no result any more: nothing
    left.pipe_input("x", "c", 5)
    right.pipe_input("x", None, 6)  # x never joined: nothing
    assert read(driver, "output") == [["k", "a+b", 2], ["k", None, 3]]


def test_table_left_join() -> None:
    driver, left, right = table_table("left_join")
    left.pipe_input("k", "a", 1)
    right.pipe_input("k", "b", 2)
    right.pipe_input("k", None, 3)
    left.pipe_input("k", None, 4)
    right.pipe_input("y", "only-right", 5)
    assert read(driver, "output") == [["k", "a+None", 1], ["k", "a+b", 2], ["k", "a+None", 3], ["k", None, 4]]


def test_table_outer_join() -> None:
    driver, left, right = table_table("outer_join")
    right.pipe_input("k", "b", 1)
    left.pipe_input("k", "a", 2)
    left.pipe_input("k", None, 3)
    right.pipe_input("k", None, 4)
    assert read(driver, "output") == [["k", "None+b", 1], ["k", "a+b", 2], ["k", "None+b", 3], ["k", None, 4]]


@pytest.mark.parametrize("mode", ["join", "left_join", "outer_join"])
def test_table_join_result_timestamp_is_the_max_of_both_sides(mode: str) -> None:
    driver, left, right = table_table(mode)
    right.pipe_input("k", "b", 40)
    left.pipe_input("k", "a", 10)
    assert read(driver, "output")[-1] == ["k", "a+b", 40]


@pytest.mark.parametrize("side", ["this", "other"])
def test_a_regrouped_table_join_subtracts_the_old_result_of_a_filtered_side(side: str) -> None:
    # group_by needs the join's old results, made of both sides' old values: a side that is a filter of a
    # table must send them too, or a key would count in its old group forever
    builder = StreamsBuilder()
    groups = builder.table("groups").filter(lambda key, group: group is not None)
    sites = builder.table("sites")
    if side == "this":
        joined = groups.join(sites, lambda group, site: f"{group}@{site}")
    else:
        joined = sites.join(groups, lambda site, group: f"{group}@{site}")
    joined.group_by(lambda key, value: (value, 1)).count().to_stream().to("output")
    driver = TopologyTestDriver(builder.build())
    driver.create_input_topic("sites").pipe_input("k", "s", 1)
    groups_topic = driver.create_input_topic("groups")
    groups_topic.pipe_input("k", "g1", 2)
    groups_topic.pipe_input("k", "g2", 3)  # k leaves g1 for g2
    assert read(driver, "output") == [["g1@s", 1, 2], ["g1@s", 0, 3], ["g2@s", 1, 3]]


@pytest.mark.parametrize("mode", ["join", "left_join"])
def test_a_stream_table_join_batch_splits_the_windowed_keys_its_table_does_not_hold(mode: str) -> None:
    """A batch whose every key is found in a table of str keys holds no windowed key; one with a key the
    table lacks may (a left join forwards it), and its output splits it into key and window."""
    from spark_jobs.streams import StreamTask
    from spark_jobs.streams.records import make_windowed

    builder = StreamsBuilder()
    table = builder.table("table")
    getattr(builder.stream("stream"), mode)(table, joined).to("output")
    task = StreamTask(builder.build())
    task.process_batch("table", [f"k{i}" for i in range(40)], ["v"] * 40, [1] * 40)
    task.drain_output()
    keys = [f"k{i}" for i in range(40)]
    task.process_batch("stream", keys, ["s"] * 40, [2] * 40)
    found = task.drain_output()
    assert found.keys == keys and found.window_starts == [None] * 40
    task.process_batch("stream", [*keys, make_windowed("x", 0, 10)], ["s"] * 41, [3] * 41)
    out = task.drain_output()
    if mode == "left_join":
        assert out.keys == [*keys, "x"] and out.window_starts == [None] * 40 + [0]
        assert out.window_ends[-1] == 10 and out.values[-1] == "s+None"
    else:
        assert out.keys == keys and out.window_starts == [None] * 40


@pytest.mark.parametrize("mode", ["join", "left_join"])
def test_a_stream_table_join_batch_drops_null_keys_and_values_as_record_by_record(mode: str) -> None:
    """A batch looked up at once, None keys too: a record with a null key or value is dropped (counted),
    one whose key the table lacks joins None (left) or nothing (inner), in the order and with the drop
    count of the records processed one at a time."""
    from spark_jobs.streams import StreamTask

    def run(batched: bool):
        builder = StreamsBuilder()
        table = builder.table("table")
        getattr(builder.stream("stream"), mode)(table, joined).to("output")
        task = StreamTask(builder.build())
        task.process_batch("table", [f"k{i}" for i in range(0, 60, 2)], ["v"] * 30, [1] * 30)
        task.drain_output()
        keys = [None if i % 7 == 3 else f"k{i % 50}" for i in range(80)]
        values = [None if i % 11 == 4 else f"s{i}" for i in range(80)]
        if batched:
            task.process_batch("stream", keys, values, [2] * 80)
        else:
            for key, value in zip(keys, values, strict=True):
                task.process_batch("stream", [key], [value], [2])
        out = task.drain_output()
        return out.keys, out.values, out.timestamps, task.metrics()["dropped-records-total"]

    once = run(batched=True)
    assert once == run(batched=False)
    assert once[3] == 80 - len([i for i in range(80) if i % 7 != 3 and i % 11 != 4])
    assert ("k1" in once[0]) == (mode == "left_join")  # a key the table lacks


def test_a_stream_joined_with_a_windowed_table_drops_its_null_keys_without_looking_them_up() -> None:
    """A windowed table's getter reads a key's window: a batch's None keys are dropped (counted), never
    looked up, in a batch as record by record."""
    from spark_jobs.streams import StreamTask, TimeWindows
    from spark_jobs.streams.records import make_windowed

    def run(batched: bool):
        builder = StreamsBuilder()
        counts = (
            builder.stream("events").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10)).count()
        )
        builder.stream("probes").join(counts, joined).to("output")
        task = StreamTask(builder.build())
        task.process_batch("events", ["a", "b", "a"], [1, 1, 1], [1, 2, 3])
        task.drain_output()
        keys = [None if i % 5 == 2 else make_windowed("ab"[i % 2], 0, 10) for i in range(60)]
        if batched:
            task.process_batch("probes", keys, ["p"] * 60, [4] * 60)
        else:
            for key in keys:
                task.process_batch("probes", [key], ["p"], [4])
        out = task.drain_output()
        return out.keys, out.values, out.window_starts, task.metrics()["dropped-records-total"]

    once = run(batched=True)
    assert once == run(batched=False)
    assert once[3] == 12 and once[1][:2] == ["p+2", "p+1"]


@pytest.mark.parametrize("kind", ["str", "int"])
def test_a_large_stream_stream_join_batch_with_null_keys_and_values_equals_the_records_one_by_one(
    kind,
) -> None:
    """A batch numbered with its None keys (numbered -1 in the key table, or left out and numbered again
    where the keys are not str) joins, drops and counts as the records processed one at a time."""
    from spark_jobs.streams import StreamTask

    def key(i: int):
        if i % 13 == 5:
            return None
        return f"k{i % 97}" if kind == "str" else i % 97

    def run(batched: bool):
        builder = StreamsBuilder()
        left, right = builder.stream("left"), builder.stream("right")
        left.join(right, joined, JoinWindows.of_time_difference_and_grace(50, 10)).to("output")
        task = StreamTask(builder.build())
        rows = []
        for topic, offset in (("right", 0), ("left", 1), ("right", 2)):
            n = 3000
            keys = [key(i + offset) for i in range(n)]
            values = [None if i % 17 == 3 else f"{topic}{i}" for i in range(n)]
            stamps = [i // 10 for i in range(n)]
            if batched:
                task.process_batch(topic, keys, values, stamps)
            else:
                for k, v, t in zip(keys, values, stamps, strict=True):
                    task.process_batch(topic, [k], [v], [t])
            out = task.drain_output()
            rows.append((out.keys, out.values, out.timestamps))
        return rows, task.metrics()["dropped-records-total"]

    once = run(batched=True)
    assert once == run(batched=False)
    assert once[1] > 0 and all(rows[0] for rows in once[0][1:])
