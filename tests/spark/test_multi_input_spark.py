"""A three-input job the project never saw (tests/spark/jobs/orders_enriched.py) on Spark equals the test
driver fed the rule-1 merge of all records: one file per micro-batch and all at once, and with the job
SIGKILLed at random points and restarted from its checkpoint."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from spark_jobs.spark.job import JobSpec
from spark_jobs.spark.runtime import RunConfig, run_job
from tests.spark.jobs import orders_enriched as job
from tests.spark.multi_input_support import BASE_MTIME_S, land, rule1_driver_rows
from tests.spark.support import committed_rows, job_env
from tests.spark.test_crash_recovery import _run_until_killed

MODULE = job.__name__
PARTITIONS = 2


def _land_interleaved(root, files_per_topic: int, records_per_file: int, seed: int) -> None:
    """Files of the three topics landing in turns, timestamps overlapping across topics (and tying)."""
    rng = random.Random(seed)
    mtime = BASE_MTIME_S
    for index in range(files_per_topic):
        for topic in job.INPUT_TOPICS:
            mtime += 1
            records = []
            for _ in range(records_per_file):
                key = rng.choice("abcdefg")
                value = None if topic == job.CUSTOMERS and rng.random() < 0.2 else {"n": rng.randrange(100)}
                records.append((key, value, rng.randrange(index * 20, index * 20 + 40)))
            land(root, topic, index, records, mtime)


def _spark_rows(output) -> dict[str, dict[int, list[tuple]]]:
    out: dict[str, dict[int, list[tuple]]] = {}
    for topic in job.OUTPUT_TOPICS:
        for key, value, ts, _start, _end, partition, _seq in committed_rows(output, topic):
            value = None if value is None else json.loads(value)
            out.setdefault(topic, {}).setdefault(partition, []).append((key, value, ts))
    return out


@pytest.mark.spark
@pytest.mark.parametrize("per_trigger", [1, None], ids=["one-file-per-batch", "all-at-once"])
def test_never_seen_three_input_job_equals_the_rule1_merge(spark, tmp_path, per_trigger):
    landing = tmp_path / "in"
    _land_interleaved(landing, files_per_topic=3, records_per_file=15, seed=3)
    config = RunConfig(
        {t: str(landing / t) for t in job.INPUT_TOPICS},
        str(tmp_path / "out"),
        str(tmp_path / "ckpt"),
        max_files_per_trigger=per_trigger,
    )
    summary = run_job(spark, JobSpec(MODULE, {}, PARTITIONS), config)
    expected = rule1_driver_rows(MODULE, landing, PARTITIONS)
    assert set(expected) == set(job.OUTPUT_TOPICS)
    assert _spark_rows(tmp_path / "out") == expected
    assert len(summary.to_dict()["batches"]) == (3 if per_trigger else 1)


@pytest.mark.spark
@pytest.mark.slow
def test_sigkill_and_restart_keep_the_rule1_merge(tmp_path):
    landing = tmp_path / "in"
    _land_interleaved(landing, files_per_topic=6, records_per_file=30, seed=11)
    output, checkpoint = tmp_path / "out", tmp_path / "ckpt"
    inputs = [arg for t in job.INPUT_TOPICS for arg in ("--input", f"{t}={landing / t}")]
    cmd = [sys.executable, "-m", MODULE, *inputs, "--output", str(output), "--checkpoint", str(checkpoint)]
    cmd += ["--max-files-per-trigger", "1", "--partitions", str(PARTITIONS)]
    rng = random.Random(int(os.environ.get("CRASH_SEED", "7")))
    kills = 0
    with open(tmp_path / "job.log", "wb") as log:
        while kills < 2 and _run_until_killed(cmd, output, rng, log):
            kills += 1
        final = subprocess.run(cmd, env=job_env(), stdout=subprocess.PIPE, stderr=log, timeout=600)
    assert final.returncode == 0, (tmp_path / "job.log").read_text()[-3000:]
    assert kills == 2, "the job finished before it could be killed twice: make the input larger"
    assert _spark_rows(output) == rule1_driver_rows(MODULE, landing, PARTITIONS)
