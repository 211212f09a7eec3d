"""StreamTask: the one runtime of the engine (the test driver, the Spark runtime and the benchmark use it).

A task processes its records one at a time, depth first, as Kafka does. To be fast it cuts a batch into
columns where that cannot change anything:

- For each source, if the nodes reachable from it form a tree (no node reachable twice) without joins
  (which read state other nodes own), each built-in node processes the whole batch as columns. Each node
  then sees exactly the rows it would see record by record, in the same order, so its state and outputs
  are the same; the task restores the depth-first interleaving of the sinks' rows with the `src` index
  every node returns (see nodes/base.py).
- User processors that are children of such a source ("islands") run row by row, in lockstep, with the
  task's stream time set for each row as it would be record by record; their state depends on nothing
  else. If one of them creates or cancels a schedule, the batch is cut after that row. Where no user
  processor is below an island, the task holds the island's forwards over the batch and runs its
  children as columns over them (`_island_children_runner` says why that changes nothing); otherwise
  the island's forwards cascade row by row.
- STREAM_TIME punctuation may run between two records, so a batch is cut right after every record at
  which a schedule falls due.
- Other sources are processed record by record, each node's outputs cascading row by row.
"""

from __future__ import annotations

import hashlib
import io
import pickle
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import repeat
from operator import itemgetter
from typing import Any, NamedTuple

from ..nodes.base import ForwardBuffer, Node, SinkNode, SourceNode, UserProcessorNode
from ..optimizer import rewrites
from ..records import Record, Windowed, make_record, make_windowed
from ..timeutil import INT64_MAX, Duration, to_millis
from ..topology import Topology, topology_fingerprint
from . import batching
from .batching import EMPTY, Columns
from .context import TaskContext
from .gc_pause import no_cyclic_gc
from .late import LateKeeper, LateRecord
from .part_keys import KeyListLoader, dump_entries_part, dumps_entries_part
from .punctuation import PunctuationManager, PunctuationSchedule
from .selection import record_runs

_first, _second = itemgetter(0), itemgetter(1)
_NO_OLD = object()  # a serial row that belongs to a batch without an `olds` column
# a snapshot: the magic, a flag, then (zlib-compressed or not) the parts, their index (names and sizes), and
# where the index starts
_SNAPSHOT_MAGIC = b"STK2"
_RAW, _ZLIB = b"\x00", b"\x01"
_SNAPSHOT_HEAD = 5  # the magic and the flag
_OLD_SNAPSHOT_MAGIC = b"STK1"  # one pickle of the task state and each node's snapshot_state(): refused
# How the stores save their entries in the parts (nodes/kv_store.py, nodes/kv_rows.py, nodes/window_rows.py),
# in the "task" part of every state: a state of another layout is refused, never misread.
STATE_LAYOUT = 13
_REPROCESS = "delete the checkpoint (or snapshot) and process the input again"


class OutputBatch:
    """Columnar output of a task: parallel lists of equal length (see docs/TASK_INTERFACE.md)."""

    __slots__ = ("topics", "keys", "values", "timestamps", "window_starts", "window_ends", "seqs", "headers")

    def __init__(
        self,
        topics: list,
        keys: list,
        values: list,
        timestamps: list,
        window_starts: list,
        window_ends: list,
        seqs: list,
        headers: list,
    ) -> None:
        self.topics = topics
        self.keys = keys
        self.values = values
        self.timestamps = timestamps
        self.window_starts = window_starts
        self.window_ends = window_ends
        self.seqs = seqs
        self.headers = headers

    @classmethod
    def from_columns(
        cls, columns: Columns | None, first_seq: int, split: tuple[list, Any, Any] | None = None
    ) -> OutputBatch:
        """`split`: the key column's keys, window starts and window ends, as the node that made it gave them
        (`StreamTask.key_splits`; starts and ends None: str keys only, no window), else each key is read."""
        if columns is None or not columns[0]:
            return cls([], [], [], [], [], [], [], [])
        topics, keys, values, timestamps, headers = columns
        n = len(topics)
        if headers is None:
            headers = [None] * n
        W = Windowed
        key_types = set(map(type, keys)) if split is None else None
        if split is not None:
            keys, starts, ends = split
        elif key_types == {W}:  # all windowed: split with C-level itemgetters
            windows = list(map(_second, keys))
            keys, starts, ends = (
                list(map(_first, keys)),
                list(map(_first, windows)),
                list(map(_second, windows)),
            )
        elif W in key_types:
            starts = [k[1][0] if type(k) is W else None for k in keys]
            ends = [k[1][1] if type(k) is W else None for k in keys]
            keys = [k[0] if type(k) is W else k for k in keys]
        else:
            starts = None
        if starts is None:
            starts = [None] * n
            ends = starts.copy()
        return cls(
            topics, keys, values, timestamps, starts, ends, list(range(first_seq, first_seq + n)), headers
        )

    def __len__(self) -> int:
        return len(self.topics)

    def records(self) -> list[tuple[str, Record]]:
        """`(topic, Record)` pairs; windowed keys come back as `Windowed` objects."""
        out = []
        for topic, key, value, ts, start, end, headers in zip(
            self.topics,
            self.keys,
            self.values,
            self.timestamps,
            self.window_starts,
            self.window_ends,
            self.headers,
            strict=False,
        ):
            if start is not None:
                key = make_windowed(key, start, end)
            out.append((topic, make_record(key, value, ts, headers)))
        return out

    def __repr__(self) -> str:
        return f"OutputBatch({len(self)} records)"


