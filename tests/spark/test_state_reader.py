"""The state reader (`spark_jobs.spark.state`, `python -m spark_jobs.state`): a checkpoint's task state as a
table equals the state the engine's own tasks hold after the same records, across a restart."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from spark_jobs import state as state_cli
from spark_jobs.jobs import generate_events, sensor_alerts
from spark_jobs.spark.state import COLUMNS, read_state, state_frame, task_rows
from spark_jobs.streams import TopologyTestDriver
from tests.spark.support import (
    copy_files,
    job_env,
    ordered_files,
    partition_records,
    run_in_process,
)

PARTITIONS = 3


@pytest.fixture(scope="module")
def landing(tmp_path_factory):
    """6 files of readings of 16 sensors (late ones included; every partition has some), cut in two
    halves: one run each."""
    directory = tmp_path_factory.mktemp("landing")
    generate_events.main(
        ["--output", str(directory), "--events", "900", "--sensors", "16", "--files", "6"]
        + ["--late-fraction", "0.03", "--seed", "5"]
    )
    files = ordered_files(directory)
    return files[:3], files[3:]


@pytest.fixture(scope="module")
def checkpoint(spark, landing, tmp_path_factory):
    """The job run over the first half (one file per micro-batch), stopped, then run again over both:
    the checkpoint, the last batch of the first run, and the second run's summary."""
    root = tmp_path_factory.mktemp("run")
    first, second = landing
    copy_files(first, root / "in")
    summary = run_in_process(
        spark, root / "in", root / "out", root / "ckpt", partitions=PARTITIONS, max_files_per_trigger=1
    )
    first_run_last = max(summary.batches)
    copy_files(second, root / "in")
    last = run_in_process(spark, root / "in", root / "out", root / "ckpt", partitions=PARTITIONS)
    return root / "ckpt", first_run_last, last.to_dict()


def driver_state(files: list[str], build=sensor_alerts.build_topology, input_topic=sensor_alerts.INPUT_TOPIC):
    """The state table of one TopologyTestDriver per partition fed that partition's records (a partition
    without records has no task, in the runtime: none here either)."""
    rows = []
    for partition, records in partition_records(files, PARTITIONS).items():
        if not records:
            continue
        driver = TopologyTestDriver(build(), initial_wall_clock_ms=0, partition=partition)
        topic = driver.create_input_topic(input_topic)
        for key, value, timestamp in records:
            topic.pipe_input(key, value, timestamp)
        rows += task_rows(driver.task, partition)
    return state_frame(rows)


def ordered(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(list(COLUMNS), na_position="first").reset_index(drop=True)


@pytest.mark.spark
def test_latest_state_equals_the_drivers_tasks(spark, landing, checkpoint):
    path, *_ = checkpoint
    actual = read_state(path, spark=spark)
    expected = driver_state(landing[0] + landing[1])
    assert list(actual.columns) == list(COLUMNS)
    pd.testing.assert_frame_equal(ordered(actual), ordered(expected))
    # the comparison is not vacuous: open windows with their counts, in every partition, and the
    # suppress buffer's and user processors' entries
    windows = actual[actual["store"] == "window"]
    assert set(windows["partition"]) == set(range(PARTITIONS))
    assert windows["window_start"].notna().all() and (windows["window_end"] > windows["window_start"]).all()
    assert windows["value"].map(json.loads).min() >= 1
    assert {"window", "suppress_buffer", "latest"} <= set(actual["store"])


@pytest.mark.spark
def test_an_earlier_batch_is_the_state_after_its_records(spark, landing, checkpoint):
    path, first_run_last, _ = checkpoint
    actual = read_state(path, batch_id=first_run_last, spark=spark)
    pd.testing.assert_frame_equal(ordered(actual), ordered(driver_state(landing[0])))
    assert not ordered(actual).equals(ordered(read_state(path, spark=spark)))


@pytest.mark.spark
def test_cli_summary_and_parquet_agree_with_read_state(spark, checkpoint, tmp_path, capsys):
    path, *_ = checkpoint
    expected = read_state(path, spark=spark)
    target = tmp_path / "state.parquet"
    assert state_cli.main(["--checkpoint", str(path), "--output", str(target)]) == 0
    pd.testing.assert_frame_equal(ordered(pd.read_parquet(target)), ordered(expected))
    as_csv = tmp_path / "state.csv"
    assert state_cli.main(["--checkpoint", str(path), "--output", str(as_csv)]) == 0
    assert pd.read_csv(as_csv)["key"].count() == expected["key"].count()
    capsys.readouterr()

    assert state_cli.main(["--checkpoint", str(path)]) == 0
    printed = capsys.readouterr().out
    header, *lines = printed.split("\n\n")[0].splitlines()
    assert header.split() == ["node", "stores", "entries", "keys", "windows", "bytes"]
    summary = {line.split()[0]: [int(x) for x in line.split()[2:]] for line in lines}
    for node, rows in expected.groupby("node"):
        windows = rows.dropna(subset=["window_start"])[["window_start", "window_end"]].drop_duplicates()
        entries, _, n_windows, stored_bytes = summary[node]
        assert (entries, n_windows) == (len(rows), len(windows)), node
        assert stored_bytes > 0
    assert f"{len(expected)} entries" in printed


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "spark_jobs.state", *args], env=job_env(), capture_output=True, text=True
    )


