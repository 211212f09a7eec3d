"""One task (= one input partition) through one micro-batch: process in order, tick.

Pure Python: the Spark runtime calls it from its stateful function with the task state it loads from the
state store; the in-memory runtime with state it loads from a dict (both through `task_state`). Both therefore run the same code
between "input chunks of a partition" and "output tables + new state".
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from spark_jobs.spark.job import JobSpec
from spark_jobs.spark.task_state import TaskState, new_task_state
from spark_jobs.spark.topics import topic_tables
from spark_jobs.spark.transport import OrderedInput

# The engine's count of records dropped as late (and of negative timestamps, which never get here).
LATE_METRIC = "dropped-records-total"

# A task starts at wall clock 0 (deterministic); only markers move it.
INITIAL_WALL_CLOCK_MS = 0


@dataclass
class TaskBatchResult:
    tables: dict[str, pa.Table]
    state: TaskState
    metrics: dict


def run_task_batch(
    spec: JobSpec, partition: int, state: TaskState | None, inp: OrderedInput
) -> TaskBatchResult:
    """Runs the batch on `state`'s live task (a new task if None) and returns that state, updated: the
    caller persists it (`task_state.save`)."""
    if state is None:
        state = new_task_state(spec.topology(), partition, INITIAL_WALL_CLOCK_MS)
    task = state.task
    wall_clock = state.runtime["wall_clock"]
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
    state.runtime["wall_clock"] = wall_clock
    return TaskBatchResult(tables, state, metrics)
