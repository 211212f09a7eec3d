"""Multi-input test helpers: landing folders per topic, and the reference (one TopologyTestDriver per
partition fed the rule-1 merge of all records, computed here with heapq, not with the runtime's code)."""

from __future__ import annotations

import heapq
import importlib
import json
import os
import zlib
from pathlib import Path

BASE_MTIME_S = 1_700_000_000


def land(root: Path, topic: str, index: int, records: list[tuple], mtime_s: int) -> Path:
    """One JSON-lines file of (key, value, timestamp) records in root/topic, with this modification time."""
    folder = root / topic
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{index:04d}.jsonl"
    path.write_text("".join(json.dumps({"key": k, "value": v, "timestamp": t}) + "\n" for k, v, t in records))
    os.utime(path, ns=(mtime_s * 10**9, mtime_s * 10**9))
    return path


def topic_records(folder: Path, partitions: int, only: set[str] | None = None) -> dict[int, list[tuple]]:
    """A topic's records per partition (crc32 of the key), files in (mtime, path) order, lines in order
    (`only`: these paths)."""
    files = sorted(
        (
            p
            for p in folder.iterdir()
            if p.is_file() and not p.name.startswith((".", "_")) and (only is None or str(p) in only)
        ),
        key=lambda p: (p.stat().st_mtime_ns // 1_000_000, str(p)),
    )
    out: dict[int, list[tuple]] = {p: [] for p in range(partitions)}
    for path in files:
        for line in path.read_text().splitlines():
            r = json.loads(line)
            out[zlib.crc32(r["key"].encode()) % partitions].append((r["key"], r["value"], r["timestamp"]))
    return out


def rule1_driver_rows(
    module: str, root: Path, partitions: int, phases: list[set[str]] | None = None
) -> dict[str, dict[int, list[tuple]]]:
    """topic -> partition -> (key, value, timestamp) of the driver fed the rule-1 merge of all records:
    each topic in its order, lowest head timestamp next, ties to the topic declared first. `phases`: the
    paths landed before each run, in run order: each run's records are merged on their own."""
    from spark_jobs.streams import TopologyTestDriver

    mod = importlib.import_module(module)
    per_phase = [
        [topic_records(root / topic, partitions, only) for topic in mod.INPUT_TOPICS]
        for only in phases or [None]
    ]
    result: dict[str, dict[int, list[tuple]]] = {}
    for p in range(partitions):
        driver = TopologyTestDriver(mod.build_topology(), initial_wall_clock_ms=0, partition=p)
        inputs = [driver.create_input_topic(topic) for topic in mod.INPUT_TOPICS]
        for per_topic in per_phase:
            tagged = [[(r[2], i, r) for r in records[p]] for i, records in enumerate(per_topic)]
            for _ts, i, (key, value, ts) in heapq.merge(*tagged, key=lambda e: (e[0], e[1])):
                inputs[i].pipe_input(key, value, ts)
        for topic in mod.OUTPUT_TOPICS:
            rows = [
                (r.key, r.value, r.timestamp)
                for r in driver.create_output_topic(topic).read_records_to_list()
            ]
            if rows:
                result.setdefault(topic, {})[p] = rows
    return result


def frame_rows(frame) -> dict[int, list[tuple]]:
    """A topic's output (pandas, in (partition, seq) order) as partition -> (key, decoded value, ts)."""
    out: dict[int, list[tuple]] = {}
    for row in frame.itertuples(index=False):
        value = json.loads(row.value) if isinstance(row.value, str) else row.value  # JSON text or a struct
        out.setdefault(int(row.partition), []).append((row.key, value, int(row.timestamp)))
    return out
