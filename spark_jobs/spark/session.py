"""SparkSession construction: one place for the settings every job and test relies on."""

from __future__ import annotations

import os
import sys
import threading


def prepare_environment() -> None:
    """Workers must run this interpreter, and Spark must bind to loopback unless told otherwise."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def launched_by_spark_submit() -> bool:
    """spark-submit starts the JVM first and hands its gateway to the Python driver through these."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


# What every job and test relies on, applied only where the user (spark-submit --conf, spark-defaults.conf,
# PYSPARK_SUBMIT_ARGS) has set nothing: what the user sets wins.
SESSION_DEFAULTS = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
    # The task state of every job lives in RocksDB.
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.ui.showConsoleProgress": "false",
}


def local_spark_session(
    app_name: str,
    master: str | None = None,
    warehouse_dir: str | None = None,
    shuffle_partitions: int | None = None,
    extra_conf: dict[str, str] | None = None,
):
    """A SparkSession for jobs and tests, with `SESSION_DEFAULTS` where the user set nothing.

    `master` defaults to `$SPARK_MASTER` or `local[2]`, except under `spark-submit`, whose `--master`
    is kept (an inherited `$SPARK_MASTER` does not override it). Spark's UI stays on (its default): tests
    turn it off through `extra_conf`. Arguments given here (`shuffle_partitions`, `extra_conf`) are
    explicit, so they win.
    """
    prepare_environment()
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    if master is None and not launched_by_spark_submit():  # spark-submit's --master is the user's choice
        master = os.environ.get("SPARK_MASTER") or "local[2]"
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.config("spark.master", master)
    # spark-submit's --conf and spark-defaults.conf reach the JVM as system properties; a SparkConf loads
    # them only once the gateway is up (before, it is a Python-only dict).
    SparkContext._ensure_initialized()
    user = SparkConf()
    for key, value in SESSION_DEFAULTS.items():
        if not user.contains(key):
            builder = builder.config(key, value)
    if not user.contains("spark.driver.host"):
        builder = builder.config("spark.driver.host", os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"))
    explicit = dict(extra_conf or {})
    if shuffle_partitions is not None:
        explicit["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    if warehouse_dir:
        explicit["spark.sql.warehouse.dir"] = warehouse_dir
    for key, value in explicit.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


def stop_session(spark) -> threading.Thread | None:
    """Stop `spark` as `spark.stop()` does, without waiting for pyspark's accumulator server to stop.

    Once a Python function has run, the JVM holds a connection to that server, and the server's handler
    notices a shutdown only when its poll of that connection times out: `spark.stop()` then waits for it,
    after the JVM has stopped and nothing can use the server any more. Here the
    server stops in a background (daemon) thread, which is returned: join it to wait. A process that exits
    right after does not wait for it."""
    context = spark.sparkContext
    server = getattr(context, "_accumulatorServer", None)
    context._accumulatorServer = None  # SparkContext.stop shuts down only a server it still holds
    try:
        spark.stop()
    finally:
        stopping = None
        if server is not None:
            stopping = threading.Thread(
                target=server.shutdown, name="accumulator-server-shutdown", daemon=True
            )
            stopping.start()
    return stopping
