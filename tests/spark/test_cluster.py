"""The job submitted with spark-submit to a standalone cluster (a master and two one-core workers started from
the pyspark package) gives the output of local mode; the master's JSON state lists the application."""

from __future__ import annotations

import json
import subprocess

import pytest

from spark_jobs.jobs import generate_events, sensor_alerts
from spark_jobs.spark.cluster import StandaloneCluster
from tests.spark.support import REPO_ROOT, all_committed, job_env, ordered_files, reference_rows

PARTITIONS = 4


@pytest.fixture(scope="module")
def landing(tmp_path_factory):
    directory = tmp_path_factory.mktemp("landing")
    generate_events.main(["--output", str(directory), "--events", "2000", "--sensors", "10", "--files", "4"])
    wall_clock = json.loads((directory / "_generated.json").read_text())["last_event_ms"] + 180_000
    expected = reference_rows(
        sensor_alerts.JOB_MODULE, {}, PARTITIONS, [(ordered_files(directory), wall_clock)]
    )
    return directory, wall_clock, expected


@pytest.mark.spark
@pytest.mark.slow
def test_spark_submit_to_a_standalone_cluster_gives_the_output_of_local_mode(landing, tmp_path):
    """As the Airflow SparkSubmitOperator runs it: `spark-submit path/to/sensor_alerts.py`, PYTHONPATH = repo."""
    directory, wall_clock, expected = landing
    job_file = REPO_ROOT / "spark_jobs" / "jobs" / "sensor_alerts.py"
    env = job_env()
    env["PYTHONPATH"] = str(REPO_ROOT)
    with StandaloneCluster.start(workers=2, cores=1, memory="1g", work_dir=tmp_path / "cluster") as cluster:
        env["SPARK_MASTER"] = cluster.master_url  # as the DAG's operator passes it on to the job
        done = subprocess.run(
            [
                str(REPO_ROOT / ".venv" / "bin" / "spark-submit"),
                "--master",
                cluster.master_url,
                str(job_file),
                "--input",
                str(directory),
                "--output",
                str(tmp_path / "out"),
                "--checkpoint",
                str(tmp_path / "ckpt"),
                "--partitions",
                str(PARTITIONS),
                "--max-files-per-trigger",
                "2",
                "--wall-clock",
                str(wall_clock),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        apps = cluster.applications()
        workers = cluster.state()["workers"]
    summary = json.loads(done.stdout[done.stdout.index("{") :])
    assert summary["records"]["read"] == 2000
    assert [app["name"] for app in apps] == ["sensor_alerts"]
    assert apps[0]["state"] == "FINISHED"
    assert len(workers) == 2 and all(w["state"] == "ALIVE" for w in workers)
    # Same rows as local mode (the StreamTasks' rows; local mode is checked against them in test_equivalence).
    assert all_committed(tmp_path / "out", sensor_alerts.OUTPUT_TOPICS) == expected
