"""The real-browser tests: marked ``browser``, skipped with their reason when Chromium, Playwright or
JupyterLab is missing (``scripts/browser-test-env`` installs them)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "browser: drives the app in a real JupyterLab terminal in Debian's Chromium (Playwright)"
    )
