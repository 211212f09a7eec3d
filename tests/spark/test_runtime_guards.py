"""A checkpoint keeps its job, options, partition count and task groups; an output folder keeps its
checkpoint and records the job that made it; a missing input is an error; partitions spread evenly over
Spark's tasks; a run's query settings and its Python workers' environment."""

from __future__ import annotations

import json
import os

import pytest

from spark_jobs.spark.job import JobSpec, recorded_job
from spark_jobs.spark.runtime import (
    CHECKPOINT_FILE_MANAGER,
    FILE_SYSTEM_CHECKPOINT_MANAGER,
    IdentityMismatch,
    MissingInput,
    RunConfig,
    TopologyRuntime,
    balanced_task_groups,
    shuffle_partition_of_int,
)
from spark_jobs.spark.worker_memory import WORKER_ENVIRONMENT

JOB = "spark_jobs.jobs.sensor_alerts"


def _runtime(spark, tmp_path, partitions=3, checkpoint="ckpt", options=None, input_dir="in"):
    config = RunConfig(str(tmp_path / input_dir), str(tmp_path / "out"), str(tmp_path / checkpoint))
    return TopologyRuntime(spark, JobSpec(JOB, options or {}, partitions), config)


@pytest.mark.spark
def test_options_cannot_change_under_a_checkpoint_and_the_output_records_them(spark, tmp_path):
    _runtime(spark, tmp_path, options={"window_size": 300_000})._check_identity()
    recorded = recorded_job(tmp_path / "out")
    assert recorded.module == JOB and recorded.num_partitions == 3
    assert recorded.options["window_size"] == 300_000 and recorded.options["grace"] == 120_000
    assert recorded.options == recorded.effective_options()  # every option, not only those given
    # The same options spelled as the command line gives them are the same options.
    _runtime(spark, tmp_path, options={"window_size": "5min", "grace": 120_000})._check_identity()
    with pytest.raises(IdentityMismatch, match=r"window_size=120000 \(checkpoint: 300000\).*new checkpoint"):
        _runtime(spark, tmp_path)._check_identity()
    assert recorded_job(tmp_path / "out").options["window_size"] == 300_000  # the refused run wrote nothing


def test_an_output_folder_without_a_job_record_is_an_error_naming_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"_job\.json"):
        recorded_job(tmp_path)


@pytest.mark.spark
def test_a_missing_input_folder_is_an_error_naming_it(spark, tmp_path):
    runtime = _runtime(spark, tmp_path, input_dir="typo")
    with pytest.raises(MissingInput, match="typo"):
        runtime.run()
    assert not (tmp_path / "typo").exists()  # nothing created in its place
    assert not (tmp_path / "ckpt").exists()


@pytest.mark.spark
def test_partition_count_cannot_change_under_a_checkpoint(spark, tmp_path):
    _runtime(spark, tmp_path)._check_identity()
    _runtime(spark, tmp_path)._check_identity()
    with pytest.raises(IdentityMismatch, match="partitions"):
        _runtime(spark, tmp_path, partitions=4)._check_identity()


@pytest.mark.spark
def test_a_checkpoint_of_an_older_runtime_is_refused_with_what_to_do(spark, tmp_path):
    """Before task groups, the state was grouped by partition: resuming it would mix up task states."""
    (tmp_path / "ckpt").mkdir()
    older = {"checkpoint_id": "0f", "module": JOB, "partitions": 3, "options": {}}
    (tmp_path / "ckpt" / "job.json").write_text(json.dumps(older))
    with pytest.raises(IdentityMismatch, match="older version.*task_groups.*new checkpoint"):
        _runtime(spark, tmp_path)._check_identity()


@pytest.mark.spark
def test_a_new_checkpoint_cannot_write_into_an_old_output(spark, tmp_path):
    _runtime(spark, tmp_path)._check_identity()
    with pytest.raises(IdentityMismatch, match="another checkpoint"):
        _runtime(spark, tmp_path, checkpoint="ckpt-2")._check_identity()


