"""Small sensor-alerts outputs for the quality tests, written as the job writes them (docs/jobs.md).

`simulate_sensor_alerts` follows docs/semantics.md for the job's topology (a tumbling count with grace, its
suppressed finals, low-activity alerts from the finals, aligned STREAM_TIME summaries), one task per
partition, with one `seq` sequence per task across topics. It is a stand-in for the real job's output,
so the suites can be shown to pass on a correct output and fail on a corrupted copy of it.
"""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from spark_jobs.quality.derived import late_graces, topic_suites
from spark_jobs.spark.job import JobSpec, write_job_record
from spark_jobs.spark.topics import LATE_SCHEMA

MINUTE = 60_000
# the node of the job's windowed count: the one that drops late records
[_COUNT_NODE] = late_graces(JobSpec("spark_jobs.jobs.sensor_alerts", {}, 2).topology())
OUTPUT_COLUMNS = ["key", "value", "timestamp", "window_start", "window_end", "partition", "seq"]
TOPICS = ("window-counts", "window-finals", "low-activity-alerts", "summaries", "silent-sensors")


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
            if end + grace <= agg_time:  # rule 4.2: dropped iff window_end + grace <= observed time
                out["_late"].append(
                    dict(
                        node=_COUNT_NODE,
                        topic="sensor-readings",
                        partition=partition,
                        file=f"events-{partition}.jsonl",
                        line=processed,
                        key=key,
                        timestamp=ts,
                        window_start=start,
                        window_end=end,
                        stream_time=agg_time,
                    )
                )
            else:
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
                summary = {"partition": partition, "period_end": boundary, "records": processed}
                task.emit("summaries", f"partition-{partition}", summary, boundary)
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


QUARANTINE_SCHEMA = pa.schema(
    [("reason", pa.string()), ("raw", pa.string()), ("source_file", pa.string()), ("line", pa.int64())]
)


def _schema(rows: list[dict]) -> pa.Schema:
    if rows and "reason" in rows[0]:
        return QUARANTINE_SCHEMA
    if rows and "stream_time" in rows[0]:
        return LATE_SCHEMA
    # The value's type is the topic's own (a count, a struct): inferred from the values.
    values = [r["value"] for r in rows if r.get("value") is not None]
    value_type = pa.array(values).type if values else pa.int64()
    return pa.schema(
        [
            ("key", pa.string()),
            ("value", value_type),
            ("timestamp", pa.int64()),
            ("window_start", pa.int64()),
            ("window_end", pa.int64()),
            ("partition", pa.int32()),
            ("seq", pa.int64()),
        ]
    )


def write_topic(rows: list[dict], path: Path, batches: int = 2) -> None:
    """Write rows as a Parquet dataset split in `batch_id=<n>/` subfolders, as the job's sink does."""
    schema = _schema(rows)
    path.mkdir(parents=True, exist_ok=True)
    clean = [{name: row.get(name) for name in schema.names} for row in rows]
    chunks = [clean[i::batches] for i in range(batches)] if len(clean) >= batches else [clean]
    for batch_id, chunk in enumerate(chunks):
        folder = path / f"batch_id={batch_id}"
        folder.mkdir(exist_ok=True)
        pq.write_table(pa.Table.from_pylist(chunk, schema=schema), folder / "part-00000.parquet")


