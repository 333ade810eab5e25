"""The MCP server over streamable HTTP as an OAuth 2.1 resource server
(recallatron_mcp/oauth.py), with the dev kit's authorization server
(recallatron_devkit/oauth_server.py) as the issuer: the protected-resource
metadata and the 401 challenge that points to it; the MCP SDK's own OAuth
client going from nothing but the server's URL through discovery, dynamic
registration, the authorization-code grant with PKCE and a tool call, as the
member the token names, with the scope it was granted; the tokens a resource
server must refuse (another audience, none, expired, another issuer or key,
an unknown member, no scope of ours); and the project's own member tokens,
still accepted."""

from __future__ import annotations

import json
import math
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import AnyUrl

from recallatron_devkit.oauth_server import AuthorizationServer, Running
from recallatron_devkit.stack import Stack
from recallatron_mcp.oauth import SCOPES
from tests.conftest import Team, free_port
from tests.surfaces.mcp_server import ACCEPT, INITIALIZE, REPO, http_server

pytestmark = pytest.mark.integration


@dataclass
class Deployment:
    url: str
    port: int
    auth: AuthorizationServer
    team: Team

    @property
    def metadata_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/.well-known/oauth-protected-resource/mcp"


@pytest.fixture
def deployment(stack: Stack, team: Team) -> Iterator[Deployment]:
    """The issuer approving as Bob; the MCP server taking its tokens, making
    gateway tokens with Ada's (the owner's)."""
    auth_port, mcp_port = free_port(), free_port()
    auth = AuthorizationServer(f"http://127.0.0.1:{auth_port}", team.members["bob"])
    running = Running(auth, "127.0.0.1", auth_port)
    url = f"http://127.0.0.1:{mcp_port}/mcp"
    env = {
        "RECALLATRON_MCP_OAUTH_ISSUER": auth.issuer,
        "RECALLATRON_MCP_RESOURCE_URL": url,
        "RECALLATRON_MCP_OAUTH_ADMIN_TOKEN": team.clients["ada"].token,
    }
    try:
        with http_server(stack.gateway, port=mcp_port, more_env=env) as served:
            assert served == url
            yield Deployment(url, mcp_port, auth, team)
    finally:
        running.stop()


def initialize(url: str, token: str | None) -> httpx2.Response:
    headers = {**ACCEPT, **({"Authorization": f"Bearer {token}"} if token else {})}
    return httpx2.post(url, json=INITIALIZE, headers=headers, timeout=30)


def test_metadata_and_the_challenge_that_points_to_it(deployment: Deployment) -> None:
    refused = initialize(deployment.url, None)
    assert refused.status_code == 401
    challenge = refused.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{deployment.metadata_url}"' in challenge
    for where in (
        deployment.metadata_url,
        f"http://127.0.0.1:{deployment.port}/.well-known/oauth-protected-resource",
    ):
        metadata = httpx2.get(where, timeout=10).json()
        assert metadata["resource"].rstrip("/") == deployment.url
        assert [s.rstrip("/") for s in metadata["authorization_servers"]] == [
            deployment.auth.issuer
        ]
        assert metadata["scopes_supported"] == SCOPES
        assert metadata["bearer_methods_supported"] == ["header"]


