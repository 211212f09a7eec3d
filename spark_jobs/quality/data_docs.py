"""Make a GX Data Docs site self-contained: no script, style sheet or image loaded from the Internet.

GX 1.x pages load jQuery, Bootstrap, bootstrap-table and Font Awesome from CDNs, and their tables are
filled in by those scripts. Without Internet access (an air-gapped cluster, a locked-down Airflow UI) the
index then shows no result at all. After each build the validation job copies the same files, vendored
in `data_docs_assets/` with their licences, into the site and points every page at them; tags for what
our pages do not use (Vega charts, a dark-mode theme) are dropped.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

ASSETS_DIR = Path(__file__).resolve().parent / "data_docs_assets"
VENDOR_FOLDER = "static/vendor"

# Address prefix in GX's templates -> vendored file (relative to ASSETS_DIR), or None to drop the tag.
LOCAL_COPIES: dict[str, str | None] = {
    "https://code.jquery.com/jquery-3.7.1.min.js": "jquery.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/popper.js/1.12.9/umd/popper.min.js": "popper.min.js",
    "https://stackpath.bootstrapcdn.com/bootstrap/4.3.1/js/bootstrap.min.js": "bootstrap.min.js",
    "https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css": "bootstrap.min.css",
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.js": "bootstrap-table.min.js",
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.css": "bootstrap-table.min.css",
    "https://unpkg.com/bootstrap-table@1.19.1/dist/extensions/filter-control/bootstrap-table-filter-control.min.js": (
        "bootstrap-table-filter-control.min.js"
    ),
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/bootstrap-table-filter-control": (
        "bootstrap-table-filter-control.min.css"
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/js/bootstrap-datepicker.min.js": (
        "bootstrap-datepicker.min.js"
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/css/bootstrap-datepicker.min.css": (
        "bootstrap-datepicker.min.css"
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/font-awesome/6.6.0/css/all.min.css": "fontawesome/css/all.min.css",
    "https://cdn.jsdelivr.net/npm/@forevolve/bootstrap-dark": None,
    "https://cdn.jsdelivr.net/npm/vega": None,
    # The GX logo, fetched with a time stamp: the site ships the same image.
    "https://great-expectations-web-assets.s3.us-east-2.amazonaws.com/logo-long.png": "../images/logo-long.png",
}

_SCRIPT = re.compile(r'<script\s+src="(https?://[^"]+)"[^>]*>\s*</script>')
_LINK = re.compile(r'<link\b[^>]*\bhref="(https?://[^"]+)"[^>]*>')
_IMG_SRC = re.compile(r'(<img\b[^>]*\bsrc=")(https?://[^"]+)(")')


def _local_copy(url: str) -> tuple[bool, str | None]:
    for prefix, local in LOCAL_COPIES.items():
        if url.startswith(prefix):
            return True, local
    return False, None


def _rewrite(html: str, vendor_prefix: str) -> str:
    def tag(match: re.Match, make) -> str:
        known, local = _local_copy(match.group(1))
        if not known:
            return match.group(0)
        return "" if local is None else make(f"{vendor_prefix}/{local}")

    html = _SCRIPT.sub(lambda m: tag(m, lambda src: f'<script src="{src}"></script>'), html)
    html = _LINK.sub(lambda m: tag(m, lambda href: f'<link rel="stylesheet" href="{href}">'), html)

    def image(match: re.Match) -> str:
        known, local = _local_copy(match.group(2))
        if not known or local is None:
            return match.group(0)
        return f"{match.group(1)}{vendor_prefix}/{local}{match.group(3)}"

    return _IMG_SRC.sub(image, html)


def make_self_contained(site_dir: Path | str) -> int:
    """Vendor the assets into `site_dir` and rewrite its pages; returns the number of pages rewritten."""
    site = Path(site_dir)
    if not (site / "index.html").is_file():
        raise FileNotFoundError(f"no Data Docs site at {site}")
    shutil.copytree(ASSETS_DIR, site / VENDOR_FOLDER, dirs_exist_ok=True)
    rewritten = 0
    for page in site.rglob("*.html"):
        relative_root = os.path.relpath(site, page.parent).replace(os.sep, "/")
        text = page.read_text(encoding="utf-8")
        new_text = _rewrite(text, f"{relative_root}/{VENDOR_FOLDER}")
        if new_text != text:
            page.write_text(new_text, encoding="utf-8")
            rewritten += 1
    return rewritten


def external_resources(html: str) -> list[str]:
    """Addresses a page would still load from elsewhere (scripts, style sheets, images)."""
    found = [m.group(1) for m in _SCRIPT.finditer(html)]
    found += [m.group(1) for m in _LINK.finditer(html)]
    found += [m.group(2) for m in _IMG_SRC.finditer(html)]
    return found
