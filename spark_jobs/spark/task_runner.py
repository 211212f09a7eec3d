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
from spark_jobs.spark.topics import LATE_TOPIC, late_table, topic_tables
from spark_jobs.spark.transport import OrderedInput, RecordOrigins
from spark_jobs.streams.runtime.selection import record_runs

# A task starts at wall clock 0 (deterministic); only markers move it.
INITIAL_WALL_CLOCK_MS = 0

# Records a task processes at a time: the engine's work on a batch (its columns, arrays and groups) takes
# memory in proportion to the batch, and a worker holds it beside the task's state, so a micro-batch's
# records go to the task in slices of at most this many (processing consecutive slices is processing the
# whole: `StreamTask.process_batch`).
PROCESS_SLICE = 65_536


@dataclass
class TaskBatchResult:
    tables: dict[str, pa.Table]
    state: TaskState
    metrics: dict


# state.runtime keys of a multi-input task: records taken from files but not processed yet, per topic
# (keys, values, timestamps), and per topic the last landing file (mtime, path) the task has read.
WAITING = "waiting"
READ_UP_TO = "read_up_to"

LastLanded = dict[str, tuple[int, str] | None]


def run_task_batch(
    spec: JobSpec,
    partition: int,
    state: TaskState | None,
    inp: OrderedInput,
    last_landed: LastLanded | None = None,
) -> TaskBatchResult:
    """Runs the batch on `state`'s live task (a new task if None) and returns that state, updated: the
    caller persists it (`task_state.save`).

    A multi-input job's records are taken by Kafka's record selection (`select_records`); `last_landed`
    is, per input topic, the last file (mtime, path) landed when the query started (None: no file).
    Without it, no input waits for files (every record at hand is processed)."""
    if state is None:
        state = new_task_state(spec.topology(), partition, INITIAL_WALL_CLOCK_MS)
    task = state.task
    wall_clock = state.runtime["wall_clock"]
    output = OutputTables(spec, partition)
    topics = spec.input_topics
    if len(topics) == 1:
        processed = inp.records
        if processed:
            columns = inp.by_topic(topics[0])
            unknown = set(columns) - {topics[0]}
            if unknown:
                raise ValueError(f"records of {sorted(unknown)}, not an input of {spec.module}")
            origins = inp.origins_of(topics[0], topics[0])
            keys, values, timestamps = columns[topics[0]]
            for start in range(0, processed, PROCESS_SLICE):
                end = start + PROCESS_SLICE
                task.process_batch(
                    topics[0],
                    keys[start:end],
                    values[start:end],
                    timestamps[start:end],
                    origins=None if origins is None else origins[start:end],
                )
                output.add(task.drain_output())  # as Arrow, in order: a slice's rows go with it
    else:
        processed = select_records(task, topics, state.runtime, inp, last_landed)
    for marker in inp.wall_clocks:
        # Markers of a restarted scheduled run may repeat a value; the clock only moves forward.
        if marker > wall_clock:
            task.advance_wall_clock_to(marker)
            wall_clock = marker
    output.add(task.drain_output())
    tables = output.tables()
    emitted = {topic: table.num_rows for topic, table in tables.items()}
    late = task.drain_late()  # committed with the output: each late record is written once
    if late:
        tables[LATE_TOPIC] = late_table(late)
    task_metrics = task.metrics()
    metrics = {
        "partition": partition,
        "processed": processed,
        "late": len(late),
        "late_by_node": _count_by_node(late),
        "emitted": emitted,
        "wall_clock": wall_clock,
        "task_metrics": {k: v for k, v in task_metrics.items() if isinstance(v, int | float)},
    }
    state.runtime["wall_clock"] = wall_clock
    return TaskBatchResult(tables, state, metrics)


