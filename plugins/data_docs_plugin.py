"""The Data Docs of the pipelines' validations, in the Airflow UI ("Data Docs" in the navigation).

The validation job (`spark_jobs.quality.validate`) builds one site per job at
`<reports>/<job>/data_docs/index.html`, where `<reports>` is `$SPARK_JOBS_VAR/reports` (the DAGs' own
layout, `pipeline_airflow.paths`) unless `DATA_DOCS_REPORTS_DIR` says otherwise. This plugin serves
those sites read-only under `/data-docs/`:

- `/data-docs/latest` redirects to the most recently built report;
- `/data-docs/` lists every report with the verdicts of its latest run (`verdicts.json`);
- `/data-docs/<job>/runs/<run id>` lists one run's suites, verdicts and links to their result pages
  (the run id quoted whole; the validation task links there; only runs the validation recorded, see
  `spark_jobs.quality.history`);
- `/data-docs/<job>/<file>` is a file of that job's site.

Only files inside a site are served: a path with `..`, an absolute path, a symlink leading out of the
site and anything that is not a regular file are refused with 404. Requests need an Airflow login (the
UI's token cookie), as the pages show failing rows of the data.
"""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path, PurePosixPath
from urllib.parse import quote

from airflow.plugins_manager import AirflowPlugin
from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse
from pipeline_airflow.web import SECURITY_HEADERS, browse_menu_view, page_app

URL_PREFIX = "/data-docs"
SITE_FOLDER = "data_docs"
_JOB_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


class NotServable(Exception):
    """The request names nothing this plugin may serve."""


def reports_root() -> Path:
    configured = os.environ.get("DATA_DOCS_REPORTS_DIR")
    if configured:
        return Path(configured)
    from pipeline_airflow.paths import var_dir

    return var_dir() / "reports"


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def site_dir(root: Path, job: str) -> Path:
    """The resolved Data Docs folder of `job`, which must lie inside `root` even through symlinks."""
    if not _JOB_NAME.match(job) or job in {".", ".."}:
        raise NotServable(f"not a job name: {job!r}")
    resolved_root = root.resolve()
    try:
        site = (resolved_root / job / SITE_FOLDER).resolve(strict=True)
    except (FileNotFoundError, NotADirectoryError, RuntimeError) as error:  # RuntimeError: symlink loop
        raise NotServable(f"no report for {job!r}") from error
    if not _inside(site, resolved_root) or not site.is_dir():
        raise NotServable(f"the report of {job!r} is not inside {root}")
    return site


def report_file(root: Path, job: str, relative: str) -> Path:
    """The file `relative` of `job`'s site; `NotServable` for anything else."""
    site = site_dir(root, job)
    if "\x00" in relative or "\\" in relative:
        raise NotServable("bad characters in path")
    parts = PurePosixPath(relative or "index.html")
    if parts.is_absolute() or ".." in parts.parts or re.match(r"^[A-Za-z]:", relative):
        raise NotServable(f"not a path inside the report: {relative!r}")
    try:
        target = (site / parts).resolve(strict=True)  # follows every symlink on the way
    except (FileNotFoundError, NotADirectoryError, RuntimeError) as error:
        raise NotServable(f"no such file: {relative!r}") from error
    if target.is_dir():
        target = target / "index.html"
        if not target.is_file():
            raise NotServable(f"no index in {relative!r}")
    if not _inside(target, site) or not target.is_file():
        raise NotServable(f"{relative!r} leads out of the report")
    return target


def reports(root: Path) -> list[dict]:
    """Every job with a built site, newest first, with its latest verdicts when the job left them."""
    found = []
    if not root.is_dir():
        return found
    for folder in root.iterdir():
        try:
            index = report_file(root, folder.name, "index.html")
        except NotServable:
            continue
        verdicts = None
        verdicts_file = folder / "verdicts.json"
        if verdicts_file.is_file() and not verdicts_file.is_symlink():
            try:
                verdicts = json.loads(verdicts_file.read_text())
            except (OSError, ValueError):
                verdicts = None
        found.append({"job": folder.name, "built": index.stat().st_mtime, "verdicts": verdicts})
    return sorted(found, key=lambda r: r["built"], reverse=True)


def run_record(root: Path, job: str, run_id: str) -> dict:
    """The record `<root>/<job>/runs/` keeps of `run_id`; `NotServable` unless that run was recorded."""
    from spark_jobs.quality.history import read_run

    site = site_dir(root, job)  # the job name's checks, and a report that exists
    if "\x00" in run_id:
        raise NotServable("bad characters in run id")
    record = read_run(site.parent, run_id)
    if record is None:
        raise NotServable(f"no recorded run {run_id!r} of {job!r}")
    return record


