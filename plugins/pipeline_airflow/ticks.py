"""The log of wall-clock ticks: one JSON line per aligned boundary the sensor saw."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from airflow.sdk import timezone

from pipeline_airflow.timing import epoch_millis


def append_tick(ticks_file: Path, boundary: dict[str, Any]) -> dict[str, Any]:
    """Append `boundary` (the sensor's XCom) with the time it was recorded and its lateness in ms."""
    recorded_ms = epoch_millis(timezone.utcnow())
    tick = {**boundary, "recorded_ms": recorded_ms, "lateness_ms": recorded_ms - boundary["boundary_ms"]}
    ticks_file.parent.mkdir(parents=True, exist_ok=True)
    with ticks_file.open("a", encoding="utf-8") as out:
        out.write(json.dumps(tick, sort_keys=True) + "\n")
    return tick
