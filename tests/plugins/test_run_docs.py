"""The validation task's link to its run's Data Docs, and the page it opens."""

from __future__ import annotations

import datetime as dt
import json
from urllib.parse import unquote

import data_docs_plugin as plugin
import pytest
from fastapi.testclient import TestClient
from pipeline_airflow.links import RunDataDocsLink, run_docs_path, run_docs_url

from spark_jobs.quality.history import (
    GX_RUN_TIME_FORMAT,
    append_history,
    read_history,
    read_run,
    record_run,
    run_file_name,
)

RUN_ID = "scheduled__2026-11-22T10:02:00+00:00"
RUN_TIME = dt.datetime(2026, 11, 22, 10, 3, 4, 500, tzinfo=dt.UTC)


def verdicts(run_name: str, failed: tuple[str, ...] = ()) -> dict:
    """A summary as validate.py's `_write_verdicts` writes it to verdicts.json."""
    suites = [
        {"suite": suite, "topic": suite, "success": suite not in failed, "line": f"line of {suite} <b>"}
        for suite in ("window-finals", "alerts", "quarantine")
    ]
    return {
        "run_name": run_name,
        "run_time": RUN_TIME.isoformat(),
        "output": "/out",
        "success": not failed,
        "suites": suites,
    }


def gx_page(reports, suite: str, run_name: str) -> str:
    """A result page where GX's site builder puts it: validations/<suite>/<run name>/<run time>/<batch>."""
    folder = reports / "data_docs" / "validations" / suite / run_name / RUN_TIME.strftime(GX_RUN_TIME_FORMAT)
    folder.mkdir(parents=True)
    (folder / "batch-1.html").write_text(f"<html>result of {suite}</html>")
    return (folder / "batch-1.html").relative_to(reports / "data_docs").as_posix()


@pytest.fixture
def reports(tmp_path):
    """`<tmp>/reports/sensor_alerts` with a site, two suites' result pages and the run recorded."""
    job_reports = tmp_path / "reports" / "sensor_alerts"
    (job_reports / "data_docs").mkdir(parents=True)
    (job_reports / "data_docs" / "index.html").write_text("<html>index</html>")
    for suite in ("window-finals", "alerts"):
        gx_page(job_reports, suite, RUN_ID)
    record_run(job_reports, verdicts(RUN_ID, failed=("alerts",)), RUN_TIME.strftime(GX_RUN_TIME_FORMAT))
    return job_reports


@pytest.fixture
def client(reports):
    return TestClient(plugin.create_app(root=reports.parent, require_login=False))


def test_the_link_quotes_the_whole_run_id_under_the_base_url():
    assert run_docs_path("sensor_alerts", RUN_ID) == (
        "/data-docs/sensor_alerts/runs/scheduled__2026-11-22T10%3A02%3A00%2B00%3A00"
    )
    assert run_docs_url("sensor_alerts", RUN_ID, "http://host:8080/airflow/") == (
        "http://host:8080/airflow" + run_docs_path("sensor_alerts", RUN_ID)
    )
    assert unquote(run_docs_path("j", "a/b c:+").rsplit("/", 1)[1]) == "a/b c:+"


def test_the_link_is_computed_from_the_task_instance_run_id():
    class Key:
        dag_id, task_id, run_id, map_index = "sensor_alerts_pipeline", "validate_outputs", RUN_ID, -1

    link = RunDataDocsLink(job="sensor_alerts").get_link(None, ti_key=Key())
    assert link.endswith(run_docs_path("sensor_alerts", RUN_ID))
    assert RunDataDocsLink().xcom_key == "_link_RunDataDocsLink"


def test_the_pipeline_validation_task_carries_the_link():
    from pipeline_airflow.pipeline import pipeline_dag

    task = pipeline_dag("spark_jobs.jobs.sensor_alerts").get_task("validate_outputs")
    assert [link.name for link in task.operator_extra_links] == ["Data Docs of this run"]
    assert task.operator_extra_links[0].job == "sensor_alerts"


