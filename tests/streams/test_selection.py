"""Record selection over several input topics (runtime/selection.py): the next record is the head with the
lowest timestamp, ties to the topic declared first (docs/semantics.md section 1)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_jobs.streams.runtime.selection import record_runs


def selected_by_heads(timestamps: list[list[int]]) -> list[tuple[int, int]]:
    """(topic, offset) of each record in the order the rule takes them, head by head."""
    heads = [0] * len(timestamps)
    taken = []
    while True:
        live = [topic for topic, column in enumerate(timestamps) if heads[topic] < len(column)]
        if not live:
            return taken
        pick = min(live, key=lambda topic: (timestamps[topic][heads[topic]], topic))
        taken.append((pick, heads[pick]))
        heads[pick] += 1


def selected_by_runs(timestamps: list[list[int]]) -> list[tuple[int, int]]:
    return [(topic, at) for topic, start, end in record_runs(timestamps) for at in range(start, end)]


@given(st.lists(st.lists(st.integers(-3, 30), max_size=60), min_size=1, max_size=4))
def test_runs_take_the_records_in_the_order_of_the_lowest_head_ties_to_the_first_topic(timestamps) -> None:
    """Out-of-order timestamps within a topic, ties across topics, topics without records."""
    assert selected_by_runs(timestamps) == selected_by_heads(timestamps)


@given(st.lists(st.lists(st.integers(0, 30), max_size=60), min_size=2, max_size=4))
def test_runs_are_the_longest_of_one_topic(timestamps) -> None:
    """Consecutive runs are of different topics, none empty: a topic's consecutive records are one run."""
    runs = record_runs(timestamps)
    assert all(end > start for _, start, end in runs)
    assert all(a[0] != b[0] for a, b in zip(runs, runs[1:], strict=False))


def test_examples() -> None:
    # heads 5 (topic 1) vs 10 (topic 0): topic 1; 10 vs 10: the topic declared first; then 3 < 10 ...
    assert record_runs([[10, 3], [5, 10, 10]]) == [(1, 0, 1), (0, 0, 2), (1, 1, 3)]
    assert record_runs([[], [4, 2]]) == [(1, 0, 2)]
    assert record_runs([[], []]) == []


def test_timestamps_beyond_int64_are_refused() -> None:
    with pytest.raises(ValueError, match="int64"):
        record_runs([[1], [1 << 63]])
