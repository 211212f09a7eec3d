"""The Spark benchmark counts native's output from its sink's files, not with a Spark job (which would add
seconds to native's end-to-end time): the count must be the one Spark reads."""

from __future__ import annotations

import pytest

from bench import spark_bench
from spark_jobs.jobs import generate_events

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("query", ["windowed_count", "hopping_stats", "running_count"])
def test_native_output_is_counted_as_spark_reads_it(spark, tmp_path, query):
    generate_events.main(
        ["--output", str(tmp_path / "in"), "--events", "4000", "--sensors", "20", "--files", "3"]
    )
    (tmp_path / "run").mkdir()
    result = spark_bench.run_native(spark, query, tmp_path / "in", tmp_path / "run", 1, {})
    assert result["batches"] >= 3
    assert result["events"] == 4000
    assert result["output_rows"] == spark.read.parquet(str(tmp_path / "run" / "out")).count() > 0


def test_native_gets_the_settings_our_query_gives_itself(spark, tmp_path):
    settings = spark_bench.tuned_settings(spark, str(tmp_path / "ckpt"))
    assert settings["spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"] == "true"
    assert settings["spark.sql.shuffle.orderIndependentChecksum.enabled"] == "false"
    assert settings["spark.sql.shuffle.partitions"] == str(spark_bench.SHUFFLE_PARTITIONS)
