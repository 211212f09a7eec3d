"""Task state in a store of small entries, written in proportion to what changed.

A task's state is a set of named *parts*: the engine's (`StreamTask.export_state()`, stored under
`task/<name>`) and the runtime's own (`runtime`: a pickled dict, e.g. the wall clock). Each part is cut into
chunks of at most `STATE_CHUNK_BYTES`, one store entry each, so no single value holds a whole task's state
and state of any size fits. A micro-batch writes only the parts whose bytes changed (and removes the chunks
a part no longer has); a small *meta* value holds a version counter and the manifest: every part's chunk
count and the version that wrote it, and the last versions saved, each with a random token.

Between micro-batches the live task stays in the Python worker (`WORKER_TASKS`, keyed by checkpoint id and
partition) with the version and token it saved. The next micro-batch uses it as it is if the store holds
that version and token; if the store holds a later version whose history lists them (another worker ran
the partition since: Spark hands tasks to whichever worker is idle), the task is caught up from the parts
written since (`StreamTask.apply_state`); otherwise (a replay after a crash or a failed attempt, which
wrote other tokens, or a copy too old) it is read whole from the store. A task is taken out of the cache
while its batch runs, so an exception leaves none.

The store is an interface (`PartStore`): Spark's is the state of `transformWithStateInPandas` (a MapState
of chunks and a ValueState of meta, in RocksDB); the in-memory runtime's is a dict. Both run this code.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # imported where used: the stateful processor's module stays light (task_processor.py)
    from spark_jobs.streams import StreamTask

# Written into the checkpoint's job.json; a checkpoint with another layout is refused. Every store saved as
# bases and deltas (nodes/store_log.py), in the engine's state layout of the same number (runtime/task.py).
STATE_LAYOUT = "task-parts-v13"

# Upper bound of one stored value (Arrow and the state store cap one cell at 2 GB). Small entries keep the
# JVM's memory low: a value of many megabytes is a humongous object for the JVM's G1 collector (at least half
# a heap region, 512 KB under a 1 GB heap) and one RocksDB block of its own, copied whole through JNI, and
# the memory those copies leave behind stays with the JVM. Tests set a tiny value to force many chunks.
STATE_CHUNK_BYTES = 256 * 2**10

RUNTIME_PART = "runtime"
ENGINE_PART_PREFIX = "task/"


class StateCorrupt(RuntimeError):
    """The store does not hold the chunks its manifest lists."""


class PartStore(Protocol):
    """One task's entries: a meta value and chunks keyed by (part, chunk index)."""

    def read_meta(self) -> tuple[int, bytes] | None: ...

    def write_meta(self, version: int, manifest: bytes) -> None: ...

    def read_chunks(self) -> Iterable[tuple[str, int, bytes]]: ...

    def read_chunk(self, part: str, index: int) -> bytes | None: ...

    def write_chunk(self, part: str, index: int, data: bytes) -> None: ...

    def remove_chunk(self, part: str, index: int) -> None: ...


class DictPartStore:
    """A PartStore in a dict (the in-memory runtime, tests)."""

    def __init__(self):
        self.meta: tuple[int, bytes] | None = None
        self.chunks: dict[tuple[str, int], bytes] = {}

    def read_meta(self):
        return self.meta

    def write_meta(self, version, manifest):
        self.meta = (version, manifest)

    def read_chunks(self):
        return [(part, index, data) for (part, index), data in self.chunks.items()]

    def read_chunk(self, part, index):
        return self.chunks.get((part, index))

    def write_chunk(self, part, index, data):
        self.chunks[(part, index)] = bytes(data)

    def remove_chunk(self, part, index):
        del self.chunks[(part, index)]


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


@dataclass
class StoredPart:
    chunks: int
    version: int  # the version whose save wrote it
    digest: bytes = b""  # of its bytes, known where this worker wrote or read them
    size: int = 0  # its bytes, known where this worker wrote or read them


@dataclass
class Manifest:
    """The meta value's manifest: every part with its chunk count and the version that wrote it, and the
    versions saved last, each with the token of the save that wrote it (one history, not a replay's)."""

    parts: dict[str, StoredPart]
    history: list[tuple[int, str]]

    def encode(self) -> bytes:
        parts = {name: [p.chunks, p.version] for name, p in sorted(self.parts.items())}
        return json.dumps({"parts": parts, "history": self.history}).encode()

    @classmethod
    def decode(cls, data: bytes, version: int) -> Manifest:
        raw = json.loads(data)
        if "parts" not in raw:  # written before part versions: {part: chunk count}, no history
            return cls({name: StoredPart(count, version) for name, count in raw.items()}, [])
        parts = {name: StoredPart(count, written) for name, (count, written) in raw["parts"].items()}
        return cls(parts, [(v, token) for v, token in raw["history"]])


# Saves a manifest remembers: a worker whose copy of a task is older than these restores it whole.
HISTORY_VERSIONS = 64


