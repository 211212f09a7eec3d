"""The pipeline health page and a run's Data Docs page as a user meets them in the Airflow UI.

Real `scripts/airflow_standalone.sh` and Debian's Chromium (Playwright); the data is seeded by the code
that writes it in production (RunSummary.write, the validation's history and run records), without Spark.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from spark_jobs.quality.history import GX_RUN_TIME_FORMAT, append_history, record_run
from spark_jobs.spark.summary import RunSummary
from tests.browser import logged_in_page

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

START = dt.datetime(2026, 11, 22, 10, 2, tzinfo=dt.UTC)
SUITES = ("window-finals", "alerts", "quarantine")


def seed(var: Path) -> str:
    """Six runs of sensor_alerts with their validations (the last one failing `alerts`); its run id."""
    output, reports = var / "data" / "sensor_alerts" / "output", var / "reports" / "sensor_alerts"
    site = reports / "data_docs"
    site.mkdir(parents=True)
    (site / "index.html").write_text("<html><body>all results</body></html>")
    run_id = ""
    for i in range(6):
        started = START + dt.timedelta(minutes=10 * i)
        summary = RunSummary(
            "sensor_alerts", "available-now", 4, run_id=f"{started:%Y%m%dT%H%M%SZ}-{100 + i}"
        )
        summary.processed, summary.late, summary.quarantined = 20_000 + 5_000 * i, 10 * i, 3 + i % 3
        sizes = {
            "state_entries": 1_000 + 250 * i,
            "state_windows": 2 + i % 2,
            "state_bytes": 400_000 * (i + 1),
        }
        summary.task_metrics = {partition: dict(sizes) for partition in range(4)}  # each task's last batch
        for batch in range(3):
            summary.add_progress(
                {"batch": batch, "records": summary.processed // 3, "duration_ms": 800 + 300 * i}
            )
        summary.write(output)

        run_id = f"scheduled__{started.isoformat()}"
        validated = started + dt.timedelta(minutes=2)
        failed = {"alerts"} if i == 5 else set()
        suites = [
            {
                "suite": s,
                "topic": s,
                "success": s not in failed,
                "line": f"{s}: {'FAILED' if s in failed else 'PASSED'}",
            }
            for s in SUITES
        ]
        verdicts = {
            "run_name": run_id,
            "run_time": validated.isoformat(),
            "success": not failed,
            "suites": suites,
        }
        run_time_folder = validated.strftime(GX_RUN_TIME_FORMAT)
        for suite in SUITES:  # where GX's site builder puts a result page
            page = site / "validations" / suite / run_id / run_time_folder / "batch.html"
            page.parent.mkdir(parents=True)
            page.write_text(f"<html><body>GX result of {suite}</body></html>")
        append_history(reports, verdicts)
        record_run(reports, verdicts, run_time_folder)
    return run_id


def test_the_health_page_charts_the_runs_and_the_link_opens_a_runs_data_docs(airflow_ui, tmp_path):
    from pipeline_airflow.links import run_docs_url
    from playwright.sync_api import expect, sync_playwright

    last_run = seed(airflow_ui.var)
    with (
        sync_playwright() as playwright,
        logged_in_page(playwright, airflow_ui, tmp_path, height=1000) as page,
    ):
        page.get_by_role("button", name="Browse").click()
        page.get_by_role("menuitem", name="Pipeline health").click()
        frame = page.frame_locator("iframe")
        section = frame.locator("section#sensor_alerts")
        expect(section.locator("svg.chart")).to_have_count(8, timeout=30_000)
        expect(section).to_contain_text("45,005 records read, 50 late, 5 quarantined")
        expect(section).to_contain_text(f"Latest validation {last_run}: FAILED: alerts")
        expect(section.locator("svg.chart").first).to_contain_text("Throughput (events/s)")
        state = section.locator("svg.chart", has_text="State entries at run end (entries)")
        expect(state.locator("circle")).to_have_count(6)
        expect(state.locator("circle").last).to_contain_text("9,000 entries")  # 4 tasks of 2,250
        expect(section.locator("svg.chart", has_text="State size at run end (MB)")).to_be_visible()
        expect(section.locator("rect.fail")).to_have_count(1)
        expect(section.locator("rect.pass")).to_have_count(17)
        # The other pipeline job has not run: the page says what to do.
        expect(frame.locator("section#sensor_enrichment")).to_contain_text("No runs yet")
        page.screenshot(path=tmp_path / "health.png", full_page=True)

        page.goto(run_docs_url("sensor_alerts", last_run, airflow_ui.url))
        for suite in SUITES:
            expect(page.get_by_role("cell", name=suite, exact=True)).to_be_visible()
        expect(page.get_by_text("FAILED").first).to_be_visible()
        page.screenshot(path=tmp_path / "run_docs.png")
        page.get_by_role("link", name="result page").nth(1).click()
        expect(page.get_by_text("GX result of alerts")).to_be_visible()


LINK_CHECK_DAG = """
import datetime as dt
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG
from pipeline_airflow.links import RunDataDocsLink

with DAG("run_docs_link_check", schedule=None, start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC)) as dag:
    validate = PythonOperator(task_id="validate_outputs", python_callable=lambda: None)
    validate.operator_extra_links = (RunDataDocsLink(job="sensor_alerts"),)
"""


def test_a_finished_task_leaves_its_run_docs_link_where_the_ui_reads_it(airflow_db, tmp_path, monkeypatch):
    """Airflow computes the link on the worker when the task ends and keeps it in an XCom; the UI reads
    that XCom through the serialized DAG's link of the same name."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.xcom import XComModel
    from airflow.serialization.serialized_objects import DagSerialization
    from airflow.utils.session import create_session
    from pipeline_airflow.links import run_docs_path
    from sqlalchemy import select

    (tmp_path / "link_check.py").write_text(LINK_CHECK_DAG)
    # dag.test() parses the DAG's bundle into the database: one bundle, this folder.
    bundle = {"name": "link_check", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle"}
    monkeypatch.setenv(
        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST",
        json.dumps([{**bundle, "kwargs": {"path": str(tmp_path)}}]),
    )
    bag = DagBag(dag_folder=tmp_path)
    assert bag.import_errors == {}
    dag = bag.dags["run_docs_link_check"]
    run = dag.test()
    with create_session() as session:
        stored = session.scalars(
            select(XComModel.value).where(
                XComModel.dag_id == dag.dag_id,
                XComModel.run_id == run.run_id,
                XComModel.key == "_link_RunDataDocsLink",
            )
        ).all()
    assert len(stored) == 1 and run_docs_path("sensor_alerts", run.run_id) in str(stored[0])
    served = DagSerialization.from_dict(DagSerialization.to_dict(dag)).get_task("validate_outputs")
    assert served.extra_links == ["Data Docs of this run"]
