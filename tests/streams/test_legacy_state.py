"""State parts of earlier engines still load.

- `data/suppress_parts_v2_fields.pickle` (before 2026-11-23): suppress buffer entries saved a column per
  field, window aggregates as three columns (keys, aggregates, max timestamps). Written by commit cbc9e33's
  engine: the parts `export_state()` wrote after the first CUT records, per topology `_topology` builds.
- `data/window_parts_v3_entries.pickle` (before 2026-11-24): both stores' entries saved by key, as
  `(keys, entry tuples)`, since replaced by rows (nodes/window_rows.py). Written by commit a234958's engine:
  the store of parts (bases, then deltas) after exports every 10 records up to CUT.
  `data/window_snapshots_v3_entries.pickle`: that engine's `snapshot()` of the same tasks at CUT.
- `data/window_parts_v4_rows.pickle` (before 2026-11-24 14:00): rows (nodes/window_rows.py), a final
  buffer fed by a count holding its new, old and prior values in list columns, since int64 columns.
  Written by commit e1815b6's engine as the v3 fixtures were; `data/window_snapshots_v4_rows.pickle`: its
  `snapshot()` of the same tasks at CUT.
- `data/window_snapshots_v5_int64.pickle` (before 2026-11-25): the last snapshots in one pickle (magic
  "STK1": the task state and each node's `snapshot_state()`; int64 value columns), since a container of the
  parts an export writes. Written by commit d465de0's engine, after exports every 10 records up to CUT.

A task imported from them must go on exactly as a task that never stopped.
"""

from __future__ import annotations

import pickle
import random
from pathlib import Path

import pytest

import spark_jobs.streams as streams

DATA = Path(__file__).parent / "data" / "suppress_parts_v2_fields.pickle"
FIXTURES = [
    DATA,
    Path(__file__).parent / "data" / "window_parts_v3_entries.pickle",
    Path(__file__).parent / "data" / "window_parts_v4_rows.pickle",
]
SNAPSHOTS = [
    Path(__file__).parent / "data" / "window_snapshots_v3_entries.pickle",
    Path(__file__).parent / "data" / "window_snapshots_v4_rows.pickle",
    Path(__file__).parent / "data" / "window_snapshots_v5_int64.pickle",
]

_rng = random.Random(11)
RECORDS = [
    (f"key-{_rng.randrange(30)}", _rng.randrange(100), max(0, i * 3 - _rng.choice([0, 0, 0, 7, 40])))
    for i in range(600)
]
CUT = 350
BUFFER = "KTABLE-SUPPRESS-0000000002"


def _topology(st, name: str):
    """count() of the records, per window but for "time_limit", suppressed into "out" ("reducing": a sum that
    turns null now and then, per tumbling window, also to "sums")."""
    builder = st.StreamsBuilder()
    grouped = builder.stream("in").group_by_key()
    windows = {
        "tumbling": lambda: st.TimeWindows.of_size_and_grace(100, 20),
        "hopping": lambda: st.TimeWindows.of_size_and_grace(90, 10).advance_by(30),
        "session": lambda: st.SessionWindows.of_inactivity_gap_and_grace(15, 30),
    }
    if name == "reducing":  # a null aggregate deletes its entry: parts that remove keys
        table = grouped.windowed_by(windows["tumbling"]()).reduce(
            lambda a, b: None if (a + b) % 7 == 0 else a + b
        )
        table.to_stream().to("sums")
    else:
        table = grouped.windowed_by(windows[name]()).count() if name in windows else grouped.count()
    if name == "time_limit":
        suppressed = st.Suppressed.until_time_limit(
            50, st.BufferConfig.max_records(12).emit_early_when_full()
        )
    elif name == "hopping":
        suppressed = st.Suppressed.until_window_closes(
            st.BufferConfig.max_records(10_000).shut_down_when_full()
        )
    else:
        suppressed = st.Suppressed.until_window_closes(st.BufferConfig.unbounded())
    table.suppress(suppressed).to_stream().to("out")
    return builder.build()


TOPOLOGIES = ["hopping", "session", "time_limit", "tumbling"]
V3_TOPOLOGIES = [*TOPOLOGIES, "reducing"]  # the v3 fixtures also have parts that remove keys


