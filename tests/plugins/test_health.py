"""The pipeline health page's data and charts, without a server; and its plugin behind the login."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from fastapi.testclient import TestClient
from pipeline_airflow import health
from pipeline_airflow.paths import JobPaths

from spark_jobs.quality.history import append_history
from spark_jobs.spark.summary import RunSummary


def write_run(
    output, run_id: str, processed: int, late: int, quarantined: int, durations_ms: list[int], state=None
):
    """A run summary written by the job's own code (RunSummary.write); `state`: each of its two tasks'
    (entries, windows, bytes) at the end of the run."""
    summary = RunSummary(job="sensor_alerts", trigger="available-now", partitions=2, run_id=run_id)
    summary.processed, summary.late, summary.quarantined = processed, late, quarantined
    if state is not None:
        entries, windows, size = state
        sizes = {"state_entries": entries, "state_windows": windows, "state_bytes": size}
        summary.task_metrics = {0: dict(sizes), 1: dict(sizes)}
    for batch, ms in enumerate(durations_ms):
        summary.add_progress({"batch": batch, "records": processed // len(durations_ms), "duration_ms": ms})
    return summary.write(output)


def validation(run_name: str, run_time: str, failed: tuple[str, ...] = ()) -> dict:
    suites = [{"suite": s, "success": s not in failed} for s in ("window-finals", "alerts")]
    return {"run_name": run_name, "run_time": run_time, "success": not failed, "suites": suites}


@pytest.fixture
def paths(tmp_path):
    paths = JobPaths(tmp_path / "in", tmp_path / "out", tmp_path / "ckpt", tmp_path / "reports")
    paths.reports.mkdir()
    write_run(paths.output, "20261122T100200Z-11", 10_000, 40, 3, [1000, 1000], (100, 2, 50_000))
    write_run(paths.output, "20261122T101200Z-12", 30_000, 0, 7, [2000, 1000], (300, 3, 1_500_000))
    (paths.output / "_runs" / "20261122T102200Z-13.json").write_text('{"records": ')  # being written
    append_history(paths.reports, validation("scheduled__1", "2026-11-22T10:04:00+00:00"))
    append_history(paths.reports, validation("scheduled__2", "2026-11-22T10:14:00+00:00", ("alerts",)))
    return paths


def test_runs_are_read_oldest_first_with_their_rate_and_batch_durations(paths):
    runs = health.read_runs(paths.output)
    assert [r.run_id for r in runs] == ["20261122T100200Z-11", "20261122T101200Z-12"]  # latest.json skipped
    assert runs[0].time == dt.datetime(2026, 11, 22, 10, 2, tzinfo=dt.UTC)
    assert (runs[0].read, runs[0].late, runs[0].quarantined) == (10_003, 40, 3)
    assert runs[0].events_per_s == pytest.approx(5000.0)  # 10,000 records over 2 s of batches
    assert runs[1].events_per_s == pytest.approx(10_000.0)
    assert runs[1].batch_durations_s == [2.0, 1.0]


def test_runs_carry_their_tasks_state_at_the_end_and_the_charts_show_it(paths):
    runs = health.read_runs(paths.output)
    assert runs[0].state == {"entries": 200, "windows": 4, "bytes": 100_000}  # two tasks' sum
    assert runs[1].state == {"entries": 600, "windows": 6, "bytes": 3_000_000}
    entries, windows, size = health.state_charts(runs)
    assert "State entries at run end (entries)" in entries and entries.count("<circle") == 2
    assert "600 entries" in entries and "6 windows" in windows
    assert "State size at run end (MB)" in size and "3 MB" in size


def test_a_summary_without_state_charts_nothing_for_it(tmp_path):
    write_run(tmp_path, "20261122T100200Z-1", 10, 0, 0, [1000])  # no task ran (or an older summary)
    write_run(tmp_path, "20261122T101200Z-2", 10, 0, 0, [1000], (5, 1, 800))
    runs = health.read_runs(tmp_path)
    assert runs[0].state is None and runs[1].state == {"entries": 10, "windows": 2, "bytes": 1600}
    assert all(chart.count("<circle") == 1 for chart in health.state_charts(runs))


def test_a_run_without_batches_has_no_rate_and_a_missing_folder_no_runs(tmp_path):
    write_run(tmp_path, "20261122T100200Z-1", 0, 0, 0, [])
    assert health.read_runs(tmp_path)[0].events_per_s is None
    assert health.read_runs(tmp_path / "nowhere") == []


@pytest.mark.parametrize(
    ("highest", "ticks"),
    [
        (0, [0, 1]),
        (2.3, [0, 1, 2, 3]),
        (5, [0, 2, 4, 6]),
        (50, [0, 20, 40, 60]),
        (8300, [0, 2500, 5000, 7500, 10_000]),
        (0.3, [0, 0.1, 0.2, 0.3]),
    ],
)
def test_axis_ticks_are_round_steps_up_to_the_highest_value(highest, ticks):
    assert health.axis_ticks(highest) == pytest.approx(ticks)


def test_a_line_chart_has_a_titled_unit_dated_axis_and_a_point_per_value():
    start = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC)
    points = [(start + dt.timedelta(minutes=10 * i), v) for i, v in enumerate([5, 12, 3])]
    svg = health.line_chart("Throughput", "events/s", points)
    assert svg.startswith("<svg") and svg.count("<circle") == 3 and "<polyline" in svg
    assert "Throughput (events/s)" in svg
    assert re.findall(r'class="ytick">([^<]+)<', svg) == ["0", "5", "10", "15"]
    assert re.findall(r'class="xtick">([^<]+)<', svg) == ["10:00", "10:10", "10:20"]
    assert "run start (UTC, 2026-11-22)" in svg
    # The highest value sits highest (smallest y) and the earliest run leftmost.
    dots = [tuple(map(float, d)) for d in re.findall(r'cx="([\d.]+)" cy="([\d.]+)"', svg)]
    assert dots[1][1] < dots[0][1] < dots[2][1] and dots[0][0] < dots[1][0] < dots[2][0]


def test_an_empty_chart_says_so():
    assert "no data yet" in health.line_chart("Throughput", "events/s", [])
    assert "no validation yet" in health.verdict_chart([])


def test_the_verdict_chart_has_a_row_per_suite_and_a_cell_per_validation(paths):
    from spark_jobs.quality.history import read_history

    svg = health.verdict_chart(read_history(paths.reports))
    assert re.findall(r'class="ytick">([^<]+)<', svg) == ["alerts", "window-finals"]
    assert svg.count('class="pass"') == 3 and svg.count('class="fail"') == 1
    assert "scheduled__2 (2026-11-22T10:14:00+00:00): alerts FAILED" in svg


def test_a_job_section_shows_the_latest_figures_and_eight_charts(paths):
    section = health.job_section("sensor_alerts", paths)
    assert section.count("<svg") == 8
    assert "30,007 records read, 0 late, 7 quarantined, 10,000 events/s" in section
    assert "Latest validation scheduled__2: FAILED: alerts" in section


def test_a_job_that_never_ran_says_what_to_do(tmp_path):
    paths = JobPaths(tmp_path / "in", tmp_path / "out", tmp_path / "ckpt", tmp_path / "reports")
    section = health.job_section("sensor_alerts", paths)
    assert "No runs yet" in section and "sensor_alerts_pipeline" in section and "<svg" not in section


def test_names_in_the_page_are_escaped(paths):
    append_history(paths.reports, validation("<script>x</script>", "2026-11-22T10:24:00+00:00"))
    page = health.health_page(["sensor_alerts"], lambda job: paths)
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_the_page_lists_every_pipeline_job(monkeypatch, tmp_path):
    monkeypatch.setenv("SPARK_JOBS_VAR", str(tmp_path))
    page = health.health_page(health.pipeline_job_names())
    assert 'id="sensor_alerts"' in page and 'id="sensor_enrichment"' in page


def test_the_plugin_serves_the_page_to_logged_in_users_only(monkeypatch, tmp_path):
    import pipeline_health_plugin as plugin

    monkeypatch.setenv("SPARK_JOBS_VAR", str(tmp_path))
    response = TestClient(plugin.create_app(require_login=False)).get("/")
    assert response.status_code == 200 and "Pipeline health" in response.text
    assert "default-src 'self'" in response.headers["content-security-policy"]
    assert TestClient(plugin.create_app()).get("/").status_code == 401
    view = plugin.PipelineHealthPlugin.external_views[0]
    assert view["destination"] == "nav" and view["href"] == "pipeline-health/"


def test_the_plugin_file_loads_in_airflow_without_errors():
    from airflow import plugins_manager

    plugins_manager.ensure_plugins_loaded()
    names = {info["name"] for info in plugins_manager.get_plugin_info()}
    errors = [path for path in plugins_manager.get_import_errors() if "pipeline_health" in path]
    assert {"pipeline_health", "data_docs"} <= names and errors == []
    apps = {app["name"]: app["url_prefix"] for app in plugins_manager.get_fastapi_plugins()[0]}
    assert apps["Pipeline health"] == "/pipeline-health" and apps["Data Docs"] == "/data-docs"
