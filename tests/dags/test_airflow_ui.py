"""The Airflow UI as a user meets it: `make airflow` (scripts/airflow_standalone.sh), log in, find the DAG.

Drives Debian's Chromium (apt package `chromium`) through Playwright; it installs nothing itself.
"""

from __future__ import annotations

import pytest

from tests.browser import logged_in_page

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def test_the_pipeline_dag_is_listed_with_its_aligned_schedule(airflow_ui, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright, logged_in_page(playwright, airflow_ui, tmp_path) as page:
        # The DAG processor may still be parsing dags/ when the UI first answers.
        dag_link = page.get_by_role("link", name="sensor_alerts_pipeline")
        for _ in range(30):
            if dag_link.count():
                break
            page.wait_for_timeout(2000)
            page.reload()
        expect(dag_link).to_be_visible()
        # Every pipeline DAG shows its schedule: the first one is enough here.
        schedule = page.get_by_text("every 10m, +2m").first
        expect(schedule).to_be_visible()
        schedule.hover()  # the timetable's description, as a tooltip
        expect(page.get_by_text("k × 10m + 2m since the Unix epoch").first).to_be_visible()
        page.screenshot(path=tmp_path / "dags.png")

        dag_link.click()
        expect(page.get_by_text("every 10m, +2m").first).to_be_visible()
        for task_id in ("run_sensor_alerts", "validate_outputs", "publish_outputs", "report_outputs"):
            expect(page.get_by_text(task_id, exact=True).first).to_be_visible()
        page.screenshot(path=tmp_path / "sensor_alerts_pipeline.png")

        # What the job computes, in the DAG's documentation: its topology as a text graph, and its rules.
        page.get_by_role("button", name="Dag Docs").click()
        docs = page.get_by_role("dialog")
        diagram = docs.locator("code", has_text="Source: KSTREAM-SOURCE-0000000000")  # a fenced block
        diagram.scroll_into_view_if_needed()
        expect(diagram).to_contain_text("[Suppress; store: suppress_buffer]")
        expect(diagram).to_contain_text("─▶ (silent-sensors)")
        diagram.screenshot(path=tmp_path / "sensor_alerts_topology.png")
        rules = docs.locator("li", has_text="window-counts: derived from the topology")
        expect(rules).to_contain_text("expect_no_updates_after_window_closes(grace_ms=120000)")
        rules.scroll_into_view_if_needed()
        page.screenshot(path=tmp_path / "sensor_alerts_rules.png")