class StateExport(NamedTuple):
    """What `StreamTask.export_state()` returns (see docs/TASK_INTERFACE.md)."""

    parts: dict[str, bytes]  # parts new or changed since the previous export_state()/import_state()
    removed: list[str]  # parts that existed at the previous export and no longer do


TASK_PART = "task"  # clocks, output sequence, punctuation, pending output


def _as_list(column: Sequence) -> list:
    """A batch's column as a list: a list as it is, another sequence copied into one."""
    return column if type(column) is list else list(column)


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def _dump_state(state: Any, file: Any) -> None:
    """A part other than an entries' part, as `export_state` pickles it."""
    pickle.dump(state, file, protocol=5)


def _every_part(node: Node) -> tuple[dict[str, Any], list[str]] | None:
    """A node's parts for a snapshot, in `export_parts`' shape."""
    parts = node.state_parts()
    return None if parts is None else (parts, list(parts))


def _check_fingerprint(topology: Topology, state: dict[str, Any]) -> None:
    layout = state.get("layout")
    if layout != STATE_LAYOUT:
        raise ValueError(
            f"the task state was written in state layout {layout or 'before 3'}, this engine reads layout "
            f"{STATE_LAYOUT} only: {_REPROCESS}"
        )
    if state["fingerprint"] != topology_fingerprint(topology):
        raise ValueError(
            "the snapshot was taken with a different topology (node names, kinds or parents differ)"
        )


