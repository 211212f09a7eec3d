"""The parsing stage (spark_jobs/spark/parse_stage.py) without Spark: files in as Spark's file source hands
them over, input chunks out, one output batch per file; and what a worker does after a task to hand back
the memory the task freed (spark_jobs/spark/worker_memory.py)."""

from __future__ import annotations

import gc
import json
import sys
import types
import weakref

import pyarrow as pa
import pytest

from spark_jobs.spark import task_state, worker_memory
from spark_jobs.spark.landing import read_landing_file
from spark_jobs.spark.parse_stage import SOURCE_LANDING, parse_files
from spark_jobs.spark.transport import INPUT_CHUNK_ARROW, chunks_to_arrow, data_chunks
from spark_jobs.spark.worker_memory import freeze_long_lived, in_python_worker, return_free_memory


def _landing_batch(paths: list[str], mtimes_ms: list[int], topic: str) -> pa.RecordBatch:
    """The rows of local landing files as the stage gets them: no content (the stage reads each file)."""
    return pa.RecordBatch.from_pydict(
        {
            "source": [SOURCE_LANDING] * len(paths),
            "topic": [topic] * len(paths),
            "path": [f"file://{p}" for p in paths],
            "modificationTime": pa.array([m * 1000 for m in mtimes_ms], pa.timestamp("us")),
            "content": pa.array([None] * len(paths), pa.binary()),
        }
    )


def test_every_file_of_an_input_batch_is_its_own_output_batch_of_its_chunks(tmp_path):
    paths = []
    for f in range(3):
        lines = [{"key": f"k{i % 7}", "value": {"f": f, "i": i}, "timestamp": 1000 * i} for i in range(50)]
        if f == 1:
            lines.insert(10, {"key": 3, "timestamp": 5})  # ill-typed key: quarantined
        path = tmp_path / f"part-{f}.jsonl"
        path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
        paths.append(str(path))
    mtimes = [100, 200, 300]
    groups = {0: 7, 1: 3, 2: 5}

    out = list(parse_files(iter([_landing_batch(paths, mtimes, "readings")]), 3, groups, True))

    assert len(out) == 3
    for path, mtime, batch in zip(paths, mtimes, out, strict=True):
        assert batch.schema == INPUT_CHUNK_ARROW
        assert set(batch.column("file_path").to_pylist()) == {path}
        parsed = read_landing_file(path, None, 3)
        expected = chunks_to_arrow(data_chunks(parsed, mtime, True, "readings"), groups)
        assert batch.equals(expected)
    assert -1 in out[1].column("partition").to_pylist()  # the quarantined line goes with its file


def test_returning_free_memory_frees_what_a_task_left_in_reference_cycles():
    class Node:
        pass

    gc.disable()  # as while a task runs (no_cyclic_gc)
    try:
        node, other = Node(), Node()
        node.peer, other.peer = other, node
        node.payload = bytearray(2**20)
        alive = weakref.ref(node)
        del node, other
        assert alive() is not None  # a cycle: its last reference gone, it is not freed
        return_free_memory()
        assert alive() is None
    finally:
        gc.enable()


@pytest.fixture
def as_python_worker(monkeypatch):
    """This process taken for a Python worker that has not frozen anything yet; unfrozen afterwards."""
    monkeypatch.setattr(worker_memory, "in_python_worker", lambda: True)
    monkeypatch.setattr(worker_memory, "_modules_at_freeze", 0)
    yield
    gc.unfreeze()


def test_a_worker_freezes_what_it_holds_once_it_has_imported_modules_since_it_last_did(
    as_python_worker, monkeypatch
):
    class Node:
        pass

    def scanned(obj) -> bool:  # in a generation the collector scans (a frozen object is in none)
        return any(o is obj for o in gc.get_objects())

    held = Node()
    freeze_long_lived()
    assert not scanned(held)
    late = Node()
    freeze_long_lived()  # no module imported since: nothing more frozen
    assert scanned(late)
    monkeypatch.setitem(sys.modules, "an_imported_module", types.ModuleType("an_imported_module"))
    freeze_long_lived()
    assert not scanned(late)


def test_what_a_task_leaves_in_reference_cycles_is_freed_after_a_freeze(as_python_worker):
    class Node:
        pass

    freeze_long_lived()
    gc.disable()  # as while a task runs (no_cyclic_gc)
    try:
        node, other = Node(), Node()
        node.peer, other.peer = other, node
        alive = weakref.ref(node)
        del node, other
        return_free_memory()
        assert alive() is None
    finally:
        gc.enable()


def test_a_worker_keeping_a_task_state_freezes_nothing(as_python_worker, monkeypatch):
    monkeypatch.setattr(task_state, "WORKER_TASKS", task_state.LiveTasks())
    task_state.WORKER_TASKS.keep(("checkpoint", 0), object(), None)  # a live task kept between batches
    frozen = gc.get_freeze_count()
    freeze_long_lived()
    assert gc.get_freeze_count() == frozen


def test_nothing_is_frozen_outside_a_python_worker(monkeypatch):
    monkeypatch.setattr(worker_memory, "_modules_at_freeze", 0)
    assert not in_python_worker()  # pytest's process
    frozen = gc.get_freeze_count()
    freeze_long_lived()
    assert gc.get_freeze_count() == frozen
