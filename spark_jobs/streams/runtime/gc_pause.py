"""The cyclic garbage collector, paused over work that allocates many objects none of which is in a cycle."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """A micro-batch, a snapshot or a restore builds one object per record or store entry, all still alive
    when the cyclic collector runs, again and again, rescanning them for nothing: pause it meanwhile and let
    it run once afterwards. Nests: an inner pause leaves the collector as the outer one found it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
