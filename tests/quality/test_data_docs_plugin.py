"""The Airflow plugin that serves the Data Docs: only files inside a report, only to logged-in users."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import data_docs_plugin as plugin
import pytest
from fastapi.testclient import TestClient


@pytest.fixture
def reports(tmp_path):
    """`<tmp>/reports/<job>/data_docs/` for two jobs, and a secret file beside the reports folder."""
    root = tmp_path / "reports"
    for job, verdict in (("older_job", True), ("sensor_alerts", False)):
        site = root / job / "data_docs"
        (site / "static").mkdir(parents=True)
        (site / "index.html").write_text(f"<html>index of {job}</html>")
        (site / "static" / "style.css").write_text("body {}")
        (root / job / "verdicts.json").write_text(
            json.dumps(
                {
                    "run_name": f"run-{job}",
                    "run_time": "2026-01-01T00:00:00+00:00",
                    "success": verdict,
                    "suites": [{"line": f"{'PASSED' if verdict else 'FAILED'} window-finals: <details>"}],
                }
            )
        )
    old = root / "older_job" / "data_docs" / "index.html"
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    (tmp_path / "secret.txt").write_text("top secret")
    return root


@pytest.fixture
def client(reports):
    return TestClient(plugin.create_app(root=reports, require_login=False))


def test_serves_the_files_of_a_report(client):
    assert client.get("/sensor_alerts/index.html").text == "<html>index of sensor_alerts</html>"
    assert client.get("/sensor_alerts/static/style.css").text == "body {}"
    assert client.get("/sensor_alerts/").text == "<html>index of sensor_alerts</html>"


def test_pages_may_load_nothing_from_elsewhere(client):
    policy = client.get("/sensor_alerts/index.html").headers["content-security-policy"]
    assert "default-src 'self'" in policy and "frame-ancestors 'self'" in policy


def test_latest_redirects_to_the_newest_report(client):
    response = client.get("/latest", follow_redirects=False)
    assert response.status_code == 307
    assert response.headers["location"] == "./sensor_alerts/index.html"


def test_the_landing_page_lists_reports_with_their_latest_verdicts_escaped(client):
    page = client.get("/").text
    assert page.index("sensor_alerts/index.html") < page.index("older_job/index.html")  # newest first
    assert "FAILED window-finals: &lt;details&gt;" in page and "<details>" not in page
    assert "run-sensor_alerts" in page


@pytest.mark.parametrize(
    "path",
    [
        "/sensor_alerts/%2e%2e/%2e%2e/secret.txt",
        "/sensor_alerts/static/%2e%2e%2f%2e%2e%2f%2e%2e%2fsecret.txt",
        "/sensor_alerts/..%5c..%5c..%5csecret.txt",
        "/..%2fsecret.txt/x",
        "/%2e%2e/secret.txt",
    ],
)
def test_refuses_paths_that_climb_out(client, path):
    response = client.get(path)
    assert response.status_code == 404
    assert "top secret" not in response.text


@pytest.mark.parametrize("path", ["/sensor_alerts//etc/passwd", "/sensor_alerts/%2Fetc%2Fpasswd"])
def test_refuses_absolute_paths(client, path, tmp_path):
    response = client.get(path)
    assert response.status_code == 404
    assert "root:" not in response.text


def test_refuses_a_symlinked_file_that_leads_out_of_the_report(client, reports, tmp_path):
    (reports / "sensor_alerts" / "data_docs" / "leak.html").symlink_to(tmp_path / "secret.txt")
    assert client.get("/sensor_alerts/leak.html").status_code == 404


def test_refuses_a_symlinked_folder_that_leads_out_of_the_report(client, reports, tmp_path):
    (reports / "sensor_alerts" / "data_docs" / "outside").symlink_to(tmp_path)
    assert client.get("/sensor_alerts/outside/secret.txt").status_code == 404


def test_refuses_a_report_whose_site_is_a_symlink_out_of_the_reports_folder(client, reports, tmp_path):
    elsewhere = tmp_path / "elsewhere" / "data_docs"
    elsewhere.mkdir(parents=True)
    (elsewhere / "index.html").write_text("not a report of ours")
    (reports / "intruder").mkdir()
    (reports / "intruder" / "data_docs").symlink_to(elsewhere)
    assert client.get("/intruder/index.html").status_code == 404
    assert "intruder" not in client.get("/").text


def test_a_symlink_inside_the_report_is_served(client, reports):
    site = reports / "sensor_alerts" / "data_docs"
    (site / "same.html").symlink_to(site / "index.html")
    assert client.get("/sensor_alerts/same.html").text == "<html>index of sensor_alerts</html>"


def test_unknown_jobs_and_files_are_404(client):
    assert client.get("/nobody/index.html").status_code == 404
    assert client.get("/sensor_alerts/missing.html").status_code == 404


def test_without_an_airflow_login_nothing_is_served(reports):
    guarded = TestClient(plugin.create_app(root=reports))
    for path in ("/", "/latest", "/sensor_alerts/index.html"):
        assert guarded.get(path, follow_redirects=False).status_code == 401


def test_the_reports_folder_follows_the_pipeline_layout(monkeypatch, tmp_path):
    monkeypatch.delenv("DATA_DOCS_REPORTS_DIR", raising=False)
    monkeypatch.setenv("SPARK_JOBS_VAR", str(tmp_path / "var"))
    assert plugin.reports_root() == tmp_path / "var" / "reports"
    monkeypatch.setenv("DATA_DOCS_REPORTS_DIR", str(tmp_path / "elsewhere"))
    assert plugin.reports_root() == tmp_path / "elsewhere"


def test_airflow_mounts_the_app_and_links_it_in_the_navigation():
    from airflow import plugins_manager

    plugins_manager.ensure_plugins_loaded()
    apps, _ = plugins_manager.get_fastapi_plugins()
    assert any(app["url_prefix"] == "/data-docs" and app["name"] == "Data Docs" for app in apps)
    views = [v for v in plugin.DataDocsPlugin.external_views if v["name"] == "Data Docs"]
    assert views and views[0]["href"] == "data-docs/latest" and not views[0]["href"].startswith("/")
    errors = {p: e for p, e in plugins_manager.get_import_errors().items() if "data_docs_plugin" in p}
    assert errors == {}


def test_report_file_refuses_a_climb_that_would_reach_a_real_file(reports):
    site = reports / "sensor_alerts" / "data_docs"
    climb = "../../../secret.txt"
    assert (site / climb).resolve().read_text() == "top secret"  # the attack would work without the guard
    with pytest.raises(plugin.NotServable):
        plugin.report_file(reports, "sensor_alerts", climb)
    with pytest.raises(plugin.NotServable):
        plugin.report_file(reports, "sensor_alerts", str((reports.parent / "secret.txt").resolve()))
    with pytest.raises(plugin.NotServable):
        plugin.report_file(reports, "..", "secret.txt")


API_SERVER_CHECK = """
import json, sys
from pathlib import Path
from airflow.api_fastapi.app import create_app
from fastapi.testclient import TestClient

