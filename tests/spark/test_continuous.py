"""Continuous mode: a processing-time trigger; WALL_CLOCK_TIME punctuation fires from the system clock while
no data arrives, and a silent sensor is reported once, not on every tick."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from spark_jobs.spark.sink import committed_batch_ids, read_topic
from tests.spark.support import job_command, job_env


def _wait_for(condition, process, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert process.poll() is None, "the job stopped"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.5)


def _alerted(output) -> list[str]:
    if not committed_batch_ids(output, "silent-sensors"):
        return []
    return list(read_topic(output, "silent-sensors")["key"])


@pytest.mark.spark
@pytest.mark.slow
def test_wall_clock_punctuation_fires_without_data_and_pages_once(tmp_path):
    landing = tmp_path / "in"
    landing.mkdir()

    def land(name: str, readings: list[tuple[str, int]]) -> None:
        tmp = landing / f".{name}"
        tmp.write_text(
            "".join(json.dumps({"key": k, "value": None, "timestamp": ts}) + "\n" for k, ts in readings)
        )
        tmp.rename(landing / name)

    now = int(time.time() * 1000)
    land("old.jsonl", [("old", now - 600_000 - i * 1000) for i in range(3)])  # silent for 10 minutes already
    cmd = job_command(
        landing,
        tmp_path / "out",
        tmp_path / "ckpt",
        "--trigger",
        "continuous",
        "--processing-interval",
        "1 second",
        "--wall-clock-tick",
        "1s",
        "--silence-check-interval",
        "1s",
        "--silence-horizon",
        "8s",
        "--partitions",
        "2",
    )
    process = subprocess.Popen(
        cmd, env=job_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        _wait_for(lambda: _alerted(tmp_path / "out") == ["old"], process)
        fresh_ts = int(time.time() * 1000)
        land("fresh.jsonl", [("fresh", fresh_ts)])  # one reading, then nothing more arrives
        _wait_for(lambda: len(_alerted(tmp_path / "out")) == 2, process)
        time.sleep(10)  # ten more checks of the silence: no second page
        process.send_signal(signal.SIGTERM)  # a graceful stop
        stdout, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    finished = int(time.time() * 1000)
    assert process.returncode == 0
    summary = json.loads(stdout[stdout.index(b"{") :])
    assert summary["records"]["read"] == 4
    alerts = read_topic(tmp_path / "out", "silent-sensors")
    # Each sensor once, although the check ran every second all along.
    assert list(alerts.sort_values("timestamp")["key"]) == ["old", "fresh"]
    by_key = {row["key"]: row["value"] for row in alerts.to_dict("records")}
    assert by_key["fresh"]["last_event_time"] == fresh_ts
    # "fresh" went silent 8 s after its reading, by the system clock alone: no data arrived since.
    assert fresh_ts + 8_000 < by_key["fresh"]["wall_clock"] <= finished
    assert len(summary["batches"]) > 5  # micro-batches kept coming with the clock alone
