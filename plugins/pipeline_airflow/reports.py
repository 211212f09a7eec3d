"""What a pipeline run leaves behind, summed up for its log and XCom."""

from __future__ import annotations

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
