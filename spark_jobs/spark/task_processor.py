"""Stage 3's stateful processor for `transformWithStateInPandas`, and the task-state store over its state
variables.

A module of its own, light to import: at every query start Spark's driver unpickles the processor in a new
Python process, only to call `init` and learn its state variables. Importing the runtime there (pandas
above all, and the parsing and sink modules) and the engine (numpy) would add their import time to every
run, so the function that processes the rows and the engine are imported when the first rows come, in
the executors' Python workers.
"""

from __future__ import annotations

from pyspark.sql.streaming.stateful_processor import StatefulProcessor
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

from spark_jobs.spark.job import JobSpec

# The state variables' schemas, as types: given as DDL text, pyspark has the JVM parse each (six round trips
# to the state server at every task's `init`, each micro-batch).
CHUNK_KEY = StructType([StructField("part", StringType()), StructField("chunk", IntegerType())])
CHUNK_VALUE = StructType([StructField("data", BinaryType())])
META = StructType([StructField("version", LongType()), StructField("manifest", BinaryType())])


class SparkPartStore:
    """`task_state.PartStore` over the state variables of `transformWithStateInPandas` (RocksDB): a MapState
    (part, chunk) -> bytes, where only the entries written in a micro-batch go to its changelog, and a
    ValueState with the version and the manifest."""

    def __init__(self, chunks, meta):
        self._chunks = chunks
        self._meta = meta

    def read_meta(self):
        value = self._meta.get()  # None when unset: one round trip to the state server, not two
        if value is None:
            return None
        version, manifest = value
        return version, bytes(manifest)

    def write_meta(self, version, manifest):
        self._meta.update((version, manifest))

    def read_chunks(self):
        for (part, index), (data,) in self._chunks.iterator():
            yield part, index, data

    def read_chunk(self, part, index):
        value = self._chunks.getValue((part, index))
        return None if value is None else bytes(value[0])

    def write_chunk(self, part, index, data):
        self._chunks.updateValue((part, index), (data,))

    def remove_chunk(self, part, index):
        self._chunks.removeKey((part, index))


class TaskProcessor(StatefulProcessor):
    """Stage 3 (executors): one call per task (group) and micro-batch, its state in small entries."""

    def __init__(
        self,
        spec: JobSpec,
        checkpoint_id: str,
        chunk_bytes: int,
        output_dir: str,
        last_landed=None,
        live_tasks: int | None = None,
    ):
        self.spec = spec
        # Per input topic, its last landed file when the query started (multi-input record selection).
        self.last_landed = last_landed
        self.checkpoint_id = checkpoint_id
        # Read on the driver and shipped with the processor, so that a test's setting reaches the workers.
        self.chunk_bytes = chunk_bytes
        self.live_tasks = live_tasks
        # The task stages its output there itself: a `mapInArrow` after this stage would need another Python
        # worker per Spark task, and the output another trip through the JVM.
        self.output_dir = output_dir

    def init(self, handle) -> None:
        self._store = SparkPartStore(
            handle.getMapState("chunks", CHUNK_KEY, CHUNK_VALUE),
            handle.getValueState("meta", META),
        )

    def handleInputRows(self, key, rows, timerValues):
        # here, not at import: see the module docstring
        from spark_jobs.spark.runtime import run_partition
        from spark_jobs.streams.runtime.gc_pause import no_cyclic_gc

        with no_cyclic_gc():
            yield from run_partition(
                self.spec,
                rows,
                self._store,
                self.checkpoint_id,
                self.output_dir,
                self.chunk_bytes,
                self.last_landed,
                self.live_tasks,
            )

    def close(self) -> None:
        pass