class Memory:
    """A client's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Browser:
    """The person's browser, headless: follows the authorization URL to the
    (auto-approving) authorization server and reads the code off the redirect."""

    def __init__(self) -> None:
        self.visited: list[str] = []
        self.result: AuthorizationCodeResult | None = None

    async def redirect(self, url: str) -> None:
        self.visited.append(url)
        async with httpx2.AsyncClient(timeout=30) as http:
            answer = await http.get(url)
        assert answer.status_code == 302, answer.text
        query = parse_qs(urlsplit(answer.headers["location"]).query)
        state = query.get("state", [None])[0]
        self.result = AuthorizationCodeResult(code=query["code"][0], state=state)

    async def callback(self) -> AuthorizationCodeResult:
        assert self.result is not None
        return self.result


def oauth_client(url: str, scope: str | None) -> tuple[OAuthClientProvider, Browser, Memory]:
    browser, storage = Browser(), Memory()
    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="hosted-style test client",
            redirect_uris=[AnyUrl("http://127.0.0.1:1/callback")],
            grant_types=["authorization_code"],
            response_types=["code"],
            token_endpoint_auth_method="none",
            scope=scope,
        ),
        storage=storage,
        redirect_handler=browser.redirect,
        callback_handler=browser.callback,
    )
    return provider, browser, storage


def payload(result: Any) -> Any:
    return json.loads(result.content[0].text)


def test_sdk_client_completes_discovery_and_a_tool_call_from_the_url_alone(
    deployment: Deployment,
) -> None:
    word = f"oauth{uuid.uuid4().hex[:8]}"
    provider, browser, storage = oauth_client(deployment.url, None)

    async def run() -> tuple[dict[str, Any], list[str]]:
        async with (
            httpx2.AsyncClient(auth=provider, timeout=30) as http,
            streamable_http_client(deployment.url, http_client=http) as (r, w),
            ClientSession(r, w) as s,
        ):
            await s.initialize()
            made = await s.call_tool(
                "remember",
                {
                    "request_id": str(uuid.uuid4()),
                    "kind": "fact",
                    "title": f"The {word} connector was attached over OAuth",
                    "audience": "workspace",
                },
            )
            assert not made.is_error, payload(made)
            found = await s.call_tool("recall", {"query": word, "mode": "lexical"})
            return made.structured_content or {}, [r["id"] for r in payload(found)["results"]]

    made, found = anyio.run(run)
    # Discovery, registration and the grant happened, bound to this server.
    assert len(browser.visited) == 1
    asked = parse_qs(urlsplit(browser.visited[0]).query)
    assert asked["resource"] == [deployment.url]
    assert asked["code_challenge_method"] == ["S256"]
    assert storage.client is not None and storage.client.client_id in deployment.auth.clients
    assert storage.tokens is not None
    # The tool ran as the member the token names (Bob), not as the admin (Ada).
    memory = made["memory"]
    assert memory["created_by"] == deployment.team.members["bob"]
    assert memory["id"] in found
    ada = deployment.team.clients["ada"]
    assert ada.read([memory["id"]]).memories[0].created_by == deployment.team.members["bob"]
    made_for_bob = [
        t
        for t in ada.list_tokens(deployment.team.members["bob"]).tokens
        if t.label.startswith("mcp-oauth")
    ]
    assert len(made_for_bob) == 1 and not made_for_bob[0].read_only
    assert made_for_bob[0].HasField("expires_at")


def test_a_read_only_grant_for_one_purpose_reads_and_writes_nothing(
    deployment: Deployment,
) -> None:
    # The person approves only reading, for assist, whatever the client asks.
    deployment.auth.consent = ("recallatron:read", "recallatron:purpose:assist")
    provider, _, storage = oauth_client(deployment.url, None)

    async def run() -> tuple[Any, Any, Any]:
        async with (
            httpx2.AsyncClient(auth=provider, timeout=30) as http,
            streamable_http_client(deployment.url, http_client=http) as (r, w),
            ClientSession(r, w) as s,
        ):
            await s.initialize()
            recalled = await s.call_tool("recall", {"query": "anything"})
            audit = await s.call_tool("recall", {"query": "anything", "purpose": "audit"})
            wrote = await s.call_tool(
                "remember", {"request_id": str(uuid.uuid4()), "kind": "note", "title": "no"}
            )
            return recalled, audit, wrote

    recalled, audit, wrote = anyio.run(run)
    assert storage.tokens is not None
    assert storage.tokens.scope == "recallatron:read recallatron:purpose:assist"
    assert not recalled.is_error
    assert audit.is_error and payload(audit).startswith("PERMISSION_DENIED")
    assert wrote.is_error and payload(wrote).startswith("PERMISSION_DENIED")
    # The sign-in's scopes refused them, not the member's role: the advice was
    # to ask a workspace owner, who cannot widen what the person approved.
    for refused, scope in ((audit, "recallatron:purpose:"), (wrote, "recallatron:write")):
        told = payload(refused)
        assert "ask a workspace owner" not in told, told
        assert "reconnect" in told and scope in told, told


def test_tokens_a_resource_server_must_refuse(deployment: Deployment) -> None:
    auth, url = deployment.auth, deployment.url
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    refused = {
        "another audience": auth.issue("http://127.0.0.1:1/mcp"),
        "no audience": auth.issue(None),
        "expired": auth.issue(url, lifetime=-120),
        "another issuer": auth.issue(url, issuer="http://127.0.0.1:2"),
        "another key": auth.issue(url, key=other_key),
        "an unknown member": auth.issue(url, subject=str(uuid.uuid4())),
        "not a token": "rct_not-a-token-of-this-workspace",
        "a broken JWT": auth.issue(url)[:-8],
    }
    for why, token in refused.items():
        answer = initialize(url, token)
        assert answer.status_code == 401, why
        assert (
            f'resource_metadata="{deployment.metadata_url}"' in answer.headers["www-authenticate"]
        ), why
    no_scope = initialize(url, auth.issue(url, "openid profile"))
    assert no_scope.status_code == 403
    assert 'error="insufficient_scope"' in no_scope.headers["www-authenticate"]
    # The one that is right, and the audience with a trailing slash.
    assert initialize(url, auth.issue(url)).status_code == 200
    assert initialize(url, auth.issue(url + "/")).status_code == 200


def test_a_bearer_no_token_could_be_is_refused_with_the_challenge(
    deployment: Deployment,
) -> None:
    """A bearer holding a character no token has (a non-ASCII letter, DEL, a
    lone byte) cannot even be sent to the gateway: it is refused 401 with the
    challenge, as any token the server does not know, never taken as a member
    token the gateway did not refuse."""
    for raw in (b"rct_\xe9t\xe9", b"rct_abc\x7f", b"\xff"):
        answer = httpx2.post(
            deployment.url,
            json=INITIALIZE,
            headers=[
                *((k.encode(), v.encode()) for k, v in ACCEPT.items()),
                (b"Authorization", b"Bearer " + raw),
            ],
            timeout=30,
        )
        assert answer.status_code == 401, (raw, answer.status_code)
        challenge = answer.headers["www-authenticate"]
        assert f'resource_metadata="{deployment.metadata_url}"' in challenge, raw


def test_the_members_own_tokens_are_still_accepted(deployment: Deployment) -> None:
    cy = deployment.team.clients["cy"]
    mine = cy.remember("Cy waters the office plants", audience_to="workspace").memory

    async def run() -> Any:
        headers = {"Authorization": f"Bearer {cy.token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            streamable_http_client(deployment.url, http_client=http) as (r, w),
            ClientSession(r, w) as s,
        ):
            await s.initialize()
            return await s.call_tool("read", {"ids": [mine.id]})

    read = anyio.run(run)
    assert not read.is_error
    assert payload(read)["memories"][0]["created_by"] == deployment.team.members["cy"]


TOOLS = REPO / ".tools" / "node_modules"
INSPECTOR = TOOLS / ".bin" / "mcp-inspector"


def test_the_inspectors_typescript_sdk_completes_the_flow(deployment: Deployment) -> None:
    """The MCP TypeScript SDK the Inspector ships (its OAuth client is what the
    Inspector's own OAuth flow runs), from the URL alone."""
    assert INSPECTOR.exists(), f"{INSPECTOR} is missing: `make test` installs it"
    title = f"The ts{uuid.uuid4().hex[:8]} connector was attached over OAuth"
    done = subprocess.run(
        ["node", str(REPO / "tests" / "surfaces" / "mcp_oauth_client.cjs"), deployment.url, title],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NODE_PATH": str(TOOLS)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["challenged"] is True
    assert len(seen["visited"]) == 1
    asked = parse_qs(urlsplit(seen["visited"][0]).query)
    assert asked["resource"] == [deployment.url]
    assert seen["client_id"] in deployment.auth.clients
    assert set(seen["scope"].split()) == set(SCOPES)
    assert "recall" in seen["tools"]
    assert seen["made"].get("isError") is not True, seen["made"]
    memory = seen["made"]["structuredContent"]["memory"]
    assert memory["title"] == title
    assert memory["created_by"] == deployment.team.members["bob"]


def test_the_inspector_cli_without_credentials_is_challenged(deployment: Deployment) -> None:
    """The Inspector's CLI sends no credentials over HTTP (0.15): it is refused,
    and what it reports is the challenge's error, not a tool list."""
    assert INSPECTOR.exists(), f"{INSPECTOR} is missing: `make test` installs it"
    done = subprocess.run(
        [str(INSPECTOR), "--cli", deployment.url, "--transport", "http", "--method", "tools/list"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode != 0
    assert '"error": "invalid_token"' in done.stdout + done.stderr
    assert '"tools"' not in done.stdout


def call_recall(url: str, bearer: str) -> Any:
    """One recall over a session whose requests carry ``bearer`` as they are."""

    async def run() -> Any:
        headers = {"Authorization": f"Bearer {bearer}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            streamable_http_client(url, http_client=http) as (r, w),
            ClientSession(r, w) as s,
        ):
            await s.initialize()
            return await s.call_tool("recall", {"query": "anything", "mode": "lexical"})

    return anyio.run(run)


def refused_after(url: str, bearer: str, limit: float = 30.0) -> str:
    """The message of the first recall the gateway refuses (it learns of a
    revocation within moments)."""
    deadline = time.monotonic() + limit
    while True:
        answer = call_recall(url, bearer)
        if answer.is_error:
            return str(payload(answer))
        assert time.monotonic() < deadline, "the revoked token was still accepted"
        time.sleep(0.2)


def test_a_revoked_gateway_token_asks_the_caller_to_sign_in_again(
    deployment: Deployment,
) -> None:
    """An owner revoking the `mcp-oauth` token made for a caller: the caller's
    calls failed until the token's renewal (~55 min), each telling the agent
    to set RECALLATRON_TOKEN, which an OAuth caller has no use for, and a new
    sign-in was given the revoked token again. Now the failure says to sign
    in again; the token signed in with before stays refused (the revocation
    holds); a new sign-in gets a new gateway token, unless the member was
    removed."""
    url, auth, ada = deployment.url, deployment.auth, deployment.team.clients["ada"]
    bob = deployment.team.members["bob"]
    before = auth.issue(url)
    issued = math.floor(time.time())
    assert not call_recall(url, before).is_error
    # A refusal is recorded in whole seconds, as `iat` is, and holds for
    # tokens issued before its second: revoke from the next second on.
    while math.floor(time.time()) <= issued:
        time.sleep(0.05)

    def made_for_bob() -> list[Any]:
        listed = ada.list_tokens(bob).tokens
        return [t for t in listed if t.label.startswith("mcp-oauth")]

    (made,) = made_for_bob()
    ada.revoke_token(made.id)
    said = refused_after(url, before)
    assert said.startswith("UNAUTHENTICATED"), said
    assert "RECALLATRON_TOKEN" not in said and "sign in again" in said, said
    # The access token of before the revocation: refused, its challenge sent.
    again = initialize(url, before)
    assert again.status_code == 401
    assert "resource_metadata=" in again.headers["www-authenticate"]
    # Signed in again: a new gateway token, and the tools work.
    assert not call_recall(url, auth.issue(url)).is_error
    live = [t for t in made_for_bob() if not t.HasField("revoked_at")]
    assert len(live) == 1 and live[0].id != made.id
    # A removed member stays refused, signed in again or not.
    signed_in = auth.issue(url)
    ada.remove_member(bob, "erase")
    assert refused_after(url, signed_in).startswith("UNAUTHENTICATED")
    assert initialize(url, auth.issue(url)).status_code == 401
