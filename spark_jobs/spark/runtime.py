"""Runs a job's Topology on Spark Structured Streaming with Kafka Streams' per-task guarantees.

The query, stage by stage:

1. File sources in `binaryFile` format, unioned: the landing directory of each input topic (whole files,
   admitted by Spark in modification-time order, optionally `maxFilesPerTrigger` at a time per topic) and
   the wall-clock control directory under the checkpoint (see `wall_clock`). For local directories Spark only lists
   the files: their content is not in the plan.
2. `mapInArrow` (`parse_stage`): each file is read (if local), parsed, validated and partitioned
   (`landing`), and cut into chunks of records per partition (`transport`), each with its topic; bad
   records go to the pseudo-partition -1. A multi-input job's file also tells every partition that it
   was read.
3. `groupBy(task group).transformWithStateInPandas` (`task_processor`, then `run_partition` here): one
   group per partition = one task (a task group is an integer chosen per partition so that Spark spreads
   the partitions evenly over its tasks). The task state is kept in small entries of Spark's state store
   (RocksDB provider, checkpointed), and a micro-batch writes only the parts that changed
   (`task_state`); the live task stays in the Python worker between micro-batches. Each micro-batch
   processes the partition's records in order, applies wall-clock markers, and emits its output as Arrow
   tables (`task_runner`), which the task stages as Parquet files, one per topic, returning their manifest
   (`sink.stage_partition_output`). A multi-input task takes its records by Kafka's record selection,
   waiting for a topic that still has landed, unread files (the query ships each topic's last landed file
   as listed when it starts: `task_runner.select_records`).
4. `foreachBatch`: the driver collects the manifests and publishes each topic's staged files with an
   atomic rename (`sink.commit_batch`).

Spark logs a micro-batch's offsets before running it and restores the state of the previous version on
replay, so a micro-batch that is run again after a crash yields the same rows, and the sink publishes
each batch once.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pandas as pd
import pyarrow as pa

from spark_jobs.spark import progress, sink, task_state, wall_clock
from spark_jobs.spark.errors import UserError
from spark_jobs.spark.job import JobSpec, write_job_record
from spark_jobs.spark.parse_stage import SOURCE_CONTROL, SOURCE_LANDING, is_local, local_path, parse_files
from spark_jobs.spark.summary import RunSummary
from spark_jobs.spark.task_processor import TaskProcessor
from spark_jobs.spark.task_runner import INITIAL_WALL_CLOCK_MS, run_task_batch
from spark_jobs.spark.topics import QUARANTINE_TOPIC, quarantine_table
from spark_jobs.spark.transport import (
    INPUT_CHUNK_ARROW,
    KIND_QUARANTINE,
    METRICS_TOPIC,
    QUARANTINE_PARTITION,
    InputChunk,
    metrics_payload,
    ordered_input,
    quarantined_rows,
)
from spark_jobs.spark.worker_memory import WORKER_ENVIRONMENT, freeze_long_lived, return_free_memory

AVAILABLE_NOW = "available-now"
CONTINUOUS = "continuous"
TRIGGERS = (AVAILABLE_NOW, CONTINUOUS)

# The binaryFile source's columns (its own schema: path, modificationTime, length, content).
BINARY_FILE_ARROW = pa.schema(
    [
        ("path", pa.string()),
        ("modificationTime", pa.timestamp("us", tz="UTC")),
        ("length", pa.int64()),
        ("content", pa.binary()),
    ]
)

CHECKPOINT_FILE_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
FILE_SYSTEM_CHECKPOINT_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)

# Bytes of one Arrow batch of the stateful stage's input, and of a task's state as it reads it whole
# (query_settings): a few input chunks, 8 state chunks.
ARROW_BATCH_BYTES = 2 * 2**20

JOB_FILE = "job.json"
SPARK_CHECKPOINT = "spark"


def spark_schema(schema: pa.Schema):
    """A schema of the query plan as Spark's type, converted in Python. Given as DDL text (or a type by
    name, as in `cast("string")`), pyspark has the JVM parse it with Spark's SQL parser, whose first use
    in a JVM is slow (its grammar's tables are built then), on the driver before the query starts;
    nothing else in our query uses that parser."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


class IdentityMismatch(UserError):
    """The checkpoint or the output folder belongs to another job, options, partition count or checkpoint."""


class MissingInput(UserError, FileNotFoundError):
    """An input folder of the run does not exist or cannot be read."""


def _check_same_options(checkpoint: Path, stored: dict, wanted: dict) -> None:
    """Task state is only meaningful under the options that built it (a new window size over old windows
    corrupts results), so a run must use its checkpoint's options."""
    if stored == wanted:
        return
    names = sorted(set(stored) | set(wanted))
    differ = [n for n in names if stored.get(n, "(absent)") != wanted.get(n, "(absent)")]
    detail = ", ".join(
        f"{n}={wanted.get(n, '(absent)')} (checkpoint: {stored.get(n, '(absent)')})" for n in differ
    )
    raise IdentityMismatch(
        f"checkpoint {checkpoint} was made with other options: {detail}. Its task state is only valid under "
        "its own options: run with the checkpoint's options, or start a new checkpoint with a new output "
        "folder for the new ones"
    )


@dataclass
class RunConfig:
    # The landing folder of a one-input job, or {topic: folder} for each input topic.
    input_dir: str | dict[str, str]
    output_dir: str
    checkpoint_dir: str
    trigger: str = AVAILABLE_NOW
    max_files_per_trigger: int | None = None
    wall_clock_ms: int | None = None
    processing_interval: str = "10 seconds"
    wall_clock_tick_ms: int = 10_000
    run_for_s: float | None = None
    # Parallelism of the stateful stage; fixed by the checkpoint on its first run. None: the session's.
    shuffle_partitions: int | None = 2
    # Spark tasks of the stateful stage whose partitions a Python worker keeps live between micro-batches.
    # Spark gives a task to whichever worker is idle: a worker that kept a task it ran before catches it up
    # from the parts written since, where one that did not reads its whole state. Each one kept costs the
    # memory of its partitions' state in every worker, all the time; 0 (the default) keeps none: a worker
    # holds one partition's state at a time, read from the store at each micro-batch (for a state that is
    # slow to read compared with a micro-batch's work, 2 keeps every task of a local[2] run live).
    live_spark_tasks: int = 0

    def __post_init__(self):
        if self.live_spark_tasks < 0:
            raise UserError("live_spark_tasks must be at least 0")
        if self.trigger not in TRIGGERS:
            raise UserError(f"trigger must be one of {TRIGGERS}, got {self.trigger!r}")
        if self.max_files_per_trigger is not None and self.max_files_per_trigger < 1:
            raise UserError("max_files_per_trigger must be at least 1")
        if self.wall_clock_ms is not None and self.trigger == CONTINUOUS:
            raise UserError("--wall-clock is for available-now runs; continuous runs use the system clock")


# ---------------------------------------------------------------------------------------------- stages


def _manifest_frame(staged: list[tuple], metrics: dict) -> pd.DataFrame:
    """The task's manifest: its staged files, then its metrics."""
    rows = [*staged, (METRICS_TOPIC, None, 0, metrics_payload(metrics))]
    return pd.DataFrame(rows, columns=sink.MANIFEST_COLUMNS)


def run_partition(
    spec: JobSpec,
    frames,
    store: task_state.PartStore,
    checkpoint_id: str,
    output_dir: str,
    chunk_bytes: int | None = None,
    last_landed=None,
    live_tasks: int | None = None,
):
    """Stage 3, one task's micro-batch: its input chunks in; its output staged as Parquet files under
    `output_dir` (`sink.stage_partition_output`), and the manifest of them out."""
    freeze_long_lived()  # the worker's modules, out of the collection after the task (worker_memory)
    began = time.process_time()
    chunks = [
        InputChunk(*row)
        for frame in frames
        for row in frame[
            ["partition", "kind", "file_mtime", "file_path", "first_line", "records", "payload", "topic"]
        ].itertuples(index=False, name=None)
    ]
    partition = chunks[0].partition  # a group is one partition (its key is the partition's task group)
    if partition == QUARANTINE_PARTITION:
        reasons, raws, files, lines, topics = quarantined_rows(
            [c for c in chunks if c.kind == KIND_QUARANTINE]
        )
        by_reason: dict[str, int] = {}
        for reason in reasons:
            by_reason[reason] = by_reason.get(reason, 0) + 1
        metrics = {"partition": partition, "quarantined": len(reasons), "reasons": by_reason}
        table = quarantine_table(reasons, raws, files, lines, topics)
        yield _manifest_frame(
            sink.stage_partition_output(output_dir, partition, {QUARANTINE_TOPIC: table}), metrics
        )
        return
    cache_key = (checkpoint_id, partition)
    # CPU seconds per phase of the task (in the task metrics: where a micro-batch's time goes)
    started = time.process_time()
    state, how = task_state.load(store, spec.topology(), partition, INITIAL_WALL_CLOCK_MS, cache_key)
    loaded = time.process_time()
    records = ordered_input(chunks)
    del chunks  # the decoded columns replace the chunks' bytes: not both at the batch's peak
    result = run_task_batch(spec, partition, state, records, last_landed)
    del records
    processed = time.process_time()
    written = task_state.save(store, result.state, cache_key, chunk_bytes, live_tasks)
    saved = time.process_time()
    staged = sink.stage_partition_output(output_dir, partition, result.tables)
    metrics = result.metrics
    metrics["task_metrics"].update(
        written.metrics(how),
        **task_state.size_metrics(result.state),
        cpu_input_s=round(started - began, 3),
        cpu_state_load_s=round(loaded - started, 3),
        cpu_process_s=round(processed - loaded, 3),
        cpu_state_save_s=round(saved - processed, 3),
        cpu_output_s=round(time.process_time() - saved, 3),
    )
    # The batch's input, output and (unless the worker keeps it live) task state go now, before the worker's
    # next task: see worker_memory.
    del state, result
    return_free_memory()
    yield _manifest_frame(staged, metrics)


# --------------------------------------------------------------------------------------------- driver


def balanced_task_groups(num_partitions: int, shuffle_partitions: int) -> dict[int, int]:
    """partition -> the key Spark groups its chunks by, so that partitions spread evenly over the shuffle
    partitions (= Spark tasks of the stateful stage).

    Spark places a group by Murmur3 hash of its key, and small integers hash unevenly (with 2 shuffle
    partitions, partitions 0, 1 and 3 would share one Spark task and 2 have the other). So partition p
    gets the smallest unused integer that Spark itself places in shuffle partition p mod S."""
    free: dict[int, list[int]] = {slot: [] for slot in range(shuffle_partitions)}
    key = 0
    while any(len(free[p % shuffle_partitions]) <= p // shuffle_partitions for p in range(num_partitions)):
        free[shuffle_partition_of_int(key, shuffle_partitions)].append(key)
        key += 1
    return {p: free[p % shuffle_partitions][p // shuffle_partitions] for p in range(num_partitions)}


_MASK32 = 0xFFFFFFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK32


def shuffle_partition_of_int(key: int, shuffle_partitions: int) -> int:
    """The shuffle partition Spark's hash partitioning gives an int key: pmod(Murmur3_x86_32.hashInt(key,
    seed 42), n), as `pmod(hash(key), n)` computes it, without a Spark job (a new checkpoint's first run
    would otherwise pay one, and its JVM warm-up, before the query starts)."""
    k1 = (key & _MASK32) * 0xCC9E2D51 & _MASK32
    k1 = _rotl32(k1, 15) * 0x1B873593 & _MASK32
    h1 = 42 ^ k1
    h1 = (_rotl32(h1, 13) * 5 + 0xE6546B64) & _MASK32
    h1 ^= 4  # the input's length in bytes
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _MASK32
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _MASK32
    h1 ^= h1 >> 16
    signed = h1 - (1 << 32) if h1 & 0x80000000 else h1
    return signed % shuffle_partitions


def _make_package_importable_by_workers(spark) -> None:
    """Python workers import the job and this package by name. Spark hands `SparkContext.environment`
    to every Python function it creates (merged into the workers' PYTHONPATH), so adding the directory
    that holds `spark_jobs` covers local mode and clusters sharing this file system; a cluster without it
    gets the package from spark-submit's --py-files."""
    root = str(Path(__file__).resolve().parents[2])
    environment = spark.sparkContext.environment
    paths = [p for p in environment.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        environment["PYTHONPATH"] = os.pathsep.join([root, *paths])


def _set_worker_environment(spark) -> None:
    """The Python workers' environment (`worker_memory.WORKER_ENVIRONMENT`), where neither the session's
    nor this process's (which the JVM and its workers inherit) sets the variable."""
    environment = spark.sparkContext.environment
    for name, value in WORKER_ENVIRONMENT.items():
        if name not in environment and name not in os.environ:
            environment[name] = value


class TopologyRuntime:
    """Builds and runs the streaming query of one job; one instance per run."""

    def __init__(self, spark, spec: JobSpec, config: RunConfig, job_name: str | None = None):
        self.spark = spark
        self.spec = spec
        self.config = config
        self.summary = RunSummary(
            job=job_name or spec.module, trigger=config.trigger, partitions=spec.num_partitions
        )
        self._declared = spec.topic_schemas
        _make_package_importable_by_workers(spark)
        _set_worker_environment(spark)
        self._checkpoint = Path(config.checkpoint_dir)
        self.query_name = f"{self.summary.job}-{self.summary.run_id}".replace(".", "_")
        self._control = wall_clock.control_dir(config.checkpoint_dir)

    # -- checkpoint identity

    def _check_identity(self) -> None:
        """Refuses a checkpoint or an output folder of another run (`read_checkpoint_record`); on a new
        checkpoint, records its job, options, partitions, task groups and state layout. The task groups
        are chosen once, with the checkpoint."""
        options = self.spec.effective_options()
        record = read_checkpoint_record(self._checkpoint, self.spec)
        if record is not None:
            checkpoint_id, groups, shuffle = record
        else:
            checkpoint_id = uuid.uuid4().hex
            shuffle = self.config.shuffle_partitions or int(
                self.spark.conf.get("spark.sql.shuffle.partitions")
            )
            groups = balanced_task_groups(self.spec.num_partitions, shuffle)
            self._checkpoint.mkdir(parents=True, exist_ok=True)
            path = self._checkpoint / JOB_FILE
            tmp = path.with_suffix(".tmp")
            identity = {"module": self.spec.module, "partitions": self.spec.num_partitions}
            new = {**identity, "options": options, "checkpoint_id": checkpoint_id, "task_groups": groups}
            new["state_layout"] = task_state.STATE_LAYOUT
            new["shuffle_partitions"] = shuffle  # fixed by the checkpoint, as the groups' placement
            tmp.write_text(json.dumps(new, sort_keys=True) + "\n")
            os.replace(tmp, path)
        self._task_groups = groups
        # Live tasks a Python worker keeps: the partitions of `live_spark_tasks` Spark tasks of the stateful
        # stage (groups are spread evenly, see balanced_task_groups), the least recently run going first.
        per_spark_task = -(-self.spec.num_partitions // shuffle) if shuffle else self.spec.num_partitions
        self._live_tasks = min(self.spec.num_partitions, per_spark_task * self.config.live_spark_tasks)
        self._checkpoint_id = checkpoint_id
        check_output_owner(
            self.config.output_dir,
            sink.claim_output(self.config.output_dir, checkpoint_id),
            checkpoint_id,
            self._checkpoint,
        )
        write_job_record(self.config.output_dir, self.spec, checkpoint_id)

    def _check_inputs(self) -> None:
        check_inputs(self.spec, self.config.input_dir)

    # -- the query

    def _source(self, directory: Path, name: str, max_files: int | None, topic: str | None = None):
        from pyspark.sql import functions as F
        from pyspark.sql.types import BinaryType, StringType

        reader = (
            self.spark.readStream.format("binaryFile")
            .schema(spark_schema(BINARY_FILE_ARROW))
            # Without this, files more than 7 days older than the newest seen file would be skipped silently.
            .option("maxFileAge", "36500d")
        )
        if max_files is not None:
            reader = reader.option("maxFilesPerTrigger", max_files)
        if name == SOURCE_CONTROL:
            # Markers are ours and, once their batch is committed, never read again: a continuous run
            # writes one per tick, so delete them rather than list an ever longer directory.
            reader = reader.option("cleanSource", "delete")
        files = (
            reader.load(str(directory))
            .withColumn("source", F.lit(name))
            .withColumn("topic", F.lit(topic).cast(StringType()))
        )
        if is_local(str(directory)):
            # Python reads local files itself: without `content` in the plan, Spark lists the files but
            # does not read them, which saves the JVM a copy of every byte and its handing-over to Python.
            # (On a cluster, a local path must exist on every worker for Spark too.)
            files = files.withColumn("content", F.lit(None).cast(BinaryType()))
        return files

    def input_dirs(self) -> dict[str, str]:
        """{topic: landing folder} of the run (see `input_dirs`)."""
        return input_dirs(self.spec, self.config.input_dir)

    def build_query(self):
        self._control.mkdir(parents=True, exist_ok=True)
        dirs = self.input_dirs()
        files = self._source(self._control, SOURCE_CONTROL, None)
        for topic, directory in dirs.items():
            files = files.unionByName(
                self._source(Path(directory), SOURCE_LANDING, self.config.max_files_per_trigger, topic)
            )
        multi_input = len(dirs) > 1
        topology = self.spec.topology()
        # Listed when the query starts: an available-now query admits exactly these files.
        last_landed = {topic: last_landed_file(d) for topic, d in dirs.items()} if multi_input else None
        chunks = files.select("source", "topic", "path", "modificationTime", "content").mapInArrow(
            partial(
                parse_files,
                num_partitions=self.spec.num_partitions,
                task_groups=self._task_groups,
                with_values={topic: topology.reads_values(topic) for topic in dirs},
                multi_input=multi_input,
            ),
            spark_schema(INPUT_CHUNK_ARROW),
        )
        return (
            chunks.groupBy("task_group")
            .transformWithStateInPandas(
                TaskProcessor(
                    self.spec,
                    self._checkpoint_id,
                    task_state.STATE_CHUNK_BYTES,
                    self.config.output_dir,
                    last_landed,
                    self._live_tasks,
                ),
                spark_schema(sink.MANIFEST_ARROW),
                "Append",
                # Processing-time mode never terminates under availableNow (Spark 4.3); no timers are used.
                "None",
            )
            .writeStream.queryName(self.query_name)
            .foreachBatch(self._publish)
            .option("checkpointLocation", str(self._checkpoint / SPARK_CHECKPOINT))
        )

    def query_settings(self) -> dict[str, str]:
        """The SQL settings this job's query runs with, on top of the session's."""
        conf = {
            # Commit a changelog per batch instead of uploading RocksDB files: far less written per batch.
            "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
            # Files are parsed whole, one Spark task per few files: small tasks balance over the cores.
            "spark.sql.files.maxPartitionBytes": "16m",
            # Spark 4 hashes every shuffled row to see whether a re-run map task wrote other rows (then it
            # re-runs the stages that read them). The parsing stage is deterministic (a landed file never
            # changes, and the task orders its input by file and line), so that is cost alone.
            "spark.sql.shuffle.orderIndependentChecksum.enabled": "false",
            # Spark keeps one pool of Python workers (and one daemon forking them) per environment, and
            # sets SPARK_SIMPLIFIED_TRACEBACK for the parsing stage's workers but not for those of
            # transformWithStateInPandas: two daemons and twice the workers, each importing pyarrow and
            # numpy, unless neither sets it. (Tracebacks from our stages then keep pyspark's frames.)
            "spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled": "false",
            # The stateful stage's input reaches Python as Arrow batches, built in the JVM's direct memory,
            # where a batch of 10,000 rows (the default bound) holds a whole micro-batch of a partition
            # (chunks of up to 20k records each): tens of MB per Spark task. A bound in bytes cuts them into
            # batches of a few chunks (the task reads a group's batches in turn), and the JVM's peak is
            # lower by the difference. Native queries send nothing to Python: the setting changes nothing
            # there.
            "spark.sql.execution.arrow.maxBytesPerBatch": str(ARROW_BATCH_BYTES),
            # A task reading its state whole gets the entries of its MapState in Arrow batches of 10,000
            # (the default), a whole state in one; the same bound in bytes, in state chunks.
            "spark.sql.execution.arrow.transformWithStateInPySpark.maxStateRecordsPerBatch": str(
                max(1, ARROW_BATCH_BYTES // task_state.STATE_CHUNK_BYTES)
            ),
        }
        if self.config.shuffle_partitions is not None:
            conf["spark.sql.shuffle.partitions"] = str(self.config.shuffle_partitions)
        if self.spark.conf.get(CHECKPOINT_FILE_MANAGER, None) is None and self._checkpoint_is_local():
            # Each micro-batch writes checkpoint files (offsets, commits, a state changelog per task). Without
            # its native library (pip's pyspark has none), Hadoop's local file system forks a process per
            # permission set and per symlink check: Spark's default FileContext-based manager makes more of
            # those checks per file it writes than the FileSystem-based one.
            conf[CHECKPOINT_FILE_MANAGER] = FILE_SYSTEM_CHECKPOINT_MANAGER
        return conf

    def _checkpoint_is_local(self) -> bool:
        """Whether Spark writes the checkpoint to the local file system (a path without a scheme goes to
        Hadoop's default file system)."""
        scheme = urlparse(self.config.checkpoint_dir).scheme
        if not scheme:
            scheme = urlparse(self.spark.sparkContext._jsc.hadoopConfiguration().get("fs.defaultFS")).scheme
        return scheme == "file"

    def _start(self, writer):
        """Start with this job's query settings, leaving the (possibly shared) session's own untouched:
        a query runs on a clone of the session taken at start."""
        conf = self.query_settings()
        previous = {key: self.spark.conf.get(key, None) for key in conf}
        for key, value in conf.items():
            self.spark.conf.set(key, value)
        try:
            return writer.start()
        finally:
            for key, value in previous.items():
                if value is None:
                    self.spark.conf.unset(key)
                else:
                    self.spark.conf.set(key, value)

    def _publish(self, batch, batch_id: int) -> None:
        """foreachBatch: empty the staging directories, run the micro-batch (its tasks stage their files and
        return their manifest), then commit on the driver."""
        sink.prepare_batch(self.config.output_dir, batch_id)
        manifest = batch.collect()
        staged: dict[str, list[str]] = {}
        metrics = []
        for row in manifest:
            if row.topic == METRICS_TOPIC:
                metrics.append(json.loads(bytes(row.payload)))
            else:
                staged.setdefault(row.topic, []).append(row.file)
        for files in staged.values():
            files.sort()  # part numbering independent of task completion order
        sink.commit_batch(self.config.output_dir, batch_id, staged, self._declared)
        self.summary.add_batch(batch_id, metrics)
        self.summary.write(self.config.output_dir)

    # -- triggers

    def run(self) -> RunSummary:
        self._check_inputs()
        self._check_identity()
        self._progress = progress.BatchProgressLogger(self.summary)
        if self.config.trigger == AVAILABLE_NOW:
            self._run_available_now()
        else:
            self._run_continuous()
        self.summary.write(self.config.output_dir)
        return self.summary

    def _run_available_now(self) -> None:
        self._await(self._start(self.build_query().trigger(availableNow=True)))
        if self.config.wall_clock_ms is not None:
            # The run's wall clock, after its input, for every task (docs/semantics.md section 8).
            wall_clock.write_marker(self._control, self.config.wall_clock_ms, self.spec.num_partitions)
            self._await(self._start(self.build_query().trigger(availableNow=True)))

    def _run_continuous(self) -> None:
        ticker = wall_clock.WallClockTicker(
            self._control, self.spec.num_partitions, self.config.wall_clock_tick_ms
        )
        query = self._start(self.build_query().trigger(processingTime=self.config.processing_interval))
        ticker.start()
        stop = threading.Event()
        previous = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda *_: stop.set())
        deadline = None if self.config.run_for_s is None else time.monotonic() + self.config.run_for_s
        try:
            while query.isActive and not stop.is_set():
                if deadline is not None and time.monotonic() >= deadline:
                    break
                query.awaitTermination(progress.POLL_S)
                self._progress.poll(query)
        finally:
            ticker.stop()
            if query.isActive:
                query.stop()
            self._progress.poll(query)  # the batches that ended since the last look
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if query.exception() is not None:
            raise RuntimeError(f"streaming query failed: {query.exception()}")

    def _await(self, query) -> None:
        while not query.awaitTermination(progress.POLL_S):
            self._progress.poll(query)
        self._progress.poll(query)  # the batches that ended since the last look
        if query.exception() is not None:
            raise RuntimeError(f"streaming query failed: {query.exception()}")


def read_job_record(checkpoint: Path) -> dict[str, Any] | None:
    """The checkpoint's own record (job, options, partitions, task groups), None where there is none. A
    record this version cannot read (another state layout, or fields missing) is refused (IdentityMismatch)
    with what to do."""
    path = checkpoint / JOB_FILE
    if not path.exists():
        return None
    stored = json.loads(path.read_text())
    missing = {"checkpoint_id", "task_groups", "options", "module", "partitions"} - set(stored)
    layout = stored.get("state_layout")
    if missing or layout != task_state.STATE_LAYOUT:
        what = (
            f"was written by an older version of this runtime (its {JOB_FILE} has no "
            f"{', '.join(sorted(missing))})"
            if missing
            else f"keeps task state in layout {layout or 'single-snapshot'}"
        )
        raise IdentityMismatch(
            f"checkpoint {checkpoint} {what}, this version reads task state layout {task_state.STATE_LAYOUT} "
            "only: start a new checkpoint, with a new output folder (or read it with the version that "
            "wrote it)"
        )
    return stored


def read_checkpoint_record(checkpoint: Path, spec: JobSpec) -> tuple[str, dict[int, int], int | None] | None:
    """(checkpoint id, task groups, shuffle partitions) of an existing checkpoint, None for a new one.

    A checkpoint belongs to one job, its options and one partition count (a task's state is keyed by its
    partition and built under the options: changing either under a checkpoint would corrupt it), and keeps
    task state in one layout; a run that differs is refused (IdentityMismatch) with what to do."""
    stored = read_job_record(checkpoint)
    if stored is None:
        return None
    stored.pop("state_layout")
    checkpoint_id = stored.pop("checkpoint_id")
    groups = {int(p): g for p, g in stored.pop("task_groups").items()}
    shuffle = stored.pop("shuffle_partitions", None)
    _check_same_options(checkpoint, stored.pop("options"), spec.effective_options())
    identity = {"module": spec.module, "partitions": spec.num_partitions}
    stored = {k: v for k, v in stored.items() if k in identity}
    if stored != identity:
        raise IdentityMismatch(f"checkpoint {checkpoint} belongs to {stored}, not {identity}")
    return checkpoint_id, groups, shuffle


def check_output_owner(output_dir: str, owner: str | None, checkpoint_id: str | None, checkpoint) -> None:
    """An output folder belongs to one checkpoint (`owner`, see `sink.output_owner`): batch ids restart
    with a new checkpoint, so a new one over an old output would skip batches that look published already."""
    if owner is not None and owner != checkpoint_id:
        raise IdentityMismatch(
            f"output {output_dir} was written with another checkpoint ({owner}); "
            f"use that checkpoint, or a new output folder with this one ({checkpoint})"
        )


def check_inputs(spec: JobSpec, given: str | dict[str, str]) -> None:
    """A mistyped input path must fail loudly, not create an empty folder and succeed with 0 rows; so
    must a topic that is not the job's, or one without its folder."""
    for directory in input_dirs(spec, given).values():
        if not is_local(str(directory)):
            continue
        path = Path(local_path(str(directory)))
        if not path.is_dir():
            raise MissingInput(
                f"input folder {directory} does not exist (or is not a folder): check the path; "
                "an input that has no files yet must still be created by whoever lands them"
            )
        if not os.access(path, os.R_OK | os.X_OK):
            raise MissingInput(f"input folder {directory} cannot be read: check its permissions")


def check_run(spec: JobSpec, config: RunConfig) -> None:
    """The user's mistakes that can be found before Spark starts, reading only: inputs (`check_inputs`),
    a checkpoint or an output folder of another run, and options the topology refuses (e.g. a window of
    size 0). The run itself checks the same again (`TopologyRuntime.run`)."""
    check_inputs(spec, config.input_dir)
    record = read_checkpoint_record(Path(config.checkpoint_dir), spec)
    checkpoint_id = record[0] if record is not None else None
    check_output_owner(
        config.output_dir, sink.output_owner(config.output_dir), checkpoint_id, config.checkpoint_dir
    )
    try:
        spec.topology()
    except ValueError as error:
        raise UserError(f"{spec.module}: the options do not make a topology: {error}") from error


def input_dirs(spec: JobSpec, given: str | dict[str, str]) -> dict[str, str]:
    """{topic: landing folder}: a folder alone is the input of a one-input job; a multi-input job needs
    one folder for each of its topics, and nothing else."""
    topics = spec.input_topics
    if not isinstance(given, dict):
        if len(topics) != 1:
            raise UserError(
                f"{spec.module} reads {len(topics)} topics {list(topics)}: give one --input TOPIC=DIR for each, "
                f"not one folder ({given})"
            )
        return {topics[0]: str(given)}
    unknown = [topic for topic in given if topic not in topics]
    if unknown:
        raise UserError(f"{unknown} not input topics of {spec.module}; its input topics: {list(topics)}")
    missing = [topic for topic in topics if topic not in given]
    if missing:
        raise UserError(f"no input folder for topics {missing} of {spec.module}: add --input TOPIC=DIR")
    return {topic: str(given[topic]) for topic in topics}


def last_landed_file(directory: str) -> tuple[int, str] | None:
    """(mtime ms, path) of the last file of a landing folder in Spark's admission order, None if it has
    none. Only local folders are listed: a remote topic never waits (its order is then timing's)."""
    if not is_local(directory):
        return None
    from spark_jobs.spark.in_memory import landing_files

    files = landing_files(os.path.abspath(local_path(directory)))
    return (files[-1][1], files[-1][0]) if files else None


def run_job(spark, spec: JobSpec, config: RunConfig, job_name: str | None = None) -> RunSummary:
    return TopologyRuntime(spark, spec, config, job_name).run()
