"""What the user sets wins: session defaults apply only where spark-submit (or spark-defaults) set
nothing, and Spark's UI is on unless turned off."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.spark.support import job_env

pytestmark = pytest.mark.spark

PROBE = """
import json
from spark_jobs.spark.session import local_spark_session
spark = local_spark_session("probe")
conf = spark.sparkContext.getConf()
print(json.dumps({k: conf.get(k, None) for k in (
    "spark.sql.shuffle.partitions", "spark.ui.enabled", "spark.sql.session.timeZone", "spark.default.parallelism")}))
spark.stop()
"""


def _submit(tmp_path: Path, *confs: str) -> dict:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    spark_submit = Path(sys.executable).parent / "spark-submit"
    args = [
        str(spark_submit),
        "--master",
        "local[1]",
        *[a for c in confs for a in ("--conf", c)],
        str(script),
    ]
    run = subprocess.run(args, env=job_env(), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_spark_submit_confs_win_over_the_session_defaults(tmp_path):
    conf = _submit(tmp_path, "spark.sql.shuffle.partitions=3", "spark.ui.enabled=false")
    assert conf["spark.sql.shuffle.partitions"] == "3" and conf["spark.ui.enabled"] == "false"
    assert conf["spark.sql.session.timeZone"] == "UTC"  # unset by the user: the default applies


def test_without_confs_the_defaults_apply_and_the_ui_is_on(tmp_path):
    conf = _submit(tmp_path)
    assert conf["spark.sql.shuffle.partitions"] == "2" and conf["spark.default.parallelism"] == "2"
    assert conf["spark.ui.enabled"] in (None, "true")  # Spark's own default: on


def test_python_workers_import_the_installed_pyspark_not_the_zip(spark):
    # Spark puts pyspark.zip first on a worker's path; modules from a zip are compiled in every new
    # process (scripts/prefer_installed_pyspark.py). Workers must get the installed, compiled package.
    (path,) = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("pyspark").__file__).collect()
    assert ".zip" not in path, path
    assert Path(path).with_name("__pycache__").is_dir(), path


STOP_PROBE = """
import json
from spark_jobs.spark.session import local_spark_session, stop_session

def summed(spark):
    # a Python function's tasks report through the accumulator server (and connect the JVM to it)
    total = spark.sparkContext.accumulator(0)
    spark.sparkContext.parallelize(range(10), 2).foreach(lambda x: total.add(x))
    return total.value

spark = local_spark_session("stop-probe", master="local[1]", extra_conf={"spark.ui.enabled": "false"})
first = summed(spark)
stopping = stop_session(spark)
stopped = spark.sparkContext._jsc is None
stopping.join(30)
server_stopped = not stopping.is_alive()
spark = local_spark_session("stop-probe-again", master="local[1]", extra_conf={"spark.ui.enabled": "false"})
again = summed(spark)
stop_session(spark)
print(json.dumps({"first": first, "stopped": stopped, "server_stopped": server_stopped, "again": again}))
"""


def test_stop_session_stops_the_context_and_its_accumulator_server(tmp_path):
    """`stop_session` leaves the accumulator server to a background thread: the context is stopped when it
    returns, the server stops (the thread ends), and a new session in the same process has a working one."""
    script = tmp_path / "stop_probe.py"
    script.write_text(STOP_PROBE)
    run = subprocess.run(
        [sys.executable, str(script)], env=job_env(), capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result == {"first": 45, "stopped": True, "server_stopped": True, "again": 45}
