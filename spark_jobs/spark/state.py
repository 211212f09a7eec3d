"""The task state of a checkpoint as a table, without running the job (`python -m spark_jobs.state`).

A checkpoint holds every task's state in Spark's state store, as `task_state` writes it (a meta value and
the chunks of the state's parts, per task group). Spark's `statestore` data source reads those variables at
a committed micro-batch; each task is then rebuilt from its parts as a restarted run rebuilds it
(`task_state.load`), and every node lists its stores' entries (`Node.state_rows`). The job, its options and
the partitions' task groups come from the checkpoint's own record (`runtime.JOB_FILE`), so nothing
job-specific is asked for.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from spark_jobs.spark import task_state
from spark_jobs.spark.errors import UserError
from spark_jobs.spark.job import JobSpec
from spark_jobs.spark.runtime import JOB_FILE, SPARK_CHECKPOINT, read_job_record

COLUMNS = ("node", "store", "partition", "key", "window_start", "window_end", "value", "timestamp")
DTYPES = {
    "node": "object",
    "store": "object",
    "partition": "int64",
    "key": "object",
    "window_start": "Int64",
    "window_end": "Int64",
    "value": "object",
    "timestamp": "Int64",
}


class StateReadError(UserError, ValueError):
    """The checkpoint cannot be read as asked: none there, another layout, or a batch it does not keep."""


@dataclass(frozen=True)
class CheckpointRecord:
    """What the checkpoint's own record says: the job, its options, and each partition's task group."""

    path: Path
    spec: JobSpec
    task_groups: dict[int, int]

    @classmethod
    def read(cls, checkpoint: str | Path) -> CheckpointRecord:
        path = Path(checkpoint)
        record = read_job_record(path)
        if record is None:
            what = "does not exist" if not path.exists() else f"has no {JOB_FILE}"
            raise StateReadError(f"{path} {what}: not a checkpoint of a job run by this project's runtime")
        spec = JobSpec(record["module"], dict(record["options"]), int(record["partitions"]))
        groups = {int(partition): int(group) for partition, group in record["task_groups"].items()}
        return cls(path, spec, groups)

    @property
    def spark_checkpoint(self) -> Path:
        return self.path / SPARK_CHECKPOINT

    def committed_batches(self) -> list[int]:
        """The micro-batches Spark committed, in order (its `commits` log; older entries may be purged)."""
        commits = self.spark_checkpoint / "commits"
        if not commits.is_dir():
            return []
        return sorted(int(f.name) for f in commits.iterdir() if f.name.isdigit())


def resolve_batch(record: CheckpointRecord, batch_id: int | None) -> int:
    """The batch to read: the latest committed one, or `batch_id` if the checkpoint still keeps it."""
    committed = record.committed_batches()
    if not committed:
        raise StateReadError(f"checkpoint {record.path} has no committed micro-batch yet: no state to read")
    if batch_id is None:
        return committed[-1]
    if batch_id not in committed:
        raise StateReadError(
            f"checkpoint {record.path} has no batch {batch_id}: it keeps batches "
            f"{committed[0]}..{committed[-1]}"
        )
    return batch_id


def read_state(checkpoint: str | Path, batch_id: int | None = None, spark=None) -> pd.DataFrame:
    """Every entry of every task's state at the latest committed micro-batch (or `batch_id`): one row per
    entry, columns `COLUMNS` (see `state_frame`). `spark`: the session to read with (default: the
    active one, else a local one)."""
    return state_frame(row for task in read_tasks(checkpoint, batch_id, spark) for row in task.rows())


@dataclass
class TaskRead:
    """One partition's task as rebuilt from the checkpoint, and the bytes its nodes' parts take there."""

    partition: int
    task: Any  # StreamTask
    node_bytes: dict[str, int]

    def rows(self) -> Iterator[tuple]:
        return task_rows(self.task, self.partition)


def read_tasks(checkpoint: str | Path, batch_id: int | None = None, spark=None) -> Iterator[TaskRead]:
    """Every partition's task at the batch (`read_state`'s), one at a time: the driver holds one task's
    chunks at once. A partition that never had state has none."""
    record = CheckpointRecord.read(checkpoint)
    batch = resolve_batch(record, batch_id)
    reader = _StoreReader(spark or _session(), record, batch)
    metas = reader.metas()
    topology = record.spec.topology()
    for partition, group in sorted(record.task_groups.items()):
        if group not in metas:
            continue  # the partition had no records yet: no state
        store = task_state.DictPartStore()
        store.meta = metas[group]
        store.chunks = reader.chunks(group)
        state, _ = task_state.load(store, topology, partition, 0)
        yield TaskRead(partition, state.task, _node_bytes(state.task, store))


def _node_bytes(task, store: task_state.DictPartStore) -> dict[str, int]:
    """node name -> the bytes of its parts in the store (`task/<node>` and `task/<node>/<part>`)."""
    sizes: dict[str, int] = {}
    prefix = task_state.ENGINE_PART_PREFIX
    for (part, _), data in store.chunks.items():
        if not part.startswith(prefix):
            continue
        name = part[len(prefix) :]
        node = name if name in task.nodes else name.rsplit("/", 1)[0]
        if node in task.nodes:
            sizes[node] = sizes.get(node, 0) + len(data)
    return sizes


def _session():
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    from spark_jobs.spark.session import local_spark_session

    return local_spark_session(
        app_name="spark-jobs-state", master="local[1]", extra_conf={"spark.ui.enabled": "false"}
    )


class _StoreReader:
    """The task state variables (task_processor.py) at one batch, read with Spark's `statestore` source."""

    def __init__(self, spark, record: CheckpointRecord, batch: int) -> None:
        self.spark, self.record, self.batch = spark, record, batch

    def _variable(self, name: str):
        return (
            self.spark.read.format("statestore")
            .option("path", str(self.record.spark_checkpoint))
            .option("batchId", self.batch)
            .option("stateVarName", name)
            .load()
        )

    def _collect(self, frame) -> list:
        try:
            return frame.collect()
        except Exception as error:  # Spark's analysis and execution errors share no type to catch
            raise StateReadError(
                f"the state of batch {self.batch} in {self.record.spark_checkpoint} cannot be read "
                f"({str(error).strip().splitlines()[0]})"
            ) from None

    def metas(self) -> dict[int, tuple[int, bytes]]:
        """task group -> (version, manifest) of its meta value."""
        rows = self._collect(self._variable("meta"))
        return {row.key.task_group: (row.value.version, bytes(row.value.manifest)) for row in rows}

    def chunks(self, group: int) -> dict[tuple[str, int], bytes]:
        """(part, chunk index) -> bytes of one task group's chunks."""
        frame = self._variable("chunks")
        rows = self._collect(frame.where(frame.key.task_group == group))
        return {(r.user_map_key.part, r.user_map_key.chunk): bytes(r.user_map_value.data) for r in rows}


