"""A person opens the Data Docs in a browser: every suite is there with its latest result.

Headless Chromium from Debian (never a downloaded browser), on a loopback HTTP server, with no access to
anything else: the pages must render from the files the validation job put in the site.
"""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator

import pytest

from tests.browser import CHROMIUM_FLAGS, system_chromium
from tests.quality.support import SENSOR_ALERTS_SUITES

pytestmark = [pytest.mark.spark, pytest.mark.slow]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass


@pytest.fixture
def docs_server(validated_correct_output) -> Iterator[str]:
    site = validated_correct_output.reports / "data_docs"
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def page(tmp_path):
    chromium = system_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # A persistent context is the way to give Chromium a new, empty user data dir.
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=str(chromium),
            args=CHROMIUM_FLAGS,
            headless=True,
            viewport={"width": 1400, "height": 1000},
        )
        try:
            yield context.new_page()
        finally:
            context.close()


def test_the_index_shows_every_suite_with_its_latest_result(docs_server, page, validated_correct_output):
    outside = []
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(docs_server) else None)

    page.goto(f"{docs_server}/index.html")
    table = page.locator("#section-1-content-block-2-1-body-table")
    # bootstrap-table fills the table from the page's data: one row per stored validation result.
    rows = table.locator("tbody tr")
    rows.first.wait_for(timeout=15_000)

    suites = {check.suite for check in SENSOR_ALERTS_SUITES}
    seen = {}
    for i in range(rows.count()):
        text = rows.nth(i).inner_text()
        suite = next((s for s in suites if text.rstrip().endswith(s)), None)
        if suite:
            seen[suite] = rows.nth(i)
    assert set(seen) == suites
    for row in seen.values():
        assert "correct-output" in row.inner_text()  # the run's name
        # The status icon of a passed validation (Font Awesome, served from the site itself).
        assert row.locator("i.fa-check-circle").count() == 1
        assert (
            row.locator("i.fa-check-circle").evaluate("e => getComputedStyle(e, '::before').content")
            != "none"
        )

    screenshot = validated_correct_output.reports / "data_docs_index.png"
    page.screenshot(path=str(screenshot), full_page=True)
    assert screenshot.stat().st_size > 10_000
    assert outside == []


def test_a_suite_page_shows_each_rule_in_words(docs_server, page):
    page.goto(f"{docs_server}/index.html")
    page.get_by_role("tab", name="Expectation Suites").click()
    page.locator("a[href='expectations/window-finals.html']").first.wait_for(state="attached", timeout=15_000)
    page.goto(f"{docs_server}/expectations/window-finals.html")
    body = page.inner_text("body")
    assert "Each (key) and window (window_start) is emitted at most once." in body
    assert "Timestamps (timestamp) never go backwards per (key), in (partition, seq) order" in body
