"""Debian's Chromium for the browser tests, driven by Playwright: never a downloaded browser."""

from __future__ import annotations

from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
# Without the background-networking flags Chromium keeps calling out to hosts this machine cannot reach.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def system_chromium() -> Path:
    """The system browser, or a failure that says how to install it (the test installs nothing)."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing. Install Debian's Chromium: "
            "apt-get update && apt-get install -y chromium (scripts/setup.sh --system does it)"
        )
    return CHROMIUM
