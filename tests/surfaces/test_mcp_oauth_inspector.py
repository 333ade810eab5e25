"""The MCP Inspector's own page (its web client and proxy, started from
.tools/ as `make test` installs it) attaching the OAuth-protected MCP server
from its URL alone, in headless Chromium: Connect, the 401, the Inspector's
OAuth flow against the dev kit's authorization server (discovery,
registration, the authorization-code grant with PKCE, back to the page), then
the tools listed and one called. Screenshots under test-artifacts/."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from urllib.parse import urlencode

import httpx2
import pytest

from tests.conftest import free_port
from tests.surfaces.browser import ARTIFACTS, browser_page
from tests.surfaces.mcp_server import REPO
from tests.surfaces.test_mcp_oauth import INSPECTOR, Deployment
from tests.surfaces.test_mcp_oauth import deployment as deployment  # the fixture

pytestmark = pytest.mark.integration


@pytest.fixture
def inspector() -> Iterator[str]:
    """The Inspector's page and proxy on free ports; yields the page's URL."""
    assert INSPECTOR.exists(), f"{INSPECTOR} is missing: `make test` installs it"
    client, proxy = free_port(), free_port()
    env = {
        **os.environ,
        "CLIENT_PORT": str(client),
        "SERVER_PORT": str(proxy),
        "MCP_AUTO_OPEN_ENABLED": "false",
        "DANGEROUSLY_OMIT_AUTH": "true",
    }
    proc = subprocess.Popen(
        [str(INSPECTOR)],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        for port in (client, proxy):
            while True:
                try:
                    httpx2.get(f"http://127.0.0.1:{port}/", timeout=2)
                    break
                except httpx2.TransportError:
                    assert time.monotonic() < deadline, "the Inspector did not start"
                    time.sleep(0.3)
        yield f"http://127.0.0.1:{client}/?" + urlencode(
            {"MCP_PROXY_FULL_ADDRESS": f"http://127.0.0.1:{proxy}"}
        )
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(10)


def test_the_inspector_page_attaches_the_server_with_oauth(
    deployment: Deployment, inspector: str
) -> None:
    page_url = f"{inspector}&" + urlencode(
        {"transport": "streamable-http", "serverUrl": deployment.url}
    )
    with browser_page() as (_, page):
        shot = 0
        logs: list[str] = []
        page.on("console", lambda m: logs.append(m.text))
        try:
            page.goto(page_url)
            page.get_by_role("button", name="Connect", exact=True).click()
            # The Inspector's OAuth flow: away to the authorization server and back.
            page.get_by_text("Connected", exact=True).wait_for(timeout=90_000)
            shot = 1
            page.screenshot(path=str(ARTIFACTS / "mcp-oauth-inspector-connected.png"))
            page.get_by_role("tab", name="Tools").click()
            page.get_by_role("button", name="List Tools").click()
            page.get_by_text("lookup", exact=True).first.click()
            page.locator("textarea").first.fill("nobody by this name")
            page.get_by_role("button", name="Run Tool").click()
            page.get_by_text("Tool Result: Success").wait_for(timeout=60_000)
            shot = 2
            page.screenshot(path=str(ARTIFACTS / "mcp-oauth-inspector-tool.png"))
        finally:
            if shot < 2:
                page.screenshot(path=str(ARTIFACTS / f"mcp-oauth-inspector-failed-{shot}.png"))
                (ARTIFACTS / "mcp-oauth-inspector-console.txt").write_text("\n".join(logs))
    # The Inspector registered itself and was sent back to its own page.
    (client,) = deployment.auth.clients.values()
    assert client["redirect_uris"] == [inspector.split("?")[0] + "oauth/callback"]
    # And its calls went as the token's member, by a gateway token made for it.
    ada = deployment.team.clients["ada"]
    made = ada.list_tokens(deployment.team.members["bob"]).tokens
    assert [t.label.split()[:2] for t in made if t.label.startswith("mcp-oauth")] == [
        ["mcp-oauth", client["client_id"]]
    ]
