"""What every page our plugins serve shares: Airflow's login, the content policy, the app without API docs,
and a link under Browse in the navigation."""

from __future__ import annotations

# Pages may run inline scripts (GX's do); everything they load must come from this server (the validation
# job vendors GX's libraries), and only Airflow's own pages may frame them.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; frame-ancestors 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-cache",
}


def airflow_login():
    """Airflow's own check of the UI's token (401 without one); imported lazily so the pages' logic can
    be used, and tested, without the API server."""
    from airflow.api_fastapi.core_api.security import requires_authenticated

    return requires_authenticated()


def page_app(title: str, require_login: bool = True):
    """A FastAPI app for Airflow to mount, behind Airflow's login, without generated API docs."""
    from fastapi import Depends, FastAPI

    dependencies = [Depends(airflow_login())] if require_login else []
    return FastAPI(title=title, dependencies=dependencies, docs_url=None, redoc_url=None, openapi_url=None)


def browse_menu_view(name: str, url_prefix: str, page: str, route: str) -> dict:
    """An `external_views` entry: `name` under Browse, opening `url_prefix/page` inside the UI (relative,
    as Airflow may sit behind a prefix)."""
    return {
        "name": name,
        "href": f"{url_prefix.lstrip('/')}/{page}",
        "destination": "nav",
        "category": "browse",
        "url_route": route,
    }
