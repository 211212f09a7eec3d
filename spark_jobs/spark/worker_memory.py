"""What a Python worker does to hand the memory its last task freed back to the system.

A worker lives on across tasks and micro-batches (Spark reuses it). Most of what a task allocates (its
input's records, the task's state as objects, its output rows) is freed when the task ends, but glibc's
malloc keeps freed memory in its heaps for reuse, and the worker's resident size stays at its highest. The
worker then carries one task's peak into the next task's. `malloc_trim(0)` returns the free pages of every
heap (not only those at its top) to the system.

A task's objects are not all freed when its last reference goes: a task's nodes, stores and context refer
to one another, so its state is a graph of reference cycles, which only the cyclic collector frees. The
collector is paused while a task runs (`no_cyclic_gc`) and, once resumed, reaches the long-lived
generation only now and then: a worker would carry the dead states of the partitions it ran before into
the next task. So the cycles are collected first, then the heap trimmed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys

# glibc's malloc only: other C libraries (macOS, musl) have no malloc_trim.
_LIBC = (
    ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6") if sys.platform.startswith("linux") else None
)
_TRIM = getattr(_LIBC, "malloc_trim", None)

# The environment of the Python workers (SparkContext.environment), where the user set none:
# - MALLOC_ARENA_MAX: a malloc arena per thread that allocates keeps what that thread freed apart from the
#   others, each heap with its own free memory; a worker's Python code runs in its main thread, and two
#   arenas leave the others room.
# - ARROW_DEFAULT_MEMORY_POOL: Arrow's buffers (a parsed file's keys, the batches to and from the JVM) from
#   the C heap, not from a pool of Arrow's own (mimalloc or jemalloc): memory one of the two freed is then
#   reused by the other, and `return_free_memory` hands both back. A pool of its own keeps what it freed
#   for Arrow alone, so a worker's peak holds both heaps' highs.
WORKER_ENVIRONMENT = {"MALLOC_ARENA_MAX": "2", "ARROW_DEFAULT_MEMORY_POOL": "system"}


def return_free_memory() -> None:
    """Free what the last task left in reference cycles, then hand the C heap's free pages back to the
    system (nothing more where malloc cannot)."""
    gc.collect()
    if _TRIM is not None:
        _TRIM(0)