class StreamTask:
    """Runs one partition of a topology. See docs/TASK_INTERFACE.md for the contract."""

    def __init__(
        self,
        topology: Topology,
        partition: int = 0,
        initial_wall_clock_ms: Duration = 0,
        _clocks: tuple[int, int] | None = None,
        *,
        byte_metrics: bool = False,
    ) -> None:
        """`byte_metrics`: nodes keep byte-size metrics that no bound needs (suppress buffers' sizes),
        as the test driver reports them; a runtime that does not read them leaves it off."""
        topology.validate()
        self.topology = topology
        self.partition = partition
        self.stream_time = -1
        self.wall_clock = to_millis(initial_wall_clock_ms, "initial_wall_clock_ms")
        if _clocks is not None:  # restore: init() must see the clocks the task had
            self.stream_time, self.wall_clock = _clocks
        self.current_topic: str | None = None
        self.dropped_records = 0
        self.late = LateKeeper()  # late records not drained yet (runtime/late.py)
        self.context = TaskContext(self)  # all that nodes and punctuation see of this task
        self.punctuation = PunctuationManager(self.context, self.fire_punctuation)
        self._segments: list[Columns] = []  # output not drained yet, in order
        self._rows: list[tuple] = []  # rows of sinks running row by row, not yet moved to _segments
        self._collector = self._rows  # where sinks running row by row put their rows
        self._next_seq = 0
        # key columns of this batch's output, each with its split as the node that made it gave it
        # (TaskContext.str_key_column, windowed_key_column): its keys, window starts and window ends
        self.key_splits: list[tuple[list, tuple[list, Any, Any]]] = []
        self._closed = False
        self._part_digests: dict[str, bytes] | None = None  # parts of the last export/import, by name

        self.nodes: dict[str, Node] = {name: spec.factory() for name, spec in topology.specs.items()}
        for name, spec in topology.specs.items():
            self.nodes[name].children = [self.nodes[child] for child in spec.children]
            if byte_metrics:
                self.nodes[name].measure_bytes()
        read = _getters_read(
            self.nodes, [name for node in self.nodes.values() for name in node.state_reads()]
        )
        for name in self.nodes.keys() - read:
            self.nodes[name].getter_unread()
        self._serial_runners: dict[str, Callable] = {}
        for node in self.nodes.values():
            self._serial_runner(node)
        self._source_by_topic: dict[str, SourceNode] = {}
        # chains of nodes the batch path runs as one step (optimizer.py)
        self._rewrites = rewrites(self.nodes)
        self._columnar: dict[str, Callable | None] = {}
        for node in self.nodes.values():
            node.need_src = False  # the columnar runners set it where a merge reads it
        for topic in topology.source_topics():
            source = self.nodes[topology.source_for_topic(topic)]
            self._source_by_topic[topic] = source  # type: ignore[assignment]
            self._columnar[topic] = self._source_runner(source) if _can_batch(source, self.nodes) else None

        for node in self.nodes.values():  # Kafka's order: nodes in the order they were added
            node.init(self.context)
        self.punctuation.init_count = len(self.punctuation.schedules)

    # -- processing ---------------------------------------------------------------------------------------

    def process(self, topic: str, key: Any, value: Any, timestamp: int, headers: Any = None) -> None:
        """Process one record completely, then run STREAM_TIME punctuation."""
        if type(timestamp) is not int:
            raise TypeError(f"timestamp must be an int of epoch milliseconds, got {timestamp!r}")
        self.process_batch(topic, [key], [value], [timestamp], None if headers is None else [headers])

    def process_batch(
        self,
        topic: str,
        keys: Sequence,
        values: Sequence,
        timestamps: Sequence[int],
        headers: Sequence | None = None,
        origins: Sequence | None = None,
    ) -> None:
        """Same result as `process()` for each record in order. `origins[i]`, read only for a record that
        turns out late, says where record i came from (kept in its `LateRecord.origin`)."""
        self._check_open()
        source = self._source_by_topic.get(topic)
        if source is None:
            raise ValueError(
                f"topic {topic!r} is not an input of this topology; inputs: {list(self._source_by_topic)}"
            )
        n = len(keys)
        if len(values) != n or len(timestamps) != n or (headers is not None and len(headers) != n):
            raise ValueError("keys, values, timestamps (and headers) must have equal lengths")
        if not n:
            return
        # A list is taken as it is: a copy takes and drops a reference to each item, in a batch of many keys
        # a cache miss apiece. The task reads the lists and never changes them, but may hold them or pass
        # them on as output columns: the caller is not to change them afterwards (docs/TASK_INTERFACE.md).
        keys, values, timestamps = _as_list(keys), _as_list(values), _as_list(timestamps)
        headers = None if headers is None or all(h is None for h in headers) else _as_list(headers)
        self.key_splits.clear()
        latest = max(timestamps)
        if latest > INT64_MAX:
            raise ValueError("timestamps must fit in int64")
        keep = None
        if min(timestamps) < 0:  # dropped at the source, counted, and they advance no clock
            keep = [i for i, ts in enumerate(timestamps) if ts >= 0]
            self.dropped_records += n - len(keep)
            keys, values, timestamps = ([col[i] for i in keep] for col in (keys, values, timestamps))
            headers = None if headers is None else [headers[i] for i in keep]
            n = len(keep)
            if not n:
                return
        self.current_topic = topic
        self.late.begin_batch(origins, keep)
        # A batch keeps objects of its rows (windowed keys, output columns) alive until it ends, and none of
        # the engine's are in a reference cycle: without the pause, each batch's rows reach the oldest GC
        # generation and set off full collections that rescan every container of the task's state. Cyclic
        # garbage a user function makes is collected at the first collection after the batch.
        try:
            with no_cyclic_gc():
                runner = self._columnar[topic]
                if runner is None:
                    serial = self._serial_runners[source.name]
                    late = self.late
                    for i in range(n):
                        late.row = i
                        self._process_serial(
                            serial, keys[i], values[i], timestamps[i], None if headers is None else headers[i]
                        )
                else:
                    self._process_columnar(runner, keys, values, timestamps, headers, latest)
        finally:
            self.current_topic = None
            self.late.end_batch()

    def process_topics(self, batches: dict[str, tuple[Sequence, Sequence, Sequence[int]]]) -> None:
        """Records of several input topics at hand, each `(keys, values, timestamps)` in offset order.

        The next record is the head with the lowest timestamp; ties go to the topic declared first
        (docs/semantics.md section 1). Consecutive records of one topic are processed as one batch
        (runtime/selection.py gives those runs).
        """
        declared = {topic: i for i, topic in enumerate(self.topology.source_topics())}
        unknown = [topic for topic in batches if topic not in declared]
        if unknown:
            raise ValueError(f"topics {unknown} are not inputs of this topology")
        topics = sorted(batches, key=declared.__getitem__)
        columns = [[list(column) for column in batches[topic]] for topic in topics]
        for pick, start, end in record_runs([column[2] for column in columns]):
            keys, values, timestamps = columns[pick]
            self.process_batch(topics[pick], keys[start:end], values[start:end], timestamps[start:end])

    def _process_serial(self, runner: Callable, key: Any, value: Any, timestamp: int, headers: Any) -> None:
        if timestamp > self.stream_time:
            self.stream_time = timestamp
            self.punctuation.stream_time_known(timestamp)
        runner(key, value, _NO_OLD, timestamp, headers)
        self.punctuation.punctuate_stream_time(self.stream_time)

    def _process_columnar(
        self, runner: Callable, keys: list, values: list, timestamps: list, headers: list | None, latest: int
    ) -> None:
        """`latest`: the batch's maximum timestamp (a chunk that is the whole batch is not read again for it)."""
        punctuation = self.punctuation
        n = len(keys)
        start = 0
        while start < n:
            end = n  # cut the batch right after the record at which a STREAM_TIME schedule falls due
            if punctuation.awaiting_first_record and self.stream_time < 0:
                end = start + 1
            else:
                due = punctuation.next_stream_due()
                if due is not None:
                    if self.stream_time >= due:
                        end = start + 1
                    else:
                        for j in range(start, n):
                            if timestamps[j] >= due:
                                end = j + 1
                                break
            if start == 0 and end == n:
                k, v, t, h = keys, values, timestamps, headers
            else:
                k, v, t = keys[start:end], values[start:end], timestamps[start:end]
                h = None if headers is None else headers[start:end]
            self.late.base, self.late.row = start, None
            cols, consumed = runner(k, v, t, h)
            if cols is not None:
                self._add_columns(cols)
            if consumed < len(k):  # an island changed the schedules: punctuation may be due now
                end = start + consumed
                t = t[:consumed]
            self.late.row = end - 1 - start  # punctuation runs after the chunk's last record
            chunk_max = latest if start == 0 and end == n else max(t)
            if chunk_max > self.stream_time:
                self.stream_time = chunk_max
                punctuation.stream_time_known(chunk_max)
            punctuation.punctuate_stream_time(self.stream_time)
            start = end

    def advance_wall_clock_to(self, wall_clock_ms: Duration) -> None:
        """Move the wall clock (never backwards) and run WALL_CLOCK_TIME punctuation."""
        self._check_open()
        ms = to_millis(wall_clock_ms, "wall_clock_ms")
        if ms > self.wall_clock:
            self.wall_clock = ms
        self.punctuation.punctuate_wall_clock(self.wall_clock)

    def fire_punctuation(self, schedule: PunctuationSchedule, now: int) -> None:
        node = self.nodes[schedule.node_name]
        previous_topic = self.current_topic
        self.current_topic = None
        try:
            node.punctuate(schedule.punctuator, now)  # type: ignore[attr-defined]
        finally:
            self.current_topic = previous_topic

    # -- output and metrics -------------------------------------------------------------------------------

    def _add_columns(self, cols: Columns) -> None:
        self._flush_rows()
        self._segments.append(cols)

    def _flush_rows(self) -> None:
        if self._rows:
            self._segments.append(batching.rows_to_columns(self._rows))
            self._rows.clear()

    def _pending_output(self) -> Columns | None:
        self._flush_rows()
        return batching.concat(self._segments) if self._segments else None

    def drain_output(self) -> OutputBatch:
        """Everything emitted since the last drain, in order."""
        columns = self._pending_output()
        split = None
        if columns is not None:
            split = next((given for keys, given in self.key_splits if keys is columns[1]), None)
        # the words are about the output drained here: dropped with it, so that the columns they name are
        # not held until the next batch (the cyclic collector would scan such a list's every key after a
        # micro-batch, a cache miss apiece among many keys)
        self.key_splits.clear()
        batch = OutputBatch.from_columns(columns, self._next_seq, split)
        self._segments = []
        self._next_seq += len(batch)
        return batch

    def drain_late(self) -> list[LateRecord]:
        """Every record dropped as late since the last drain (runtime/late.py), in the order of the input
        records they descend from. A runtime drains them with the output, so that both are committed
        together."""
        return self.late.drain()

    def metrics(self) -> dict[str, int | float]:
        result: dict[str, int | float] = {"dropped-records-total": self.dropped_records}
        totals: dict[str, float] = {}
        for node in self.nodes.values():
            for name, value in node.metrics().items():
                result[f"{name}{{processor-node-id={node.name}}}"] = value
                totals[name] = totals.get(name, 0) + value
        result.update(totals)  # unqualified names: the sum over nodes (the node's own value when only one)
        return result

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            for node in self.nodes.values():
                node.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this task is closed")

    # -- snapshot -----------------------------------------------------------------------------------------

    def snapshot(self, compress: bool = False) -> bytes:
        """The complete task state as bytes: every part a first `export_state()` would write, taken without
        changing what this task's next export writes. `compress`: zlib over the parts (a fraction of the
        bytes, for several times the time)."""
        # one stream, each part written into it once (no copy to join them)
        stream = io.BytesIO()
        stream.write(_SNAPSHOT_MAGIC + (_ZLIB if compress else _RAW))
        index: list[tuple[str, int]] = []
        with no_cyclic_gc():
            entries, states, _ = self._collect_parts(_every_part)
            for parts, dump in ((entries, dump_entries_part), (states, _dump_state)):
                for name, state in parts.items():
                    at = stream.tell()
                    dump(state, stream)
                    index.append((name, stream.tell() - at))
        index_at = stream.tell() - _SNAPSHOT_HEAD
        stream.write(pickle.dumps(index, protocol=5))
        stream.write(index_at.to_bytes(8, "little"))
        if compress:
            with stream.getbuffer() as written:
                return written[:_SNAPSHOT_HEAD].tobytes() + zlib.compress(written[_SNAPSHOT_HEAD:], 1)
        return stream.getvalue()

    @classmethod
    def restore(cls, topology: Topology, blob: bytes) -> StreamTask:
        """A task in the state `blob` was taken in; `topology` is the same object or a fresh build of it."""
        magic, flag = blob[:4], blob[4:_SNAPSHOT_HEAD]
        if magic == _OLD_SNAPSHOT_MAGIC:
            raise ValueError(f"a StreamTask snapshot of an earlier state layout: {_REPROCESS}")
        if magic != _SNAPSHOT_MAGIC or flag not in (_RAW, _ZLIB):
            raise ValueError("not a StreamTask snapshot")
        body = memoryview(blob)[_SNAPSHOT_HEAD:]  # the parts are read in place, not copied
        if flag == _ZLIB:
            body = memoryview(zlib.decompress(body))
        index_at = int.from_bytes(body[-8:], "little") if len(body) >= 8 else len(body)
        if index_at > len(body) - 8:
            raise ValueError(
                f"a StreamTask snapshot of {len(body)} bytes, its index at {index_at}: cut or padded"
            )
        try:
            index = pickle.loads(body[index_at:-8])
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as error:
            raise ValueError(
                f"a StreamTask snapshot whose index does not load ({error}): cut or padded"
            ) from None
        parts: dict[str, memoryview] = {}
        at = 0
        for name, size in index:
            parts[name] = body[at : at + size]
            at += size
        if at != index_at:
            raise ValueError(
                f"a StreamTask snapshot whose parts end at {at}, its index at {index_at}: cut or padded"
            )
        task = cls.import_state(topology, parts)
        task._part_digests = None  # restored, not imported: its first export writes every part
        return task

    def export_state(self) -> StateExport:
        """The parts of the task state that are new or changed since the previous `export_state()` or
        `import_state()` of this task (a fresh task: every part), and the names of parts that went away.

        Parts: "task" (clocks, output sequence, punctuation, pending output), then per stateful node
        "<node name>" and, for nodes that split their state, "<node name>/<part>" (the window store and the
        suppress buffer: a base and deltas per window, see nodes/store_log.py). A split node exports only
        the parts that changed; any other part is serialized and kept only if its bytes differ from the
        previous export.
        """
        with no_cyclic_gc():
            return self._export_state()

    def _export_state(self) -> StateExport:
        previous = self._part_digests
        changed_only = previous is not None
        digests = {} if previous is None else previous
        entries, states, current = self._collect_parts(lambda node: node.export_parts(changed_only))
        parts = {part_name: dumps_entries_part(state) for part_name, state in entries.items()}
        for part_name in parts:
            # an entries' part: the node exports it only when it changed, so it has no digest to compare
            digests[part_name] = b""
        for part_name, state in states.items():  # exported if their bytes changed
            data = pickle.dumps(state, protocol=5)
            digest = _digest(data)
            if digests.get(part_name) != digest:
                parts[part_name] = data
                digests[part_name] = digest
        current_names = set(current)
        removed = [part_name for part_name in digests if part_name not in current_names]
        for part_name in removed:
            del digests[part_name]
        self._part_digests = digests
        return StateExport(parts, removed)

    def _collect_parts(
        self, parts_of: Callable[[Node], Any]
    ) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
        """The task's state parts: `(the entries' parts' states, the other parts' states, the names of every
        current part)`. `parts_of(node)` gives a node's parts as `export_parts` or `state_parts` does: for
        an export, the entries' parts it gives are exactly those that changed."""
        entries: dict[str, Any] = {}
        states: dict[str, Any] = {TASK_PART: self._task_state()}
        current: list[str] = [TASK_PART]
        for name, node in self.nodes.items():
            exported = parts_of(node)
            if exported is None:
                state = node.snapshot_state()
                if state is not None:
                    states[name] = state
                    current.append(name)
                continue
            node_parts, node_names = exported
            for sub, state in node_parts.items():
                if sub:
                    entries[f"{name}/{sub}"] = state
                else:  # the node's own part
                    states[name] = state
            current += [f"{name}/{sub}" if sub else name for sub in node_names]
        return entries, states, current

    @classmethod
    def import_state(cls, topology: Topology, parts: Mapping[str, bytes]) -> StreamTask:
        """A task from every current part of an export history (the union of the exported parts minus
        the removed ones); `topology` is the same object or a fresh build of it."""
        if TASK_PART not in parts:
            raise ValueError(f"the task state has no {TASK_PART!r} part; parts: {sorted(parts)[:10]}")
        with no_cyclic_gc():
            task = cls._from_task_state(topology, pickle.loads(parts[TASK_PART]))
            task._part_digests = {TASK_PART: _digest(parts[TASK_PART])}
            task._apply_parts({name: data for name, data in parts.items() if name != TASK_PART}, [])
        return task

    def apply_state(self, parts: Mapping[str, bytes], removed: Iterable[str]) -> None:
        """Catch this task up with a later point of its own export history, which another copy of it went
        through (the task as it was at its last `export_state()` or `import_state()`, restored and run
        elsewhere since): `parts` holds every part exported since (the latest bytes of each), `removed` the
        parts gone since. The task then equals `import_state` of every current part, having read only what
        changed. Raises ValueError where the parts do not continue this task's history: then import."""
        if self._part_digests is None:
            raise ValueError("this task was never exported or imported: it has no export history")
        with no_cyclic_gc():
            self._apply_parts(parts, removed)

    def _apply_parts(self, parts: Mapping[str, bytes], removed: Iterable[str]) -> None:
        """Parts and removals over the state of the last export or import (import_state, apply_state)."""
        digests = self._part_digests
        by_node: dict[str, tuple[dict[str, Any], list[str]]] = {}
        loader = KeyListLoader()  # equal keys in two stores' parts are unpickled once, then shared
        for part_name in removed:
            if part_name == TASK_PART:
                raise ValueError(f"the {TASK_PART!r} part cannot go")
            node_name, sub = self._node_part(part_name)
            by_node.setdefault(node_name, ({}, []))[1].append(sub)
            digests.pop(part_name, None)
        for part_name, data in parts.items():
            if part_name == TASK_PART:
                self._apply_task_state(pickle.loads(data))
                sub = ""
            else:
                node_name, sub = self._node_part(part_name)
                by_node.setdefault(node_name, ({}, []))[0][sub] = (
                    loader.loads(data) if sub else pickle.loads(data)
                )
            # an entries' part is exported only when it changed: no digest to compare (_export_state)
            digests[part_name] = b"" if sub else _digest(data)
        for node_name, node in self.nodes.items():  # parents first: a buffer may read its store's values
            if node_name in by_node:
                node.apply_parts(*by_node[node_name])

    def _node_part(self, part_name: str) -> tuple[str, str]:
        """(node name, the node's name of the part: "" for its own) of a part other than "task"."""
        node_name, sub = (part_name, "") if part_name in self.nodes else part_name.rsplit("/", 1)
        if node_name not in self.nodes:
            raise ValueError(f"state part {part_name!r} names no node of this topology")
        return node_name, sub

    def _task_state(self) -> dict[str, Any]:
        state = {
            "layout": STATE_LAYOUT,
            "fingerprint": topology_fingerprint(self.topology),
            "partition": self.partition,
            "clocks": (self.stream_time, self.wall_clock),
            "next_seq": self._next_seq,
            "dropped": self.dropped_records,
            "punctuation": self.punctuation.snapshot(),
            "pending_output": self._pending_output(),
        }
        late = self.late.pending()
        if late is not None:  # only then: a task part without late records is as it was before them
            state["pending_late"] = late
        return state

    @classmethod
    def _from_task_state(cls, topology: Topology, state: dict[str, Any]) -> StreamTask:
        _check_fingerprint(topology, state)
        task = cls(topology, state["partition"], 0, _clocks=state["clocks"])
        task._set_task_state(state)
        return task

    def _apply_task_state(self, state: dict[str, Any]) -> None:
        """The "task" part of a later point of this task's history, over its own (apply_state)."""
        _check_fingerprint(self.topology, state)
        if state["partition"] != self.partition:
            raise ValueError(
                f"the state is partition {state['partition']}'s, this task is {self.partition}'s"
            )
        self.stream_time, self.wall_clock = state["clocks"]
        # schedules are never taken out (a cancelled one stays, marked): this copy's are a prefix of the
        # state's, which restore overwrites and completes
        self._rows.clear()
        self._segments = []
        self._set_task_state(state)

    def _set_task_state(self, state: dict[str, Any]) -> None:
        self.punctuation.restore(state["punctuation"], self._rebind_punctuator)
        self._next_seq = state["next_seq"]
        self.dropped_records = state["dropped"]
        if state["pending_output"] is not None:
            self._segments.append(state["pending_output"])
        self.late.restore(state.get("pending_late"))

    def _rebind_punctuator(self, node_name: str, method_name: str) -> Callable[[int], Any]:
        node = self.nodes[node_name]
        if not isinstance(node, UserProcessorNode):
            raise ValueError(f"node {node_name!r} cannot own a punctuation schedule")
        return node.rebind(method_name)

    # -- wiring -------------------------------------------------------------------------------------------

    def _serial_runner(self, node: Node) -> Callable:
        """A function processing one row at `node` and cascading its outputs depth first."""
        runner = self._serial_runners.get(node.name)
        if runner is not None:
            return runner
        if isinstance(node, SinkNode):
            topic = node.topic

            def runner(key, value, old, timestamp, headers):
                self._collector.append((topic, key, value, timestamp, headers))

        elif isinstance(node, UserProcessorNode):
            node.child_runners = [self._serial_runner(child) for child in node.children]
            node.child_runner_by_name = {
                child.name: r for child, r in zip(node.children, node.child_runners, strict=False)
            }
            runner = node.run
        else:
            children = [self._serial_runner(child) for child in node.children]
            process = node.process_columns

            def runner(key, value, old, timestamp, headers):
                out = process(
                    [key],
                    [value],
                    None if old is _NO_OLD else [old],
                    [timestamp],
                    None if headers is None else [headers],
                )
                if out is None:
                    return
                keys, values, olds, timestamps, headers_out, _ = out
                for j in range(len(keys)):
                    old_j = _NO_OLD if olds is None else olds[j]
                    headers_j = None if headers_out is None else headers_out[j]
                    for child in children:
                        child(keys[j], values[j], old_j, timestamps[j], headers_j)

        self._serial_runners[node.name] = runner
        return runner

    def _source_runner(self, source: Node) -> Callable:
        """Runs a batch from `source`: islands row by row in lockstep, then the columnar children; returns
        the output columns in depth-first order and how many input rows were consumed."""
        islands = []  # (child index, serial runner, its children's batch runner or None, its buffer)
        for i, child in enumerate(source.children):
            if isinstance(child, UserProcessorNode):
                below = self._island_children_runner(child)
                buffer = ForwardBuffer() if below is not None else None
                islands.append((i, self._serial_runners[child.name], child, below, buffer))
        columnar = [
            (i, self._columnar_runner(c, len(source.children) > 1))
            for i, c in enumerate(source.children)
            if not isinstance(c, UserProcessorNode)
        ]
        punctuation = self.punctuation

        def run_source(keys, values, timestamps, headers):
            n = len(keys)
            results: list[tuple[int, Columns, list | None]] = []
            if islands:
                collected: list[tuple[list, list]] = [([], []) for _ in islands]
                # islands whose forwards are held: each row's forwards go to its buffer, nothing runs below
                held = [(serial, buffer) for _, serial, _, _, buffer in islands if buffer is not None]
                if len(held) < len(islands):
                    held = None
                version = punctuation.version
                base = stream_time = self.stream_time
                late = self.late
                for _, _, node, _, buffer in islands:
                    if buffer is not None:
                        buffer.clear()
                        node.forwards = buffer
                try:
                    for i in range(n):
                        ts = timestamps[i]
                        if ts > stream_time:
                            self.stream_time = stream_time = ts
                        key, value, h = keys[i], values[i], None if headers is None else headers[i]
                        if held is not None:
                            for serial, buffer in held:
                                buffer.row = i
                                serial(key, value, _NO_OLD, ts, h)
                        else:
                            late.row = i
                            for (rows, src), (_, serial, _, _, buffer) in zip(
                                collected, islands, strict=True
                            ):
                                if buffer is not None:
                                    buffer.row = i
                                    serial(key, value, _NO_OLD, ts, h)
                                    continue
                                self._collector = rows
                                mark = len(rows)
                                serial(key, value, _NO_OLD, ts, h)
                                if len(rows) > mark:
                                    src += repeat(i, len(rows) - mark)
                        if punctuation.version != version:
                            if i + 1 < n:
                                n = i + 1
                                keys, values, timestamps = keys[:n], values[:n], timestamps[:n]
                                headers = None if headers is None else headers[:n]
                            break
                finally:
                    self._collector = self._rows
                    self.stream_time = base  # the task advances it after the batch
                    late.row = None
                    for _, _, node, _, _ in islands:
                        node.forwards = None
                for (index, _, _, below, buffer), (rows, src) in zip(islands, collected, strict=False):
                    if buffer is None:
                        if rows:
                            results.append((index, batching.rows_to_columns(rows), src))
                    elif buffer.records:
                        cols, src = below(buffer)
                        buffer.clear()  # the batch's rows go with it
                        if cols is not None:
                            results.append((index, cols, src))
            for index, run_child in columnar:
                cols, src = run_child(keys, values, None, timestamps, headers)
                if cols is not None:
                    results.append((index, cols, src))
            if not results:
                return None, n
            if len(results) == 1:
                return results[0][1], n
            results.sort(key=lambda r: r[0])  # child order decides ties
            return batching.merge([(cols, src) for _, cols, src in results], False)[0], n

        return run_source

    def _island_children_runner(self, island: UserProcessorNode) -> Callable | None:
        """A function running an island's children as columns over the forwards its processor made in a
        batch (a `ForwardBuffer`); returns the sinks' columns in depth-first order and the input row each
        output row descends from. None where they must run row by row: a user processor below the island.

        Record by record, the island's children run each forward before the processor sees the next record.
        Holding the forwards changes nothing there: the processor reads no state of the nodes below it
        (its own attributes, the task's clocks and topic, which the batch sets per row), the nodes below
        read no state that the source's tree changes (`_can_batch`), and punctuation, the one other way
        into those nodes, runs only between chunks (`_process_columnar` cuts a chunk after the record at
        which a schedule falls due, and after a record at which a processor changes the schedules). The
        children then see exactly the rows they see record by record, in the same order; a forward to a
        named child goes to that child's rows only, and the merge by forward (`src`) restores the
        depth-first order: forward by forward, children in order."""
        stack = list(island.children)
        while stack:
            below = stack.pop()
            if isinstance(below, UserProcessorNode) or not below.columnar:
                return None
            stack.extend(below.children)
        runners = [self._columnar_runner(child, True) for child in island.children]
        path = self.late.path  # late rows map back through the forwards' src (runtime/late.py)

        def run_children(buffer: ForwardBuffer) -> tuple[Columns | None, list | None]:
            keys, values, timestamps, headers = buffer.columns()
            src, targets = buffer.src, buffer.targets
            olds = [None] * len(keys)  # as a forward reaches a child record by record
            results = []
            path.append(src)
            for c, run_child in enumerate(runners):
                if targets is None:
                    picked = None
                    cols, child_src = run_child(keys, values, olds, timestamps, headers)
                else:
                    picked = [j for j, target in enumerate(targets) if target is None or target == c]
                    if not picked:
                        continue
                    path.append(picked)
                    cols, child_src = run_child(
                        [keys[j] for j in picked],
                        [values[j] for j in picked],
                        [None] * len(picked),
                        [timestamps[j] for j in picked],
                        None if headers is None else [headers[j] for j in picked],
                    )
                    path.pop()
                if cols is not None:
                    results.append((cols, batching.compose(picked, child_src)))
            path.pop()
            if not results:
                return EMPTY
            cols, forward_src = results[0] if len(results) == 1 else batching.merge(results, True)
            return cols, batching.compose(src, forward_src)

        return run_children

    def _columnar_runner(self, node: Node, need_src: bool) -> Callable:
        """A function processing a batch at `node`; returns the sinks' columns in depth-first order and,
        when `need_src` (a fan-out above merges them), the input row each output row descends from."""
        # a node above one that may drop late records builds its src: late rows map back through it
        late_below = _late_below(node)
        node.need_src = node.need_src or need_src or late_below
        if isinstance(node, SinkNode):
            topic = node.topic

            def run_sink(keys, values, olds, timestamps, headers):
                return batching.sink_columns(topic, keys, values, timestamps, headers), None

            return run_sink
        process = node.process_columns
        rewrite = self._rewrites.get(node.name)
        if rewrite is not None:  # a chain run as one step: its output goes to its last node's children
            node = rewrite.output
            node.need_src = node.need_src or need_src or late_below
            process = rewrite.process_columns
        fan_out = len(node.children) > 1
        path = self.late.path  # the src of this node's output, while its children run (runtime/late.py)
        children = [self._columnar_runner(child, need_src or fan_out) for child in node.children]
        if not children:

            def run_leaf(keys, values, olds, timestamps, headers):
                process(keys, values, olds, timestamps, headers)
                return EMPTY

            return run_leaf
        if not fan_out:
            child = children[0]

            def run_chain(keys, values, olds, timestamps, headers):
                out = process(keys, values, olds, timestamps, headers)
                if out is None or not out.keys:
                    return EMPTY
                path.append(out.src)
                cols, child_src = child(out.keys, out.values, out.olds, out.timestamps, out.headers)
                path.pop()
                if cols is None:
                    return EMPTY
                return cols, batching.compose(out.src, child_src) if need_src else None

            return run_chain

        def run_fan_out(keys, values, olds, timestamps, headers):
            out = process(keys, values, olds, timestamps, headers)
            if out is None or not out.keys:
                return EMPTY
            k, v, o, t, h, src = out
            results = []
            path.append(src)
            for run_child in children:
                cols, child_src = run_child(k, v, o, t, h)
                if cols is not None:
                    results.append((cols, child_src))
            path.pop()
            if not results:
                return EMPTY
            cols, child_src = results[0] if len(results) == 1 else batching.merge(results, need_src)
            return cols, batching.compose(src, child_src) if need_src else None

        return run_fan_out