@dataclass
class TaskState:
    """A live task and the runtime's state of it, with what the store holds (to write only changes)."""

    task: StreamTask
    # Runtime-level state persisted with the task (the "runtime" part): wall_clock, and what other runtime
    # features add (a pickled dict: add a key, keep it picklable).
    runtime: dict = field(default_factory=dict)
    version: int = 0
    stored: dict[str, StoredPart] = field(default_factory=dict)
    history: list[tuple[int, str]] = field(default_factory=list)

    @property
    def wall_clock(self) -> int:
        return self.runtime["wall_clock"]

    @property
    def saved_as(self) -> tuple[int, str] | None:
        """(version, token) of the save this state is at, as the manifest's history lists it."""
        return self.history[-1] if self.history else None


# How `load` got the task state.
NEW, LIVE, CAUGHT_UP, RESTORED = "new", "live", "caught up", "restored"


@dataclass
class StateLoad:
    source: str = NEW
    parts_read: int = 0
    bytes_read: int = 0

    @property
    def restored(self) -> bool:
        return self.source == RESTORED


@dataclass
class StateWrite:
    parts_written: int = 0
    chunks_written: int = 0
    bytes_written: int = 0
    parts_removed: int = 0
    parts_stored: int = 0

    def metrics(self, loaded: StateLoad | None = None) -> dict:
        metrics = {
            "state_parts_written": self.parts_written,
            "state_chunks_written": self.chunks_written,
            "state_bytes_written": self.bytes_written,
            "state_parts_removed": self.parts_removed,
            "state_parts_stored": self.parts_stored,
        }
        if loaded is not None:
            metrics.update(
                state_restored=int(loaded.restored),
                state_caught_up=int(loaded.source == CAUGHT_UP),
                state_parts_read=loaded.parts_read,
                state_bytes_read=loaded.bytes_read,
            )
        return metrics


class LiveTasks:
    """The task states a Python worker saved, by (checkpoint id, partition), the most recently saved last.

    Spark hands a micro-batch's Spark tasks to whichever Python worker is idle, so a worker's copy of a
    partition may be some versions behind the store: `load` then catches it up from the parts written
    since, which costs what those micro-batches changed, where a restore reads the whole state."""

    def __init__(self) -> None:
        self._states: dict[tuple, TaskState] = {}

    def take(self, key: tuple) -> TaskState | None:
        """The state kept under `key`, taken out (a batch that fails leaves none behind)."""
        return self._states.pop(key, None)

    def keep(self, key: tuple, state: TaskState, limit: int | None) -> None:
        """Keep `state`, and at most `limit` states of its checkpoint: the least recently saved go."""
        self._states.pop(key, None)
        self._states[key] = state
        if limit is not None:
            same = [k for k in self._states if k[0] == key[0]]
            for k in same[: max(0, len(same) - limit)]:
                del self._states[k]

    def held(self) -> list[tuple]:
        """The keys of the states kept, the least recently saved first."""
        return list(self._states)


# This worker process's live tasks.
WORKER_TASKS = LiveTasks()


def new_task_state(topology, partition: int, initial_wall_clock_ms: int) -> TaskState:
    from spark_jobs.streams import StreamTask

    task = StreamTask(topology, partition=partition, initial_wall_clock_ms=initial_wall_clock_ms)
    return TaskState(task, {"wall_clock": initial_wall_clock_ms})


def load(
    store: PartStore,
    topology,
    partition: int,
    initial_wall_clock_ms: int,
    cache_key: tuple | None = None,
    live: LiveTasks = WORKER_TASKS,
) -> tuple[TaskState, StateLoad]:
    """The task state of a partition (new if the store is empty) and how it was got: the live task kept
    under `cache_key` if the store holds its version, that task caught up if the store holds a later
    version of the same history, else the state read whole from the store."""
    meta = store.read_meta()
    cached = live.take(cache_key) if cache_key is not None else None
    if meta is None:
        return new_task_state(topology, partition, initial_wall_clock_ms), StateLoad(NEW)
    version, manifest_bytes = meta
    manifest = Manifest.decode(manifest_bytes, version)
    if cached is not None and cached.saved_as in manifest.history:
        if cached.version == version:
            return cached, StateLoad(LIVE)
        try:
            return cached, _catch_up(store, cached, version, manifest)
        except ValueError:
            pass  # not a continuation of this copy's history after all: read the state whole
    return _restore(store, topology, partition, version, manifest)


