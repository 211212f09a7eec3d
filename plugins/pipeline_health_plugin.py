"""The "Pipeline health" page in the Airflow UI's navigation (the page itself: pipeline_airflow.health).

Served at `/pipeline-health/` behind Airflow's login, like the Data Docs, with the same content policy:
the page is self-contained (inline SVG and CSS, no script, nothing loaded from elsewhere).
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin
from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from pipeline_airflow.links import RunDataDocsLink
from pipeline_airflow.web import SECURITY_HEADERS, browse_menu_view, page_app

URL_PREFIX = "/pipeline-health"


def create_app(require_login: bool = True) -> FastAPI:
    app = page_app("Pipeline health", require_login)

    @app.get("/", response_class=HTMLResponse)
    def health() -> HTMLResponse:
        from pipeline_airflow.health import health_page, pipeline_job_names

        return HTMLResponse(health_page(pipeline_job_names()), headers=SECURITY_HEADERS)

    return app


class PipelineHealthPlugin(AirflowPlugin):
    name = "pipeline_health"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Pipeline health"}]
    external_views = [browse_menu_view("Pipeline health", URL_PREFIX, "", "pipeline-health")]
    # Listed for `airflow plugins`; the validation task carries the link itself (pipeline_airflow.pipeline).
    operator_extra_links = [RunDataDocsLink()]