def _late_below(node: Node) -> bool:
    """Whether a node below `node` may drop late records (`Node.drops_late`)."""
    stack = list(node.children)
    while stack:
        below = stack.pop()
        if below.drops_late:
            return True
        stack.extend(below.children)
    return False


def _can_batch(source: Node, nodes: Mapping[str, Node]) -> bool:
    """True if the nodes reachable from `source` form a tree, user processors appear only as the source's
    children or below them (islands: their subtrees run row by row), and no node reads state (a join's
    table or other side, through their value getters) that a node of the tree changes."""
    seen: set[int] = set()
    names: set[str] = set()
    reads: list[str] = []
    stack = [(child, isinstance(child, UserProcessorNode)) for child in source.children]
    while stack:
        node, in_island = stack.pop()
        if id(node) in seen:
            return False
        if isinstance(node, UserProcessorNode):
            if not in_island:
                return False
        elif not node.columnar:
            return False
        seen.add(id(node))
        names.add(node.name)
        reads += node.state_reads()
        stack.extend((child, in_island) for child in node.children)
    return not _getters_read(nodes, reads) & names


def _getters_read(nodes: Mapping[str, Node], reads: list[str]) -> set[str]:
    """The nodes named in `reads`, and those their value getters read."""
    read: set[str] = set()
    while reads:
        name = reads.pop()
        if name not in read:
            read.add(name)
            reads += nodes[name].getter_reads()
    return read