client = TestClient(create_app())
home = Path(sys.argv[1])
password = json.loads(next(home.glob("simple_auth_manager_passwords.json*")).read_text())["admin"]
answers = {"anonymous": client.get("/data-docs/latest", follow_redirects=False).status_code}
token = client.post("/auth/token", json={"username": "admin", "password": password}).json()["access_token"]
auth = {"Authorization": f"Bearer {token}"}
latest = client.get("/data-docs/latest", headers=auth, follow_redirects=False)
answers["latest"] = [latest.status_code, latest.headers.get("location")]
answers["index"] = client.get("/data-docs/sensor_alerts/index.html", headers=auth).text
answers["climb"] = client.get("/data-docs/sensor_alerts/%2e%2e/%2e%2e/secret.txt", headers=auth).status_code
plugins = client.get("/api/v2/plugins", headers=auth).json()["plugins"]
answers["nav"] = [v for p in plugins if p["name"] == "data_docs" for v in p["external_views"]]
print("ANSWERS " + json.dumps(answers))
"""


@pytest.mark.airflow
@pytest.mark.slow
def test_the_airflow_api_server_serves_the_docs_to_logged_in_users_only(reports, tmp_path):
    repo = Path(__file__).resolve().parents[2]
    home = tmp_path / "airflow-home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__PLUGINS_FOLDER=str(repo / "plugins"),
        AIRFLOW__CORE__DAGS_FOLDER=str(repo / "dags"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        DATA_DOCS_REPORTS_DIR=str(reports),
        PYTHONPATH=os.pathsep.join([str(repo), str(repo / "plugins")]),
    )
    migrate = subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"], env=env, capture_output=True, text=True
    )
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    check = subprocess.run(
        [sys.executable, "-c", API_SERVER_CHECK, str(home)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    answer_line = next((line for line in check.stdout.splitlines() if line.startswith("ANSWERS ")), None)
    assert answer_line, check.stdout[-3000:] + check.stderr[-3000:]
    answers = json.loads(answer_line.removeprefix("ANSWERS "))
    assert answers["anonymous"] == 401
    assert answers["latest"] == [307, "./sensor_alerts/index.html"]
    assert answers["index"] == "<html>index of sensor_alerts</html>"
    assert answers["climb"] == 404
    # What the UI reads to draw its navigation: the "Data Docs" link to the latest report.
    [nav] = answers["nav"]
    assert (nav["name"], nav["href"], nav["destination"]) == ("Data Docs", "data-docs/latest", "nav")
