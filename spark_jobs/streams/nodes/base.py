"""Runtime nodes: the per-task instances a StreamTask wires together.

Every built-in operator implements one method, `process_columns`, over a batch of rows held as parallel
lists. Per-record processing is a batch of one; a task feeds larger batches only where the result cannot
differ (see runtime/task.py). Output is a `Batch` tuple `(keys, values, olds, timestamps, headers, src)`:

- `olds` is the previous value of a table row (KTable changes), None for streams or when not tracked;
- `headers` is None when no row carries headers;
- `src[j]` is the index of the input row that produced output row j (non-decreasing), or None when
  output row j came from input row j for every j. The task uses it to restore depth-first output order.

`process_columns` never mutates its input lists (siblings receive the same lists).
"""

from __future__ import annotations

import inspect
import zlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from ..processor import Cancellable, Processor, ProcessorContext
from ..records import Record, To, make_record
from ..serde import key_bytes

if TYPE_CHECKING:
    from ..runtime.context import TaskContext


class Batch(NamedTuple):
    """What a node's `process_columns` returns: parallel columns of its output rows (see above)."""

    keys: list
    values: list
    olds: list | None
    timestamps: list
    headers: list | None
    src: list | None


Row = tuple  # (topic, key, value, timestamp, headers)
SerialRunner = Callable[[Any, Any, Any, int, Any], None]


class Node:
    """Base of all runtime nodes. Subclasses set `columnar = False` when a batch may not be cut in columns."""

    columnar: bool = True

    def __init__(self, name: str) -> None:
        self.name = name
        self.children: list[Node] = []
        # False when nothing reads this node's `src` (the task says so): a node may then skip building it.
        self.need_src = True
        self.task_context: TaskContext | None = None  # set by the task before init()

    def init(self, task_context: TaskContext) -> None:
        self.task_context = task_context

    def process_columns(
        self, keys: list, values: list, olds: list | None, timestamps: list, headers: list | None
    ) -> Batch | None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def snapshot_state(self) -> Any:
        return None

    def restore_state(self, state: Any) -> None:
        pass

    # State export in parts (StreamTask.export_state). A node whose state is big splits it into parts that
    # change independently; others keep the default: one part, `snapshot_state()`.
    def export_parts(self, changed_only: bool) -> tuple[dict[str, Any], list[str]] | None:
        """`(states of the parts that may have changed since the last export, or all of them when not
        changed_only; the names of every current part)`. The name "" is the node's own part. None: the
        node has one part, its `snapshot_state()`."""
        return None

    def import_parts(self, parts: dict[str, Any]) -> None:
        """Restore from every current part (names and states as `export_parts` gave them)."""
        self.restore_state(parts[""])

    def metrics(self) -> dict[str, float]:
        return {}

    # KTable value getter: (value, timestamp) or None. Only table nodes implement it.
    def get(self, key: Any) -> tuple[Any, int] | None:
        raise TypeError(f"node {self.name} is not a table and has no value getter")

    def count_dropped(self, n: int = 1) -> None:
        self.task_context.count_dropped(n)


class SourceNode(Node):
    """Reads one or more input topics; its children get every valid record."""

    def __init__(self, name: str, topics: tuple[str, ...]) -> None:
        super().__init__(name)
        self.topics = topics

    def process_columns(self, keys, values, olds, timestamps, headers):
        return Batch(keys, values, None, timestamps, headers, None)


class SinkNode(Node):
    """Writes to an output topic. It has no children; the task collects its rows."""

    def __init__(self, name: str, topic: str) -> None:
        super().__init__(name)
        self.topic = topic

    def process_columns(self, keys, values, olds, timestamps, headers):
        return Batch(keys, values, None, timestamps, headers, None)


