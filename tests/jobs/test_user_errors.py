"""A user's mistake on the jobs' command line or the validation's is one line `error: ...` on stderr and
exit status 2, with no traceback; anything else keeps its traceback and exits 1.

Each case runs the real command line in a subprocess. The mistakes are found before Spark starts, so only
the test that first makes a checkpoint with a real run needs Spark.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from spark_jobs.spark.job import JobSpec
from spark_jobs.spark.runtime import JOB_FILE, RunConfig, TopologyRuntime

REPO_ROOT = Path(__file__).resolve().parents[2]
ALERTS = "spark_jobs.jobs.sensor_alerts"
ENRICHMENT = "spark_jobs.jobs.sensor_enrichment"
VALIDATE = "spark_jobs.quality.validate"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env


def _run(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", module, *map(str, args)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )


def _job(tmp_path: Path, *extra: str, input_dir: str = "in", checkpoint: str = "ckpt", module=ALERTS):
    return _run(
        module,
        "--input",
        tmp_path / input_dir,
        "--output",
        tmp_path / "out",
        "--checkpoint",
        tmp_path / checkpoint,
        *extra,
    )


def assert_user_error(run: subprocess.CompletedProcess, *words: str) -> str:
    """Exactly one line on stderr, `error: ...` naming `words`; exit status 2; no traceback."""
    assert "Traceback" not in run.stderr, run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), run.stderr
    assert run.returncode == 2, run.stderr
    assert run.stdout == ""
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def _checkpoint(tmp_path: Path, options=None, partitions=4, checkpoint="ckpt") -> None:
    """A checkpoint's record and its output folder's claim, as the runtime writes them when a run starts
    (the Spark session is not needed for them when the shuffle partitions are given)."""
    (tmp_path / "in").mkdir(exist_ok=True)
    no_session = SimpleNamespace(sparkContext=SimpleNamespace(environment={}))
    config = RunConfig(
        str(tmp_path / "in"), str(tmp_path / "out"), str(tmp_path / checkpoint), shuffle_partitions=2
    )
    TopologyRuntime(no_session, JobSpec(ALERTS, options or {}, partitions), config)._check_identity()


# -- inputs


def test_a_missing_input_folder(tmp_path):
    assert_user_error(_job(tmp_path, input_dir="typo"), "input folder", "typo", "does not exist")
    assert not (tmp_path / "typo").exists() and not (tmp_path / "ckpt").exists()
    assert not (tmp_path / "out").exists()


def test_an_input_that_is_a_file(tmp_path):
    (tmp_path / "readings.jsonl").write_text("{}\n")
    assert_user_error(_job(tmp_path, input_dir="readings.jsonl"), "readings.jsonl", "not a folder")


def test_an_unreadable_input_folder(tmp_path, monkeypatch, capsys):
    """Run in-process: permissions do not hold back root, so the folder's access is what the test sets."""
    from spark_jobs.jobs import sensor_alerts

    (tmp_path / "in").mkdir()
    unreadable = str(tmp_path / "in")
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: str(path) != unreadable and real_access(path, mode))
    argv = ["--input", unreadable, "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ckpt")]
    with pytest.raises(SystemExit) as exit_:
        sensor_alerts.main(argv)
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"error: input folder {unreadable} cannot be read: check its permissions"]


@pytest.mark.parametrize(
    ("inputs", "words"),
    [
        (
            ["sensor-readings=a", "sensor-registry=b", "maintenance=c", "alarms=d"],
            ["'alarms'", "not an input"],
        ),
        (["sensor-readings=a", "sensor-registry=b", "maintenance=c", "maintenance=d"], ["given twice"]),
        (["sensor-readings=a", "sensor-registry=b"], ["no --input for topics maintenance"]),
        (["a-folder"], ["TOPIC=DIR"]),
    ],
    ids=["unknown topic", "repeated topic", "missing topic", "one folder for three topics"],
)
def test_input_topics_that_do_not_fit_the_job(tmp_path, inputs, words):
    args = [arg for given in inputs for arg in ("--input", str(given))]
    run = _run(ENRICHMENT, *args, "--output", tmp_path / "out", "--checkpoint", tmp_path / "ckpt")
    assert_user_error(run, *words)


