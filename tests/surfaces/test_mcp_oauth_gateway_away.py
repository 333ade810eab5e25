"""The OAuth resource server (recallatron_mcp/oauth.py) while the gateway it
makes its callers' gateway tokens with is away: a valid token that cannot be
served for now is answered 503 with Retry-After, never 401 (which sends an MCP
client back through its whole sign-in); only a token that is not valid, or
whose member the gateway refuses, is 401. No stack: the dev kit's issuer in
this process, the gateway an address nothing listens on, or a fake."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator

import grpc
import pytest
from starlette.authentication import AuthenticationError
from starlette.testclient import TestClient

from recallatron_devkit.oauth_server import AuthorizationServer, Running
from recallatron_devkit.stack import free_port
from recallatron_mcp.gateway_tokens import Grant
from recallatron_mcp.oauth import CannotCheckNow, OAuthSettings, Verifier
from recallatron_mcp.server import Clients, build_server, http_app
from tests.surfaces.mcp_server import ACCEPT, INITIALIZE

# A generous limit for a condition that holds at once when all is well.
WAIT = 30.0
# Generous beside the bound on one fetch of the issuer's keys (5 s).
KEYS_WAIT = 20.0


@pytest.fixture(scope="module")
def issuer() -> Iterator[AuthorizationServer]:
    port = free_port()
    auth = AuthorizationServer(f"http://127.0.0.1:{port}", "3f0c6f9e-0000-4000-8000-000000000001")
    running = Running(auth, "127.0.0.1", port)
    yield auth
    running.stop()


def test_a_valid_token_while_the_gateway_is_away_is_503_with_retry_after(
    issuer: AuthorizationServer,
) -> None:
    resource = "http://127.0.0.1:7421/mcp"
    # Nothing listens there: every gateway call is UNAVAILABLE.
    clients = Clients(f"127.0.0.1:{free_port()}", "")
    settings = OAuthSettings(issuer=issuer.issuer, resource=resource, admin_token="rct_owner")
    app = http_app(build_server(clients), "127.0.0.1", clients, settings)
    try:
        with TestClient(app, base_url="http://127.0.0.1:7421") as http:
            valid = {**ACCEPT, "Authorization": f"Bearer {issuer.issue(resource)}"}
            away = http.post("/mcp", json=INITIALIZE, headers=valid)
            assert away.status_code == 503, away.text
            assert int(away.headers["retry-after"]) >= 1
            assert "www-authenticate" not in away.headers
            assert away.json()["error"] == "temporarily_unavailable"
            # A token that is not valid is still 401, with its challenge.
            broken = {**ACCEPT, "Authorization": f"Bearer {issuer.issue(resource)[:-8]}"}
            refused = http.post("/mcp", json=INITIALIZE, headers=broken)
            assert refused.status_code == 401
            assert "resource_metadata=" in refused.headers["www-authenticate"]
    finally:
        clients.close()


class Refusing(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return f"{self._code.name.lower()} for the test"

    def trailing_metadata(self) -> tuple[()]:
        return ()


class Minting:
    """Stands in for MemberTokens: every token it is asked for fails with ``code``."""

    def __init__(self, code: grpc.StatusCode) -> None:
        self.code = code

    def token_for(self, grant: Grant, label: str, issued_at: float | None = None) -> str:
        raise Refusing(self.code)


def verifier_for(settings: OAuthSettings, code: grpc.StatusCode) -> Verifier:
    """A verifier whose gateway tokens fail with ``code``; no member token of ours is checked."""
    return Verifier(settings, client_of=lambda token: None, minted=Minting(code))  # type: ignore[arg-type,return-value]


AWAY = [
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.INTERNAL,
]
NOT_SERVED = [
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.FAILED_PRECONDITION,
]


@pytest.mark.parametrize("code", AWAY + NOT_SERVED, ids=lambda c: c.name)
def test_only_a_member_the_gateway_refuses_makes_a_valid_token_401(
    issuer: AuthorizationServer, code: grpc.StatusCode
) -> None:
    resource = "https://memory.example.com/mcp"
    settings = OAuthSettings(issuer=issuer.issuer, resource=resource)
    verifier = verifier_for(settings, code)
    token = issuer.issue(resource)
    if code in NOT_SERVED:
        assert verifier._check_jwt(token) is None
        return
    with pytest.raises(AuthenticationError) as away:
        verifier._check_jwt(token)
    assert getattr(away.value, "retry_after", 0) > 0


def test_a_valid_looking_token_while_the_issuers_keys_cannot_be_had_is_503(
    issuer: AuthorizationServer,
) -> None:
    """The issuer's metadata or keys out of reach says nothing of the token:
    503, asked again once the issuer may be looked up again, not 401."""
    resource = "https://memory.example.com/mcp"
    gone = f"http://127.0.0.1:{free_port()}"
    for settings in (
        # No metadata to find the keys from.
        OAuthSettings(issuer=gone, resource=resource),
        # The keys' own URL not answering.
        OAuthSettings(issuer=issuer.issuer, resource=resource, jwks_url=f"{gone}/jwks"),
    ):
        verifier = verifier_for(settings, grpc.StatusCode.OK)
        for _ in range(2):  # the lookup, then its failure remembered
            with pytest.raises(AuthenticationError) as away:
                verifier._check_jwt(issuer.issue(resource))
            assert getattr(away.value, "retry_after", 0) > 0, settings


class _Silent:
    """A server that accepts connections and never answers (a hung host, a
    proxy with no backend): it counts them and holds them open until closed."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            self.held.append(connection)

    def close(self) -> None:
        # Shut down first: a close alone leaves accept() waiting.
        self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for connection in self.held:
            connection.close()
        self._thread.join(WAIT)