class UserProcessorNode(Node):
    """Hosts a user `Processor`; forwarding is synchronous and depth-first, so it always runs row by row."""

    columnar = False

    def __init__(self, name: str, processor: Processor) -> None:
        super().__init__(name)
        if not isinstance(processor, Processor) and not callable(getattr(processor, "process", None)):
            raise ValueError(f"supplier of processor {name!r} returned {processor!r}, not a Processor")
        self.processor = processor
        self.context = ProcessorContext(self)
        self.current_timestamp = -1
        self.child_runners: list[SerialRunner] = []
        self.child_runner_by_name: dict[str, SerialRunner] = {}

    def init(self, task_context: TaskContext) -> None:
        super().init(task_context)
        self.processor.init(self.context)

    def run(self, key: Any, value: Any, old: Any, timestamp: int, headers: Any) -> None:
        previous = self.current_timestamp
        self.current_timestamp = timestamp
        try:
            self.processor.process(make_record(key, value, timestamp, headers))
        finally:
            self.current_timestamp = previous

    def punctuate(self, punctuator: Callable[[int], Any], now: int) -> None:
        previous = self.current_timestamp
        self.current_timestamp = now
        try:
            punctuator(now)
        finally:
            self.current_timestamp = previous

    def forward(self, record: Record, to: To | str | None) -> None:
        if not isinstance(record, Record):
            raise TypeError(f"forward() takes a Record, got {type(record).__name__}")
        timestamp = record.timestamp
        if isinstance(to, str):
            to = To.child(to)
        if to is not None and to.timestamp is not None:
            timestamp = to.timestamp
        if timestamp is None:
            timestamp = self.current_timestamp
        if timestamp < 0:
            raise ValueError(f"cannot forward a record with negative timestamp {timestamp}")
        if to is None or to.child_name is None:
            targets = self.child_runners
        else:
            runner = self.child_runner_by_name.get(to.child_name)
            if runner is None:
                raise ValueError(
                    f"processor {self.name!r} has no child named {to.child_name!r}; "
                    f"children: {list(self.child_runner_by_name)}"
                )
            targets = (runner,)
        key, value, headers = record.key, record.value, record.headers
        for runner in targets:
            runner(key, value, None, timestamp, headers)

    def close(self) -> None:
        self.processor.close()

    # State contract documented on Processor.
    def snapshot_state(self) -> Any:
        processor = self.processor
        hook = getattr(processor, "snapshot_state", None)
        if hook is not None and callable(hook):
            return ("hook", hook())
        return (
            "dict",
            {name: value for name, value in vars(processor).items() if not _is_runtime_handle(value)},
        )

    def restore_state(self, state: Any) -> None:
        kind, payload = state
        if kind == "hook":
            self.processor.restore_state(payload)
        else:
            vars(self.processor).update(payload)

    def rebind(self, method_name: str) -> Callable[[int], Any]:
        method = getattr(self.processor, method_name, None)
        if method is None or not inspect.ismethod(method):
            raise ValueError(f"processor {self.name!r} has no method {method_name!r} to re-create a schedule")
        return method


STATE_BUCKETS = 1024  # key-hash buckets a big store's state is exported in


class KeyBuckets:
    """Splits a store's keys into STATE_BUCKETS buckets by crc32 of the serialized key (stable across
    processes, unlike hash()), computed once per key and cached, so a state export re-serializes only the
    buckets holding a changed key."""

    def __init__(self) -> None:
        self.bucket_of: dict[Any, int] = {}

    def bucket(self, key: Any) -> int:
        bucket = self.bucket_of.get(key)
        if bucket is None:
            data = key.encode() if type(key) is str else key_bytes(key)
            bucket = self.bucket_of[key] = zlib.crc32(data) % STATE_BUCKETS
        return bucket

    def group(self, keys: Iterable[Any], only: set[int] | None = None) -> dict[int, list]:
        """Keys by bucket (only the buckets in `only`, when given), in iteration order."""
        keys = list(keys)
        bucket_of = self.bucket_of
        buckets = list(map(bucket_of.get, keys))
        if None in buckets:  # keys not seen yet: their buckets in bulk (C loops for str keys)
            missing = [key for key, b in zip(keys, buckets, strict=True) if b is None]
            if set(map(type, missing)) == {str}:
                data = map(str.encode, missing)
            else:
                data = (key.encode() if type(key) is str else key_bytes(key) for key in missing)
            bucket_of.update(zip(missing, map(STATE_BUCKETS.__rmod__, map(zlib.crc32, data)), strict=True))
            buckets = list(map(bucket_of.__getitem__, keys))
        groups: dict[int, list] = {}
        for key, b in zip(keys, buckets, strict=True):
            if only is None or b in only:
                group = groups.get(b)
                if group is None:
                    groups[b] = [key]
                else:
                    group.append(key)
        return groups

    def forget(self, keep: Iterable[Any]) -> None:
        """Drop cached keys no longer in the store (called at exports, so the cache stays bounded)."""
        self.bucket_of = {key: self.bucket_of[key] for key in keep if key in self.bucket_of}


DIRTY_SLOTS = 1 << 16  # slots of the changed-key table a store marks per row


class DirtyKeys:
    """The keys a store changed since its last state export, tracked per batch in one of two ways.

    A batch small against the store adds its keys to the set `keys` (a cache miss per row once the store
    holds 250k keys, but fewer rows than the export would otherwise scan). A larger batch marks, per row,
    one byte: the slot of its key's `hash()` (this process's hash; nothing of it is exported) in a table
    that stays in the CPU cache, and sets `scan`: the export then takes the keys of the changed windows
    whose slot is marked, the changed keys plus a few sharing a slot with one (a superset, which only
    re-serializes a part the export finds unchanged). Removed keys always go to `keys`."""

    MASK = DIRTY_SLOTS - 1

    def __init__(self) -> None:
        self.slots = bytearray(DIRTY_SLOTS)
        self.keys: set = set()
        self.scan = False

    @staticmethod
    def marks_slots(rows: int, stored: int) -> bool:
        """Whether a batch of `rows` marks slots rather than keys, `stored` entries in its store."""
        return 2 * rows >= stored

    def changed_in(self, keys: Iterable[Any]) -> list:
        """Those of `keys` that may have changed."""
        slots, mask = self.slots, self.MASK
        return [key for key in keys if slots[hash(key) & mask]]


def _is_runtime_handle(value: Any) -> bool:
    return isinstance(value, (ProcessorContext, Cancellable))