def _feed(task, records) -> list[tuple]:
    keys, values, timestamps = zip(*records, strict=True)
    task.process_batch("in", list(keys), list(values), list(timestamps))
    return [(topic, r.key, r.value, r.timestamp) for topic, r in task.drain_output().records()]


@pytest.mark.parametrize(
    ("fixture", "name"),
    [(FIXTURES[0], name) for name in TOPOLOGIES]
    + [(fixture, name) for fixture in FIXTURES[1:] for name in V3_TOPOLOGIES],
    ids=lambda value: value.stem if isinstance(value, Path) else value,
)
def test_parts_of_earlier_engines_load_and_go_on_as_the_task_that_wrote_them(fixture, name) -> None:
    parts = pickle.loads(fixture.read_bytes())[name]
    topology = _topology(streams, name)
    imported = streams.StreamTask.import_state(topology, parts)
    # saved again in today's form and loaded: what the old parts removed must stay removed
    resaved = streams.StreamTask.restore(topology, imported.snapshot())
    never_stopped = streams.StreamTask(topology)
    _feed(never_stopped, RECORDS[:CUT])
    expected = _feed(never_stopped, RECORDS[CUT:])
    assert expected, "the records after the cut close windows: output to compare"
    for task in (imported, resaved):
        assert _feed(task, RECORDS[CUT:]) == expected
        assert task.metrics() == never_stopped.metrics()


def test_a_part_of_removed_keys_only_saved_a_column_per_field_loads() -> None:
    """A delta that only removed keys saved its columns empty (no window start to read the window from)."""
    parts = dict(pickle.loads(DATA.read_bytes())["tumbling"])
    base_name = next(name for name in parts if name.startswith(f"{BUFFER}/"))
    columns, _ = pickle.loads(parts[base_name])
    gone = columns["keys"][0]
    empty = {field: None if column is None else column[:0] for field, column in columns.items()}
    parts[base_name.replace(".0", ".1")] = pickle.dumps((empty, [gone]))
    buffer = streams.StreamTask.import_state(_topology(streams, "tumbling"), parts).nodes[BUFFER].buffer
    (bucket,) = buffer.buckets.values()
    assert sorted(bucket.index) == sorted(columns["keys"][1:])


@pytest.mark.parametrize("snapshots", SNAPSHOTS, ids=lambda path: path.stem)
@pytest.mark.parametrize("name", V3_TOPOLOGIES)
def test_snapshots_of_earlier_engines_restore(name, snapshots) -> None:
    topology = _topology(streams, name)
    blob = pickle.loads(snapshots.read_bytes())[name]
    restored = streams.StreamTask.restore(topology, blob)
    never_stopped = streams.StreamTask(topology)
    _feed(never_stopped, RECORDS[:CUT])
    assert _feed(restored, RECORDS[CUT:]) == _feed(never_stopped, RECORDS[CUT:])
    assert restored.metrics() == never_stopped.metrics()


@pytest.mark.parametrize("fixture", FIXTURES[1:], ids=lambda path: path.stem)
@pytest.mark.parametrize("name", V3_TOPOLOGIES)
def test_copies_loaded_from_earlier_parts_stay_in_step_on_the_new_parts(name, fixture) -> None:
    """Two copies import the same parts of an earlier engine (saved by key; rows with list value columns);
    one runs on and exports in today's form, the other catches up from that export: both must have
    numbered the rows alike."""
    parts = pickle.loads(fixture.read_bytes())[name]
    topology = _topology(streams, name)
    runner = streams.StreamTask.import_state(topology, parts)
    follower = streams.StreamTask.import_state(topology, parts)
    half = CUT + (len(RECORDS) - CUT) // 2
    first = _feed(runner, RECORDS[CUT:half])
    export = runner.export_state()
    follower.apply_state(export.parts, export.removed)
    never_stopped = streams.StreamTask(topology)
    _feed(never_stopped, RECORDS[:CUT])
    assert first == _feed(never_stopped, RECORDS[CUT:half])
    rest = _feed(never_stopped, RECORDS[half:])
    assert _feed(follower, RECORDS[half:]) == rest
    assert follower.metrics() == never_stopped.metrics()
