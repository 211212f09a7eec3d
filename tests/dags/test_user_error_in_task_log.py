"""A user's mistake in a pipeline's job task: its one `error: ...` line reaches the task log, and the task
fails (spark-submit passes the job's exit status on to the operator)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from airflow.exceptions import AirflowException
from pipeline_airflow.spark import SparkJobSubmitOperator, connection_for_master, spark_connection_id


@pytest.mark.spark
def test_a_missing_input_folder_fails_the_task_with_its_error_line_in_the_log(monkeypatch, tmp_path, capfd):
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{spark_connection_id().upper()}", json.dumps(connection_for_master("local[1]"))
    )
    task = SparkJobSubmitOperator(
        task_id="run_sensor_alerts",
        script="jobs/sensor_alerts.py",
        application_args=[
            "--input",
            str(tmp_path / "no-such-input"),
            "--output",
            str(tmp_path / "output"),
            "--checkpoint",
            str(tmp_path / "checkpoint"),
        ],
    )
    with pytest.raises(AirflowException, match="Error code is: 2") as failed:
        task.execute(context={})
    expected = f"error: input folder {tmp_path / 'no-such-input'} does not exist"
    captured = capfd.readouterr()
    # The hook logs each line of spark-submit's output: "<time> [info     ] <line> [<logger>] loc=...".
    errors = [line for line in captured.out.splitlines() if "] error: " in line]
    assert len(errors) == 1 and expected in errors[0], captured.out
    assert "Traceback" not in captured.out + captured.err
    assert expected in str(failed.value)  # the provider adds the output's tail to the failure
    assert not (tmp_path / "checkpoint").exists()
