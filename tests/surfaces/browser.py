"""The review page from a test: headless Chromium (Debian's chromium driven by
Playwright's Python package, no browser download), where screenshots go, and
plain form posts for the checks that need no browser."""

from __future__ import annotations

import http.client
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from playwright.sync_api import BrowserContext, Page, sync_playwright

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# As root in a container, without a network: no sandbox, no background traffic.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


@contextmanager
def browser_page() -> Iterator[tuple[BrowserContext, Page]]:
    """A fresh browser context and page, 1360 x 1000; the browser closes after."""
    assert Path(CHROMIUM).exists(), "needs Debian's chromium: apt-get install -y chromium"
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1360, "height": 1000})
            yield context, context.new_page()
        finally:
            browser.close()


def sign_in(page: Page, url: str, token: str) -> None:
    page.goto(url)
    page.fill("[data-testid=token]", token)
    page.click("[data-testid=signin]")


def post_form(
    url: str, path: str, form: dict[str, str], headers: dict[str, str]
) -> http.client.HTTPResponse:
    """One form post to the page at ``url``, with these headers only."""
    conn = http.client.HTTPConnection(urlsplit(url).netloc, timeout=10)
    conn.request(
        "POST",
        path,
        urlencode(form),
        {"Content-Type": "application/x-www-form-urlencoded", **headers},
    )
    return conn.getresponse()