def _restore(
    store: PartStore, topology, partition: int, version: int, manifest: Manifest
) -> tuple[TaskState, StateLoad]:
    pieces: dict[str, dict[int, bytes]] = {}
    for part, index, data in store.read_chunks():
        pieces.setdefault(part, {})[index] = data
    parts: dict[str, bytes] = {}
    for part, stored in manifest.parts.items():
        chunks = pieces.get(part, {})
        if sorted(chunks) != list(range(stored.chunks)):
            raise StateCorrupt(
                f"task state of partition {partition}: part {part!r} should have {stored.chunks} chunks, the "
                f"store has {sorted(chunks)}"
            )
        parts[part] = b"".join(chunks[i] for i in range(stored.chunks))
    runtime = pickle.loads(parts[RUNTIME_PART])
    engine = {name[len(ENGINE_PART_PREFIX) :]: data for name, data in parts.items() if name != RUNTIME_PART}
    from spark_jobs.streams import StreamTask

    task = StreamTask.import_state(topology, engine)
    stored = {
        part: StoredPart(manifest.parts[part].chunks, manifest.parts[part].version, _digest(data), len(data))
        for part, data in parts.items()
    }
    state = TaskState(task, runtime, version, stored, manifest.history)
    return state, StateLoad(RESTORED, len(parts), sum(map(len, parts.values())))


def _catch_up(store: PartStore, state: TaskState, version: int, manifest: Manifest) -> StateLoad:
    """Read the parts written after `state.version` and apply them, with the parts removed since."""
    changed: dict[str, bytes] = {}
    for part, stored in manifest.parts.items():
        if stored.version > state.version:
            chunks = [store.read_chunk(part, index) for index in range(stored.chunks)]
            if any(chunk is None for chunk in chunks):
                raise StateCorrupt(f"task state: part {part!r} should have {stored.chunks} chunks")
            changed[part] = b"".join(chunks)  # type: ignore[arg-type]
    removed = [part for part in state.stored if part not in manifest.parts]
    engine_changed = {p[len(ENGINE_PART_PREFIX) :]: d for p, d in changed.items() if p != RUNTIME_PART}
    engine_removed = [p[len(ENGINE_PART_PREFIX) :] for p in removed if p != RUNTIME_PART]
    state.task.apply_state(engine_changed, engine_removed)
    if RUNTIME_PART in changed:
        state.runtime = pickle.loads(changed[RUNTIME_PART])
    for part in removed:
        del state.stored[part]
    for part, data in changed.items():
        state.stored[part] = StoredPart(
            manifest.parts[part].chunks, manifest.parts[part].version, _digest(data), len(data)
        )
    state.version, state.history = version, manifest.history
    return StateLoad(CAUGHT_UP, len(changed), sum(map(len, changed.values())))


def size_metrics(state: TaskState) -> dict[str, int]:
    """The task's state size: the entries of its nodes' stores (`Node.state_size`), its open windows (the
    most any one node holds: a suppress buffer holds windows of the aggregate before it), and the bytes its
    parts take in the store."""
    entries = windows = 0
    for node in state.task.nodes.values():
        node_entries, node_windows = node.state_size()
        entries += node_entries
        windows = max(windows, node_windows)
    return {
        "state_entries": entries,
        "state_windows": windows,
        "state_bytes": sum(part.size for part in state.stored.values()),
    }


def save(
    store: PartStore,
    state: TaskState,
    cache_key: tuple | None = None,
    chunk_bytes: int | None = None,
    live_tasks: int | None = None,
    live: LiveTasks = WORKER_TASKS,
) -> StateWrite:
    """Write the parts that changed since the store's version, then the meta with the next version, and
    keep the live task under `cache_key` in `live`, with at most `live_tasks` of its checkpoint."""
    chunk_bytes = chunk_bytes or STATE_CHUNK_BYTES
    engine_parts, engine_removed = state.task.export_state()
    parts = {ENGINE_PART_PREFIX + name: data for name, data in engine_parts.items()}
    parts[RUNTIME_PART] = pickle.dumps(state.runtime, protocol=5)
    written = StateWrite()
    version = state.version + 1
    for part, data in parts.items():
        digest = _digest(data)
        old = state.stored.get(part)
        if old is not None and digest == old.digest:
            continue  # unchanged (e.g. the runtime part, or an engine that re-exports a part as it was)
        old_count = 0 if old is None else old.chunks
        count = max(1, -(-len(data) // chunk_bytes))
        view = memoryview(data)
        for index in range(count):
            store.write_chunk(part, index, bytes(view[index * chunk_bytes : (index + 1) * chunk_bytes]))
        for index in range(count, old_count):
            store.remove_chunk(part, index)
        state.stored[part] = StoredPart(count, version, digest, len(data))
        written.parts_written += 1
        written.chunks_written += count
        written.bytes_written += len(data)
    for name in engine_removed:
        part = ENGINE_PART_PREFIX + name
        old = state.stored.pop(part, None)
        for index in range(0 if old is None else old.chunks):
            store.remove_chunk(part, index)
        written.parts_removed += 1
    written.parts_stored = len(state.stored)
    state.version = version
    state.history = [*state.history, (version, secrets.token_hex(8))][-HISTORY_VERSIONS:]
    store.write_meta(version, Manifest(state.stored, state.history).encode())
    if cache_key is not None:
        live.keep(cache_key, state, live_tasks)
    return written
