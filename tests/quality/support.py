"""Small sensor-alerts outputs for the quality tests, written as the job writes them (API.md).

`simulate_sensor_alerts` follows SEMANTICS.md for the job's topology (a tumbling count with grace, its
suppressed finals, low-activity alerts from the finals, aligned STREAM_TIME summaries), one task per
partition, with one `seq` sequence per task across topics. It is a stand-in for the real job's output,
so the suites can be shown to pass on a correct output and fail on a corrupted copy of it.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path

import pandas as pd

MINUTE = 60_000
OUTPUT_COLUMNS = ["key", "value", "timestamp", "window_start", "window_end", "partition", "seq"]
TOPICS = ("window-counts", "window-finals", "low-activity-alerts", "summaries")


class _Task:
    """One task's output: every topic shares the task's `seq` (its output order)."""

    def __init__(self, partition: int, out: dict[str, list[dict]]):
        self.partition, self.out, self.seq = partition, out, 0

    def emit(self, topic: str, key: str, value: int, ts: int, start=None, end=None) -> None:
        self.out[topic].append(
            dict(
                key=key,
                value=value,
                timestamp=ts,
                window_start=start,
                window_end=end,
                partition=self.partition,
                seq=self.seq,
            )
        )
        self.seq += 1


def simulate_sensor_alerts(
    events_by_partition: dict[int, list[tuple[str, int]]],
    window_size: int = 2 * MINUTE,
    grace: int = 2 * MINUTE,
    threshold: int = 4,
    summary_interval: int = 10 * MINUTE,
    summary_shift: int = 0,
) -> dict[str, list[dict]]:
    """Output rows per topic for (key, timestamp) events, each partition's in offset order."""
    out: dict[str, list[dict]] = defaultdict(list)
    shift = summary_shift % summary_interval
    for partition, events in sorted(events_by_partition.items()):
        task = _Task(partition, out)
        counts: dict[tuple[str, int], tuple[int, int]] = {}  # (key, start) -> (count, max ts)
        buffer: dict[tuple[str, int], tuple[int, int]] = {}  # suppress buffer
        agg_time = suppress_time = stream_time = -1
        next_summary = None
        for processed, (key, ts) in enumerate(events, start=1):
            stream_time = max(stream_time, ts)
            agg_time = max(agg_time, ts)
            start = ts // window_size * window_size
            end = start + window_size
            if end + grace > agg_time:  # rule 4.2: dropped iff window_end + grace <= observed time
                count, max_ts = counts.get((key, start), (0, -1))
                count, max_ts = count + 1, max(max_ts, ts)  # rule 4.3: the max contributing timestamp
                counts[(key, start)] = (count, max_ts)
                task.emit("window-counts", key, count, max_ts, start, end)
                suppress_time = max(suppress_time, max_ts)
                buffer[(key, start)] = (count, max_ts)
                for (bkey, bstart), (bcount, bts) in sorted(buffer.items(), key=lambda kv: kv[0][1]):
                    if bstart + window_size <= suppress_time - grace:  # section 5: buffer time = window end
                        del buffer[(bkey, bstart)]
                        task.emit("window-finals", bkey, bcount, bts, bstart, bstart + window_size)
                        if bcount < threshold:
                            task.emit("low-activity-alerts", bkey, bcount, bts, bstart, bstart + window_size)
            if next_summary is None:
                next_summary = -((shift - stream_time) // summary_interval) * summary_interval + shift
            if stream_time >= next_summary:
                boundary = (stream_time - shift) // summary_interval * summary_interval + shift
                task.emit("summaries", f"task-{partition}", processed, boundary)
                next_summary = boundary + summary_interval
    return out


def default_events() -> dict[int, list[tuple[str, int]]]:
    """Two tasks, three sensors, 30 minutes: busy and quiet windows, a late-but-accepted record, a dropped
    one, and summaries on several boundaries."""
    events: dict[int, list[tuple[str, int]]] = {0: [], 1: []}
    for minute in range(30):
        t = minute * MINUTE
        events[0].append(("sensor-a", t + 5_000))
        events[0].append(("sensor-a", t + 35_000))
        if minute % 3 == 0:
            events[0].append(("sensor-b", t + 20_000))
        events[1].append(("sensor-c", t + 10_000))
        if minute % 2:
            events[1].append(("sensor-c", t + 40_000))
        if minute == 12:
            events[0].append(("sensor-a", t - 150_000))  # late within grace: updates an older window
            events[1].append(("sensor-c", t - 400_000))  # past the grace: dropped
    return events


def write_topic(rows: list[dict], path: Path, batches: int = 2) -> None:
    """Write rows as a Parquet dataset split in `batch_id=<n>/` subfolders, as a micro-batch job does."""
    frame = pd.DataFrame(rows, columns=list(rows[0].keys()) if rows else OUTPUT_COLUMNS)
    frame = _typed(frame)
    path.mkdir(parents=True, exist_ok=True)
    chunks = [frame.iloc[i::batches] for i in range(batches)] if len(frame) >= batches else [frame]
    for batch_id, chunk in enumerate(chunks):
        folder = path / f"batch_id={batch_id}"
        folder.mkdir(exist_ok=True)
        chunk.to_parquet(folder / "part-00000.parquet", index=False)


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    for column in ("value", "timestamp", "window_start", "window_end", "seq"):
        if column in frame:
            frame[column] = frame[column].astype("Int64")
    if "partition" in frame:
        frame["partition"] = frame["partition"].astype("Int32")
    for column in ("key", "reason", "raw", "source_file"):
        if column in frame:
            frame[column] = frame[column].astype("string")  # all-null chunks must stay strings
    return frame


def quarantine_rows() -> list[dict]:
    return [
        dict(reason="unparseable JSON", raw="{not json", source_file="events-0001.jsonl", line=3),
        dict(
            reason="negative timestamp",
            raw='{"key":"s","timestamp":-1}',
            source_file="events-0001.jsonl",
            line=9,
        ),
    ]


def write_sensor_alerts_output(output: Path, events=None) -> dict[str, list[dict]]:
    """A complete, correct output folder; returns the rows per topic."""
    rows = simulate_sensor_alerts(events or default_events())
    for topic in TOPICS:
        write_topic(rows[topic], output / topic)
    rows["_quarantine"] = quarantine_rows()
    write_topic(rows["_quarantine"], output / "_quarantine", batches=1)
    return rows


def read_topic(output: Path, topic: str) -> list[dict]:
    frame = pd.read_parquet(output / topic)
    return frame.drop(columns=[c for c in frame.columns if c == "batch_id"]).to_dict("records")


def rewrite_topic(output: Path, topic: str, rows: list[dict]) -> None:
    shutil.rmtree(output / topic)
    write_topic(rows, output / topic)


def copy_output(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target
