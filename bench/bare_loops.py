"""Bare loops: a shape's state updates alone, record by record, in a plain dict, as the simplest hand-written
Python stream processor would make them.

A bare loop keeps its state in one dict keyed by the record's key (and window start), calls the shape's own
user functions where the shape has them, and does nothing else: no grace or late records, no suppression or
emission, no export, no garbage collection, one pass over all the records. It is a reference for the engine
benchmark (`bench/engine_bench.py`), not a peer: what the per-record work costs in Python before any engine
work, and, at many keys against few, what the memory hierarchy alone costs a processor that reaches each
key's state through a dict. Where a shape's work per record is the user's function (a user aggregate, a
joiner), that function reads state that is out of the caches at many keys whatever calls it: a cost that no
engine calling it per record removes.

Session windows and the stream-stream join have none: their per-record work (merging sessions, searching
the other side's window) is the engine's own, not a dict update.
"""

from __future__ import annotations

from collections.abc import Callable

from bench.jobs import hopping_stats

# The engine bench's windows (bench/engine_bench.py): tumbling for count, hopping by half their size.
WINDOW_MS = 600_000
ADVANCE_MS = 300_000
FIELD = hopping_stats.FIELD


def enrich(reading: dict, sensor: dict) -> dict:
    """The stream-table join's joiner: the reading with its sensor's fields."""
    return {**reading, **sensor}


def registry(keys: list) -> dict:
    """The stream-table join's table: a sensor per distinct key, in key order."""
    return {key: {"site": f"site-{i % 50}", "threshold": 25.0} for i, key in enumerate(sorted(set(keys)))}


def _count(keys: list, values: list, timestamps: list) -> dict:
    state: dict = {}
    get = state.get
    for key, ts in zip(keys, timestamps, strict=True):
        window = (key, ts - ts % WINDOW_MS)
        state[window] = get(window, 0) + 1
    return state


def _hopping_user(keys: list, values: list, timestamps: list) -> dict:
    initial, add = hopping_stats._initial, hopping_stats._add
    state: dict = {}
    get = state.get
    for key, value, ts in zip(keys, values, timestamps, strict=True):
        last = ts - ts % ADVANCE_MS
        for start in (last - ADVANCE_MS, last):  # the two windows of size 2 x advance holding ts
            window = (key, start)
            stats = get(window)
            state[window] = add(key, value, initial() if stats is None else stats)
    return state


def _hopping_builtin(keys: list, values: list, timestamps: list) -> dict:
    state: dict = {}
    get = state.get
    for key, value, ts in zip(keys, values, timestamps, strict=True):
        reading = value[FIELD]
        last = ts - ts % ADVANCE_MS
        for start in (last - ADVANCE_MS, last):
            window = (key, start)
            stats = get(window)
            state[window] = (
                (1, reading, reading)
                if stats is None
                else (stats[0] + 1, stats[1] + reading, max(stats[2], reading))
            )
    return state


def _running_count(keys: list, values: list, timestamps: list) -> dict:
    state: dict = {}
    get = state.get
    for key in keys:
        state[key] = get(key, 0) + 1
    return state


def _stream_table_join(table: dict) -> Callable[[list, list, list], list]:
    def join(keys: list, values: list, timestamps: list) -> list:
        get = table.get
        out = []
        for key, value in zip(keys, values, strict=True):
            sensor = get(key)
            if sensor is not None:
                out.append(enrich(value, sensor))
        return out

    return join


def bare_loop(shape: str, keys: list, values: list, timestamps: list) -> Callable[[], object] | None:
    """The bare loop of `shape` over the records, ready to time (a join's table is built here, untimed, as
    the engine bench processes the table before it times the stream); None for a shape without one."""
    if shape == "stream_table_join":
        loop = _stream_table_join(registry(keys))
    else:
        loop = LOOPS.get(shape)
        if loop is None:
            return None
    return lambda: loop(keys, values, timestamps)


LOOPS: dict[str, Callable[[list, list, list], object]] = {
    "count": _count,
    "hopping_user": _hopping_user,
    "hopping_builtin": _hopping_builtin,
    "running_count": _running_count,
}
