"""Bad input on Spark: every kind is quarantined with its reason, raw text and file; the job never stops;
read = processed + quarantined in the run summary."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from spark_jobs.jobs import generate_events
from spark_jobs.spark.landing import Reason
from spark_jobs.spark.topics import QUARANTINE_TOPIC
from tests.spark.support import committed_rows, run_in_process


@pytest.mark.spark
def test_every_kind_of_bad_record_is_quarantined_and_counted(spark, tmp_path):
    landing = tmp_path / "in"
    generate_events.main(
        ["--output", str(landing), "--events", "1500", "--files", "3", "--bad-fraction", "0.02"]
    )
    json_facts = json.loads((landing / "_generated.json").read_text())
    generate_events.main(
        [
            "--output",
            str(landing),
            "--events",
            "500",
            "--files",
            "2",
            "--bad-fraction",
            "0.02",
            "--format",
            "parquet",
        ]
    )
    parquet_facts = json.loads((landing / "_generated.json").read_text())
    (landing / "zz-empty-lines.jsonl").write_text("\n  \n\n")  # no records, nothing to quarantine
    bad_total = json_facts["bad_records"] + parquet_facts["bad_records"]

    summary = run_in_process(
        spark,
        landing,
        tmp_path / "out",
        tmp_path / "ckpt",
        partitions=2,
        max_files_per_trigger=2,
        wall_clock_ms=json_facts["last_event_ms"],
    )

    records = summary.to_dict()["records"]
    assert records == {
        "read": 2000 + bad_total,
        "processed": 2000,
        "dropped_late": records["dropped_late"],
        "quarantined": bad_total,
    }
    assert records["read"] == records["processed"] + records["quarantined"]
    quarantine = pd.read_parquet(tmp_path / "out" / QUARANTINE_TOPIC)
    assert len(quarantine) == bad_total
    assert set(quarantine["reason"]) == set(Reason.ALL)
    assert summary.quarantined_by_reason == quarantine["reason"].value_counts().to_dict()
    assert quarantine["source_file"].map(lambda p: p.startswith(str(landing))).all()
    assert (quarantine["raw"].str.len() > 0).all()
    unparseable = quarantine[quarantine["reason"] == Reason.UNPARSEABLE].iloc[0]
    line = Path(unparseable["source_file"]).read_bytes().split(b"\n")[unparseable["line"] - 1]
    assert line.decode() == unparseable["raw"]
    # The valid records went on: every one of them reached a task and counted.
    counted = sum(row[1] for row in committed_rows(tmp_path / "out", "window-finals"))
    assert 0 < counted <= 2000