# -- options


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--window-size=-2min"], ["window size", "-120000"]),
        (["--window-size", "0"], ["window size", "0"]),
        (["--window-size", "two minutes"], ["not a duration", "two minutes"]),
        (["--low-activity-threshold", "2.5"], ["low_activity_threshold", "not a int", "2.5"]),
        (["--partitions", "0"], ["--partitions", "at least 1"]),
        (["--trigger", "sometimes"], ["--trigger", "sometimes"]),
        (["--no-such-flag", "1"], ["--no-such-flag"]),
    ],
    ids=[
        "negative window",
        "zero window",
        "not a duration",
        "non-integer",
        "no partitions",
        "trigger",
        "flag",
    ],
)
def test_invalid_options(tmp_path, extra, words):
    (tmp_path / "in").mkdir()
    assert_user_error(_job(tmp_path, *extra), *words)
    assert not (tmp_path / "ckpt").exists()


def test_a_missing_argument(tmp_path):
    assert_user_error(_run(ALERTS, "--input", tmp_path), "--output", "--checkpoint", "--help")


# -- checkpoint and output folder


def test_options_that_differ_from_the_checkpoints(tmp_path):
    _checkpoint(tmp_path, options={"window_size": 300_000})
    line = assert_user_error(_job(tmp_path), "window_size=120000 (checkpoint: 300000)", "new checkpoint")
    assert "grace" not in line  # only what differs


def test_partitions_that_differ_from_the_checkpoints(tmp_path):
    _checkpoint(tmp_path, partitions=3)
    assert_user_error(_job(tmp_path, "--partitions", "4"), "'partitions': 3", "'partitions': 4")


def test_an_output_folder_of_another_checkpoint(tmp_path):
    _checkpoint(tmp_path)
    assert_user_error(_job(tmp_path, checkpoint="ckpt-2"), "another checkpoint", "ckpt-2")
    assert not (tmp_path / "ckpt-2").exists()


def test_a_checkpoint_of_another_state_layout(tmp_path):
    _checkpoint(tmp_path)
    record = json.loads((tmp_path / "ckpt" / JOB_FILE).read_text())
    record["state_layout"] = "task-parts-v1"
    (tmp_path / "ckpt" / JOB_FILE).write_text(json.dumps(record))
    assert_user_error(_job(tmp_path), "layout task-parts-v1", "new checkpoint")


def test_anything_else_keeps_its_traceback_and_exit_status_1(tmp_path):
    """A damaged checkpoint record is no mistake of the user's: the traceback is for whoever debugs it."""
    _checkpoint(tmp_path)
    (tmp_path / "ckpt" / JOB_FILE).write_text("{not json")
    run = _job(tmp_path)
    assert run.returncode == 1 and "Traceback" in run.stderr and "JSONDecodeError" in run.stderr
    assert not any(line.startswith("error: ") for line in run.stderr.splitlines())


# -- validation


def test_validation_of_a_missing_output_folder(tmp_path):
    run = _run(VALIDATE, "--output", tmp_path / "nowhere", "--reports", tmp_path / "reports")
    assert_user_error(run, "no output folder", "nowhere")


def test_validation_of_a_folder_no_job_wrote(tmp_path):
    (tmp_path / "output" / "window-finals").mkdir(parents=True)
    run = _run(VALIDATE, "--output", tmp_path / "output", "--reports", tmp_path / "reports")
    assert_user_error(run, "_job.json not found")


def test_validation_argument_mistakes(tmp_path):
    run = _run(VALIDATE, "--output", tmp_path, "--reports", tmp_path / "r", "--full", "--engine", "local")
    assert_user_error(run, "--full", "--engine local")


# -- after a real run


@pytest.mark.spark
def test_mistakes_against_the_checkpoint_of_a_real_run(tmp_path):
    """The runtime's own record of a run is what the command line checks a later run against."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "readings.jsonl").write_text(
        "\n".join(json.dumps({"key": f"s{i}", "value": {}, "timestamp": 1000 * i}) for i in range(10)) + "\n"
    )
    first = _job(tmp_path, "--partitions", "2", "--window-size", "1min")
    assert first.returncode == 0, first.stderr[-3000:]
    assert_user_error(_job(tmp_path, "--partitions", "2"), "window_size=120000 (checkpoint: 60000)")
    assert_user_error(_job(tmp_path, "--window-size", "1min"), "'partitions': 2", "'partitions': 4")
    again = _job(tmp_path, "--partitions", "2", "--window-size", "1min", checkpoint="ckpt-2")
    assert_user_error(again, "another checkpoint")
