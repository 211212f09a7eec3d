"""The cyclic garbage collector, paused over a micro-batch's Python work."""

from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def without_cyclic_gc():
    """A micro-batch allocates millions of small objects that are all still alive when the cyclic garbage
    collector runs, again and again, for nothing; collect once afterwards instead."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
