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

That full collection scans every object the worker holds, and most of them are its modules' (pyarrow,
pandas, numpy, pyspark and the engine: tens of thousands of objects), scanned again after every task. A
worker moves what it holds when a task begins to the collector's permanent generation
(`freeze_long_lived`) whenever it has imported modules since it last did and keeps no task state, so the
collection after each task scans what was made since.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys

from spark_jobs.spark import task_state

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


# sys.modules' size at the worker's last freeze (freeze_long_lived)
_modules_at_freeze = 0


def in_python_worker() -> bool:
    """Whether this process is one of pyspark's Python workers (forked by its daemon, or started as
    `pyspark.worker`), whose objects are those of the tasks it runs."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) in ("pyspark.daemon", "pyspark.worker")


def freeze_long_lived() -> None:
    """In a Python worker that imported modules since it last froze and keeps no task state
    (`task_state.WORKER_TASKS`), collect the garbage and move every object left (the modules' above all)
    to the collector's permanent generation, which no collection scans again. An object frozen while
    alive that later dies in a reference cycle is never freed: called as a task begins, so that only the
    few objects pyspark holds for that task can be such, never a task state. A worker imports its modules
    in its first tasks: it freezes a few times, then no more. Elsewhere (tests, the in-memory runtime, a
    driver) the process's objects are not the worker's to freeze: nothing is done."""
    global _modules_at_freeze
    if len(sys.modules) == _modules_at_freeze or task_state.WORKER_TASKS.held() or not in_python_worker():
        return
    gc.collect()
    gc.freeze()
    _modules_at_freeze = len(sys.modules)


def return_free_memory() -> None:
    """Free what the last task left in reference cycles, then hand the C heap's free pages back to the
    system (nothing more where malloc cannot)."""
    gc.collect()
    if _TRIM is not None:
        _TRIM(0)
