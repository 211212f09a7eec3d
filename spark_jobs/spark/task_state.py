"""Task state in a store of small entries, written in proportion to what changed.

A task's state is a set of named *parts*: the engine's (`StreamTask.export_state()`, stored under
`task/<name>`) and the runtime's own (`runtime`: a pickled dict, e.g. the wall clock). Each part is cut into
chunks of at most `STATE_CHUNK_BYTES`, one store entry each, so no single value holds a whole task's state
and state of any size fits. A micro-batch writes only the parts whose bytes changed (and removes the chunks
a part no longer has); a small *meta* value holds a version counter and the chunk count of every part.

Between micro-batches the live task stays in the Python worker (`_LIVE`, keyed by checkpoint id and
partition) together with the version it saved. The next micro-batch uses it only if the store holds that
same version: a replay after a crash or a failed attempt sees an older version in the store and restores
from the store. An entry is taken out of the cache while its batch runs, so an exception leaves none.

The store is an interface (`PartStore`): Spark's is the state of `transformWithStateInPandas` (a MapState
of chunks and a ValueState of meta, in RocksDB); the in-memory runtime's is a dict. Both run this code.
"""

from __future__ import annotations

import hashlib
import json
import pickle
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

# Written into the checkpoint's job.json; a checkpoint with another layout is refused. Without one: the
# whole task state in one value. "task-parts-v1": windows cut into key-hash buckets, each rewritten whole
# when one of its keys changed. "task-parts-v2": a base part and deltas per window (nodes/store_log.py).
STATE_LAYOUT = "task-parts-v2"

# Upper bound of one stored value (Arrow and the state store cap one cell at 2 GB; smaller entries keep
# memory per row modest). Tests set a tiny value to force many chunks.
STATE_CHUNK_BYTES = 16 * 2**20

RUNTIME_PART = "runtime"
ENGINE_PART_PREFIX = "task/"
# The engine's whole snapshot as one part, for an engine without export_state/import_state.
WHOLE_SNAPSHOT_PART = "task"

# Spark state schemas (transformWithStateInPandas).
CHUNK_KEY_DDL = "part string, chunk int"
CHUNK_VALUE_DDL = "data binary"
META_DDL = "version long, manifest binary"


class StateCorrupt(RuntimeError):
    """The store does not hold the chunks its manifest lists."""


class PartStore(Protocol):
    """One task's entries: a meta value and chunks keyed by (part, chunk index)."""

    def read_meta(self) -> tuple[int, bytes] | None: ...

    def write_meta(self, version: int, manifest: bytes) -> None: ...

    def read_chunks(self) -> Iterable[tuple[str, int, bytes]]: ...

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

    def write_chunk(self, part, index, data):
        self.chunks[(part, index)] = bytes(data)

    def remove_chunk(self, part, index):
        del self.chunks[(part, index)]


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


@dataclass
class TaskState:
    """A live task and the runtime's state of it, with what the store holds (to write only changes)."""

    task: Any  # spark_jobs.streams.StreamTask
    # Runtime-level state persisted with the task (the "runtime" part): wall_clock, and what other runtime
    # features add (a pickled dict: add a key, keep it picklable).
    runtime: dict = field(default_factory=dict)
    version: int = 0
    # part -> (chunk count, digest) as stored
    stored: dict[str, tuple[int, bytes]] = field(default_factory=dict)

    @property
    def wall_clock(self) -> int:
        return self.runtime["wall_clock"]


@dataclass
class StateWrite:
    parts_written: int = 0
    chunks_written: int = 0
    bytes_written: int = 0
    parts_removed: int = 0
    parts_stored: int = 0
    restored: bool = False

    def metrics(self) -> dict:
        return {
            "state_parts_written": self.parts_written,
            "state_chunks_written": self.chunks_written,
            "state_bytes_written": self.bytes_written,
            "state_parts_removed": self.parts_removed,
            "state_parts_stored": self.parts_stored,
            "state_restored": int(self.restored),
        }


# (checkpoint id, partition) -> TaskState saved by this worker process
_LIVE: dict[tuple[str, int], TaskState] = {}


def _export_engine(task) -> tuple[dict[str, bytes], list[str]]:
    if hasattr(task, "export_state"):
        export = task.export_state()
        return dict(export.parts), list(export.removed)
    return {WHOLE_SNAPSHOT_PART: task.snapshot()}, []


