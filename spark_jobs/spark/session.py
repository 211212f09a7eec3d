"""SparkSession construction: one place for the settings every job and test relies on."""

from __future__ import annotations

import os
import sys


def prepare_environment() -> None:
    """Workers must run this interpreter, and Spark must bind to loopback unless told otherwise."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def launched_by_spark_submit() -> bool:
    """spark-submit starts the JVM first and hands its gateway to the Python driver through these."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def local_spark_session(
    app_name: str,
    master: str | None = None,
    warehouse_dir: str | None = None,
    shuffle_partitions: int = 4,
    extra_conf: dict[str, str] | None = None,
):
    """A SparkSession for jobs and tests.

    `master` defaults to `$SPARK_MASTER` or `local[2]`, except under `spark-submit`, whose `--master`
    is kept. The RocksDB state store provider is set here because the task state of every job lives in it.
    """
    prepare_environment()
    from pyspark.sql import SparkSession

    master = master or os.environ.get("SPARK_MASTER")
    if master is None and not launched_by_spark_submit():
        master = "local[2]"
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    builder = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config(
            "spark.sql.streaming.stateStore.providerClass",
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        )
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.host", os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"))
    )
    if warehouse_dir:
        builder = builder.config("spark.sql.warehouse.dir", warehouse_dir)
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
