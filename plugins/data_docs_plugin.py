"""The Data Docs of the pipelines' validations, in the Airflow UI ("Data Docs" in the navigation).

The validation job (`spark_jobs.quality.validate`) builds one site per job at
`<reports>/<job>/data_docs/index.html`, where `<reports>` is `$SPARK_JOBS_VAR/reports` (the DAGs' own
layout, `pipeline_airflow.paths`) unless `DATA_DOCS_REPORTS_DIR` says otherwise. This plugin serves
those sites read-only under `/data-docs/`:

- `/data-docs/latest` redirects to the most recently built report;
- `/data-docs/` lists every report with the verdicts of its latest run (`verdicts.json`);
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

from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse

URL_PREFIX = "/data-docs"
SITE_FOLDER = "data_docs"
_JOB_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")

# The GX pages run inline scripts; everything they load must come from this server (the validation job
# vendors their libraries), and only Airflow's own pages may frame them.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; frame-ancestors 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-cache",
}


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


def _require_login():
    """Airflow's own check of the UI's token (401 without one); imported lazily so the path logic can be
    used, and tested, without the API server."""
    from airflow.api_fastapi.core_api.security import requires_authenticated

    return requires_authenticated()


def create_app(root: Path | None = None, require_login: bool = True) -> FastAPI:
    """The FastAPI app Airflow mounts at `/data-docs`; `root` defaults to `reports_root()` per request."""
    dependencies = [Depends(_require_login())] if require_login else []
    app = FastAPI(
        title="Data Docs", dependencies=dependencies, docs_url=None, redoc_url=None, openapi_url=None
    )

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
    # A link in the navigation, opened inside the UI; relative, as Airflow may sit behind a prefix.
    external_views = [
        {
            "name": "Data Docs",
            "href": URL_PREFIX.lstrip("/") + "/latest",
            "destination": "nav",
            "category": "browse",
            "url_route": "data-docs",
        }
    ]
