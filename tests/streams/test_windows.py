"""Windows and aggregations (docs/semantics.md section 4)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_jobs.streams import (
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TimeWindows,
    TopologyTestDriver,
    Window,
    Windowed,
)

from .helpers import pipe_all, read


def windowed_counts(windows, records, value_filter=None):
    builder = StreamsBuilder()
    stream = builder.stream("input")
    stream.group_by_key().windowed_by(windows).count().to_stream().to("output")
    driver = TopologyTestDriver(builder.build())
    pipe_all(driver, "input", records)
    return read(driver, "output", stringify_keys=True), driver.metrics()["dropped-records-total"]


def test_windows_of_a_record_ascend_by_start() -> None:
    hopping = TimeWindows.of_size_with_no_grace(10).advance_by(3)
    assert list(hopping.windows_for(11)) == [(3, 13), (6, 16), (9, 19)]
    assert list(hopping.windows_for(1)) == [(0, 10)]
    assert list(TimeWindows.of_size_with_no_grace(10).windows_for(25)) == [(20, 30)]


def test_windowed_key_string_is_kafkas() -> None:
    assert str(Windowed("sensor-1", Window(0, 120000))) == "[sensor-1@0/120000]"
    assert Windowed("a", Window(1, 2)).key == "a" and Windowed("a", Window(1, 2)).window.end == 2


def test_hopping_late_record_is_dropped_per_window() -> None:
    windows = TimeWindows.of_size_and_grace(10, 3).advance_by(5)
    # observed time 22: window [5,15) closed (15 + 3 <= 22), window [10,20) still open (20 + 3 > 22)
    out, dropped = windowed_counts(windows, [("k", "a", 22), ("k", "b", 13)])
    assert out == [["[k@15/25]", 1, 22], ["[k@20/30]", 1, 22], ["[k@10/20]", 1, 13]]
    assert dropped == 1


def test_grace_boundary_equality_drops() -> None:
    windows = TimeWindows.of_size_and_grace(10, 5)
    out, dropped = windowed_counts(windows, [("k", "a", 15), ("k", "b", 9), ("k", "c", 20), ("k", "d", 9)])
    # at observed 15, [0,10) closes at 10 + 5 = 15 <= 15: b is dropped; d too
    assert out == [["[k@10/20]", 1, 15], ["[k@20/30]", 1, 20]]
    assert dropped == 2


def test_result_timestamp_is_the_max_of_contributing_records() -> None:
    windows = TimeWindows.of_size_and_grace(100, 100)
    out, _ = windowed_counts(windows, [("k", "a", 50), ("k", "b", 10), ("k", "c", 70), ("k", "d", 20)])
    assert [row[2] for row in out] == [50, 50, 70, 70]


def test_null_keys_are_skipped_and_advance_no_time() -> None:
    windows = TimeWindows.of_size_and_grace(10, 0)
    out, dropped = windowed_counts(windows, [("k", "a", 5), (None, "x", 100), ("k", "b", 6)])
    assert out == [["[k@0/10]", 1, 5], ["[k@0/10]", 2, 6]]
    assert dropped == 1


def test_windowed_aggregate_gets_null_values() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("input")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(10))
        .aggregate(lambda: [], lambda k, v, agg: agg + [v])
        .to_stream()
        .to("output")
    )
    driver = TopologyTestDriver(builder.build())
    pipe_all(driver, "input", [("k", None, 1), ("k", "x", 2)])
    assert [row[1] for row in read(driver, "output")] == [[None], [None, "x"]]


def test_windowed_reduce() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("input")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(10))
        .reduce(lambda agg, v: agg + v)
        .to_stream()
        .to("output")
    )
    driver = TopologyTestDriver(builder.build())
    pipe_all(driver, "input", [("k", 1, 1), ("k", 2, 2), ("k", 3, 12)])
    assert read(driver, "output", stringify_keys=True) == [
        ["[k@0/10]", 1, 1],
        ["[k@0/10]", 3, 2],
        ["[k@10/20]", 3, 12],
    ]


def test_session_windows_merge_and_respect_grace() -> None:
    windows = SessionWindows.of_inactivity_gap_and_grace(10, 20)
    out, dropped = windowed_counts(
        windows, [("k", "a", 0), ("k", "c", 15), ("k", "d", 8), ("k", "b", 60), ("k", "e", 12)]
    )
    assert out == [
        ["[k@0/0]", 1, 0],
        ["[k@15/15]", 1, 15],  # 15 - 10 > 0: a session of its own
        # 8 is within the gap of both: they merge; each absorbed session is retracted at its own end
        ["[k@0/0]", None, 0],
        ["[k@15/15]", None, 15],
        ["[k@0/15]", 3, 15],
        ["[k@60/60]", 1, 60],
    ]
    # at 60, [0,15] has closed (15 + 10 + 20 <= 60): 12 cannot join it, and alone it is too late
    assert dropped == 1


def test_closed_sessions_are_not_merged_again() -> None:
    # gap 5, no grace: at observed 10, [0,0] is closed (0 + 5 <= 10); 5 opens [5,10] with [10,10] only
    out, dropped = windowed_counts(
        SessionWindows.of_inactivity_gap_with_no_grace(5), [("k", "a", 0), ("k", "b", 10), ("k", "c", 5)]
    )
    assert out == [["[k@0/0]", 1, 0], ["[k@10/10]", 1, 10], ["[k@10/10]", None, 10], ["[k@5/10]", 2, 10]]
    assert dropped == 0


def test_session_reduce_and_aggregate_with_merger() -> None:
    builder = StreamsBuilder()
    grouped = (
        builder.stream("input").group_by_key().windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 20))
    )
    grouped.aggregate(lambda: "", lambda k, v, agg: agg + v, lambda k, a, b: a + b).to_stream().to("output")
    driver = TopologyTestDriver(builder.build())
    pipe_all(driver, "input", [("k", "a", 0), ("k", "b", 10), ("k", "c", 5)])
    assert read(driver, "output", stringify_keys=True)[-1] == ["[k@0/10]", "abc", 10]


def brute_force_sliding_counts(timestamps: list[int], d: int) -> dict[tuple[int, int], int]:
    """For in-order input: the windows Kafka creates and their final counts (records in [start, start+d])."""
    windows = set()
    for t in timestamps:
        windows.add((max(0, t - d), max(0, t - d) + d))
        if any(t < u <= t + 1 + d for u in timestamps):
            windows.add((t + 1, t + 1 + d))
    return {(s, e): sum(1 for t in timestamps if s <= t <= e) for s, e in windows}


def test_sliding_window_counts_match_their_definition() -> None:
    d = 10
    timestamps = [10, 15, 20, 22, 30, 45, 46, 60]
    out, dropped = windowed_counts(
        SlidingWindows.of_time_difference_and_grace(d, 100),
        [("A", str(i), t) for i, t in enumerate(timestamps)],
    )
    final: dict[str, int] = {}
    for key, count, _ in out:
        final[key] = count
    expected = {f"[A@{s}/{e}]": c for (s, e), c in brute_force_sliding_counts(timestamps, d).items()}
    assert final == expected
    assert dropped == 0


def test_sliding_window_drops_records_beyond_grace() -> None:
    out, dropped = windowed_counts(
        SlidingWindows.of_time_difference_and_grace(10, 5),
        [("A", "x", 100), ("A", "late", 84), ("A", "ok", 95)],
    )
    # drop iff ts + d < observed - grace: 84 + 10 < 95; 95 is kept: its left window [85,95], the window
    # [90,100] it falls in, and its right window [96,106] (holding x) are updated or created
    assert out == [
        ["[A@90/100]", 1, 100],
        ["[A@90/100]", 2, 100],
        ["[A@85/95]", 1, 95],
        ["[A@96/106]", 1, 100],
    ]
    assert dropped == 1


def test_non_windowed_aggregations_skip_null_keys_and_values() -> None:
    builder = StreamsBuilder()
    builder.stream("input").group_by_key().count().to_stream().to("output")
    driver = TopologyTestDriver(builder.build())
    pipe_all(driver, "input", [("a", "x", 5), (None, "x", 6), ("a", None, 7), ("a", "y", 3)])
    assert read(driver, "output") == [["a", 1, 5], ["a", 2, 5]]  # a late record does not lower the time
    assert driver.metrics()["dropped-records-total"] == 2


@settings(max_examples=200, deadline=None)
@given(
    shape=st.tuples(st.integers(1, 40), st.integers(1, 40), st.integers(0, 30)).filter(
        lambda s: s[1] <= s[0]
    ),
    timestamps=st.lists(st.integers(0, 300), max_size=40),
)
def test_the_node_keeps_the_pairs_of_open_windows_as_time_windows_pairs_says(shape, timestamps) -> None:
    """The windowed aggregation's loop (its windows per record reused while they stay open) keeps exactly
    the (record, window) pairs that TimeWindows.pairs finds open at the node's observed time."""
    size, advance, grace = shape
    windows = TimeWindows.of_size_and_grace(size, grace).advance_by(advance)
    builder = StreamsBuilder()
    builder.stream("input").group_by_key().windowed_by(windows).count().to_stream().to("output")
    driver = TopologyTestDriver(builder.build())
    topic = driver.create_input_topic("input")
    for i, ts in enumerate(timestamps):
        topic.pipe_input(f"k{i % 3}", i, ts)
    kept = [(r.key[0], r.key[1][0]) for r in driver.create_output_topic("output").read_records_to_list()]
    ts = np.array(timestamps, np.int64)
    rec, start, open_ = windows.pairs(ts, np.maximum.accumulate(ts) if len(ts) else ts)
    expected = [
        (f"k{r % 3}", s) for r, s, o in zip(rec.tolist(), start.tolist(), open_.tolist(), strict=True) if o
    ]
    assert kept == expected
    assert driver.metrics()["dropped-records-total"] == int((~open_).sum())
