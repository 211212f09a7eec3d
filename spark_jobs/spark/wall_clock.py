"""The wall clock as data: marker files that advance every task's wall clock (docs/semantics.md section 8).

A marker file holds one line `{"partition": p, "wall_clock": ms}` for every partition 0..N-1, so every
task sees it, including tasks that have never had input. Marker files live in a control directory under
the checkpoint; the job reads that directory as a second file source next to the landing directory, so a
marker is part of exactly one micro-batch, recorded in Spark's offset log and replayed identically after
a crash. In a micro-batch a task applies its markers after its data.

- available-now: after the input has been drained, one marker with `--wall-clock` is written and the same
  query runs once more; markers are named by their value, so a crash-restart never writes a second one.
- continuous: a ticker thread writes a marker with the system clock every tick, so WALL_CLOCK_TIME
  punctuation fires when no data arrives (best effort, like Kafka).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

CONTROL_DIR_NAME = "wall-clock-markers"
MARKER_PREFIX = "wall-clock-"


def control_dir(checkpoint_dir: str | os.PathLike) -> Path:
    return Path(checkpoint_dir) / CONTROL_DIR_NAME


def marker_path(directory: str | os.PathLike, wall_clock_ms: int) -> Path:
    # Zero-padded so that name order is time order too.
    return Path(directory) / f"{MARKER_PREFIX}{wall_clock_ms:015d}.jsonl"


def write_marker(directory: str | os.PathLike, wall_clock_ms: int, num_partitions: int) -> Path | None:
    """Atomically write the marker for `wall_clock_ms`; None if it exists already (a restarted run)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    final = marker_path(directory, wall_clock_ms)
    if final.exists():
        return None
    # Hidden temporary name: Spark's file listing skips names starting with '.' or '_'.
    tmp = directory / f".{final.name}.{os.getpid()}.tmp"
    lines = "".join(
        json.dumps({"partition": p, "wall_clock": wall_clock_ms}) + "\n" for p in range(num_partitions)
    )
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(lines)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, final)
    return final


def parse_marker_file(content: bytes) -> dict[int, list[int]]:
    """partition -> wall-clock values in file order. Markers are written only by this module, so a bad
    line is a bug or tampering, not input data: it raises instead of being quarantined."""
    markers: dict[int, list[int]] = {}
    for line in content.decode("utf-8").splitlines():
        if not line.strip():
            continue
        fields = json.loads(line)
        markers.setdefault(int(fields["partition"]), []).append(int(fields["wall_clock"]))
    return markers


def system_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class WallClockTicker:
    """Writes a system-clock marker now and then every `tick_ms`, until stopped (continuous mode)."""

    def __init__(
        self, directory: str | os.PathLike, num_partitions: int, tick_ms: int, clock=system_clock_ms
    ):
        if tick_ms < 1:
            raise ValueError(f"wall-clock tick must be at least 1 ms, got {tick_ms}")
        self._directory = Path(directory)
        self._num_partitions = num_partitions
        self._tick_s = tick_ms / 1000
        self._clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wall-clock-ticker", daemon=True)

    def start(self) -> WallClockTicker:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        last = -1
        while True:
            now = self._clock()
            if now > last:  # never two markers for one millisecond
                write_marker(self._directory, now, self._num_partitions)
                last = now
            if self._stop.wait(self._tick_s):
                return
