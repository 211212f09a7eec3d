"""Every shape a user writes, on Spark: the output equals the engine's tasks fed record by record (the
reference path), whether Spark hands the task one micro-batch or many, across a stop and restart from the
checkpoint, and across SIGKILLs of the whole job.

Shapes: the fused windowed count under a final suppress, hopping windows with a user aggregate and with
declared aggregations (both suppressed), a running count without windows (a table), and session windows.
The joins run in tests/spark/test_multi_input_spark.py (a three-input job, restarts and SIGKILLs).
"""

from __future__ import annotations

import json
import os
import random
import subprocess

import pytest

from spark_jobs.jobs import generate_events
from tests.spark.support import (
    all_committed,
    copy_files,
    job_command,
    job_env,
    ordered_files,
    reference_rows,
    run_in_process,
)
from tests.spark.test_crash_recovery import _run_until_killed

PARTITIONS = 3
SHAPES = {
    "count": "spark_jobs.jobs.window_finals",
    "hopping_user": "bench.jobs.hopping_stats",
    "hopping_builtin": "bench.jobs.hopping_builtin",
    "running_count": "bench.jobs.running_count",
    "session_count": "bench.jobs.session_count",
}


def _topics(module: str) -> list[str]:
    import importlib

    return list(importlib.import_module(module).OUTPUT_TOPICS)


@pytest.fixture(scope="module")
def landing(tmp_path_factory):
    """6 files of readings from 10 sensors over about an hour and a half of event time (late and
    out-of-order ones included); the wall clock plays no part in these shapes."""
    directory = tmp_path_factory.mktemp("landing")
    generate_events.main(
        ["--output", str(directory), "--events", "1800", "--sensors", "10", "--files", "6"]
        + ["--late-fraction", "0.03", "--seed", "23"]
    )
    return directory


def _expected(module: str, phases) -> dict[str, list[tuple]]:
    expected = reference_rows(module, {}, PARTITIONS, phases)
    # Every output topic had rows from every partition: the comparison is not vacuous.
    assert set(expected) == set(_topics(module))
    for rows in expected.values():
        assert {row[5] for row in rows} == set(range(PARTITIONS))
    return expected


@pytest.mark.spark
@pytest.mark.parametrize("shape", list(SHAPES))
def test_one_micro_batch_or_many_with_a_restart_equals_the_record_by_record_tasks(
    spark, landing, tmp_path, shape
):
    module = SHAPES[shape]
    files = ordered_files(landing)
    expected = _expected(module, [(files, None)])

    run_in_process(spark, landing, tmp_path / "whole" / "out", tmp_path / "whole" / "ckpt", module=module)
    assert all_committed(tmp_path / "whole" / "out", _topics(module)) == expected

    inbox, output, checkpoint = tmp_path / "inbox", tmp_path / "out", tmp_path / "ckpt"
    copy_files(files[:2], inbox)
    first = run_in_process(spark, inbox, output, checkpoint, module=module, max_files_per_trigger=1)
    copy_files(files[2:], inbox)
    second = run_in_process(spark, inbox, output, checkpoint, module=module, max_files_per_trigger=1)
    assert (first.batches, second.batches) == ([0, 1], [2, 3, 4, 5])
    assert all_committed(output, _topics(module)) == expected


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("shape", list(SHAPES))
def test_sigkill_then_restart_gives_exactly_the_record_by_record_output(tmp_path, shape):
    module = SHAPES[shape]
    landing = tmp_path / "in"
    generate_events.main(
        ["--output", str(landing), "--events", "3000", "--sensors", "12", "--files", "10"]
        + ["--late-fraction", "0.02", "--seed", "7"]
    )
    output, checkpoint = tmp_path / "out", tmp_path / "ckpt"
    cmd = job_command(
        landing,
        output,
        checkpoint,
        "--partitions",
        str(PARTITIONS),
        "--max-files-per-trigger",
        "1",
        module=module,
    )
    rng = random.Random(int(os.environ.get("CRASH_SEED", "20250101")) + len(shape))
    with open(tmp_path / "job.log", "wb") as log:
        killed = _run_until_killed(cmd, output, rng, log)
        final = subprocess.run(cmd, env=job_env(), stdout=subprocess.PIPE, stderr=log, timeout=600)
    assert final.returncode == 0, (tmp_path / "job.log").read_text()[-3000:]
    assert killed, "the job finished before it could be killed: make the input larger"
    summary = json.loads(final.stdout[final.stdout.index(b"{") :])
    assert summary["batches"], "the restarted job had nothing left to do: the kill came too late"
    assert all_committed(output, _topics(module)) == _expected(module, [(ordered_files(landing), None)])