def _import_engine(topology, parts: Mapping[str, bytes]):
    from spark_jobs.streams import StreamTask

    if hasattr(StreamTask, "import_state"):
        return StreamTask.import_state(topology, parts)
    return StreamTask.restore(topology, parts[WHOLE_SNAPSHOT_PART])


def new_task_state(topology, partition: int, initial_wall_clock_ms: int) -> TaskState:
    from spark_jobs.streams import StreamTask

    task = StreamTask(topology, partition=partition, initial_wall_clock_ms=initial_wall_clock_ms)
    return TaskState(task, {"wall_clock": initial_wall_clock_ms})


def load(
    store: PartStore, topology, partition: int, initial_wall_clock_ms: int, cache_key: tuple | None = None
) -> tuple[TaskState, bool]:
    """The task state of a partition (new if the store is empty) and whether it was read from the store."""
    meta = store.read_meta()
    cached = _LIVE.pop(cache_key, None) if cache_key is not None else None
    if meta is None:
        return new_task_state(topology, partition, initial_wall_clock_ms), False
    version, manifest_bytes = meta
    if cached is not None and cached.version == version:
        return cached, False
    manifest: dict[str, int] = json.loads(manifest_bytes)
    pieces: dict[str, dict[int, bytes]] = {}
    for part, index, data in store.read_chunks():
        pieces.setdefault(part, {})[index] = data
    parts: dict[str, bytes] = {}
    for part, count in manifest.items():
        chunks = pieces.get(part, {})
        if sorted(chunks) != list(range(count)):
            raise StateCorrupt(
                f"task state of partition {partition}: part {part!r} should have {count} chunks, the store "
                f"has {sorted(chunks)}"
            )
        parts[part] = b"".join(chunks[i] for i in range(count))
    runtime = pickle.loads(parts[RUNTIME_PART])
    engine = {name[len(ENGINE_PART_PREFIX) :]: data for name, data in parts.items() if name != RUNTIME_PART}
    task = _import_engine(topology, engine)
    stored = {part: (manifest[part], _digest(data)) for part, data in parts.items()}
    return TaskState(task, runtime, version, stored), True


def save(
    store: PartStore,
    state: TaskState,
    cache_key: tuple | None = None,
    chunk_bytes: int | None = None,
    live_tasks: int | None = None,
) -> StateWrite:
    """Write the parts that changed since the store's version, then the meta with the next version, and
    keep the live task under `cache_key`, with at most `live_tasks` of its checkpoint (the least recently
    saved go: a worker that took another Spark task holds stale copies of its former partitions)."""
    chunk_bytes = chunk_bytes or STATE_CHUNK_BYTES
    engine_parts, engine_removed = _export_engine(state.task)
    parts = {ENGINE_PART_PREFIX + name: data for name, data in engine_parts.items()}
    parts[RUNTIME_PART] = pickle.dumps(state.runtime, protocol=5)
    written = StateWrite()
    for part, data in parts.items():
        digest = _digest(data)
        old_count, old_digest = state.stored.get(part, (0, b""))
        if digest == old_digest:
            continue  # unchanged (e.g. the runtime part, or an engine that re-exports a part as it was)
        count = max(1, -(-len(data) // chunk_bytes))
        view = memoryview(data)
        for index in range(count):
            store.write_chunk(part, index, bytes(view[index * chunk_bytes : (index + 1) * chunk_bytes]))
        for index in range(count, old_count):
            store.remove_chunk(part, index)
        state.stored[part] = (count, digest)
        written.parts_written += 1
        written.chunks_written += count
        written.bytes_written += len(data)
    for name in engine_removed:
        part = ENGINE_PART_PREFIX + name
        old_count, _ = state.stored.pop(part, (0, b""))
        for index in range(old_count):
            store.remove_chunk(part, index)
        written.parts_removed += 1
    written.parts_stored = len(state.stored)
    state.version += 1
    manifest = {part: count for part, (count, _) in sorted(state.stored.items())}
    store.write_meta(state.version, json.dumps(manifest).encode())
    if cache_key is not None:
        _LIVE.pop(cache_key, None)
        _LIVE[cache_key] = state  # the most recent last
        if live_tasks is not None:
            same = [key for key in _LIVE if key[0] == cache_key[0]]
            for key in same[: max(0, len(same) - live_tasks)]:
                del _LIVE[key]
    return written
