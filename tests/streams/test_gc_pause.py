"""The cyclic collector's pause (runtime/gc_pause.py)."""

from __future__ import annotations

import gc

from spark_jobs.streams.runtime.gc_pause import no_cyclic_gc


class _Cycle:
    """An object in a reference cycle with itself, counting how many of its kind are alive."""

    alive = 0

    def __init__(self) -> None:
        self.me = self
        _Cycle.alive += 1

    def __del__(self) -> None:
        _Cycle.alive -= 1


def test_a_pause_nests_and_leaves_the_collector_as_it_found_it() -> None:
    assert gc.isenabled()
    with no_cyclic_gc():
        assert not gc.isenabled()
        with no_cyclic_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with no_cyclic_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_cyclic_garbage_made_in_pauses_is_collected_after_them() -> None:
    gc.collect()
    before = _Cycle.alive
    most = 0
    for _ in range(200):  # a job of many batches, each leaving cyclic garbage behind
        with no_cyclic_gc():
            for _ in range(1000):
                _Cycle()
        _ = []  # the process allocates after the pause: the young collection it starts finds the garbage
        most = max(most, _Cycle.alive - before)
    assert most <= 2 * 1000  # bounded by a pause's making, not by the job's length
