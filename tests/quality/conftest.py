"""Fixtures of the data-quality tests: a correct sensor-alerts output, validated once per session."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.quality.support import write_sensor_alerts_output


@dataclass
class ValidatedOutput:
    output: Path
    reports: Path
    verdicts: list


@pytest.fixture(scope="session")
def correct_output(tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("correct") / "output"
    write_sensor_alerts_output(output)
    return output


@pytest.fixture(scope="session")
def validated_correct_output(spark, correct_output, tmp_path_factory) -> ValidatedOutput:
    """Every suite run once on the correct output (shared: a full validation takes tens of seconds)."""
    from spark_jobs.quality.validate import validate_output

    reports = tmp_path_factory.mktemp("correct-reports")
    verdicts = validate_output(spark, correct_output, reports, run_name="correct-output")
    return ValidatedOutput(correct_output, reports, verdicts)
