"""Test helpers: the reference outputs (StreamTask / TopologyTestDriver per partition, fed independently of
the runtime's own parsing), committed Spark outputs as plain rows, and ways to run a job."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pyarrow.parquet as pq

from spark_jobs.spark import sink
from spark_jobs.spark.in_memory import landing_files
from spark_jobs.spark.job import JobSpec
from spark_jobs.spark.runtime import RunConfig, run_job
from spark_jobs.streams import TopologyTestDriver
from spark_jobs.streams.runtime.task import StreamTask

REPO_ROOT = Path(__file__).resolve().parents[2]
SENSOR_ALERTS = "spark_jobs.jobs.sensor_alerts"
COLUMNS = ("key", "value", "timestamp", "window_start", "window_end", "partition", "seq")


# ------------------------------------------------------------------------------------------ reference


def partition_records(files: list[str], partitions: int) -> dict[int, list[tuple]]:
    """(key, value, timestamp) per partition, in file then line order: read with json and crc32 only,
    not with the runtime's code. Valid JSON-lines input without `partition`/`offset` only."""
    out: dict[int, list[tuple]] = {p: [] for p in range(partitions)}
    for path in files:
        for line in Path(path).read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                out[zlib.crc32(r["key"].encode()) % partitions].append(
                    (r["key"], r.get("value"), r["timestamp"])
                )
    return out


def _task_rows(topology_module: str, options: dict, partition: int, phases) -> dict[str, list[tuple]]:
    """Feed one StreamTask record by record (`process`, not the batch path), phase by phase:
    each phase is (records, wall_clock_ms or None)."""
    module = importlib.import_module(topology_module)
    task = StreamTask(module.build_topology(**options), partition=partition, initial_wall_clock_ms=0)
    for records, wall_clock_ms in phases:
        for key, value, ts in records:
            task.process(module.INPUT_TOPIC, key, value, ts)
        if wall_clock_ms is not None:
            task.advance_wall_clock_to(wall_clock_ms)
    out = task.drain_output()
    rows: dict[str, list[tuple]] = {}
    for i, topic in enumerate(out.topics):
        rows.setdefault(topic, []).append(
            (
                out.keys[i],
                out.values[i],
                out.timestamps[i],
                out.window_starts[i],
                out.window_ends[i],
                partition,
                out.seqs[i],
            )
        )
    return rows


def reference_rows(module: str, options: dict, partitions: int, phases) -> dict[str, list[tuple]]:
    """Per topic, rows of every partition's StreamTask (including seq), sorted by (partition, seq).

    `phases`: list of (list of files, wall_clock_ms or None); every partition gets every wall clock."""
    by_partition = [(partition_records(files, partitions), wall_clock) for files, wall_clock in phases]
    result: dict[str, list[tuple]] = {}
    for p in range(partitions):
        rows = _task_rows(module, options, p, [(recs[p], wc) for recs, wc in by_partition])
        for topic, topic_rows in rows.items():
            result.setdefault(topic, []).extend(topic_rows)
    return {t: sorted(r, key=lambda row: (row[5], row[6])) for t, r in result.items()}


def driver_rows(module: str, options: dict, partitions: int, phases) -> dict[str, list[tuple]]:
    """Per topic and partition, (key, value, timestamp, window_start, window_end) from one TopologyTestDriver
    per partition, playing that partition (the per-task summaries of sensor_alerts name it)."""
    mod = importlib.import_module(module)
    by_partition = [(partition_records(files, partitions), wc) for files, wc in phases]
    result: dict[str, dict[int, list[tuple]]] = {}
    for p in range(partitions):
        driver = TopologyTestDriver(mod.build_topology(**options), initial_wall_clock_ms=0, partition=p)
        topic_in = driver.create_input_topic(mod.INPUT_TOPIC)
        for recs, wall_clock in by_partition:
            for key, value, ts in recs[p]:
                topic_in.pipe_input(key, value, ts)
            if wall_clock is not None:
                driver.advance_wall_clock_time(max(0, wall_clock - driver.wall_clock_time()))
        for topic in mod.OUTPUT_TOPICS:
            rows = []
            for r in driver.create_output_topic(topic).read_records_to_list():
                key, start, end = r.key, None, None
                if hasattr(key, "window"):
                    key, start, end = key.key, key.window.start, key.window.end
                rows.append((key, r.value, r.timestamp, start, end))
            if rows:
                result.setdefault(topic, {})[p] = rows
    return result


# ---------------------------------------------------------------------------------------------- outputs


def committed_rows(output_dir, topic: str) -> list[tuple]:
    """A committed topic as tuples of COLUMNS sorted by (partition, seq), read with pyarrow."""
    rows = []
    for batch_id in sink.committed_batch_ids(output_dir, topic):
        for r in pq.read_table(sink.batch_dir(output_dir, topic, batch_id)).to_pylist():
            rows.append(tuple(r[c] for c in COLUMNS))
    return sorted(rows, key=lambda row: (row[5], row[6]))


def committed_by_partition(output_dir, topic: str) -> dict[int, list[tuple]]:
    out: dict[int, list[tuple]] = {}
    for row in committed_rows(output_dir, topic):
        out.setdefault(row[5], []).append(row[:5])
    return out


def all_committed(output_dir, topics) -> dict[str, list[tuple]]:
    return {t: committed_rows(output_dir, t) for t in topics if committed_rows(output_dir, t)}


# --------------------------------------------------------------------------------------------- running


def run_in_process(
    spark,
    input_dir,
    output_dir,
    checkpoint_dir,
    *,
    module=SENSOR_ALERTS,
    options=None,
    partitions=3,
    max_files_per_trigger=None,
    wall_clock_ms=None,
):
    spec = JobSpec(module, dict(options or {}), partitions)
    config = RunConfig(
        str(input_dir),
        str(output_dir),
        str(checkpoint_dir),
        max_files_per_trigger=max_files_per_trigger,
        wall_clock_ms=wall_clock_ms,
    )
    return run_job(spark, spec, config)


def job_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env


def job_command(input_dir, output_dir, checkpoint_dir, *extra: str, module=SENSOR_ALERTS) -> list[str]:
    return [
        sys.executable,
        "-m",
        module,
        "--input",
        str(input_dir),
        "--output",
        str(output_dir),
        "--checkpoint",
        str(checkpoint_dir),
        *extra,
    ]


def run_cli(input_dir, output_dir, checkpoint_dir, *extra: str, timeout=600, module=SENSOR_ALERTS) -> dict:
    """Run the job's command line in a subprocess; return its printed summary."""
    done = subprocess.run(
        job_command(input_dir, output_dir, checkpoint_dir, *extra, module=module),
        env=job_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout[done.stdout.index("{") :])


def copy_files(files: list[str], target: Path) -> None:
    """Copy landing files keeping their modification times (admission order)."""
    target.mkdir(parents=True, exist_ok=True)
    for path in files:
        tmp = target / f".{Path(path).name}.tmp"
        shutil.copy2(path, tmp)
        os.rename(tmp, target / Path(path).name)


def ordered_files(directory) -> list[str]:
    return [path for path, _mtime in landing_files(directory)]
