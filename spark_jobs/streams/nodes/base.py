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
import operator
from collections.abc import Callable, Iterator, Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any, NamedTuple

from ..processor import Cancellable, Processor, ProcessorContext
from ..records import Record, To, Windowed, make_record

if TYPE_CHECKING:
    from ..runtime.context import TaskContext


def holds_none(column: list) -> bool:
    """Whether a column holds None, by identity: `None in column` would call each element's `==`, reading
    every element's object (a cache miss apiece in a large batch)."""
    return any(map(operator.is_, column, repeat(None)))


class Batch(NamedTuple):
    """What a node's `process_columns` returns: parallel columns of its output rows (see above)."""

    keys: list
    values: list
    olds: list | None
    timestamps: list
    headers: list | None
    src: list | None


class StateRow(NamedTuple):
    """One entry of a node's stores, as `Node.state_rows` lists it (the state reader's rows)."""

    # key_value, window, session, suppress_buffer, join_window:<side>, join_waiting:<side> (side: left or
    # right), table, or a user store's name
    store: str
    key: Any
    window_start: int | None  # epoch ms; None where the store has no windows
    window_end: int | None
    value: Any
    timestamp: int | None

    @property
    def window(self) -> tuple | None:
        """The window the row is in, as a state size counts windows: `(start, end)`, shared by the keys,
        or for a session `(key, start, end)` (a session window belongs to its key); None without one."""
        if self.window_start is None:
            return None
        if self.store == "session":
            return self.key, self.window_start, self.window_end
        return self.window_start, self.window_end


Row = tuple  # (topic, key, value, timestamp, headers)
SerialRunner = Callable[[Any, Any, Any, int, Any], None]


class Node:
    """Base of all runtime nodes. Subclasses set `columnar = False` when a batch may not be cut in columns."""

    columnar: bool = True
    # True for a node that may call `count_late`: the nodes above it then build their `src`, through which
    # the task finds the input record of a late one (runtime/late.py).
    drops_late: bool = False

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

    def state_parts(self) -> dict[str, Any] | None:
        """Every current part, as `export_parts(changed_only=False)` gives them, leaving the export history
        alone (StreamTask.snapshot). None: the node has one part, its `snapshot_state()`."""
        return None

    def apply_parts(self, parts: dict[str, Any], removed: list[str]) -> None:
        """Catch up, from the state of this node's last export or import (or a new node's, for an import:
        then `parts` are every current part), with the parts exported since (`parts`: the latest state of
        each, named as `export_parts` gave them) and the part names gone since (`removed`). Raises
        ValueError where they do not continue this node's history."""
        if removed:
            raise ValueError(f"node {self.name}: parts {removed} went, this node has one part")
        if "" in parts:
            self.restore_state(parts[""])

    def metrics(self) -> dict[str, float]:
        return {}

    def measure_bytes(self) -> None:
        """Keep byte-size metrics even where no bound needs them (the test driver reports Kafka's
        metrics in full); called before the node processes anything. Most nodes measure nothing."""

    def state_rows(self) -> Iterator[StateRow]:
        """Every entry this node's stores hold, one row each (read by the state reader). A node without
        stores has none."""
        return iter(())

    def state_size(self) -> tuple[int, int]:
        """`(entries, distinct windows (StateRow.window))` of `state_rows()` (a task's state size, in its
        metrics, read every micro-batch): counted over them here; a node with large stores overrides it
        with the counts its stores keep."""
        entries, windows = 0, set()
        for row in self.state_rows():
            entries += 1
            if row.window_start is not None:
                windows.add(row.window)
        return entries, len(windows)

    # KTable value getter: (value, timestamp) or None. Only table nodes implement it.
    def get(self, key: Any) -> tuple[Any, int] | None:
        raise TypeError(f"node {self.name} is not a table and has no value getter")

    def get_list(self, keys: list) -> list:
        """The value getter over a batch: per key (in order) `get(key)`."""
        return list(map(self.get, keys))

    def str_keys(self) -> bool:
        """Whether every key this table holds is a str: a key found in it is then no `Windowed` one."""
        return False

    def get_values(self, keys: list) -> tuple[list, bool]:
        """Per key (in order) its value, None where the table has none (a table's value is never None),
        and whether the table has every key. A None key has none, and is not looked up (a windowed table's
        getter reads a key's window)."""
        if holds_none(keys):
            entries = [None if key is None else self.get(key) for key in keys]
        else:
            entries = self.get_list(keys)
        values = [None if found is None else found[0] for found in entries]
        return values, not holds_none(values)

    # Which state a node reads besides its input, so that the task batches it only where that state
    # cannot change during the batch (runtime/task.py).
    def state_reads(self) -> tuple[str, ...]:
        """Names of the nodes whose state (value getter, shared store) `process_columns` reads."""
        return ()

    def getter_reads(self) -> tuple[str, ...]:
        """Names of the nodes whose value getters `get` reads, besides this node's own state."""
        return ()

    def getter_unread(self) -> None:
        """No node of the task reads this node's value getter (`state_reads`, `getter_reads`): what only
        `get` needs may go. Called once the task wired its nodes, before it processes anything."""

    def count_dropped(self, n: int = 1) -> None:
        self.task_context.count_dropped(n)

    def count_late(
        self,
        rows: Sequence[int],
        keys: Sequence[Any],
        values: Sequence[Any],
        timestamps: Sequence[int],
        window_starts: Sequence[int | None] | None = None,
        window_ends: Sequence[int | None] | None = None,
        stream_times: Sequence[int] | None = None,
    ) -> None:
        """Drop records as late: their window had closed, or they fell out of a store's retention. `rows`
        index this node's input batch; the other columns are parallel to `rows` (window columns None where
        no window applies; `stream_times`: this node's observed stream time when it dropped each, which
        shows that the window had closed). They count in dropped-records-total, and the task keeps them
        as late records. A node that calls it sets `drops_late`."""
        self.task_context.count_late(
            self.name, rows, keys, values, timestamps, window_starts, window_ends, stream_times
        )


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