class OutputTables:
    """A task's output drained in steps (`StreamTask.drain_output`, numbered in order across drains), kept
    as one Arrow table per topic: rows as Arrow take far less memory than as objects."""

    def __init__(self, spec: JobSpec, partition: int) -> None:
        self._schemas = spec.topic_schemas
        self._partition = partition
        self._parts: dict[str, list[pa.Table]] = {}

    def add(self, output) -> None:
        for topic, table in topic_tables(output, self._partition, self._schemas).items():
            self._parts.setdefault(topic, []).append(table)

    def tables(self) -> dict[str, pa.Table]:
        return {
            topic: parts[0] if len(parts) == 1 else pa.concat_tables(parts)
            for topic, parts in self._parts.items()
        }


def _count_by_node(late: list) -> dict[str, int]:
    counts: dict[str, int] = {}
    for record in late:
        counts[record.node] = counts.get(record.node, 0) + 1
    return counts


def select_records(task, topics: tuple[str, ...], runtime: dict, inp: OrderedInput, last_landed) -> int:
    """Kafka's record selection over a task's input topics, independent of how files were batched
    (docs/semantics.md rule 1 and section 7; KIP-695 task idling with "landed files not yet read" for
    "lag on the broker").

    The batch's records join, per topic, those that waited (`runtime[WAITING]`). The next record is the
    head with the lowest timestamp, ties to the topic declared first; a record is only taken while every
    topic has records at hand or has been read up to its last landed file (`last_landed`, listed when the
    query started): otherwise the task waits, and what waits stays in the task state. So every record of
    files landed before a run is processed in the order of the rule-1 merge of all records, whatever the
    micro-batches, restarts or crashes. A file landing during a run is taken when a micro-batch admits it:
    an input that has read every file landed before the run does not wait for it (as Kafka does not wait
    for records the broker has not reported), so the order relative to it depends on timing, and is
    deterministic only for files landed before a run starts. Returns the number of records processed."""
    waiting: dict[str, list] = runtime.setdefault(WAITING, {})
    read_up_to: dict[str, tuple[int, str]] = runtime.setdefault(READ_UP_TO, {})
    unknown = (set(inp.files_seen) | set(inp.topics) | ({inp.topic} if inp.keys else set())) - set(topics)
    if unknown:
        raise ValueError(f"records of {sorted(unknown)}, not inputs {list(topics)} of this task")
    for topic, seen in inp.files_seen.items():
        if topic not in read_up_to or seen > tuple(read_up_to[topic]):
            read_up_to[topic] = seen
    for topic, (keys, values, timestamps) in inp.by_topic(topics[0]).items():
        buffer = waiting.setdefault(topic, [[], [], [], RecordOrigins()])
        buffer[0].extend(keys)
        buffer[1].extend(values)
        buffer[2].extend(timestamps)
        origins = inp.origins_of(topic, topics[0])
        buffer[3] = buffer[3] + (RecordOrigins.unknown(len(keys)) if origins is None else origins)

    def caught_up(topic: str) -> bool:
        if last_landed is None:
            return True
        landed = last_landed.get(topic)
        return landed is None or (topic in read_up_to and tuple(read_up_to[topic]) >= tuple(landed))

    columns = [waiting.get(topic, ([], [], [], RecordOrigins())) for topic in topics]
    heads = [0] * len(topics)
    # The runs of the selection over the records at hand; it stops where a topic that must wait (files
    # landed, not read yet) has none left: its next record, not at hand, may go first.
    left = [len(column[2]) for column in columns]
    waits = [not caught_up(topic) for topic in topics]
    processed = 0
    for pick, start, end in record_runs([column[2] for column in columns]):
        if any(wait and not count for wait, count in zip(waits, left, strict=True)):
            break
        keys, values, timestamps, origins = columns[pick]
        task.process_batch(
            topics[pick],
            keys[start:end],
            values[start:end],
            timestamps[start:end],
            origins=origins[start:end],
        )
        heads[pick] = end
        left[pick] -= end - start
        processed += end - start
    for i, topic in enumerate(topics):
        if heads[i]:
            keys, values, timestamps, origins = columns[i]
            del keys[: heads[i]], values[: heads[i]], timestamps[: heads[i]]
            columns[i][3] = origins[heads[i] :]
        if topic in waiting and not waiting[topic][0]:
            del waiting[topic]
    return processed
