"""StreamTask: the interface of docs/TASK_INTERFACE.md."""

from __future__ import annotations

import pytest

from spark_jobs.streams import JoinWindows, Record, StreamsBuilder, Windowed
from spark_jobs.streams.runtime.task import OutputBatch, StreamTask

from .helpers import sensor_topology


def test_output_batch_is_columnar_with_windows_split_out() -> None:
    task = StreamTask(sensor_topology(size=10, grace=0))
    task.process_batch("readings", ["a", "b"], [1, 2], [3, 4])
    out = task.drain_output()
    assert isinstance(out, OutputBatch) and len(out) == 2
    assert out.topics == ["counts", "counts"]
    assert out.keys == ["a", "b"] and out.values == [1, 1] and out.timestamps == [3, 4]
    assert out.window_starts == [0, 0] and out.window_ends == [10, 10]
    assert out.seqs == [0, 1]
    topic, record = out.records()[0]
    assert topic == "counts" and record == Record(Windowed("a", (0, 10)), 1, 3)
    assert len(task.drain_output()) == 0


def test_non_windowed_output_has_no_window_columns_and_seqs_continue() -> None:
    builder = StreamsBuilder()
    builder.stream("in").map_values(str).to("out")
    task = StreamTask(builder.build())
    task.process("in", "k", 1, 10, headers={"h": b"1"})
    first = task.drain_output()
    task.process_batch("in", ["x", "y"], [2, 3], [11, 12])
    second = task.drain_output()
    assert first.window_starts == [None] and first.window_ends == [None] and first.headers == [{"h": b"1"}]
    assert first.seqs == [0] and second.seqs == [1, 2]
    assert second.values == ["2", "3"]


def test_a_running_count_of_windowed_keys_outputs_them_split_after_str_keys_and_alongside_them() -> None:
    """A running count says its key column holds str keys only while its key table numbers them; keys of
    other types (here `Windowed` ones, whose windows the output splits out) end that."""
    builder = StreamsBuilder()
    builder.stream("in").group_by_key().count().to_stream().to("out")
    task = StreamTask(builder.build())
    task.process_batch("in", ["a", "b", "a"], [1, 1, 1], [1, 2, 3])
    first = task.drain_output()
    assert first.keys == ["a", "b", "a"] and first.values == [1, 1, 2] and first.window_starts == [None] * 3
    windowed = Windowed("a", (0, 10))
    task.process_batch("in", [windowed, "b"], [1, 1], [4, 5])
    second = task.drain_output()
    assert second.keys == ["a", "b"] and second.values == [1, 2]
    assert second.window_starts == [0, None] and second.window_ends == [10, None]
    task.process_batch("in", [windowed], [1], [6])
    assert task.drain_output().records() == [("out", Record(windowed, 2, 6))]


def test_negative_timestamps_are_dropped_and_counted_in_batches() -> None:
    task = StreamTask(sensor_topology(size=10, grace=0))
    task.process_batch("readings", ["a", "b", "c"], [1, 2, 3], [5, -1, 6])
    assert task.drain_output().keys == ["a", "c"]
    assert task.metrics()["dropped-records-total"] == 1
    assert task.stream_time == 6


def test_a_batch_of_lists_or_of_other_sequences_gives_one_output_and_leaves_the_lists_unchanged() -> None:
    """process_batch takes lists as they are (no copy) and reads them only; tuples are copied into lists."""
    keys, values, timestamps = ["a", "b", "a", "c"], [1, 2, 3, 4], [5, 9, 7, -1]
    as_lists, as_tuples = (StreamTask(sensor_topology(size=10, grace=0)) for _ in range(2))
    as_lists.process_batch("readings", keys, values, timestamps)
    as_tuples.process_batch("readings", tuple(keys), tuple(values), tuple(timestamps))
    assert as_lists.drain_output().records() == as_tuples.drain_output().records()
    assert as_lists.stream_time == as_tuples.stream_time == 9
    assert (keys, values, timestamps) == (["a", "b", "a", "c"], [1, 2, 3, 4], [5, 9, 7, -1])


def test_unknown_topic_and_unequal_columns_raise() -> None:
    task = StreamTask(sensor_topology())
    with pytest.raises(ValueError, match="not an input"):
        task.process("nope", "k", 1, 1)
    with pytest.raises(ValueError, match="equal lengths"):
        task.process_batch("readings", ["a"], [1, 2], [1])


def test_wall_clock_never_moves_backwards() -> None:
    task = StreamTask(sensor_topology(), initial_wall_clock_ms=100)
    task.advance_wall_clock_to(50)
    assert task.wall_clock == 100
    task.advance_wall_clock_to(150)
    assert task.wall_clock == 150


def test_several_topics_merge_by_head_timestamp_ties_to_the_first_declared() -> None:
    builder = StreamsBuilder()
    left, right = builder.stream("left"), builder.stream("right")
    left.map_values(lambda v: ("L", v)).merge(right.map_values(lambda v: ("R", v))).to("out")
    task = StreamTask(builder.build())
    task.process_topics(
        {"right": (["r", "r", "r"], [1, 2, 3], [5, 10, 10]), "left": (["l", "l"], [1, 2], [10, 3])}
    )
    out = task.drain_output()
    # heads: R5 vs L10 -> R5; R10 vs L10 -> tie: left declared first -> L10; then L3 (head of left) < R10 ...
    assert out.values == [("R", 1), ("L", 1), ("L", 2), ("R", 2), ("R", 3)]


def test_join_topics_processed_together_match_the_driver() -> None:
    builder = StreamsBuilder()
    builder.stream("left").join(
        builder.stream("right"),
        lambda left, right: left + right,
        JoinWindows.of_time_difference_with_no_grace(5),
    ).to("out")
    task = StreamTask(builder.build())
    task.process_topics({"left": (["k", "k"], ["a", "b"], [1, 20]), "right": (["k"], ["x"], [4])})
    out = task.drain_output()
    assert list(zip(out.values, out.timestamps, strict=False)) == [("ax", 4)]


def test_restore_refuses_another_topology() -> None:
    task = StreamTask(sensor_topology())
    builder = StreamsBuilder()
    builder.stream("readings").to("elsewhere")
    with pytest.raises(ValueError, match="different topology"):
        StreamTask.restore(builder.build(), task.snapshot())
    with pytest.raises(ValueError, match="not a StreamTask snapshot"):
        StreamTask.restore(sensor_topology(), b"garbage")
