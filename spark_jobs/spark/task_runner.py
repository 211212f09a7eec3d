"""One task (= one input partition) through one micro-batch: restore, process in order, tick, snapshot.

Pure Python: the Spark runtime calls it from its stateful function with the state it keeps in the state
store; the in-memory runtime calls it with state it keeps in a dict. Both therefore run the same code
between "input chunks of a partition" and "output tables + new state".
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from spark_jobs.spark.job import JobSpec
from spark_jobs.spark.topics import topic_tables
from spark_jobs.spark.transport import OrderedInput

# The engine's count of records dropped as late (and of negative timestamps, which never get here).
LATE_METRIC = "dropped-records-total"

# A task starts at wall clock 0 (deterministic); only markers move it.
INITIAL_WALL_CLOCK_MS = 0


@dataclass
class TaskState:
    snapshot: bytes
    wall_clock: int


@dataclass
class TaskBatchResult:
    tables: dict[str, pa.Table]
    state: TaskState
    metrics: dict


def run_task_batch(
    spec: JobSpec, partition: int, state: TaskState | None, inp: OrderedInput
) -> TaskBatchResult:
    topology = spec.topology()
    from spark_jobs.streams.task import StreamTask

    if state is None:
        task = StreamTask(topology, partition=partition, initial_wall_clock_ms=INITIAL_WALL_CLOCK_MS)
        wall_clock = INITIAL_WALL_CLOCK_MS
    else:
        task = StreamTask.restore(topology, state.snapshot)
        wall_clock = state.wall_clock
    late_before = task.metrics().get(LATE_METRIC, 0)
    if inp.records:
        task.process_batch(spec.input_topic, inp.keys, inp.values, inp.timestamps)
    for marker in inp.wall_clocks:
        # Markers of a restarted scheduled run may repeat a value; the clock only moves forward.
        if marker > wall_clock:
            task.advance_wall_clock_to(marker)
            wall_clock = marker
    output = task.drain_output()
    tables = topic_tables(output, partition, spec.topic_schemas)
    task_metrics = task.metrics()
    metrics = {
        "partition": partition,
        "processed": inp.records,
        "late": int(task_metrics.get(LATE_METRIC, 0) - late_before),
        "emitted": {topic: table.num_rows for topic, table in tables.items()},
        "wall_clock": wall_clock,
        "task_metrics": {k: v for k, v in task_metrics.items() if isinstance(v, int | float)},
    }
    return TaskBatchResult(tables, TaskState(task.snapshot(), wall_clock), metrics)
