"""What a pipeline run leaves behind, summed up for its log and XCom."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def summarize_outputs(output_dir: Path, reports_dir: Path) -> dict[str, Any]:
    """Rows per output topic (committed data only, as `pandas.read_parquet` reads a topic) and the
    Data Docs index, if the validation built one."""
    import pandas as pd

    topics: dict[str, int] = {}
    if output_dir.is_dir():
        for topic_dir in sorted(p for p in output_dir.iterdir() if p.is_dir() and p.name[0] not in "._"):
            topics[topic_dir.name] = len(pd.read_parquet(topic_dir, columns=["key"]))
    data_docs = reports_dir / "data_docs" / "index.html"
    summary = {
        "output": str(output_dir),
        "topics": topics,
        "data_docs": data_docs.as_uri() if data_docs.is_file() else None,
    }
    for topic, rows in topics.items():
        log.info("topic %s: %d rows", topic, rows)
    log.info("Data Docs: %s", summary["data_docs"] or f"not built (expected at {data_docs})")
    return summary


def asset_extras(output_dir: Path, reports_dir: Path) -> dict[str, Any]:
    """What a topic's asset event carries: the latest run summary's figures (batch ids, records late and
    quarantined, late by node (the rows the run added to `_late`), rows emitted per topic) and the
    validation verdict that let it through."""
    summary_file = Path(output_dir) / "_runs" / "latest.json"
    verdicts_file = Path(reports_dir) / "verdicts.json"
    summary = json.loads(summary_file.read_text()) if summary_file.is_file() else {}
    verdicts = json.loads(verdicts_file.read_text()) if verdicts_file.is_file() else {}
    records = summary.get("records", {})
    run = {
        "run_id": summary.get("run_id"),
        "batch_ids": summary.get("batches", []),
        "processed": records.get("processed", 0),
        "late": records.get("dropped_late", 0),
        "late_by_node": dict(summary.get("dropped_late_by_node", {})),
        "quarantined": records.get("quarantined", 0),
        "verdict": "passed" if verdicts.get("success") else "failed",
        "validation_run": verdicts.get("run_name"),
    }
    return {"run": run, "rows": dict(summary.get("emitted", {}))}


def read_published_batches(topic_dir: Path, events: list) -> dict[str, Any]:
    """The rows of the batches that the given asset events announce (their `batch_ids` extra), logged."""
    import pandas as pd

    batch_ids = sorted({b for event in events for b in (event.extra or {}).get("batch_ids", [])})
    frames = [
        pd.read_parquet(path) for b in batch_ids if (path := Path(topic_dir) / f"batch_id={b}").is_dir()
    ]
    rows = pd.concat(frames) if frames else pd.DataFrame()
    log.info("%d rows in batches %s of %s", len(rows), batch_ids, topic_dir)
    if len(rows):
        log.info("first rows:\n%s", rows.head(10).to_string(index=False))
    return {"batch_ids": batch_ids, "rows": len(rows)}
