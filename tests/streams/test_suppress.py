"""Suppress (docs/semantics.md section 5)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_jobs.streams import (
    BufferConfig,
    BufferFullError,
    SessionWindows,
    StreamsBuilder,
    StreamTask,
    Suppressed,
    TimeWindows,
    TopologyTestDriver,
)
from spark_jobs.streams.nodes.suppress import SuppressNode
from spark_jobs.streams.nodes.time_ordered_buffer import PRIOR_COLUMN
from spark_jobs.streams.records import Window, Windowed
from spark_jobs.streams.serde import key_bytes

from .helpers import read


def table_suppress(suppressed: Suppressed, topic: str = "input"):
    builder = StreamsBuilder()
    builder.table(topic).suppress(suppressed.with_name("buffer")).to_stream().to("output")
    driver = TopologyTestDriver(builder.build())
    return driver, driver.create_input_topic(topic)


def test_time_limit_is_not_reset_by_updates() -> None:
    driver, topic = table_suppress(Suppressed.until_time_limit(10, BufferConfig.unbounded()))
    topic.pipe_input("k", "v1", 0)
    topic.pipe_input("k", "v2", 5)
    topic.pipe_input("k", "v3", 9)
    assert read(driver, "output") == []
    topic.pipe_input("other", "x", 10)  # 0 <= 10 - 10: k goes out, with its latest value and timestamp
    assert read(driver, "output") == [["k", "v3", 9]]
    topic.pipe_input("k", "v4", 12)  # buffered afresh: emitted at 22
    topic.pipe_input("other", "y", 19)
    assert read(driver, "output") == []
    topic.pipe_input("other", "y2", 21)  # other keeps buffer time 10: out at 20 <= 21, with its latest value
    assert read(driver, "output") == [["other", "y2", 21]]
    topic.pipe_input("other", "z", 22)
    assert read(driver, "output") == [["k", "v4", 12]]


def test_time_limit_forwards_tombstones() -> None:
    driver, topic = table_suppress(Suppressed.until_time_limit(1, BufferConfig.unbounded()))
    topic.pipe_input("k", "v", 0)
    topic.pipe_input("k", None, 1)
    topic.pipe_input("x", "v", 2)
    assert read(driver, "output") == [["k", None, 1]]


def test_until_window_closes_drops_tombstones() -> None:
    builder = StreamsBuilder()
    counts = (
        builder.stream("input")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(10))
        .reduce(lambda agg, value: None if value == "delete" else value)
    )
    counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream().to("output")
    driver = TopologyTestDriver(builder.build())
    topic = driver.create_input_topic("input")
    topic.pipe_input("a", "x", 1)
    topic.pipe_input("a", "delete", 2)  # the aggregate becomes null: a tombstone for [a@0/10]
    topic.pipe_input("b", "y", 3)
    topic.pipe_input("c", "z", 25)  # closes [0,10)
    assert read(driver, "output", stringify_keys=True) == [["[b@0/10]", "y", 3]]


def test_emit_early_takes_the_head_in_buffer_order_with_unsigned_key_bytes() -> None:
    # equal buffer times: order by serialized key, unsigned ("z" = 0x7a before "é" = 0xc3 0xa9)
    driver, topic = table_suppress(Suppressed.until_time_limit(1000, BufferConfig.max_records(2)))
    topic.pipe_input("é", 1, 5)
    topic.pipe_input("z", 2, 5)
    topic.pipe_input("a", 3, 5)
    topic.pipe_input("b", 4, 5)
    assert read(driver, "output") == [["a", 3, 5], ["b", 4, 5]]
    topic.pipe_input("c", 5, 4)  # an earlier buffer time goes first
    assert read(driver, "output") == [["c", 5, 4]]


def test_int_keys_compare_as_unsigned_big_endian() -> None:
    driver, topic = table_suppress(Suppressed.until_time_limit(1000, BufferConfig.max_records(1)))
    topic.pipe_input(-1, "minus one", 5)  # 0xff...ff
    topic.pipe_input(1, "one", 5)  # 0x00...01: smaller unsigned, emitted first
    assert read(driver, "output") == [[1, "one", 5]]


def test_shut_down_when_full_raises() -> None:
    driver, topic = table_suppress(
        Suppressed.until_time_limit(1000, BufferConfig.max_records(1).shut_down_when_full())
    )
    topic.pipe_input("a", "x", 1)
    with pytest.raises(BufferFullError, match="buffer exceeded its max capacity"):
        topic.pipe_input("b", "y", 2)


def test_entry_size_formula_and_metrics() -> None:
    # sizes are computed by a buffer with a byte limit (here one never reached)
    driver, topic = table_suppress(Suppressed.until_time_limit(1000, BufferConfig.max_bytes(10**9)))
    metrics = driver.metrics
    topic.pipe_input("k", "abc", 1)
    # 8 (buffer time) + 1 (key) + 0 (prior: none) + 3 (new) + 20 + len("input")
    first = 8 + 1 + 3 + 20 + 5
    assert metrics()["suppression-buffer-size-current"] == first
    topic.pipe_input("k", "de", 2)
    # the old value "abc" differs from the prior (none): counted; new "de"
    second = 8 + 1 + 3 + 2 + 20 + 5
    topic.pipe_input("j", "x", 3, headers={"h": b"xy"})
    third = 8 + 1 + 1 + 20 + 5 + (1 + 2)
    m = metrics()
    assert m["suppression-buffer-size-current"] == second + third
    assert m["suppression-buffer-size-max"] == second + third
    assert m["suppression-buffer-count-current"] == 2
    assert m["suppression-buffer-count-max"] == 2
    # one sample at init (0) and one after each put
    assert m["suppression-buffer-size-avg"] == pytest.approx((0 + first + second + second + third) / 4)
    assert m["suppression-buffer-count-avg"] == pytest.approx((0 + 1 + 1 + 2) / 4)
    assert m["suppression-buffer-size-current{processor-node-id=buffer}"] == second + third


def test_buffer_without_byte_limit_reports_sizes_to_the_driver() -> None:
    driver, topic = table_suppress(Suppressed.until_time_limit(1000, BufferConfig.max_records(5)))
    topic.pipe_input("k", "abc", 1)
    topic.pipe_input("j", "x", 3)
    m = driver.metrics()
    assert m["suppression-buffer-count-current"] == 2
    assert m["suppression-buffer-count-avg"] == pytest.approx((0 + 1 + 2) / 3)
    sizes = (8 + 1 + 3 + 20 + 5, 8 + 1 + 1 + 20 + 5)
    assert m["suppression-buffer-size-current"] == sum(sizes)
    assert m["suppression-buffer-size-avg"] == pytest.approx((0 + sizes[0] + sum(sizes)) / 3)


def test_task_without_byte_metrics_sizes_nothing_without_a_byte_bound() -> None:
    builder = StreamsBuilder()
    builder.table("input").suppress(
        Suppressed.until_time_limit(1000, BufferConfig.max_records(5)).with_name("buffer")
    ).to_stream().to("output")
    task = StreamTask(builder.build())
    task.process_batch("input", ["k", "j"], ["abc", "x"], [1, 3])
    m = task.metrics()
    assert m["suppression-buffer-count-current"] == 2
    assert not [name for name in m if name.startswith("suppression-buffer-size")]


def test_max_bytes_emits_early_when_strictly_exceeded() -> None:
    size = 8 + 1 + 3 + 20 + 5
    driver, topic = table_suppress(Suppressed.until_time_limit(1000, BufferConfig.max_bytes(size)))
    topic.pipe_input("k", "abc", 1)
    assert read(driver, "output") == []  # equal to the limit: kept
    topic.pipe_input("k", "abcd", 2)
    assert read(driver, "output") == [["k", "abcd", 2]]
    assert driver.metrics()["suppression-buffer-count-current"] == 0


def test_final_results_per_window_with_grace() -> None:
    builder = StreamsBuilder()
    counts = builder.stream("input").group_by_key().windowed_by(TimeWindows.of_size_and_grace(10, 5)).count()
    counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream().to("output")
    driver = TopologyTestDriver(builder.build())
    topic = driver.create_input_topic("input")
    for key, ts in [("a", 1), ("b", 2), ("a", 12), ("a", 3), ("b", 14)]:
        topic.pipe_input(key, "v", ts)
    assert read(driver, "output") == []
    topic.pipe_input("a", "v", 15)  # 10 + 5 <= 15: [0,10) closes; a (key bytes "a") before b
    assert read(driver, "output", stringify_keys=True) == [["[a@0/10]", 2, 3], ["[b@0/10]", 1, 2]]


def test_join_reads_the_last_emitted_value_of_a_suppressed_table() -> None:
    builder = StreamsBuilder()
    table = builder.table("table").suppress(Suppressed.until_time_limit(10, BufferConfig.unbounded()))
    builder.stream("stream").join(table, lambda left, right: f"{left}/{right}").to("output")
    driver = TopologyTestDriver(builder.build())
    tables, stream = driver.create_input_topic("table"), driver.create_input_topic("stream")
    tables.pipe_input("k", "v1", 0)
    stream.pipe_input("k", "s1", 1)  # nothing emitted yet for k: no join
    tables.pipe_input("other", "x", 10)  # k=v1 is emitted
    tables.pipe_input("k", "v2", 11)  # buffered: the join still sees v1
    stream.pipe_input("k", "s2", 12)
    assert read(driver, "output") == [["k", "s2/v1", 12]]


def _emission_order(windows, records) -> list[list[tuple[int, bytes]]]:
    """Feeds records one at a time to count -> suppress(until_window_closes); per record, the (window end,
    key bytes) of the finals it let out."""
    builder = StreamsBuilder()
    (
        builder.stream("input")
        .group_by_key()
        .windowed_by(windows)
        .count()
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .to("output")
    )
    task = StreamTask(builder.build())
    passes = []
    for key, ts in records:
        task.process_batch("input", [key], [1], [ts])
        passes.append([(r.key.window.end, key_bytes(r.key)) for _, r in task.drain_output().records()])
    return passes


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(["session", "hopping"]),
    st.lists(
        st.tuples(st.sampled_from(["a", "ab", "abc", "b", "é", "z" * 9]), st.integers(0, 400)),
        min_size=1,
        max_size=120,
    ),
)
def test_closed_windows_leave_in_end_then_key_bytes_order(kind, records) -> None:
    """Kafka's buffer order, (buffer time, key bytes), where windows share an end: sessions of different keys,
    and key bytes whose order differs from their keys' (the window start follows a shorter key)."""
    windows = (
        SessionWindows.of_inactivity_gap_and_grace(5, 10)
        if kind == "session"
        else TimeWindows.of_size_and_grace(30, 5).advance_by(10)
    )
    records = sorted(records, key=lambda r: r[1]) + [("flush", 10_000)]
    passes = _emission_order(windows, records)
    emitted = [item for one in passes for item in one]
    assert emitted, "the last record closes every window"
    for one in passes:
        assert one == sorted(one)
    ends = [end for end, _ in emitted]
    assert ends == sorted(ends)