def test_a_run_record_names_each_suite_with_its_result_page(reports):
    record = read_run(reports, RUN_ID)
    pages = {s["suite"]: s["page"] for s in record["suites"]}
    assert pages["window-finals"].startswith(f"validations/window-finals/{RUN_ID}/20261122T100304.000500Z/")
    assert pages["quarantine"] is None  # no page was built for it
    assert [s["success"] for s in record["suites"]] == [True, False, True]
    assert ":" not in run_file_name(RUN_ID) and "+" not in run_file_name(RUN_ID)
    assert "/" not in run_file_name("../verdicts")


def test_only_the_newest_run_records_are_kept(tmp_path):
    for i in range(5):
        record_run(tmp_path, verdicts(f"run-{i}"), "x", kept=3)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["run-2.json", "run-3.json", "run-4.json"]


def test_the_history_gets_one_line_per_validation_and_skips_a_line_cut_by_a_crash(tmp_path):
    for i in range(4):
        append_history(tmp_path, verdicts(f"run-{i}", failed=("alerts",) if i == 2 else ()), kept=3)
    with (tmp_path / "history.jsonl").open("a") as history:
        history.write('{"cut by a cra')  # a crash mid-line hides nothing else
    lines = read_history(tmp_path)
    assert [line["run_name"] for line in lines] == ["run-0", "run-1", "run-2", "run-3"]
    assert lines[-1]["run_name"] == "run-3" and lines[-1]["success"] is True
    assert {line["run_name"]: line["suites"]["alerts"] for line in lines}["run-2"] is False


def test_the_history_is_trimmed_to_the_newest_lines(tmp_path):
    for i in range(30):
        append_history(tmp_path, verdicts(f"run-{i}"), kept=1)  # 400 bytes a line: trims once past 400
    lines = read_history(tmp_path)
    assert len(lines) <= 2 and lines[-1]["run_name"] == "run-29"


def test_the_run_page_lists_suites_verdicts_and_links_that_resolve(client, reports):
    response = client.get(run_docs_path("sensor_alerts", RUN_ID).removeprefix("/data-docs"))
    assert response.status_code == 200
    assert "default-src 'self'" in response.headers["content-security-policy"]
    text = response.text
    assert "window-finals" in text and "alerts" in text and "quarantine" in text
    assert "FAILED" in text and "line of alerts &lt;b&gt;" in text
    hrefs = [part.split('"', 1)[0] for part in text.split('href="../')[1:]]
    result_links = [href for href in hrefs if href.startswith("validations/")]
    assert len(result_links) == 2
    for href in result_links:  # resolved against /<job>/runs/<run id>, as the browser does
        page = client.get(f"/sensor_alerts/{href}")
        assert page.status_code == 200 and "result of" in page.text


@pytest.mark.parametrize(
    "run_id", ["scheduled__2026-11-22T10:12:00+00:00", "../verdicts", "%2e%2e", "x\x00", "verdicts"]
)
def test_a_run_that_was_not_recorded_is_404(client, run_id):
    assert client.get(run_docs_path("sensor_alerts", run_id).removeprefix("/data-docs")).status_code == 404


def test_a_run_of_an_unknown_job_is_404(client):
    assert client.get(run_docs_path("no_such_job", RUN_ID).removeprefix("/data-docs")).status_code == 404
    assert client.get(f"/..%2F/runs/{RUN_ID}").status_code == 404


def test_a_symlinked_run_record_is_refused(client, reports, tmp_path):
    outside = tmp_path / "elsewhere.json"
    outside.write_text(json.dumps({"run_name": "linked", "suites": []}))
    (reports / "runs" / run_file_name("linked")).symlink_to(outside)
    assert client.get("/sensor_alerts/runs/linked").status_code == 404


def test_without_an_airflow_login_the_run_page_is_not_served(reports):
    client = TestClient(plugin.create_app(root=reports.parent))
    assert client.get(run_docs_path("sensor_alerts", RUN_ID).removeprefix("/data-docs")).status_code == 401
