"""The cyclic garbage collector, paused over work that allocates many objects none of which is in a cycle."""

from __future__ import annotations

import gc


class no_cyclic_gc:
    """A micro-batch, a snapshot or a restore builds one object per record or store entry, all still alive
    when the cyclic collector runs, again and again, rescanning them for nothing: pause it meanwhile and let
    it run once afterwards. Nests: an inner pause leaves the collector as the outer one found it. A class,
    not a generator's context manager: a task enters it at every batch, a few records each where topics
    take turns, and a generator's entry and exit cost several calls apiece."""

    __slots__ = ("_enabled",)

    def __enter__(self) -> None:
        self._enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self._enabled:
            gc.enable()
