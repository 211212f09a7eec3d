"""A count's batch in one tumbling window, numbered a batch at a time
(`TimeWindowAggregateNode._count_in_one_window`), gives what the count's loop gives record by record:
outputs in order (the count's own and what its children make of them), drops, metrics and exported state."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_jobs.streams import BufferConfig, StreamsBuilder, StreamTask, Suppressed, TimeWindows
from spark_jobs.streams.nodes import aggregations
from spark_jobs.streams.nodes.aggregations import TimeWindowAggregateNode

from .helpers import draw_readings
from .test_final_window_count import decoded

TOPIC = "readings"


def counts_topology(size: int, grace: int, sibling: bool):
    """A count with two children (so it is not fused with its suppress): the raw counts to a topic, and
    the final ones below a threshold to another; with `sibling`, a branch beside the count, so that the
    outputs interleave by input record."""
    builder = StreamsBuilder()
    stream = builder.stream(TOPIC)
    counts = stream.group_by_key().windowed_by(TimeWindows.of_size_and_grace(size, grace)).count()
    counts.to_stream().to("counts")
    finals = counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    finals.filter(lambda key, n: n < 3).to_stream().to("few")
    if sibling:
        stream.map_values(lambda v: v).to("echo")
    return builder.build()


@contextlib.contextmanager
def one_window_from(n: int):
    saved = aggregations.ONE_WINDOW_MIN_ROWS
    aggregations.ONE_WINDOW_MIN_ROWS = n
    try:
        yield
    finally:
        aggregations.ONE_WINDOW_MIN_ROWS = saved


def records(task: StreamTask) -> list:
    return [(topic, r.key, r.value, r.timestamp, r.headers) for topic, r in task.drain_output().records()]


class Pair:
    """The same topology in two tasks: one numbering every one-window batch, one counting record by record."""

    def __init__(self, topology_of) -> None:
        self.topology_of = topology_of
        self.numbered = StreamTask(topology_of())
        self.looped = StreamTask(topology_of())
        self.batches_numbered = 0

    def run(self, keys, timestamps, headers=None) -> list:
        values = list(range(len(keys)))
        real = TimeWindowAggregateNode._count_in_one_window

        def counted(node, *args):
            out = real(node, *args)
            self.batches_numbered += out is not None
            return out

        with one_window_from(1), pytest.MonkeyPatch.context() as patch:
            patch.setattr(TimeWindowAggregateNode, "_count_in_one_window", counted)
            self.numbered.process_batch(TOPIC, keys, values, timestamps, headers)
        with one_window_from(10**9):
            self.looped.process_batch(TOPIC, keys, values, timestamps, headers)
        numbered, looped = records(self.numbered), records(self.looped)
        assert numbered == looped
        assert self.numbered.metrics() == self.looped.metrics()
        numbered_export, looped_export = self.numbered.export_state(), self.looped.export_state()
        assert decoded(numbered_export.parts) == decoded(looped_export.parts)
        assert numbered_export.removed == looped_export.removed
        return numbered

    def move(self) -> None:
        """Both tasks go on from a snapshot (a new task, its windows' key tables not built yet)."""
        self.numbered = StreamTask.restore(self.topology_of(), self.numbered.snapshot())
        self.looped = StreamTask.restore(self.topology_of(), self.looped.snapshot())


@st.composite
def batches(draw):
    """Batches of readings, most within one window of 100 ms, some across two, some late or out of order;
    some with headers, a null key or a key that is not a str."""
    out = []
    for keys, timestamps in draw_readings(
        draw,
        sensors=10,
        clock=300,
        batches=7,
        records=30,
        step=st.sampled_from([0, 1, 2, 5, 40]),
        lateness=st.sampled_from([0, 0, 0, 4, 30, 250]),
    ):
        odd = draw(st.sampled_from([None, None, None, None, "null key", "int key", "headers"]))
        headers = None
        if odd == "null key" and keys:
            keys[-1] = None
        elif odd == "int key" and keys:
            keys[0] = 7
        elif odd == "headers":
            headers = [{"h": b"1"}] * len(keys)
        out.append((keys, timestamps, headers))
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    grace=st.sampled_from([0, 10, 60]),
    sibling=st.booleans(),
    runs=batches(),
    moves=st.lists(st.booleans(), min_size=7, max_size=7),
)
def test_a_batch_in_one_window_counts_as_record_by_record(grace, sibling, runs, moves) -> None:
    pair = Pair(lambda: counts_topology(100, grace, sibling))
    for (keys, timestamps, headers), move in zip(runs, moves, strict=False):
        pair.run(keys, timestamps, headers)
        if move:
            pair.move()


def test_batches_in_one_held_window_are_numbered_and_others_loop() -> None:
    pair = Pair(lambda: counts_topology(100, 10, sibling=False))
    pair.run(["a", "b", "a"], [1, 2, 3])  # the window is new: the loop opens it
    assert pair.batches_numbered == 0
    out = pair.run(["b", "c", "a", "c"], [5, 4, 6, 7])  # in [0, 100), which the count holds
    assert pair.batches_numbered == 1
    assert [(key, value, old_ts) for _, (key, _), value, old_ts, _ in out] == [
        ("b", 2, 5),
        ("c", 1, 4),
        ("a", 3, 6),
        ("c", 2, 7),
    ]
    (count_node,) = (
        node for node in pair.numbered.nodes.values() if isinstance(node, TimeWindowAggregateNode)
    )
    assert count_node.buckets[0]._table  # its key table
    # composite keys (np.array would make these tuples one two-dimensional array), new and not str: the loop
    pair.run([("c", 1), ("d", 2), ("c", 1)], [8, 9, 10])
    pair.run(["b", None], [11, 12])  # a null key: the loop drops it
    pair.run(["c", 7], [13, 14])  # a key new to the window that is not a str: the loop
    assert pair.batches_numbered == 1
    pair.run(["a", "b", 7], [15, 16, 17])  # the window's keys are not all str: numbered by its index
    assert pair.batches_numbered == 2
    assert count_node.buckets[0]._table is False
    pair.run(["a", "z", "a"], [20, 120, 30])  # in two open windows: the loop; [0, 100) closes at 110
    assert pair.batches_numbered == 2
    assert 0 not in count_node.buckets
    dropped = pair.numbered.metrics()["dropped-records-total"]
    pair.run(["z", "late", "z", "y"], [150, 50, 111, 120])  # [100, 200), and a record of the closed one
    assert pair.batches_numbered == 3
    assert pair.numbered.metrics()["dropped-records-total"] == dropped + 1


def test_an_unhashable_key_raises_as_in_the_loop() -> None:
    task = StreamTask(counts_topology(100, 10, sibling=False))
    task.process_batch(TOPIC, ["a"], [0], [1])
    with one_window_from(1), pytest.raises(TypeError, match="unhashable"):
        task.process_batch(TOPIC, ["a", ["x"]], [0, 0], [2, 3])
