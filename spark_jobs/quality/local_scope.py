"""A validation scope read without Spark: the batches one run published plus the kept context, in Arrow.

The same scope as scope.py (which reads it with Spark): a run's `batch_id=N` folders (each appears whole
or not at all, sink.py), and the context earlier validations kept, marked `_context`. Reading only the
run's folders costs what the run wrote, not the history. The context is chosen by the same three clauses
as `scope.keep_context`, computed on the Arrow table and written with its exact types, so either engine
can read what the other kept.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from spark_jobs.quality.expectations import CONTEXT_COLUMN
from spark_jobs.quality.local_frames import in_order
from spark_jobs.quality.scope import BATCH_COLUMN, context_path
from spark_jobs.spark.sink import BATCH_PREFIX
from spark_jobs.spark.topics import BUILT_IN_TOPICS

# Scopes up to this many rows are validated in process; larger ones (and --full) on Spark.
LOCAL_ROW_LIMIT = 5_000_000


@dataclass(frozen=True)
class LocalTopic:
    """A topic's scope: its rows (this run's, then the context, flagged `_context`), and how many are new."""

    table: pa.Table
    new_rows: int
    absent: bool

    def frame(self) -> pd.DataFrame:
        """The rows as pandas, struct fields also as `a.b` columns (rules and GX address them so)."""
        frame = self.table.to_pandas()
        structs = [f.name for f in self.table.schema if pa.types.is_struct(f.type)]
        if not structs:
            return frame
        fields = self.table.select(structs)
        while any(pa.types.is_struct(f.type) for f in fields.schema):
            fields = fields.flatten()
        return pd.concat([frame, fields.to_pandas()], axis=1)


def _parquet_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.parquet") if not p.name.startswith(("_", ".")))


def scope_rows(output: Path, topics: list[str], reports: Path, batches: list[int]) -> int:
    """Rows a scope holds, from the Parquet footers alone."""
    folders = [Path(output) / t / f"{BATCH_PREFIX}{b}" for t in topics for b in batches]
    folders += [context_path(reports, t) for t in topics]
    return sum(
        pq.ParquetFile(f).metadata.num_rows
        for folder in folders
        if folder.is_dir()
        for f in _parquet_files(folder)
    )


def _read(folder: Path) -> pa.Table | None:
    files = _parquet_files(folder)
    if not files:
        return None
    return pa.concat_tables([pq.read_table(f) for f in files], promote_options="permissive")


def read_scope(output: Path, topic: str, reports: Path, batches: list[int], schema: pa.Schema) -> LocalTopic:
    """This run's rows of `topic` with the context kept for it; `schema` types a topic with no folder."""
    folder = Path(output) / topic
    parts = []
    for batch in batches:
        table = _read(folder / f"{BATCH_PREFIX}{batch}")
        if table is not None:
            parts.append(table.append_column(BATCH_COLUMN, pa.array([batch] * table.num_rows, pa.int32())))
    if not parts:
        parts.append(schema.empty_table().append_column(BATCH_COLUMN, pa.array([], pa.int32())))
    new = pa.concat_tables(parts, promote_options="permissive")
    new = new.append_column(CONTEXT_COLUMN, pa.array([False] * new.num_rows, pa.bool_()))
    kept = None if topic in BUILT_IN_TOPICS else _read(context_path(reports, topic))
    table = new
    if kept is not None and kept.num_rows:
        kept = kept.append_column(CONTEXT_COLUMN, pa.array([True] * kept.num_rows, pa.bool_()))
        table = pa.concat_tables([new, kept], promote_options="permissive")
    return LocalTopic(table, new.num_rows, absent=not folder.is_dir())


def keep_local_context(scope: LocalTopic, topic: str, reports: Path, reach_ms: int) -> int:
    """`scope.keep_context` on the Arrow scope: each key's last row, each task's latest row, and every row
    of a window still within reach; returns the number of rows kept."""
    if topic in BUILT_IN_TOPICS:
        return 0
    table = scope.table.drop_columns([CONTEXT_COLUMN])
    rows = table.select(["key", "partition", "seq", "timestamp", "window_end"]).to_pandas()
    # ROW_NUMBER() = 1 over a descending order: the last row of the ascending order, nulls put first.
    last_of_key = in_order(rows, [], ["partition", "seq"]).groupby("key", dropna=False, sort=False).tail(1)
    latest_of_task = in_order(rows, [], ["timestamp", "seq"]).groupby("partition", dropna=False, sort=False)
    task_time = rows.groupby("partition", dropna=False, sort=False)["timestamp"].transform("max")
    keep = pd.Series(False, index=rows.index)
    keep[last_of_key.index] = True
    keep[latest_of_task.tail(1).index] = True
    keep |= (rows["window_end"].notna() & (rows["window_end"] + reach_ms > task_time)).fillna(False)
    kept = table.filter(pa.array(keep.to_numpy()))

    target = context_path(reports, topic)
    staging = target.with_name(f"{target.name}.staging")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    pq.write_table(kept, staging / "part-00000.parquet")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return kept.num_rows
