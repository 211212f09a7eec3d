"""The Airflow UI as a user meets it: `make airflow` (scripts/airflow_standalone.sh), log in, find the DAG.

Drives Debian's Chromium (apt package `chromium`) through Playwright; it installs nothing itself.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from spark_jobs.spark.cluster import free_port
from tests.browser import CHROMIUM_FLAGS, system_chromium

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 300
BANNER = re.compile(r"Airflow UI: (?P<url>http://\S+)\s+user:\s+admin\s+password:\s+(?P<password>\S+)")


@pytest.fixture
def chromium() -> Path:
    return system_chromium()


@pytest.fixture
def airflow_ui(tmp_path):
    """`scripts/airflow_standalone.sh` on free loopback ports, state in tmp_path; (url, password)."""
    # Only what the script sets up itself: none of this test session's Airflow settings.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        SPARK_JOBS_VAR=str(tmp_path / "var"),
        AIRFLOW__API__PORT=str(free_port()),
        # Standalone's log servers have fixed default ports; another Airflow on this machine may hold them.
        AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT=str(free_port()),
        AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT=str(free_port()),
    )
    log_path = tmp_path / "standalone.log"
    with log_path.open("wb") as log:
        script = subprocess.Popen(
            [str(REPO_ROOT / "scripts" / "airflow_standalone.sh")],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # its own process group, so that we can end all of it
        )
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not (banner := BANNER.search(log_path.read_text(errors="replace"))):
            if script.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"airflow standalone did not come up:\n{log_path.read_text(errors='replace')[-5000:]}"
                )
            time.sleep(1)
        yield banner["url"], banner["password"]
    finally:
        script.send_signal(signal.SIGTERM)  # the script stops standalone, which stops its components
        with contextlib.suppress(subprocess.TimeoutExpired):
            script.wait(timeout=120)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(script.pid, signal.SIGKILL)  # whatever of our group did not stop in time
        script.wait()


def test_the_pipeline_dag_is_listed_with_its_aligned_schedule(airflow_ui, chromium, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    url, password = airflow_ui
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            tempfile.mkdtemp(dir=tmp_path, prefix="chromium-profile-"),
            executable_path=str(chromium),
            args=CHROMIUM_FLAGS,
            headless=True,
            viewport={"width": 1400, "height": 900},
        )
        try:
            page = browser.new_page()
            page.goto(f"{url}/dags")
            page.fill("input[name=username]", "admin")
            page.fill("input[name=password]", password)
            page.click("button[type=submit]")
            page.wait_for_url(re.compile(r".*/dags$"), timeout=60_000)

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
        finally:
            browser.close()
