"""The Spark runtime's pipeline without Spark: same parsing, partitioning, ordering and task code.

Files are admitted in Spark's order (modification time, then path), cut into micro-batches of
`max_files_per_trigger` (per input topic, as each topic's file source admits its own), and each micro-batch runs every partition's task through `run_task_batch`
with the state kept in a dict instead of Spark's state store. Tests use it to check the pipeline's
logic in milliseconds, and to show that what Spark adds (shuffle, state store, sink) changes nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

from spark_jobs.spark import sink, task_state
from spark_jobs.spark.job import JobSpec
from spark_jobs.spark.landing import read_landing_file
from spark_jobs.spark.summary import RunSummary
from spark_jobs.spark.task_runner import INITIAL_WALL_CLOCK_MS, LastLanded, run_task_batch
from spark_jobs.spark.topics import QUARANTINE_TOPIC, quarantine_table
from spark_jobs.spark.transport import (
    KIND_QUARANTINE,
    QUARANTINE_PARTITION,
    InputChunk,
    data_chunks,
    ordered_input,
    quarantined_rows,
    wall_clock_chunks,
)


def landing_files(directory: str | os.PathLike) -> list[tuple[str, int]]:
    """(path, mtime ms) of the visible files of a landing directory, in the order Spark admits them."""
    entries = []
    for entry in os.scandir(directory):
        if entry.is_file() and not entry.name.startswith((".", "_")):
            entries.append((entry.path, entry.stat().st_mtime_ns // 1_000_000))
    return sorted(entries, key=lambda e: (e[1], e[0]))


class InMemoryRuntime:
    def __init__(self, spec: JobSpec, last_landed: LastLanded | None = None):
        """`last_landed`: per input topic, its last file (mtime, path) when the run started, as the Spark
        runtime lists it (see `task_runner.select_records`); None: no input waits for files."""
        self.spec = spec
        self.last_landed = last_landed
        # One store per partition, as Spark keeps one per task group; no live-task cache, so every batch
        # restores from the store (the path a Spark replay takes).
        self.stores: dict[int, task_state.DictPartStore] = {}
        self.tables: dict[str, list[pa.Table]] = {}
        self.summary = RunSummary(job=spec.module, trigger="in-memory", partitions=spec.num_partitions)
        self._batch_id = 0

    def run_batch(self, files: list[tuple] = (), wall_clock_ms: int | None = None) -> None:
        """One micro-batch: these files (path, mtime ms[, topic]: the job's one input if not given), then a
        wall-clock marker for every partition."""
        chunks: list[InputChunk] = []
        topics = self.spec.input_topics
        seen_by = self.spec.num_partitions if len(topics) > 1 else None
        for path, mtime, *topic in files:
            topic = topic[0] if topic else self.spec.input_topic
            if topic not in topics:
                raise ValueError(f"{path}: topic {topic!r} is not an input of {self.spec.module} {topics}")
            content = Path(path).read_bytes()
            with_values = self.spec.topology().reads_values(topic)
            parsed = read_landing_file(path, content, self.spec.num_partitions, keep_values=with_values)
            chunks += data_chunks(parsed, mtime, with_values, topic, seen_by)
        if wall_clock_ms is not None:
            markers = {p: [wall_clock_ms] for p in range(self.spec.num_partitions)}
            chunks += wall_clock_chunks(markers, "<wall-clock>", 0)
        by_partition: dict[int, list[InputChunk]] = {}
        for chunk in chunks:
            by_partition.setdefault(chunk.partition, []).append(chunk)
        metrics = []
        for partition, part_chunks in sorted(by_partition.items()):
            if partition == QUARANTINE_PARTITION:
                reasons, raws, files_, lines, topics_ = quarantined_rows(
                    [c for c in part_chunks if c.kind == KIND_QUARANTINE]
                )
                self._add(QUARANTINE_TOPIC, quarantine_table(reasons, raws, files_, lines, topics_))
                by_reason: dict[str, int] = {}
                for reason in reasons:
                    by_reason[reason] = by_reason.get(reason, 0) + 1
                metrics.append({"partition": partition, "quarantined": len(reasons), "reasons": by_reason})
                continue
            store = self.stores.setdefault(partition, task_state.DictPartStore())
            state, loaded = task_state.load(store, self.spec.topology(), partition, INITIAL_WALL_CLOCK_MS)
            result = run_task_batch(self.spec, partition, state, ordered_input(part_chunks), self.last_landed)
            written = task_state.save(store, result.state)
            result.metrics["task_metrics"].update(
                written.metrics(loaded), **task_state.size_metrics(result.state)
            )
            for topic, table in result.tables.items():
                self._add(topic, table)
            metrics.append(result.metrics)
        self.summary.add_batch(self._batch_id, metrics)
        self._batch_id += 1

    def _add(self, topic: str, table: pa.Table) -> None:
        table = table.append_column("batch_id", pa.array([self._batch_id] * table.num_rows, pa.int64()))
        self.tables.setdefault(topic, []).append(table)

    def topic(self, name: str):
        """A topic as pandas in task output order (partition, seq), like `sink.read_topic`."""
        import pandas as pd

        tables = self.tables.get(name)
        if not tables:
            return pd.DataFrame()
        frame = pa.concat_tables(tables).to_pandas()
        return frame.sort_values(sink.read_order(frame), kind="stable").reset_index(drop=True)


def last_landed_files(files_by_topic: dict[str, list[tuple[str, int]]]) -> LastLanded:
    """Per topic, its last landing file as (mtime ms, path), None if it has none."""
    return {
        topic: max(((mtime, path) for path, mtime in files), default=None)
        for topic, files in files_by_topic.items()
    }


def run_directory(
    spec: JobSpec,
    input_dir: str | os.PathLike | dict[str, str | os.PathLike],
    max_files_per_trigger: int | None = None,
    wall_clock_ms: int | None = None,
) -> InMemoryRuntime:
    """What an available-now Spark run computes for a landing directory, or one per input topic
    ({topic: directory}), with one fresh checkpoint."""
    dirs = input_dir if isinstance(input_dir, dict) else {spec.input_topic: input_dir}
    files = {topic: landing_files(directory) for topic, directory in dirs.items()}
    runtime = InMemoryRuntime(spec, last_landed_files(files))
    step = max_files_per_trigger or max(1, *(len(f) for f in files.values()))
    longest = max(len(f) for f in files.values())
    for start in range(0, longest, step):
        runtime.run_batch(
            [(path, mtime, topic) for topic, f in files.items() for path, mtime in f[start : start + step]]
        )
    if wall_clock_ms is not None:
        runtime.run_batch(wall_clock_ms=wall_clock_ms)
    return runtime
