"""The validation task's link to the Data Docs of its own DAG run ("Data Docs of this run").

Airflow 3 computes an operator's extra links on the worker when the task ends and keeps each in an XCom
(`_link_RunDataDocsLink`), which the UI reads; so the link exists for a failed validation too, the run
whose docs matter most. The page it opens, `/data-docs/<job>/runs/<run id>`, is the Data Docs plugin's.
"""

from __future__ import annotations

from urllib.parse import quote

import attrs
from airflow.sdk import BaseOperatorLink

DATA_DOCS_PREFIX = "/data-docs"


def run_docs_path(job: str, run_id: str) -> str:
    """`/data-docs/<job>/runs/<run id>`, the run id quoted whole (`:`, `+`, `/` and all)."""
    return f"{DATA_DOCS_PREFIX}/{quote(job, safe='')}/runs/{quote(run_id, safe='')}"


def run_docs_url(job: str, run_id: str, base_url: str = "") -> str:
    """The page's URL under the API server's `base_url` (absolute, since the UI shows the link on a page
    of its own); a path from the server's root without one."""
    return base_url.rstrip("/") + run_docs_path(job, run_id)


@attrs.define()
class RunDataDocsLink(BaseOperatorLink):
    """Set on the validation task of `job`'s pipeline DAG (pipeline_airflow.pipeline)."""

    name = "Data Docs of this run"
    job: str = ""

    def get_link(self, operator, *, ti_key) -> str:
        from airflow.configuration import conf

        return run_docs_url(self.job, ti_key.run_id, conf.get("api", "base_url", fallback="") or "")
