"""State parts written before 2026-11-23 (suppress buffer entries saved a column per field) still load.

`data/suppress_parts_v2_fields.pickle` holds, per topology below, the parts `export_state()` of commit
cbc9e33's engine wrote after the first CUT records (made by running this module's RECORDS through that
commit's spark_jobs.streams). A task imported from them must go on exactly as a task that never stopped.
"""

from __future__ import annotations

import pickle
import random
from pathlib import Path

import pytest

import spark_jobs.streams as streams

DATA = Path(__file__).parent / "data" / "suppress_parts_v2_fields.pickle"

_rng = random.Random(11)
RECORDS = [
    (f"key-{_rng.randrange(30)}", _rng.randrange(100), max(0, i * 3 - _rng.choice([0, 0, 0, 7, 40])))
    for i in range(600)
]
CUT = 350


def _count_suppressed(st, windowed, suppressed):
    builder = st.StreamsBuilder()
    grouped = builder.stream("in").group_by_key()
    table = windowed(st, grouped).count() if windowed else grouped.count()
    table.suppress(suppressed(st)).to_stream().to("out")
    return builder.build()


TOPOLOGIES = {
    "tumbling": lambda st: _count_suppressed(
        st,
        lambda st, g: g.windowed_by(st.TimeWindows.of_size_and_grace(100, 20)),
        lambda st: st.Suppressed.until_window_closes(st.BufferConfig.unbounded()),
    ),
    "hopping": lambda st: _count_suppressed(
        st,
        lambda st, g: g.windowed_by(st.TimeWindows.of_size_and_grace(90, 10).advance_by(30)),
        lambda st: st.Suppressed.until_window_closes(
            st.BufferConfig.max_records(10_000).shut_down_when_full()
        ),
    ),
    "session": lambda st: _count_suppressed(
        st,
        lambda st, g: g.windowed_by(st.SessionWindows.of_inactivity_gap_and_grace(15, 30)),
        lambda st: st.Suppressed.until_window_closes(st.BufferConfig.unbounded()),
    ),
    "time_limit": lambda st: _count_suppressed(
        st,
        None,
        lambda st: st.Suppressed.until_time_limit(50, st.BufferConfig.max_records(12).emit_early_when_full()),
    ),
}


def _feed(task, records) -> list[tuple]:
    keys, values, timestamps = zip(*records, strict=True)
    task.process_batch("in", list(keys), list(values), list(timestamps))
    return [(topic, r.key, r.value, r.timestamp) for topic, r in task.drain_output().records()]


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
def test_parts_saved_a_column_per_field_load_and_go_on_as_the_task_that_wrote_them(name) -> None:
    parts = pickle.loads(DATA.read_bytes())[name]
    topology = TOPOLOGIES[name](streams)
    imported = streams.StreamTask.import_state(topology, parts)
    never_stopped = streams.StreamTask(topology)
    _feed(never_stopped, RECORDS[:CUT])
    expected = _feed(never_stopped, RECORDS[CUT:])
    assert expected, "the records after the cut close windows: output to compare"
    assert _feed(imported, RECORDS[CUT:]) == expected
    assert imported.metrics() == never_stopped.metrics()
