"""Properties of the semantics, checked on random inputs (hypothesis)."""

from __future__ import annotations

import os
from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_jobs.streams import (
    BufferConfig,
    Processor,
    PunctuationType,
    Record,
    SessionWindows,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    TopologyTestDriver,
    next_aligned,
)
from spark_jobs.streams.runtime.task import StreamTask
from spark_jobs.streams.timeutil import INT64_MAX

from .helpers import recorder_topology, run_task

# STREAMS_PROPERTY_EXAMPLES raises the number of examples for a longer local hunt.
PROPERTY = settings(
    max_examples=int(os.environ.get("STREAMS_PROPERTY_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@PROPERTY
@given(
    t=st.one_of(st.integers(-(10**6), 10**6), st.integers(INT64_MAX - 10**6, INT64_MAX)),
    interval=st.one_of(st.integers(1, 1000), st.integers(1, 2**62)),
    shift=st.integers(-(2**63), 2**63 - 1),
)
def test_next_aligned_is_the_smallest_boundary_not_before_t(t: int, interval: int, shift: int) -> None:
    boundary = next_aligned(t, interval, shift)
    assert boundary >= t
    assert (boundary - shift) % interval == 0
    assert boundary - interval < t


@PROPERTY
@given(
    interval=st.integers(1, 50),
    shift=st.one_of(st.none(), st.integers(-100, 100)),
    start=st.integers(0, 1000),
    advances=st.lists(st.integers(0, 120), min_size=1, max_size=40),
)
def test_wall_clock_schedule_fires_once_per_check_and_per_boundary_crossed(
    interval, shift, start, advances
) -> None:
    topology, made = recorder_topology(interval=interval, shift=shift, type_=PunctuationType.WALL_CLOCK_TIME)
    driver = TopologyTestDriver(topology, initial_wall_clock_ms=start)
    # the grid: boundaries k*interval + shift (aligned) or start + k*interval (legacy); first due >= start
    grid_shift = start % interval if shift is None else shift
    due = next_aligned(start + (interval if shift is None else 0), interval, grid_shift)
    now = start
    for advance in advances:
        before = len(made[0].punctuations)
        driver.advance_wall_clock_time(advance)
        now += advance
        fired = made[0].punctuations[before:]
        assert len(fired) <= 1
        if now >= due:  # some boundary in (previous check, now] was crossed
            assert fired == [now]
            due = next_aligned(now + 1, interval, grid_shift)  # smallest boundary strictly after now
        else:
            assert fired == []


@PROPERTY
@given(interval=st.integers(1, 10**12), offsets=st.lists(st.integers(0, 10**12), min_size=1, max_size=20))
def test_due_times_stay_within_int64(interval: int, offsets: list[int]) -> None:
    topology, made = recorder_topology(interval=interval, shift=0, type_=PunctuationType.WALL_CLOCK_TIME)
    driver = TopologyTestDriver(topology, initial_wall_clock_ms=INT64_MAX - sum(offsets))
    for offset in offsets:
        before = len(made[0].punctuations)
        driver.advance_wall_clock_time(offset)
        assert len(made[0].punctuations) - before <= 1
        due = driver.task.punctuation.schedules[0].due
        assert due is None or due <= INT64_MAX
    assert all(0 <= p <= INT64_MAX for p in made[0].punctuations)


@PROPERTY
@given(interval=st.integers(1, 30), timestamps=st.lists(st.integers(-5, 300), min_size=1, max_size=40))
def test_legacy_stream_time_schedule_fires_once_per_boundary_crossed(interval, timestamps) -> None:
    topology, made = recorder_topology(interval=interval)
    driver = TopologyTestDriver(topology)
    topic = driver.create_input_topic("input")
    stream_time, due = -1, 0
    for ts in timestamps:
        before = len(made[0].punctuations)
        topic.pipe_input("k", "v", ts)
        if ts >= 0:
            stream_time = max(stream_time, ts)
        fired = made[0].punctuations[before:]
        if stream_time >= due:
            assert fired == [stream_time]
            due = next_aligned(stream_time + 1, interval, 0)
        else:
            assert fired == []


keys = st.sampled_from(["a", "b", "c", "d", None])
records = st.lists(st.tuples(keys, st.integers(0, 9), st.integers(-3, 400)), max_size=60)


@st.composite
def time_windows(draw) -> TimeWindows:
    size = draw(st.integers(1, 60))
    windows = TimeWindows.of_size_and_grace(size, draw(st.integers(0, 40)))
    return windows.advance_by(draw(st.integers(1, size))) if draw(st.booleans()) else windows


def window_starts(ts: int, size: int, advance: int) -> list[int]:
    """Independent of the engine: every aligned start s with s <= ts < s + size."""
    return [s for s in range(0, ts + 1, advance) if s <= ts < s + size]


@PROPERTY
@given(windows=time_windows(), data=records)
def test_until_window_closes_emits_exactly_the_closed_windows_once(windows: TimeWindows, data) -> None:
    builder = StreamsBuilder()
    counts = builder.stream("input").group_by_key().windowed_by(windows).count()
    counts.to_stream().to("raw")
    counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream().to("finals")
    driver = TopologyTestDriver(builder.build())
    topic = driver.create_input_topic("input")
    for key, value, ts in data:
        topic.pipe_input(key, value, ts)

    # reference model
    observed, accepted_max = -1, -1
    count: dict = defaultdict(int)
    max_ts: dict = {}
    for key, _, ts in data:
        if ts < 0 or key is None:
            continue
        observed = max(observed, ts)
        for start in window_starts(ts, windows.size, windows.advance):
            if start + windows.size + windows.grace > observed:
                count[(key, start)] += 1
                max_ts[(key, start)] = max(max_ts.get((key, start), -1), ts)
                accepted_max = max(accepted_max, ts)
    expected = {
        (k, s): (c, max_ts[(k, s)])
        for (k, s), c in count.items()
        if s + windows.size + windows.grace <= accepted_max
    }

    finals = driver.create_output_topic("finals").read_records_to_list()
    emitted = [(r.key.key, r.key.window.start) for r in finals]
    assert len(emitted) == len(set(emitted))  # at most once
    assert {(r.key.key, r.key.window.start): (r.value, r.timestamp) for r in finals} == expected

    raw = driver.create_output_topic("raw").read_records_to_list()
    last: dict = {}
    for r in raw:  # aggregation output timestamps never decrease per (key, window)
        assert r.timestamp >= last.get(r.key, -1)
        last[r.key] = r.timestamp


class Summaries(Processor):
    def init(self, context) -> None:
        self.context = context
        self.seen: dict = {}
        context.schedule(25, PunctuationType.STREAM_TIME, self.emit, time_shift=5)

    def emit(self, now: int) -> None:
        self.context.forward(Record("summary", (now, self.context.stream_time(), sorted(self.seen.items()))))

    def process(self, record: Record) -> None:
        self.seen[str(record.key)] = self.seen.get(str(record.key), 0) + 1
        if record.value == 0:
            self.context.forward(record.with_value(("zero", self.context.stream_time())))


def rich_topology(windows: TimeWindows):
    """Hot-path operators plus a session aggregation, a time-limit suppress and a user-processor island."""
    builder = StreamsBuilder()
    readings = builder.stream("readings")
    readings.process(Summaries).to("summaries")
    valid = readings.filter(lambda k, v: v != 9).map_values(lambda v: v + 1)
    counts = valid.group_by_key().windowed_by(windows).count()
    counts.to_stream().to("counts")
    finals = counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream()
    finals.filter(lambda k, v: v < 3).to("alerts")
    finals.to("finals")
    sessions = valid.group_by_key().windowed_by(SessionWindows.of_inactivity_gap_and_grace(7, 11)).count()
    sessions.to_stream().to("sessions")
    totals = valid.group_by(lambda k, v: v % 3).aggregate(lambda: 0, lambda k, v, agg: agg + v)
    (totals.suppress(Suppressed.until_time_limit(13, BufferConfig.max_records(2))).to_stream().to("totals"))
    return builder.build()


cuts = st.lists(st.integers(0, 60), max_size=6)


@PROPERTY
@given(windows=time_windows(), data=records, cut_points=cuts)
def test_batches_give_the_same_output_as_record_by_record(windows, data, cut_points) -> None:
    topology = rich_topology(windows)
    assert run_task(topology, data, cuts=cut_points) == run_task(topology, data, per_record=True)


@PROPERTY
@given(windows=time_windows(), data=records, cut_points=cuts, snapshot_points=cuts)
def test_snapshot_and_restore_at_any_point_change_no_output(
    windows, data, cut_points, snapshot_points
) -> None:
    topology = rich_topology(windows)
    expected = run_task(topology, data, cuts=cut_points)
    assert run_task(topology, data, cuts=cut_points, snapshot_at=snapshot_points) == expected


def _metrics_after(topology, data, cut_points=(), per_record=False) -> dict:
    task = StreamTask(topology)
    bounds = sorted(set([0, len(data), *cut_points]) & set(range(len(data) + 1)))
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        chunk = data[lo:hi]
        if per_record:
            for key, value, ts in chunk:
                task.process("readings", key, value, ts)
        else:
            task.process_batch(
                "readings", [r[0] for r in chunk], [r[1] for r in chunk], [r[2] for r in chunk]
            )
    return task.metrics()


@PROPERTY
@given(windows=time_windows(), data=records, cut_points=cuts)
def test_batches_give_the_same_metrics_as_record_by_record(windows, data, cut_points) -> None:
    """Suppress samples its buffer after every put and eviction pass: the averages and maxima (which a
    batch accumulates lazily) and the drop counts must not depend on how the input was cut."""
    topology = rich_topology(windows)
    assert _metrics_after(topology, data, cut_points) == _metrics_after(topology, data, per_record=True)
