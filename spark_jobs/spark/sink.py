"""Exactly-once Parquet output: stage a micro-batch, then publish each topic's part with one rename.

Layout: `<output>/<topic>/batch_id=<n>/part-*.parquet`. A batch directory appears complete or not at all
(an atomic directory rename), so Spark and pandas readers never see a partial batch: they skip the
`_staging` directory like every name starting with `_` or `.`.

Exactly once: Spark may run a micro-batch again after a crash (its offsets are logged before it runs, its
commit is logged after the sink returns). The replay restores the pre-batch task state from the state
store and so produces identical rows; publishing skips every topic whose batch directory exists already
and completes the others. Nothing is appended in place, so nothing is duplicated or lost.

Executor side: `stage_partition_output` (called by the stateful processor, in the same Python worker)
writes a task's output of one micro-batch into one Parquet file per topic under the staging directory and
returns the task's manifest rows. Driver side: `prepare_batch` empties the staging directory before the
micro-batch runs, and `commit_batch` moves exactly the files of the manifest (attempts that failed leave
files nobody lists) into place.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from spark_jobs.spark.topics import LATE_SCHEMA, LATE_TOPIC, QUARANTINE_SCHEMA, QUARANTINE_TOPIC, TopicSchema

STAGING_DIR = "_staging"
BATCH_PREFIX = "batch_id="

# A task's output rows: a staged file per output topic (`rows` in it), then its metrics (JSON payload). Also
# the stateful stage's output schema in the query plan (runtime.spark_schema).
MANIFEST_ARROW = pa.schema(
    [("topic", pa.string()), ("file", pa.string()), ("rows", pa.int64()), ("payload", pa.binary())]
)
MANIFEST_COLUMNS = MANIFEST_ARROW.names


OWNER_FILE = "_checkpoint_id"


def output_owner(output_dir: str | os.PathLike) -> str | None:
    """The id of the checkpoint the output folder belongs to: "unknown" for published batches without an
    owner, None for a folder that nobody claimed yet."""
    output = Path(output_dir)
    owner_file = output / OWNER_FILE
    if owner_file.exists():
        return owner_file.read_text().strip()
    if output.is_dir() and any(_has_batches(p) for p in output.iterdir() if p.is_dir()):
        return "unknown"
    return None


def claim_output(output_dir: str | os.PathLike, checkpoint_id: str) -> str:
    """The id of the checkpoint the output folder belongs to; claimed for `checkpoint_id` when the folder
    has no owner and no published batch yet."""
    owner = output_owner(output_dir)
    if owner is not None:
        return owner
    output = Path(output_dir)
    owner_file = output / OWNER_FILE
    output.mkdir(parents=True, exist_ok=True)
    tmp = output / f".{OWNER_FILE}.{os.getpid()}"
    tmp.write_text(checkpoint_id + "\n")
    os.replace(tmp, owner_file)
    return checkpoint_id


def staging_dir(output_dir: str | os.PathLike, batch_id: int) -> Path:
    return Path(output_dir) / STAGING_DIR / f"batch-{batch_id}"


def tasks_dir(output_dir: str | os.PathLike) -> Path:
    """Where the tasks of the running micro-batch stage their files (they do not know its id)."""
    return Path(output_dir) / STAGING_DIR / "tasks"


def batch_dir(output_dir: str | os.PathLike, topic: str, batch_id: int) -> Path:
    return Path(output_dir) / topic / f"{BATCH_PREFIX}{batch_id}"


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def dictionary_columns(schema: pa.Schema) -> list[str]:
    """The columns (dotted paths into structs) that a staged file dictionary-encodes: all but the int64
    ones. Those hold timestamps, sequence numbers and the times in values, mostly distinct per row: a
    dictionary for them would be built only to be dropped for plain encoding once it outgrows its page."""

    def paths(fields, prefix: str):
        for f in fields:
            if pa.types.is_struct(f.type):
                yield from paths(list(f.type), f"{prefix}{f.name}.")
            elif not pa.types.is_int64(f.type):
                yield f"{prefix}{f.name}"

    return list(paths(schema, ""))


def write_parquet(table: pa.Table, path: str | os.PathLike) -> None:
    """A topic's rows as one Parquet file (see `dictionary_columns`)."""
    pq.write_table(table, path, use_dictionary=dictionary_columns(table.schema))