@pytest.mark.spark
@pytest.mark.parametrize(("partitions", "shuffle"), [(4, 2), (3, 2), (8, 3)])
def test_task_groups_spread_partitions_evenly_over_spark_tasks(spark, partitions, shuffle):
    from pyspark.sql import functions as F

    groups = balanced_task_groups(partitions, shuffle)
    assert sorted(groups) == list(range(partitions)) and len(set(groups.values())) == partitions
    placed = spark.createDataFrame([(g,) for g in groups.values()], "g int").select(
        F.pmod(F.hash("g"), F.lit(shuffle)).alias("slot")
    )
    per_slot = sorted(r["count"] for r in placed.groupBy("slot").count().collect())
    assert per_slot[-1] - per_slot[0] <= 1 and sum(per_slot) == partitions


@pytest.mark.spark
def test_the_shuffle_partition_of_an_int_is_the_one_spark_computes(spark):
    from pyspark.sql import functions as F

    for shuffle in (1, 2, 3, 7, 200):
        rows = spark.range(-50, 3000).select(
            F.col("id").cast("int").alias("key"), F.pmod(F.hash(F.col("id").cast("int")), F.lit(shuffle))
        )
        expected = [tuple(r) for r in rows.collect()]
        assert [(key, shuffle_partition_of_int(key, shuffle)) for key, _ in expected] == expected


@pytest.mark.spark
def test_task_groups_are_kept_with_the_checkpoint(spark, tmp_path):
    first = _runtime(spark, tmp_path)
    first._check_identity()
    again = _runtime(spark, tmp_path)
    again.config.shuffle_partitions = 5  # ignored: Spark keeps the checkpoint's, and so do the groups
    again._check_identity()
    assert again._task_groups == first._task_groups


@pytest.mark.spark
def test_a_local_checkpoint_is_written_through_the_file_system_based_manager(spark, tmp_path):
    """Hadoop's local file system forks processes for FileContext's symlink checks. The setting reaches the
    query and only the query; a remote checkpoint and a user's own choice keep theirs."""
    (tmp_path / "in").mkdir()
    runtime = _runtime(spark, tmp_path)
    runtime._check_identity()
    query = runtime._start(runtime.build_query().trigger(availableNow=True))
    try:
        query.awaitTermination()
        # The query's own metadata log (its offsets) writes through the manager the setting names.
        manager = query._jsq.streamingQuery().offsetLog().fileManager().getClass().getName()
    finally:
        query.stop()
    assert manager == FILE_SYSTEM_CHECKPOINT_MANAGER
    assert spark.conf.get(CHECKPOINT_FILE_MANAGER, None) is None  # the session's own settings untouched

    remote = TopologyRuntime(spark, JobSpec(JOB, {}, 3), RunConfig("in", "out", "hdfs://namenode/ckpt"))
    assert CHECKPOINT_FILE_MANAGER not in remote.query_settings()
    spark.conf.set(CHECKPOINT_FILE_MANAGER, "com.example.OwnManager")
    try:
        assert CHECKPOINT_FILE_MANAGER not in _runtime(spark, tmp_path).query_settings()
    finally:
        spark.conf.unset(CHECKPOINT_FILE_MANAGER)


@pytest.mark.spark
def test_the_python_workers_of_a_run_get_the_worker_memory_environment(spark, tmp_path):
    _runtime(spark, tmp_path)  # a runtime gives the session's workers their environment as it is made
    names = sorted(WORKER_ENVIRONMENT)
    in_worker = spark.sparkContext.parallelize([0], 1).map(lambda _: {n: os.environ.get(n) for n in names})
    # What this process sets wins (the JVM and its workers inherit it).
    assert in_worker.first() == {n: os.environ.get(n, WORKER_ENVIRONMENT[n]) for n in names}