class ForwardBuffer:
    """A user processor's forwards over a batch, held instead of run: the task runs the processor's children
    over them as columns once the processor has seen the batch (runtime/task.py). Per forward: the record
    with the timestamp it goes with (`records`), the input row it came from (`src`, the task sets `row`)
    and the child it goes to (`targets`: None while every forward went to every child)."""

    __slots__ = ("records", "src", "targets", "row")

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.records: list[Record] = []
        self.src: list[int] = []
        self.targets: list[int | None] | None = None
        self.row = 0

    def add(self, record: Record, target: int | None) -> None:
        targets = self.targets
        if target is not None and targets is None:
            targets = self.targets = [None] * len(self.records)
        self.records.append(record)
        self.src.append(self.row)
        if targets is not None:
            targets.append(target)

    def columns(self) -> tuple[list, list, list, list | None]:
        """The forwards' keys, values, timestamps and headers (None where no forward has headers)."""
        keys, values, timestamps, headers = (list(column) for column in zip(*self.records, strict=True))
        return keys, values, timestamps, None if headers.count(None) == len(headers) else headers


class UserProcessorNode(Node):
    """Hosts a user `Processor`. Forwarding is synchronous and depth-first: its children run a forward
    before `forward` returns, unless the task holds its forwards in a `ForwardBuffer` (`forwards`) to run
    them as columns, where that cannot change anything (runtime/task.py)."""

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
        self._forwards: ForwardBuffer | None = None  # set by the task while it holds the forwards

    def init(self, task_context: TaskContext) -> None:
        super().init(task_context)
        self.processor.init(self.context)

    @property
    def forwards(self) -> ForwardBuffer | None:
        return self._forwards

    @forwards.setter
    def forwards(self, buffer: ForwardBuffer | None) -> None:
        self._forwards = buffer
        self.context._held = buffer  # the context's own path for a forward to every child

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
        """A forward from the processor (`ProcessorContext.forward` holds a forward to every child with its
        own timestamp itself while the task holds the forwards)."""
        forwards = self._forwards
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
        if forwards is not None:
            named = to is not None and to.child_name is not None
            target = list(self.child_runner_by_name).index(to.child_name) if named else None
            forwards.add(make_record(key, value, timestamp, headers), target)
            return
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

    def state_rows(self) -> Iterator[StateRow]:
        """The processor's state as snapshotted: each attribute (or each name of a hook's dict) is a store
        of that name; a dict holds one entry per key, a set one per member (value None), any other value
        is one entry without a key. A hook's state that is not a dict of names is one store, "state"."""
        kind, payload = self.snapshot_state()
        if not (isinstance(payload, dict) and all(isinstance(name, str) for name in payload)):
            payload = {"state": payload}
        for store, value in payload.items():
            if isinstance(value, dict):
                entries = value.items()
            elif isinstance(value, set | frozenset):
                entries = ((member, None) for member in _sorted_if_possible(value))
            else:
                yield StateRow(store, None, None, None, value, None)
                continue
            for key, item in entries:
                if isinstance(key, Windowed):
                    yield StateRow(store, key[0], key[1][0], key[1][1], item, None)
                else:
                    yield StateRow(store, key, None, None, item, None)

    def state_size(self) -> tuple[int, int]:
        """By the length of each dict or set of the processor's state (its keys are read only where they
        are windowed)."""
        kind, payload = self.snapshot_state()
        if not (isinstance(payload, dict) and all(isinstance(name, str) for name in payload)):
            payload = {"state": payload}
        entries, windows = 0, set()
        for value in payload.values():
            if not isinstance(value, dict | set | frozenset):
                entries += 1
                continue
            entries += len(value)
            if value and isinstance(next(iter(value)), Windowed):
                windows.update((key[1][0], key[1][1]) for key in value if isinstance(key, Windowed))
        return entries, len(windows)

    def rebind(self, method_name: str) -> Callable[[int], Any]:
        method = getattr(self.processor, method_name, None)
        if method is None or not inspect.ismethod(method):
            raise ValueError(f"processor {self.name!r} has no method {method_name!r} to re-create a schedule")
        return method


def _sorted_if_possible(values: Any) -> list:
    """A set's members sorted when they compare (a stable listing), else in iteration order."""
    try:
        return sorted(values)
    except TypeError:
        return list(values)


def _is_runtime_handle(value: Any) -> bool:
    return isinstance(value, (ProcessorContext, Cancellable))
