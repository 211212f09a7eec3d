"""A checkpoint keeps its job, partition count and task groups; an output folder keeps its checkpoint;
partitions spread evenly over Spark's tasks."""

from __future__ import annotations

import json

import pytest

from spark_jobs.spark.job import JobSpec
from spark_jobs.spark.runtime import IdentityMismatch, RunConfig, TopologyRuntime, balanced_task_groups

JOB = "spark_jobs.jobs.sensor_alerts"


def _runtime(spark, tmp_path, partitions=3, checkpoint="ckpt"):
    config = RunConfig(str(tmp_path / "in"), str(tmp_path / "out"), str(tmp_path / checkpoint))
    return TopologyRuntime(spark, JobSpec(JOB, {}, partitions), config)


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
    older = {"checkpoint_id": "0f", "module": JOB, "partitions": 3}
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

    groups = balanced_task_groups(spark, partitions, shuffle)
    assert sorted(groups) == list(range(partitions)) and len(set(groups.values())) == partitions
    placed = spark.createDataFrame([(g,) for g in groups.values()], "g int").select(
        F.pmod(F.hash("g"), F.lit(shuffle)).alias("slot")
    )
    per_slot = sorted(r["count"] for r in placed.groupBy("slot").count().collect())
    assert per_slot[-1] - per_slot[0] <= 1 and sum(per_slot) == partitions


@pytest.mark.spark
def test_task_groups_are_kept_with_the_checkpoint(spark, tmp_path):
    first = _runtime(spark, tmp_path)
    first._check_identity()
    again = _runtime(spark, tmp_path)
    again.config.shuffle_partitions = 5  # ignored: Spark keeps the checkpoint's, and so do the groups
    again._check_identity()
    assert again._task_groups == first._task_groups