def _run_page(job: str, record: dict) -> str:
    status = {True: "passed", False: "FAILED"}.get(record.get("success"), "unknown")
    rows = []
    for suite in record.get("suites", []):
        verdict = "passed" if suite.get("success") else "FAILED"
        page = suite.get("page")
        # The page is at <job>/runs/<run id>; result pages are at <job>/<page>.
        link = f'<a href="../{html.escape(quote(page))}">result page</a>' if page else "no result page"
        rows.append(
            f"<tr><td>{html.escape(str(suite.get('suite')))}</td><td class='{verdict}'>{verdict}</td>"
            f"<td>{link}</td><td>{html.escape(str(suite.get('line', '')))}</td></tr>"
        )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Data Docs of a run</title>"
        "<style>body{font-family:sans-serif;margin:2em}td{padding:.2em .6em;vertical-align:top}"
        "td:last-child{font-family:monospace}.FAILED{color:#b00;font-weight:bold}</style></head>"
        f"<body><h1>{html.escape(job)}: run {html.escape(str(record.get('run_name')))}</h1>"
        f"<p>Validated {html.escape(str(record.get('run_time')))}: <strong>{status}</strong>. "
        f'<a href="../index.html">All Data Docs of {html.escape(job)}</a></p>'
        "<table><tr><th>suite</th><th>verdict</th><th>GX result</th><th>summary</th></tr>"
        f"{''.join(rows)}</table></body></html>"
    )


def _landing_page(found: list[dict]) -> str:
    if not found:
        body = "<p>No Data Docs yet: they appear after a validation task has run.</p>"
    else:
        items = []
        for report in found:
            job = html.escape(report["job"])
            verdicts = report["verdicts"] or {}
            status = {True: "passed", False: "FAILED"}.get(verdicts.get("success"), "no verdicts")
            run = html.escape(f"{verdicts.get('run_name', '')} {verdicts.get('run_time', '')}".strip())
            lines = "".join(f"<li>{html.escape(s.get('line', ''))}</li>" for s in verdicts.get("suites", []))
            items.append(
                f'<section><h2><a href="{job}/index.html">{job}</a></h2>'
                f"<p>Latest run {run}: <strong>{status}</strong></p><ul>{lines}</ul></section>"
            )
        body = "".join(items)
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Data Docs</title>"
        "<style>body{font-family:sans-serif;margin:2em}li{font-family:monospace}</style></head>"
        f"<body><h1>Data Docs</h1>{body}</body></html>"
    )


def create_app(root: Path | None = None, require_login: bool = True) -> FastAPI:
    """The FastAPI app Airflow mounts at `/data-docs`; `root` defaults to `reports_root()` per request."""
    app = page_app("Data Docs", require_login)

    def current_root() -> Path:
        return root if root is not None else reports_root()

    @app.get("/", response_class=HTMLResponse)
    def landing() -> HTMLResponse:
        return HTMLResponse(_landing_page(reports(current_root())), headers=SECURITY_HEADERS)

    @app.get("/latest")
    def latest() -> RedirectResponse:
        found = reports(current_root())
        if not found:
            return RedirectResponse("./", status_code=307)
        # Relative, so it works behind any prefix or proxy.
        return RedirectResponse(f"./{found[0]['job']}/index.html", status_code=307)

    @app.get("/{job}")
    def report_index(job: str) -> RedirectResponse:
        return RedirectResponse(f"./{job}/index.html" if _JOB_NAME.match(job) else "./", status_code=307)

    @app.get("/{job}/runs/{run_id}", response_class=HTMLResponse)
    def run_page(job: str, run_id: str) -> HTMLResponse:
        try:
            record = run_record(current_root(), job, run_id)
        except NotServable as error:
            raise HTTPException(status_code=404, detail="not found") from error
        return HTMLResponse(_run_page(job, record), headers=SECURITY_HEADERS)

    @app.get("/{job}/{path:path}")
    def report(job: str, path: str) -> FileResponse:
        try:
            target = report_file(current_root(), job, path)
        except NotServable as error:
            raise HTTPException(status_code=404, detail="not found") from error
        return FileResponse(target, headers=SECURITY_HEADERS)

    return app


class DataDocsPlugin(AirflowPlugin):
    name = "data_docs"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Data Docs"}]
    external_views = [browse_menu_view("Data Docs", URL_PREFIX, "latest", "data-docs")]
