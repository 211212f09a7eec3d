"""What every page our plugins serve shares: Airflow's login and the content policy."""

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
