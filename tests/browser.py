"""Browser tests: `scripts/airflow_standalone.sh` as a user starts it, and Debian's Chromium driven by
Playwright (never a downloaded browser), logged in as a user does."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from spark_jobs.spark.cluster import free_port

REPO_ROOT = Path(__file__).resolve().parents[1]
READY_TIMEOUT_S = 300
BANNER = re.compile(r"Airflow UI: (?P<url>http://\S+)\s+user:\s+admin\s+password:\s+(?P<password>\S+)")

CHROMIUM = Path("/usr/bin/chromium")
# Without the background-networking flags Chromium keeps calling out to hosts this machine cannot reach.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def system_chromium() -> Path:
    """The system browser, or a failure that says how to install it (the test installs nothing)."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing. Install Debian's Chromium: "
            "apt-get update && apt-get install -y chromium (scripts/setup.sh --system does it)"
        )
    return CHROMIUM


class AirflowUI(NamedTuple):
    url: str
    password: str
    var: Path  # SPARK_JOBS_VAR of the standalone Airflow: where its jobs write


@contextlib.contextmanager
def standalone_airflow(tmp_path: Path) -> Iterator[AirflowUI]:
    """`scripts/airflow_standalone.sh` on free loopback ports, state in tmp_path."""
    # Only what the script sets up itself: none of this test session's Airflow settings.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    var = tmp_path / "var"
    env.update(
        SPARK_JOBS_VAR=str(var),
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
        yield AirflowUI(banner["url"], banner["password"], var)
    finally:
        script.send_signal(signal.SIGTERM)  # the script stops standalone, which stops its components
        with contextlib.suppress(subprocess.TimeoutExpired):
            script.wait(timeout=120)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(script.pid, signal.SIGKILL)  # whatever of our group did not stop in time
        script.wait()


@contextlib.contextmanager
def logged_in_page(playwright, ui: AirflowUI, tmp_path: Path, height: int = 900):
    """A page of the system Chromium, logged into `ui` as admin, on the DAG list."""
    browser = playwright.chromium.launch_persistent_context(
        tempfile.mkdtemp(dir=tmp_path, prefix="chromium-profile-"),
        executable_path=str(system_chromium()),
        args=CHROMIUM_FLAGS,
        headless=True,
        viewport={"width": 1400, "height": height},
    )
    try:
        page = browser.new_page()
        page.goto(f"{ui.url}/dags")
        page.fill("input[name=username]", "admin")
        page.fill("input[name=password]", ui.password)
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r".*/dags$"), timeout=60_000)
        yield page
    finally:
        browser.close()