def test_a_keys_url_that_never_answers_costs_one_short_wait_per_period(
    issuer: AuthorizationServer,
) -> None:
    """The keys fetch waited the JWT library's 30 s default and nothing
    remembered its failure: each request with a JWT (the fetches one after
    another, under the library's lock) held a worker thread for 30 s."""
    resource = "https://memory.example.com/mcp"
    silent = _Silent()
    try:
        settings = OAuthSettings(
            issuer=issuer.issuer, resource=resource, jwks_url=f"http://127.0.0.1:{silent.port}/jwks"
        )
        verifier = verifier_for(settings, grpc.StatusCode.OK)
        token = issuer.issue(resource)
        refused: list[float] = []

        def check() -> None:
            with pytest.raises(CannotCheckNow) as away:
                verifier._check_jwt(token)
            refused.append(away.value.retry_after)

        burst = [threading.Thread(target=check) for _ in range(3)]
        for thread in burst:
            thread.start()
        deadline = time.monotonic() + KEYS_WAIT
        for thread in burst:
            thread.join(max(0.0, deadline - time.monotonic()))
        assert not any(t.is_alive() for t in burst), f"still waiting after {KEYS_WAIT} s"
        assert len(refused) == 3 and all(r > 0 for r in refused)
        # Remembered: the burst and the next JWT asked the keys URL once.
        check()
        assert len(silent.held) == 1
    finally:
        silent.close()


@pytest.mark.parametrize(
    "page",
    [b"<html>502 Bad Gateway</html>", b"[]", b'{"keys": [{"kty": "nope", "kid": "k"}]}'],
    ids=["html", "not-an-object", "no-usable-key"],
)
def test_a_keys_url_answering_no_key_set_is_503_and_remembered(
    issuer: AuthorizationServer, page: bytes
) -> None:
    """A keys URL answering something that is no key set (a proxy's error
    page with 200): the JSON error escaped the check (a 500), or the token
    was refused 401 as if it were bad, and each JWT asked again."""
    asked: list[str] = []

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_response(200)
            self.send_header("content-length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        resource = "https://memory.example.com/mcp"
        settings = OAuthSettings(
            issuer=issuer.issuer,
            resource=resource,
            jwks_url=f"http://127.0.0.1:{server.server_port}/jwks",
        )
        verifier = verifier_for(settings, grpc.StatusCode.OK)
        for _ in range(2):
            with pytest.raises(CannotCheckNow) as away:
                verifier._check_jwt(issuer.issue(resource))
            assert away.value.retry_after > 0
        assert asked == ["/jwks"]
    finally:
        server.shutdown()
        server.server_close()


class _Checking:
    """Stands in for a gateway client: GetSettings fails with each code of ``codes`` in turn."""

    def __init__(self, codes: list[grpc.StatusCode]) -> None:
        self.codes = codes
        self.admin = self

    def GetSettings(self) -> None:
        raise AssertionError("called through call()")

    def call(self, method: object, request: object) -> None:
        raise Refusing(self.codes.pop(0))


def _checking(settings: OAuthSettings, codes: list[grpc.StatusCode]) -> Verifier:
    """A verifier whose checks of member tokens fail with ``codes`` in turn."""
    gateway = _Checking(codes)
    return Verifier(settings, client_of=lambda token: gateway, minted=Minting(codes[0]))  # type: ignore[arg-type,return-value]


def test_a_member_token_the_gateway_cannot_check_is_503_and_not_kept(
    issuer: AuthorizationServer,
) -> None:
    """A token of ours that is not a JWT was admitted whenever the gateway
    answered anything but UNAUTHENTICATED (away, failing, or refusing the
    address's unknown tokens, RESOURCE_EXHAUSTED), and kept as valid for 60 s:
    a made-up token opened a session as if the gateway knew it."""
    resource = "http://127.0.0.1:7421/mcp"
    # Nothing listens there: the check of a member token is UNAVAILABLE.
    clients = Clients(f"127.0.0.1:{free_port()}", "")
    settings = OAuthSettings(issuer=issuer.issuer, resource=resource, admin_token="rct_owner")
    app = http_app(build_server(clients), "127.0.0.1", clients, settings)
    try:
        with TestClient(app, base_url="http://127.0.0.1:7421") as http:
            made_up = {**ACCEPT, "Authorization": "Bearer rct_made_up_by_a_stranger"}
            away = http.post("/mcp", json=INITIALIZE, headers=made_up)
            assert away.status_code == 503, away.text
            assert int(away.headers["retry-after"]) >= 1
            assert away.json()["error"] == "temporarily_unavailable"
    finally:
        clients.close()
    settings = OAuthSettings(issuer=issuer.issuer, resource=resource)
    for code in AWAY:
        # Not kept: the next check asks again, and the gateway's refusal holds.
        verifier = _checking(settings, [code, grpc.StatusCode.UNAUTHENTICATED])
        with pytest.raises(CannotCheckNow):
            verifier._check_own("rct_made_up")
        assert verifier._check_own("rct_made_up") is None, code
    # A refusal after the gateway knew the token (a scope's) still admits it.
    verifier = _checking(settings, [grpc.StatusCode.PERMISSION_DENIED])
    assert verifier._check_own("rct_scoped") is not None