def silent_sensor_rows(rows: dict[str, list[dict]], wall_clock: int, horizon: int = 5 * MINUTE) -> list[dict]:
    """One alert per sensor whose latest reading is older than the horizon at `wall_clock`, as the job's
    wall-clock punctuation emits them after a task's other output (timestamp = the wall clock)."""
    alerts = []
    for partition in sorted({r["partition"] for r in rows["window-counts"]}):
        seq = 1 + max(r["seq"] for topic in rows.values() for r in topic if r["partition"] == partition)
        latest: dict[str, int] = {}
        for r in rows["window-counts"]:
            if r["partition"] == partition:
                latest[r["key"]] = max(latest.get(r["key"], -1), r["timestamp"])
        for sensor in sorted(latest):
            if latest[sensor] < wall_clock - horizon:
                value = {
                    "last_event_time": latest[sensor],
                    "silent_for": wall_clock - latest[sensor],
                    "wall_clock": wall_clock,
                }
                alerts.append(
                    dict(
                        key=sensor,
                        value=value,
                        timestamp=wall_clock,
                        window_start=None,
                        window_end=None,
                        partition=partition,
                        seq=seq,
                    )
                )
                seq += 1
    return alerts


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
    """A complete, correct output folder (with its job record, as the runtime writes it, for the default
    options and two partitions); returns the rows per topic."""
    output.mkdir(parents=True, exist_ok=True)
    write_job_record(output, JobSpec("spark_jobs.jobs.sensor_alerts", {}, 2), "test-checkpoint")
    rows = simulate_sensor_alerts(events or default_events())
    late = rows.pop("_late", [])  # no emission order: not among the topics that share a task's seq
    rows["silent-sensors"] = silent_sensor_rows(rows, wall_clock=60 * MINUTE)
    for topic in TOPICS:
        write_topic(rows[topic], output / topic)
    rows["_quarantine"] = quarantine_rows()
    write_topic(rows["_quarantine"], output / "_quarantine", batches=1)
    rows["_late"] = late
    write_topic(late, output / "_late", batches=1)
    return rows


def read_topic(output: Path, topic: str) -> list[dict]:
    """The topic's rows as plain Python values, in emission order where it has one."""
    table = pq.read_table(output / topic)
    rows = [{k: v for k, v in row.items() if k != "batch_id"} for row in table.to_pylist()]
    if rows and "seq" in rows[0]:
        rows.sort(key=lambda r: (r["partition"], r["seq"]))
    return rows


def rewrite_topic(output: Path, topic: str, rows: list[dict]) -> None:
    shutil.rmtree(output / topic)
    write_topic(rows, output / topic)


def copy_output(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def stored_results(reports: Path, suite: str) -> list[dict]:
    """The validation results GX stored for `suite` under `reports`, oldest first."""
    files = sorted((reports / "validations" / suite).rglob("*.json"), key=lambda p: p.stat().st_mtime)
    return [json.loads(p.read_text()) for p in files]


def failing_rows(result: dict, expectation_type: str, **kwargs) -> list[dict]:
    """The unexpected rows a stored result carries for a failed expectation of that type (and, if given,
    with those arguments, e.g. `topic=`)."""
    rows = []
    for entry in result["results"]:
        config = entry["expectation_config"]
        if config["type"] != expectation_type or any(config["kwargs"].get(k) != v for k, v in kwargs.items()):
            continue
        if not entry["success"]:
            details = entry["result"].get("details") or {}
            rows.extend(details.get("unexpected_rows") or entry["result"].get("unexpected_index_list") or [])
    return rows


def files_under(root: Path) -> dict[str, tuple[int, int]]:
    """(mtime, size) of every file under `root` but its ignored `uncommitted/`: to show nothing wrote there."""
    return {
        str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size)
        for p in root.rglob("*")
        if p.is_file() and "uncommitted" not in p.relative_to(root).parts
    }


def next_seq(output: Path, partition: int) -> int:
    """A seq after every emission of the task, in every topic."""
    seqs = [
        r["seq"]
        for topic in TOPICS
        if (output / topic).exists()
        for r in read_topic(output, topic)
        if r["partition"] == partition
    ]
    return 1 + max(seqs, default=-1)


@dataclass(frozen=True)
class Corruption:
    """One broken promise: what to do to a copy of an output, the suite and rule that must catch it, and
    the identity (key, seq, ...) of the row the result must show."""

    suite: str
    rule: str
    break_output: Callable[[Path], dict]
    columns: tuple[str, ...]