def test_windows_ending_together_interleave_by_key_bytes() -> None:
    # sessions [0, 3] of "ab" and [3, 3] of "a" both end at 3. Their key bytes: b"a" then start 3, b"ab" then
    # start 0; the start's first byte (0) sorts before "b", so "a" leaves first, though "ab"'s window is older
    passes = _emission_order(
        SessionWindows.of_inactivity_gap_and_grace(2, 0),
        [("ab", 0), ("ab", 2), ("ab", 3), ("a", 3), ("z", 20)],
    )
    assert passes[-1] == [(3, b"a" + (3).to_bytes(8, "big")), (3, b"ab" + (0).to_bytes(8, "big"))]
    assert not any(passes[:-1])


def _final_stats(joined: bool):
    """Windowed user aggregates suppressed until their windows close, to a stream; `joined`: a stream
    also joins the suppressed table, reading it through the suppress node's value getter."""
    builder = StreamsBuilder()
    finals = (
        builder.stream("input")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(10, 0))
        .aggregate(lambda: {"n": 0}, lambda key, value, agg: {"n": agg["n"] + 1})
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    )
    finals.to_stream().to("output")
    if joined:
        builder.stream("probe").join(finals, lambda probe, stats: (probe, stats)).to("joined")
    return builder.build()


def test_a_final_buffer_keeps_prior_values_only_where_a_value_getter_reads_the_suppressed_table() -> None:
    """The prior value (the first put's old one) is what the suppress node's value getter answers while a
    key is buffered; where no node reads that getter, the buffer holds and saves none."""
    for joined in (False, True):
        task = StreamTask(_final_stats(joined))
        (suppress,) = (node for node in task.nodes.values() if isinstance(node, SuppressNode))
        task.process_batch("input", ["a", "b", "a"], [1, 1, 1], [1, 2, 3])
        task.drain_output()
        (rows,) = suppress.buffer.buckets.values()
        priors = rows.columns[PRIOR_COLUMN]
        assert suppress.buffer.drops_priors is not joined
        assert (PRIOR_COLUMN in suppress.buffer.unsaved_columns) is not joined
        if joined:
            assert priors == [{"n": 0}, {"n": 0}]  # the initializer's: each key's first old value
            assert suppress.get(Windowed("a", Window(0, 10))) == ({"n": 0}, -1)
        else:
            assert priors == [None, None]
            with pytest.raises(RuntimeError, match="no prior values"):
                suppress.get(Windowed("a", Window(0, 10)))
        copy = StreamTask.import_state(_final_stats(joined), task.export_state().parts)
        task.process_batch("input", ["b", "c"], [1, 1], [12, 13])  # [0, 10) closes
        copy.process_batch("input", ["b", "c"], [1, 1], [12, 13])
        assert task.drain_output().records() == copy.drain_output().records()
