"""The cyclic garbage collector, paused over work that allocates many objects none of which is in a cycle."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

# Objects set aside since the last full collection (see `_set_aside`) that start another one: at least this
# many, and at least this share of the objects set aside after the last one.
MIN_SET_ASIDE = 100_000
SET_ASIDE_SHARE = 0.25


class _SetAside:
    """What the pauses set aside since the collector last ran over everything."""

    estimate = 0  # an upper bound of the objects set aside since then (it misses those freed since)
    after_collection = 0  # the objects set aside right after that collection


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """A micro-batch, a snapshot or a restore builds one object per record or store entry, all still alive
    when the cyclic collector runs, again and again, rescanning them for nothing: pause it meanwhile. At the
    end of an outermost pause, what is alive is set aside (`_set_aside`) rather than scanned by the next
    young collection. Nests: an inner pause leaves the collector as the outer one found it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            _set_aside()
            gc.enable()


def _set_aside() -> None:
    """Move every object the collector tracks out of its generations (`gc.freeze`, a constant-time splice
    that also zeroes the young generation's count), so that the young collection right after a pause does
    not walk what the pause left alive: the task's state and the batch's output, which would otherwise be
    scanned whole by the next young collection, then by a middle one, then by full ones. An object set aside
    is freed as ever when its last reference goes; only garbage in a reference cycle (a user function's, or
    the process's outside the engine) waits for a full collection.

    So that such garbage cannot pile up without bound in a long-running job, a full collection runs once the
    objects set aside have grown since the last one by SET_ASIDE_SHARE of what was set aside after it (at
    least MIN_SET_ASIDE): everything goes back to the collector (`gc.unfreeze`, objects another part of the
    process froze too), a full collection runs, and what survives is set aside again. Cyclic garbage is then
    bounded by that share of the live objects, and a full collection, which costs in proportion to them,
    comes after that many new ones, as the collector's own rule for its full collections has it. The growth is
    counted cheaply first (the young generation's count at each pause's end: allocations less deallocations
    of tracked objects, an upper bound since objects set aside and freed later are not subtracted), and
    only when that count reaches the bound is the set-aside generation measured (`gc.get_freeze_count`, a
    walk over it)."""
    _SetAside.estimate += gc.get_count()[0]
    gc.freeze()
    bound = max(MIN_SET_ASIDE, SET_ASIDE_SHARE * _SetAside.after_collection)
    if _SetAside.estimate < bound:
        return
    grown = gc.get_freeze_count() - _SetAside.after_collection
    if grown >= bound:
        collect_and_set_aside()
        return
    _SetAside.estimate = max(grown, 0)


def collect_and_set_aside() -> None:
    """A full collection now, over everything (set aside or not), and what survives set aside: what the
    pauses do once the objects set aside have grown enough (`_set_aside`), and what a process that has just
    built many long-lived objects of its own (a benchmark's inputs) does so that they count among the live
    objects from the start."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    _SetAside.after_collection = gc.get_freeze_count()
    _SetAside.estimate = 0
