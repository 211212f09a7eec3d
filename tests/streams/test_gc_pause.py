"""The cyclic collector's pause (runtime/gc_pause.py): objects a pause leaves alive are set aside, and cyclic
garbage made in pauses is still collected, within a bound, in a job made of many pauses."""

from __future__ import annotations

import gc

from spark_jobs.streams.runtime import gc_pause
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


def test_what_a_pause_leaves_alive_is_out_of_the_young_collections_reach() -> None:
    with no_cyclic_gc():
        kept = [[] for _ in range(1000)]
    assert gc.get_count()[0] < 1000  # not counted towards the next young collection
    assert not any(gc.is_tracked(obj) and obj in gc.get_objects(0) for obj in kept[:10])


def test_cyclic_garbage_made_in_many_pauses_is_collected_within_a_bound(monkeypatch) -> None:
    monkeypatch.setattr(gc_pause, "MIN_SET_ASIDE", 1000)
    gc.collect()
    before = _Cycle.alive
    live = len(gc.get_objects()) + gc.get_freeze_count()  # tracked objects, set aside or not: no garbage
    most = 0
    for _ in range(1000):  # a job of many batches, each leaving cyclic garbage behind
        with no_cyclic_gc():
            for _ in range(100):
                _Cycle()
        most = max(most, _Cycle.alive - before)
    # 100,000 made (two tracked objects each: the instance and its __dict__); what waits for a collection
    # is bounded by a share of the live objects (and one pause's making, counted at its end), not by the
    # job's length
    assert 2 * most <= gc_pause.SET_ASIDE_SHARE * 2 * live + 2 * 100
    assert most < 50_000
    gc.unfreeze()
    gc.collect()
    assert _Cycle.alive == before