def task_rows(task, partition: int) -> Iterator[tuple]:
    """The rows of one task's state (`COLUMNS`' order), node by node in the topology's order."""
    for name, node in task.nodes.items():
        for row in node.state_rows():
            yield (
                name,
                row.store,
                partition,
                key_text(row.key),
                row.window_start,
                row.window_end,
                json_text(row.value),
                row.timestamp,
            )


def state_frame(rows) -> pd.DataFrame:
    """The state table from rows in `COLUMNS`' order, its columns typed (`DTYPES`)."""
    frame = pd.DataFrame.from_records(list(rows), columns=list(COLUMNS))
    return frame.astype(DTYPES)


def key_text(key: Any) -> str | None:
    """A string key as it is; any other key as JSON text (None stays null)."""
    if key is None or isinstance(key, str):
        return key
    return json_text(key)


def json_text(value: Any) -> str:
    return json.dumps(value, default=_json_default, sort_keys=True, allow_nan=True)


def _json_default(value: Any) -> Any:
    if isinstance(value, set | frozenset):
        try:
            return sorted(value)
        except TypeError:
            return list(value)
    if hasattr(value, "tolist"):  # numpy scalars and arrays, array.array
        return value.tolist()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    return repr(value)


def read_state_and_sizes(
    checkpoint: str | Path, batch_id: int | None = None, spark=None
) -> tuple[pd.DataFrame, dict[str, int]]:
    """`read_state`'s table, and per node the bytes its parts take in the checkpoint (all partitions)."""
    rows: list[tuple] = []
    node_bytes: dict[str, int] = {}
    for task in read_tasks(checkpoint, batch_id, spark):
        rows += task.rows()
        for node, size in task.node_bytes.items():
            node_bytes[node] = node_bytes.get(node, 0) + size
    return state_frame(rows), node_bytes


def summary(frame: pd.DataFrame, node_bytes: dict[str, int]) -> pd.DataFrame:
    """Per node: its stores, entries, distinct keys, windows, and the bytes its parts take in the
    checkpoint; nodes whose parts hold no entries (e.g. a clock alone) too."""
    columns = ["node", "stores", "entries", "keys", "windows", "bytes"]
    per_node = {}
    for node, rows in frame.groupby("node", sort=False):
        windowed = rows.dropna(subset=["window_start"])
        per_node[node] = {
            "stores": ",".join(dict.fromkeys(rows["store"])),
            "entries": len(rows),
            "keys": rows[["store", "key"]].drop_duplicates().shape[0],
            "windows": windowed[["window_start", "window_end"]].drop_duplicates().shape[0],
        }
    for node in node_bytes:
        per_node.setdefault(node, {"stores": "", "entries": 0, "keys": 0, "windows": 0})
    table = [{"node": node, **counts, "bytes": node_bytes.get(node, 0)} for node, counts in per_node.items()]
    return pd.DataFrame(table, columns=columns)