def stage_partition_output(
    output_dir: str | os.PathLike, partition: int, tables: dict[str, pa.Table]
) -> list[tuple[str, str | None, int, bytes | None]]:
    """Executor side: write each non-empty table as `<staging>/tasks/<topic>/p<partition>-<attempt>.parquet`
    (synced to disk); return its manifest rows `(topic, file, rows, None)`. The caller adds the task's
    metrics (a METRICS_TOPIC row with a JSON payload): they travel back to the driver in the manifest."""
    attempt = uuid.uuid4().hex
    manifest: list[tuple[str, str | None, int, bytes | None]] = []
    for topic, table in sorted(tables.items()):
        if table.num_rows == 0:
            continue
        directory = tasks_dir(output_dir) / topic
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"p{partition:05d}-{attempt}.parquet"
        write_parquet(table, path)
        _fsync(path)
        manifest.append((topic, str(path), table.num_rows, None))
    return manifest


def prepare_batch(output_dir: str | os.PathLike, batch_id: int) -> Path:
    """Driver side, before the batch runs: empty staging directories (a crashed attempt leaves files)."""
    shutil.rmtree(tasks_dir(output_dir), ignore_errors=True)
    staging = staging_dir(output_dir, batch_id)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    return staging


def _empty_table(schema: pa.Schema) -> pa.Table:
    return schema.empty_table()


def commit_batch(
    output_dir: str | os.PathLike,
    batch_id: int,
    staged_files: dict[str, list[str]],
    declared: dict[str, TopicSchema],
) -> list[str]:
    """Driver side: publish each topic's staged files of `batch_id`; return the topics published now.

    Declared topics, the quarantine and the late records that have no batch yet get an empty file, so that
    each of them is readable (with its schema) from the first batch on, also when it has no rows.
    """
    output = Path(output_dir)
    staging = staging_dir(output, batch_id)
    ready = staging / "_ready"
    published = []
    for topic in sorted(set(staged_files) | set(declared) | set(_BUILT_IN_SCHEMAS)):
        files = staged_files.get(topic, [])
        final = batch_dir(output, topic, batch_id)
        if final.exists():
            continue  # published by an earlier attempt of this batch: identical rows
        if not files and _has_batches(output / topic):
            continue
        part = ready / topic
        part.mkdir(parents=True, exist_ok=True)
        if files:
            for i, path in enumerate(files):
                os.rename(path, part / f"part-{i:05d}.parquet")
        else:
            schema = (
                _BUILT_IN_SCHEMAS[topic] if topic in _BUILT_IN_SCHEMAS else declared[topic].arrow_schema()
            )
            write_parquet(_empty_table(schema), part / "part-00000.parquet")
        (output / topic).mkdir(parents=True, exist_ok=True)
        _fsync(part)
        os.rename(part, final)
        _fsync(final.parent)
        published.append(topic)
    shutil.rmtree(staging, ignore_errors=True)
    shutil.rmtree(tasks_dir(output), ignore_errors=True)  # what failed task attempts staged
    return published


_BUILT_IN_SCHEMAS = {QUARANTINE_TOPIC: QUARANTINE_SCHEMA, LATE_TOPIC: LATE_SCHEMA}


def _has_batches(topic_dir: Path) -> bool:
    return topic_dir.is_dir() and any(p.name.startswith(BATCH_PREFIX) for p in topic_dir.iterdir())


def committed_batch_ids(output_dir: str | os.PathLike, topic: str) -> list[int]:
    topic_dir = Path(output_dir) / topic
    if not topic_dir.is_dir():
        return []
    return sorted(
        int(p.name[len(BATCH_PREFIX) :]) for p in topic_dir.iterdir() if p.name.startswith(BATCH_PREFIX)
    )


def read_topic(output_dir: str | os.PathLike, topic: str):
    """A committed topic as pandas, in task output order: sorted by (partition, seq); with `batch_id`.

    Reads with pyarrow directly (as `pandas.read_parquet` does), batch directory by batch directory.
    """
    import pandas as pd

    frames = []
    for batch_id in committed_batch_ids(output_dir, topic):
        table = pq.read_table(batch_dir(output_dir, topic, batch_id))
        frame = table.to_pandas()
        frame["batch_id"] = batch_id
        frames.append(frame)
    if not frames:
        return pd.DataFrame()
    frame = pd.concat(frames, ignore_index=True)
    return frame.sort_values(read_order(frame), kind="stable").reset_index(drop=True)


def read_order(frame) -> list[str]:
    """Output topics in task output order; the quarantine by file and line; late records by batch and
    partition, each task's in the order it drained them."""
    if "seq" in frame.columns:
        return ["partition", "seq"]
    if "source_file" in frame.columns:
        return ["batch_id", "source_file", "line"]
    return ["batch_id", "partition"]