@pytest.mark.spark
def test_user_errors_are_one_line(checkpoint, tmp_path):
    path, *_ = checkpoint
    other = tmp_path / "other"
    other.mkdir()
    record = json.loads((path / "job.json").read_text())
    (other / "job.json").write_text(json.dumps({**record, "state_layout": "task-parts-v1"}))
    cases = {
        "does not exist": ["--checkpoint", str(tmp_path / "missing")],
        "layout task-parts-v1": ["--checkpoint", str(other)],
        "has no batch 999": ["--checkpoint", str(path), "--batch", "999"],
        ".parquet or a .csv": ["--checkpoint", str(path), "--output", str(tmp_path / "x.txt")],
    }
    for message, args in cases.items():
        done = _cli(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.startswith("error: ") and message in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.spark
def test_the_run_summary_records_the_state_the_reader_lists(spark, checkpoint):
    path, _, summary = checkpoint
    state = read_state(path, spark=spark)
    by_partition = summary["state"]["by_partition"]
    assert set(by_partition) == {str(p) for p in range(PARTITIONS)}
    for partition, rows in state.groupby("partition"):
        windows = rows.dropna(subset=["window_start"])[["window_start", "window_end"]].drop_duplicates()
        recorded = by_partition[str(partition)]
        assert (recorded["entries"], recorded["windows"]) == (len(rows), len(windows))
        assert recorded["windows"] > 0 and recorded["bytes"] > 0
    assert summary["state"]["entries"] == len(state)


@pytest.mark.spark
def test_a_running_counts_rows_read_as_the_drivers_tasks(spark, landing, tmp_path):
    """A non-windowed aggregation's row store (deltas and group bases, nodes/kv_rows.py), after a restart:
    one entry per sensor with its count."""
    from bench.jobs import running_count

    first, second = landing
    copy_files(first, tmp_path / "in")
    module = running_count.JOB_MODULE
    run = {"partitions": PARTITIONS, "module": module, "max_files_per_trigger": 1}
    run_in_process(spark, tmp_path / "in", tmp_path / "out", tmp_path / "ckpt", **run)
    copy_files(second, tmp_path / "in")
    run_in_process(spark, tmp_path / "in", tmp_path / "out", tmp_path / "ckpt", **run)
    actual = read_state(tmp_path / "ckpt", spark=spark)
    expected = driver_state(first + second, running_count.build_topology, running_count.INPUT_TOPIC)
    pd.testing.assert_frame_equal(ordered(actual), ordered(expected))
    assert set(actual["store"]) == {"key_value"} and set(actual["partition"]) == set(range(PARTITIONS))
    assert actual["value"].map(json.loads).sum() > len(actual)  # counts, not only first records
