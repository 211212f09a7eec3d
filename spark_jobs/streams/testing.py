"""TopologyTestDriver: Kafka's test driver, on the engine's one runtime (StreamTask).

Records piped in are processed at once, one at a time; the wall clock moves only when told. Each input
topic numbers its records from 0, as Kafka's offsets: a late record's `origin` is the offset of the input
record it descends from (`read_late_records`).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable
from typing import Any

from .records import Record
from .runtime.late import LateRecord
from .runtime.task import StreamTask
from .timeutil import Duration, to_millis
from .topology import Topology


class TopologyTestDriver:
    """`partition`: the input partition the driver plays (what `ProcessorContext.partition` reports), so
    that one driver per partition reproduces a partitioned job exactly; Kafka's driver always plays 0."""

    def __init__(self, topology: Topology, initial_wall_clock_ms: Duration = 0, partition: int = 0) -> None:
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise ValueError(f"partition must be a non-negative integer, got {partition!r}")
        self.task = StreamTask(topology, partition, initial_wall_clock_ms, byte_metrics=True)
        self._outputs: dict[str, deque[Record]] = defaultdict(deque)
        self._late: deque[LateRecord] = deque()
        self._offsets: dict[str, int] = defaultdict(int)  # per input topic, the next record's offset

    def create_input_topic(self, topic: str) -> TestInputTopic:
        if self.task.topology.source_for_topic(topic) is None:
            raise ValueError(f"unknown input topic {topic!r}; inputs: {self.task.topology.source_topics()}")
        return TestInputTopic(self, topic)

    def create_output_topic(self, topic: str) -> TestOutputTopic:
        return TestOutputTopic(self, topic)

    def pipe(
        self, topic: str, key: Any, value: Any, timestamp: int | None = None, headers: Any = None
    ) -> None:
        """Process one record; without a timestamp it is stamped with the driver's wall clock."""
        timestamp = self.task.wall_clock if timestamp is None else timestamp
        if type(timestamp) is not int:
            raise TypeError(f"timestamp must be an int of epoch milliseconds, got {timestamp!r}")
        offset = self._offsets[topic]
        self.task.process_batch(
            topic, [key], [value], [timestamp], None if headers is None else [headers], origins=[offset]
        )
        self._offsets[topic] = offset + 1
        self._collect()

    def advance_wall_clock_time(self, advance: Duration) -> None:
        ms = to_millis(advance, "advance")
        if ms < 0:
            raise ValueError(f"the wall clock cannot move backwards (advance {ms} ms)")
        self.task.advance_wall_clock_to(self.task.wall_clock + ms)
        self._collect()

    def wall_clock_time(self) -> int:
        return self.task.wall_clock

    def metrics(self) -> dict[str, int | float]:
        return self.task.metrics()

    def read_late_records(self) -> list[LateRecord]:
        """The records dropped as late since the last read, in order, and forgets them: one `LateRecord`
        per (record, window) pair a node dropped (its window had closed, or it fell out of a join's window
        store), with the node, the input topic and offset (`origin`) of the record it descends from (None
        for a punctuator's record), its key, value and timestamp, the window it would have belonged to
        (None where no window applies) and the node's stream time when it dropped it."""
        records = list(self._late)
        self._late.clear()
        return records

    def close(self) -> None:
        self.task.close()

    def __enter__(self) -> TopologyTestDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _collect(self) -> None:
        for topic, record in self.task.drain_output().records():
            self._outputs[topic].append(record)
        self._late.extend(self.task.drain_late())

    def _queue(self, topic: str) -> deque[Record]:
        return self._outputs[topic]


class TestInputTopic:
    __test__ = False  # not a pytest test class

    def __init__(self, driver: TopologyTestDriver, topic: str) -> None:
        self.driver = driver
        self.topic = topic

    def pipe_input(
        self, key: Any, value: Any, timestamp: Duration | None = None, headers: Any = None
    ) -> None:
        ts = None if timestamp is None else to_millis(timestamp, "timestamp")
        self.driver.pipe(self.topic, key, value, ts, headers)

    def pipe_value(self, value: Any, timestamp: Duration | None = None) -> None:
        self.pipe_input(None, value, timestamp)

    def pipe_key_value_list(
        self, pairs: Iterable[tuple[Any, Any]], timestamp: Duration | None = None
    ) -> None:
        for key, value in pairs:
            self.pipe_input(key, value, timestamp)

    def pipe_records(self, records: Iterable[Record]) -> None:
        for record in records:
            self.pipe_input(record.key, record.value, record.timestamp, record.headers)


class TestOutputTopic:
    __test__ = False

    def __init__(self, driver: TopologyTestDriver, topic: str) -> None:
        self.driver = driver
        self.topic = topic

    def read_record(self) -> Record:
        queue = self.driver._queue(self.topic)
        if not queue:
            raise LookupError(f"no record in output topic {self.topic!r}")
        return queue.popleft()

    def read_value(self) -> Any:
        return self.read_record().value

    def read_key_value(self) -> tuple[Any, Any]:
        record = self.read_record()
        return record.key, record.value

    def read_records_to_list(self) -> list[Record]:
        queue = self.driver._queue(self.topic)
        records = list(queue)
        queue.clear()
        return records

    def read_key_values_to_list(self) -> list[tuple[Any, Any]]:
        return [(r.key, r.value) for r in self.read_records_to_list()]

    def read_values_to_list(self) -> list[Any]:
        return [r.value for r in self.read_records_to_list()]

    def read_key_values_to_map(self) -> dict[Any, Any]:
        return dict(self.read_key_values_to_list())

    def is_empty(self) -> bool:
        return not self.driver._queue(self.topic)

    def get_queue_size(self) -> int:
        return len(self.driver._queue(self.topic))
