"""The JSON summary of one run: what was read, processed, dropped as late, quarantined, emitted.

`read = processed + quarantined` always holds: every record of a landing file either reaches its task
(where the engine may then drop it as late: `late` is part of `processed`) or is quarantined.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from spark_jobs.spark.transport import QUARANTINE_PARTITION

RUNS_DIR = "_runs"
STATE_SIZES = (
    "entries",
    "windows",
    "bytes",
)  # a task's state size, from its metrics (task_state.size_metrics)


@dataclass
class RunSummary:
    job: str
    trigger: str
    partitions: int
    run_id: str = field(
        default_factory=lambda: time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + f"-{os.getpid()}"
    )
    processed: int = 0
    late: int = 0
    late_by_node: dict[str, int] = field(default_factory=dict)  # the rows of <output>/_late, by node
    quarantined: int = 0
    emitted: dict[str, int] = field(default_factory=dict)
    quarantined_by_reason: dict[str, int] = field(default_factory=dict)
    batches: list[int] = field(default_factory=list)
    wall_clock: dict[int, int] = field(default_factory=dict)
    task_metrics: dict[int, dict] = field(default_factory=dict)
    batch_durations_ms: dict[int, int] = field(default_factory=dict)
    processed_by_batch: dict[int, int] = field(default_factory=dict)
    progress: list[dict] = field(default_factory=list)
    # How the tasks got their state, over the run's micro-batches: read whole from the store ("restored"),
    # or a worker's earlier copy caught up from the changes ("caught_up"); the rest were live or new.
    state_loads: dict[str, int] = field(default_factory=lambda: {"restored": 0, "caught_up": 0})
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def read(self) -> int:
        return self.processed + self.quarantined

    def add_batch(self, batch_id: int, metrics: list[dict]) -> None:
        """Fold the per-task metrics of one committed micro-batch into the run's totals."""
        with self._lock:
            self.batches.append(batch_id)
            self.processed_by_batch[batch_id] = sum(
                m["processed"] for m in metrics if m["partition"] != QUARANTINE_PARTITION
            )
            for m in metrics:
                if m["partition"] == QUARANTINE_PARTITION:
                    self.quarantined += m["quarantined"]
                    for reason, n in m["reasons"].items():
                        self.quarantined_by_reason[reason] = self.quarantined_by_reason.get(reason, 0) + n
                    continue
                self.processed += m["processed"]
                self.late += m["late"]
                for node, n in m.get("late_by_node", {}).items():
                    self.late_by_node[node] = self.late_by_node.get(node, 0) + n
                for topic, n in m["emitted"].items():
                    self.emitted[topic] = self.emitted.get(topic, 0) + n
                self.wall_clock[m["partition"]] = m["wall_clock"]
                self.task_metrics[m["partition"]] = m["task_metrics"]
                self.state_loads["restored"] += m["task_metrics"].get("state_restored", 0)
                self.state_loads["caught_up"] += m["task_metrics"].get("state_caught_up", 0)

    def state_size(self) -> dict | None:
        """The tasks' state as their last micro-batch of the run left it (entries and open windows of their
        stores, bytes in the state store): in total and by partition. A partition whose task did not run in
        this run is not in it; None when no task ran."""
        by_partition = {
            str(p): {name: int(m.get(f"state_{name}", 0)) for name in STATE_SIZES}
            for p, m in sorted(self.task_metrics.items())
            if "state_entries" in m
        }
        if not by_partition:
            return None
        total = {name: sum(sizes[name] for sizes in by_partition.values()) for name in STATE_SIZES}
        return {**total, "by_partition": by_partition}

    def processed_in_batch(self, batch_id: int) -> int:
        with self._lock:
            return self.processed_by_batch.get(batch_id, 0)

    def add_progress(self, line: dict) -> bool:
        """One micro-batch's progress line (spark_jobs.spark.progress); False for a batch not after the
        last one recorded. Batches are reported in order (the ids of a checkpoint only grow), so that is a
        batch recorded already (a poll that looks at the query's recent batches sees some twice)."""
        with self._lock:
            if self.progress and line["batch"] <= self.progress[-1]["batch"]:
                return False
            self.progress.append(line)
            return True

    def to_dict(self) -> dict:
        with self._lock:
            return {
                "run_id": self.run_id,
                "job": self.job,
                "trigger": self.trigger,
                "partitions": self.partitions,
                "records": {
                    "read": self.read,
                    "processed": self.processed,
                    "dropped_late": self.late,
                    "quarantined": self.quarantined,
                },
                "dropped_late_by_node": dict(sorted(self.late_by_node.items())),
                "quarantined_by_reason": dict(sorted(self.quarantined_by_reason.items())),
                "emitted": dict(sorted(self.emitted.items())),
                "batches": sorted(self.batches),
                "batch_durations_ms": {str(b): ms for b, ms in sorted(self.batch_durations_ms.items())},
                "wall_clock_by_partition": {str(p): w for p, w in sorted(self.wall_clock.items())},
                "task_metrics_by_partition": {str(p): m for p, m in sorted(self.task_metrics.items())},
                "state_loads": dict(self.state_loads),
                "state": self.state_size(),
                "progress": list(self.progress),
            }

    def write(self, output_dir: str | os.PathLike) -> Path:
        """Write `<output>/_runs/<run_id>.json` and `latest.json` (each atomically)."""
        runs = Path(output_dir) / RUNS_DIR
        runs.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.to_dict(), indent=2) + "\n"
        path = runs / f"{self.run_id}.json"
        for target in (path, runs / "latest.json"):
            tmp = runs / f".{target.name}.tmp"
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, target)
        return path
