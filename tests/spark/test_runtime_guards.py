"""A checkpoint keeps its job and partition count; an output folder keeps its checkpoint."""

from __future__ import annotations

import pytest

from spark_jobs.spark.job import JobSpec
from spark_jobs.spark.runtime import IdentityMismatch, RunConfig, TopologyRuntime

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
def test_a_new_checkpoint_cannot_write_into_an_old_output(spark, tmp_path):
    _runtime(spark, tmp_path)._check_identity()
    with pytest.raises(IdentityMismatch, match="another checkpoint"):
        _runtime(spark, tmp_path, checkpoint="ckpt-2")._check_identity()
