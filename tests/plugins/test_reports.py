"""The pipeline's report task: rows per output topic and where the Data Docs are."""

from __future__ import annotations

import pandas as pd
from pipeline_airflow.reports import summarize_outputs


def test_counts_committed_rows_per_topic_and_links_the_data_docs(tmp_path):
    output, reports = tmp_path / "output", tmp_path / "reports"
    for topic, rows in (("window-counts", 3), ("silent-sensors", 0)):
        (output / topic).mkdir(parents=True)
        pd.DataFrame({"key": [f"k{i}" for i in range(rows)]}, dtype="string").to_parquet(
            output / topic / "part-0.parquet"
        )
    (output / "_spark_metadata").mkdir()  # bookkeeping, not a topic
    (reports / "data_docs").mkdir(parents=True)
    (reports / "data_docs" / "index.html").write_text("<html></html>")

    summary = summarize_outputs(output, reports)

    assert summary["topics"] == {"silent-sensors": 0, "window-counts": 3}
    assert summary["data_docs"] == (reports / "data_docs" / "index.html").as_uri()


def test_a_run_that_wrote_nothing_is_reported_as_such(tmp_path):
    summary = summarize_outputs(tmp_path / "missing", tmp_path / "reports")
    assert summary["topics"] == {} and summary["data_docs"] is None
