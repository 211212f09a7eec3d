"""The parsing stage (spark_jobs/spark/parse_stage.py) without Spark: files in as Spark's file source hands
them over, input chunks out, one output batch per file; and what a worker does after a task to hand back
the memory the task freed (spark_jobs/spark/worker_memory.py)."""

from __future__ import annotations

import gc
import json
import weakref

import pyarrow as pa

from spark_jobs.spark.landing import read_landing_file
from spark_jobs.spark.parse_stage import SOURCE_LANDING, parse_files
from spark_jobs.spark.transport import INPUT_CHUNK_ARROW, chunks_to_arrow, data_chunks
from spark_jobs.spark.worker_memory import return_free_memory


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
