"""Stage 2 of the query (executors, `mapInArrow`): whole files in, input chunks out.

Each landing file is read (if local), parsed, validated and partitioned (`landing`), and cut into chunks
of records per partition (`transport`), each with its topic; bad records go to the pseudo-partition -1.
Wall-clock marker files (`wall_clock`) become one marker chunk per partition. A multi-input job's file
also tells every partition that it was read.

A module of its own, light to import: the Python workers of this stage import it to unpickle the stage's
function, and they need neither pandas nor the sink nor the task runtime (each would add its import time
to every worker).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow as pa

from spark_jobs.spark import wall_clock
from spark_jobs.spark.landing import read_landing_file
from spark_jobs.spark.transport import InputChunk, chunks_to_arrow, data_chunks, wall_clock_chunks
from spark_jobs.spark.worker_memory import freeze_long_lived, return_free_memory
from spark_jobs.streams.runtime.gc_pause import no_cyclic_gc

SOURCE_LANDING = "landing"
SOURCE_CONTROL = "control"


def is_local(uri: str) -> bool:
    return urlparse(uri).scheme in ("", "file")


def local_path(uri: str) -> str:
    return unquote(urlparse(uri).path) if is_local(uri) else uri


def parse_files(
    batches: Iterator[pa.RecordBatch],
    num_partitions: int,
    task_groups: dict[int, int],
    with_values: bool | dict[str, bool],
    multi_input: bool = False,
) -> Iterator[pa.RecordBatch]:
    """Stage 2 (executors): whole files in, input chunks out (values only if the topology reads them:
    one flag, or one per topic). `multi_input`: each file also tells every partition it was read."""
    freeze_long_lived()  # the stage's modules, out of the collection after the task (worker_memory)
    with no_cyclic_gc():
        yield from _parse_files(batches, num_partitions, task_groups, with_values, multi_input)
    return_free_memory()  # the files' records, before the worker's next task (worker_memory)


def _parse_files(
    batches: Iterator[pa.RecordBatch],
    num_partitions: int,
    task_groups: dict[int, int],
    with_values: bool | dict[str, bool],
    multi_input: bool,
) -> Iterator[pa.RecordBatch]:
    seen_by = num_partitions if multi_input else None
    for batch in batches:
        sources = batch.column("source").to_pylist()
        topics = batch.column("topic").to_pylist()
        paths = batch.column("path").to_pylist()
        mtimes_us = batch.column("modificationTime").cast(pa.int64()).to_pylist()
        contents = batch.column("content").to_pylist()  # None: a local file, read here
        del batch
        # One output batch per file: a file's records, parsed, are several times its size, so a task holds
        # one file's records and chunks at a time, not those of every file of its input batch (all the files
        # of a Spark task come in one).
        for i, (source, topic, uri, mtime_us) in enumerate(
            zip(sources, topics, paths, mtimes_us, strict=True)
        ):
            content, contents[i] = contents[i], None
            path = local_path(uri)
            mtime_ms = mtime_us // 1000
            chunks: list[InputChunk]
            if source == SOURCE_CONTROL:
                if content is None:
                    content = Path(path).read_bytes()
                chunks = wall_clock_chunks(wall_clock.parse_marker_file(content), path, mtime_ms)
            else:
                values = with_values.get(topic, True) if isinstance(with_values, dict) else with_values
                parsed = read_landing_file(path, content, num_partitions, keep_values=values)
                del content
                chunks = data_chunks(parsed, mtime_ms, values, topic, seen_by)
                del parsed
            if chunks:
                yield chunks_to_arrow(chunks, task_groups)
            del chunks