def _window_emitted_twice(output: Path) -> dict:
    finals = read_topic(output, "window-finals")
    twice = finals[len(finals) // 2]
    again = dict(twice, seq=next_seq(output, twice["partition"]))
    rewrite_topic(output, "window-finals", [*finals, again])
    return again


def consecutive_pair(rows: list[dict], group: tuple[str, ...]) -> tuple[dict, dict]:
    """Two rows of one group (same values of `group`, same task) next to each other in emission order."""
    previous: dict[tuple, dict] = {}
    for row in rows:
        ident = tuple(row[c] for c in group) + (row["partition"],)
        if ident in previous:
            return previous[ident], row
        previous[ident] = row
    raise AssertionError(f"no two rows share {group}")


def _final_timestamp_backwards(output: Path) -> dict:
    finals = read_topic(output, "window-finals")
    earlier, later = consecutive_pair(finals, ("key",))
    earlier["seq"], later["seq"] = later["seq"], earlier["seq"]  # emitted in the wrong order
    rewrite_topic(output, "window-finals", finals)
    return earlier


def _count_going_down(output: Path) -> dict:
    counts = read_topic(output, "window-counts")
    first, second = consecutive_pair(counts, ("key", "window_start"))
    first["value"], second["value"] = second["value"], first["value"]
    rewrite_topic(output, "window-counts", counts)
    return second


def _alert_twice(output: Path) -> dict:
    alerts = read_topic(output, "low-activity-alerts")
    again = dict(alerts[0], seq=next_seq(output, alerts[0]["partition"]))
    rewrite_topic(output, "low-activity-alerts", [*alerts, again])
    return again


def _summary_off_grid(output: Path) -> dict:
    summaries = read_topic(output, "summaries")
    summaries[-1]["timestamp"] += 1
    rewrite_topic(output, "summaries", summaries)
    return summaries[-1]


def _silent_sensor_alerted_twice(output: Path) -> dict:
    alerts = read_topic(output, "silent-sensors")
    again = dict(
        alerts[0], seq=next_seq(output, alerts[0]["partition"]), timestamp=alerts[0]["timestamp"] + MINUTE
    )
    rewrite_topic(output, "silent-sensors", [*alerts, again])
    return again


def _quarantine_without_reason(output: Path) -> dict:
    rows = read_topic(output, "_quarantine")
    rows[0]["reason"] = None
    rewrite_topic(output, "_quarantine", rows)
    return rows[0]


def _late_record_of_an_open_window(output: Path) -> dict:
    rows = read_topic(output, "_late")
    rows[0]["stream_time"] = rows[0]["window_end"] - 1  # dropped while its window was still open
    rewrite_topic(output, "_late", rows)
    return rows[0]


CORRUPTIONS = {
    "a window emitted twice": Corruption(
        "window-finals",
        "expect_emitted_at_most_once_per_key_and_window",
        _window_emitted_twice,
        ("key", "seq"),
    ),
    "a timestamp going backwards": Corruption(
        "window-finals",
        "expect_timestamps_to_never_go_backwards_per_key",
        _final_timestamp_backwards,
        ("key", "seq"),
    ),
    "a count going down": Corruption(
        "window-counts", "expect_values_to_never_decrease_per_key", _count_going_down, ("key", "seq")
    ),
    "an alert emitted twice": Corruption(
        "low-activity-alerts", "expect_emitted_at_most_once_per_key_and_window", _alert_twice, ("key", "seq")
    ),
    "a summary off its grid": Corruption(
        "summaries", "expect_timestamps_on_aligned_grid", _summary_off_grid, ("key", "seq")
    ),
    "a silent sensor alerted twice in one silence": Corruption(
        "silent-sensors",
        "expect_values_to_never_decrease_per_key",
        _silent_sensor_alerted_twice,
        ("key", "seq"),
    ),
    "a quarantine row with no reason": Corruption(
        "quarantine",
        "expect_column_values_to_be_non_blank",
        _quarantine_without_reason,
        ("source_file", "line"),
    ),
    "a late record dropped before its window closed": Corruption(
        "late",
        "expect_dropped_only_after_window_closes",
        _late_record_of_an_open_window,
        ("file", "line"),
    ),
}


# The suites validation gives a sensor-alerts output, in order (derived from the job's contract).
SENSOR_ALERTS_SUITES = topic_suites(JobSpec("spark_jobs.jobs.sensor_alerts", {}, 2))
