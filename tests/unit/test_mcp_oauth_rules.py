"""The OAuth resource server's own rules (recallatron_mcp/oauth.py), with no
stack: the settings from the environment, scopes to a gateway token's scope,
where an issuer's metadata is looked for, what passes for a JWT, and the
token checks (issuer, audience, expiry, signature, algorithm) against the dev
kit's authorization server's keys."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from recallatron_devkit.oauth_server import AuthorizationServer, Running
from recallatron_devkit.stack import free_port
from recallatron_mcp.gateway_tokens import Grant, MemberTokens
from recallatron_mcp.oauth import (
    READ,
    WRITE,
    CannotCheckNow,
    MemberAccess,
    OAuthSettings,
    Verifier,
    discover_jwks,
    grant_of,
    granted_scopes,
    looks_like_jwt,
    metadata_urls,
    scopes_of,
)

RESOURCE = "https://memory.example.com/mcp"
# A generous limit for a condition that holds at once when all is well.
WAIT = 30.0


def test_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert OAuthSettings.from_env("gw:1", {}) is None
    with pytest.raises(ValueError, match="RECALLATRON_MCP_RESOURCE_URL"):
        OAuthSettings.from_env("gw:1", {"RECALLATRON_MCP_OAUTH_ISSUER": "https://id.example"})
    monkeypatch.delenv("RECALLATRON_MCP_OAUTH_ADMIN_TOKEN", raising=False)
    monkeypatch.delenv("RECALLATRON_MCP_OAUTH_ADMIN_TOKEN_FILE", raising=False)
    env = {
        "RECALLATRON_MCP_OAUTH_ISSUER": "https://id.example",
        "RECALLATRON_MCP_RESOURCE_URL": RESOURCE,
    }
    with pytest.raises(ValueError, match="RECALLATRON_MCP_OAUTH_ADMIN_TOKEN"):
        OAuthSettings.from_env("gw:1", env)
    monkeypatch.setenv("RECALLATRON_MCP_OAUTH_ADMIN_TOKEN", "rct_owner")
    settings = OAuthSettings.from_env(
        "gw:1",
        {
            **env,
            "RECALLATRON_MCP_OAUTH_MEMBER_CLAIM": "recallatron_member",
            "RECALLATRON_MCP_OAUTH_SCOPE_CLAIM": "scp",
        },
    )
    assert settings is not None
    assert (settings.issuer, settings.resource, settings.gateway) == (
        "https://id.example",
        RESOURCE,
        "gw:1",
    )
    assert (settings.member_claim, settings.scope_claim) == ("recallatron_member", "scp")
    assert settings.admin_token == "rct_owner"


def test_scopes_become_a_gateway_tokens_scope() -> None:
    assert scopes_of({"scope": "a b"}, "scope") == ["a", "b"]
    assert scopes_of({"scp": ["a", "b"]}, "scp") == ["a", "b"]
    assert scopes_of({}, "scope") == []
    assert grant_of("m", [READ]) == Grant("m", True, ())
    assert grant_of("m", [WRITE]) == Grant("m", False, ())
    narrowed = grant_of("m", [WRITE, "recallatron:purpose:audit", "recallatron:purpose:nope"])
    assert narrowed == Grant("m", False, ("audit",))
    assert granted_scopes([WRITE]) == sorted([READ, WRITE])
    assert granted_scopes(["openid"]) == ["openid"]


def test_where_an_issuers_metadata_is_looked_for() -> None:
    assert metadata_urls("https://id.example/tenant1") == [
        "https://id.example/.well-known/oauth-authorization-server/tenant1",
        "https://id.example/.well-known/openid-configuration/tenant1",
        "https://id.example/tenant1/.well-known/openid-configuration",
    ]
    assert metadata_urls("https://id.example")[0] == (
        "https://id.example/.well-known/oauth-authorization-server"
    )


def test_what_passes_for_a_jwt() -> None:
    assert looks_like_jwt("eyJhbGciOi.eyJzdWIi.c2ln")
    assert not looks_like_jwt("rct_abc")
    assert not looks_like_jwt("eyJhbGciOi.eyJzdWIi")


@pytest.fixture(scope="module")
def issuer() -> Iterator[AuthorizationServer]:
    port = free_port()
    auth = AuthorizationServer(f"http://127.0.0.1:{port}", "member-1")
    running = Running(auth, "127.0.0.1", port)
    yield auth
    running.stop()


def _verifier(auth: AuthorizationServer) -> Verifier:
    settings = OAuthSettings(issuer=auth.issuer, resource=RESOURCE)
    return Verifier(settings, client_of=lambda token: None, minted=None)  # type: ignore[arg-type,return-value]


def test_the_keys_are_found_from_the_issuers_metadata(issuer: AuthorizationServer) -> None:
    assert discover_jwks(issuer.issuer) == f"{issuer.issuer}/jwks"
    with pytest.raises(LookupError):
        discover_jwks(issuer.issuer + "/elsewhere", timeout=5)


def test_a_token_is_checked_for_issuer_audience_expiry_and_key(
    issuer: AuthorizationServer,
) -> None:
    verifier = _verifier(issuer)
    claims = verifier.claims(issuer.issue(RESOURCE))
    assert claims["sub"] == "member-1" and claims["aud"] == RESOURCE
    assert verifier.claims(issuer.issue([RESOURCE + "/", "https://other"]))["sub"] == "member-1"
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    refused = {
        "audience": (issuer.issue("https://other.example/mcp"), jwt.InvalidAudienceError),
        "no audience": (issuer.issue(None), jwt.MissingRequiredClaimError),
        "expired": (issuer.issue(RESOURCE, lifetime=-120), jwt.ExpiredSignatureError),
        "issuer": (issuer.issue(RESOURCE, issuer="https://evil"), jwt.InvalidIssuerError),
        "key": (issuer.issue(RESOURCE, key=other_key), jwt.InvalidSignatureError),
    }
    for why, (token, error) in refused.items():
        with pytest.raises(error):
            verifier.claims(token)
        assert verifier._check_jwt(token) is None, why
    # A shared-secret token under the issuer's key id is never taken.
    now = int(time.time())
    forged = jwt.encode(
        {"iss": issuer.issuer, "aud": RESOURCE, "sub": "x", "exp": now + 60},
        "secret-secret-secret-secret-secret",
        algorithm="HS256",
        headers={"kid": issuer.kid},
    )
    with pytest.raises(jwt.PyJWTError):
        verifier.claims(forged)


def test_a_body_nested_past_the_parser_is_no_request_not_a_failure() -> None:
    """The in-flight guard reads the request ids of a body before the SDK: a
    JSON array nested deeper than the parser follows raised RecursionError
    there (a 500 before authentication)."""
    from recallatron_mcp.inflight import _request_ids

    assert _request_ids(b"[" * 100_000 + b"]" * 100_000) == []
    assert _request_ids(b'{"jsonrpc": "2.0", "id": 7, "method": "tools/list"}') == [7]


class _Answers:
    """A gateway client whose GetSettings answers at once (a valid token)."""

    def __init__(self) -> None:
        self.admin = self

    def GetSettings(self, *args: object, **kwargs: object) -> None:
        return None

    def call(self, method: object, request: object) -> None:
        return None


def test_an_issuer_that_does_not_answer_holds_up_neither_own_tokens_nor_every_jwt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The issuer's metadata was looked up under the lock the checks of the
    members' own tokens take too: an issuer that did not answer (each of
    three metadata URLs waited 10 s) held up every member token, which needs
    no issuer at all, and every JWT after it paid the same wait again."""
    import recallatron_mcp.oauth as oauth

    looking, release = threading.Event(), threading.Event()
    lookups: list[str] = []

    def hung_issuer(issuer: str, timeout: float = 10.0) -> str:
        lookups.append(issuer)
        looking.set()
        release.wait(WAIT)
        raise LookupError(f"no authorization server metadata with a jwks_uri for {issuer}")

    monkeypatch.setattr(oauth, "discover_jwks", hung_issuer)
    settings = OAuthSettings(issuer="https://id.example", resource=RESOURCE)
    verifier = Verifier(settings, client_of=lambda token: _Answers(), minted=None)  # type: ignore[arg-type,return-value]
    jwt_like = "eyJhbGciOiJSUzI1NiJ9.e30.c2ln"

    def check_jwt() -> None:
        with pytest.raises(CannotCheckNow):
            verifier._check_jwt(jwt_like)

    first = threading.Thread(target=check_jwt)
    first.start()
    try:
        assert looking.wait(WAIT)
        own: list[object] = []
        member = threading.Thread(target=lambda: own.append(verifier._check_own("rct_member")))
        member.start()
        member.join(WAIT)
        assert not member.is_alive(), "a member token waited for the issuer"
        assert own and own[0] is not None
    finally:
        release.set()
        first.join(WAIT)
    # The issuer just failed: the next JWT is told to come back (503, not
    # 401) when the issuer will be asked again, without asking it now.
    with pytest.raises(CannotCheckNow) as away:
        verifier._check_jwt(jwt_like)
    assert 0 < away.value.retry_after <= oauth.KEYS_RETRY_SECONDS
    assert len(lookups) == 1


class _SlowAdmin:
    """The admin client: each CreateToken waits (up to a bound) for ``callers``
    to be making one at once, as a burst of first requests would."""

    def __init__(self, callers: int, fails: bool = False) -> None:
        self.callers = callers
        self.fails = fails
        self.made = 0
        self._lock = threading.Condition()

    def create_token(self, member_id: str, **kwargs: object) -> object:
        with self._lock:
            self.made += 1
            self._lock.notify_all()
            self._lock.wait_for(lambda: self.made >= self.callers, timeout=2.0)
            number = self.made
        if self.fails:
            raise LookupError("the gateway is away")

        class Made:
            token = f"rct_minted_{number}"

        return Made()


def test_a_burst_of_first_requests_makes_one_gateway_token() -> None:
    """The gateway token for a grant was made by every request that found
    none kept: concurrent first requests (or renewals) each made a live token
    of the member's, which their token list then shows."""
    callers = 6
    admin = _SlowAdmin(callers)
    minted = MemberTokens(admin)  # type: ignore[arg-type]
    grant = Grant("member-1", False, ())
    got: list[str] = []
    threads = [
        threading.Thread(target=lambda: got.append(minted.token_for(grant, "mcp-oauth x")))
        for _ in range(callers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert len(got) == callers
    assert admin.made == 1 and len(set(got)) == 1
    # A failure is shared too: the burst waits one call's time, not one each.
    failing = _SlowAdmin(callers, fails=True)
    minted = MemberTokens(failing)  # type: ignore[arg-type]
    failed: list[Exception] = []

    def attempt() -> None:
        try:
            minted.token_for(grant, "mcp-oauth x")
        except LookupError as exc:
            failed.append(exc)

    threads = [threading.Thread(target=attempt) for _ in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert len(failed) == callers and failing.made == 1


def test_a_refused_gateway_token_is_remade_only_for_a_later_sign_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A gateway token the gateway refused (revoked) was kept and handed to
    every access token of its grant until its renewal; now it is dropped, the
    access tokens issued before the refusal (or with no `iat`) are refused, and
    one issued in that second or later gets a new one."""
    from recallatron_mcp.gateway_tokens import GrantRevoked

    admin = _SlowAdmin(1)
    minted = MemberTokens(admin)  # type: ignore[arg-type]
    grant, other = Grant("member-1", False, ()), Grant("member-1", True, ())
    first = minted.token_for(grant, "mcp-oauth x", 1_000.0)
    kept = minted.token_for(other, "mcp-oauth x", 1_000.0)
    monkeypatch.setattr("time.time", lambda: 2_000.5)  # when the refusal is seen
    minted.refused("rct_not_one_of_ours")  # nothing to drop
    assert minted.token_for(grant, "mcp-oauth x", 1_000.0) == first
    minted.refused(first)
    for issued in (1_999.0, None):
        with pytest.raises(GrantRevoked):
            minted.token_for(grant, "mcp-oauth x", issued)
    assert minted.token_for(other, "mcp-oauth x", 1_000.0) == kept  # another grant
    again = minted.token_for(grant, "mcp-oauth x", 2_000.0)
    assert again not in (first, kept) and admin.made == 3
    minted.refused(first)  # an older refusal, reported late: nothing more
    assert minted.token_for(grant, "mcp-oauth x", 2_001.0) == again
    with pytest.raises(GrantRevoked):  # the revocation holds for older ones
        minted.token_for(grant, "mcp-oauth x", 1_500.0)


def test_a_gateway_tokens_label_from_the_jwt_is_plain_text() -> None:
    """The label is made of the JWT's client_id and sub, the issuer's to
    choose: control or format characters in them would have the store refuse
    the label (and the OAuth caller with it); they are written as '?'."""

    class _Recording:
        label = ""

        def create_token(self, member_id: str, **kwargs: object) -> object:
            self.label = str(kwargs["label"])

            class Made:
                token = "rct_minted"

            return Made()

    admin = _Recording()
    minted = MemberTokens(admin)  # type: ignore[arg-type]
    minted.token_for(Grant("member-1", False, ()), "mcp-oauth app\x1b[2J sub\n\u202ex" + "y" * 300)
    assert admin.label == "mcp-oauth app?[2J sub??x" + "y" * 176


def test_each_client_of_a_member_has_its_own_gateway_token(issuer: AuthorizationServer) -> None:
    """Two clients (connectors) of one member with the same scopes shared one
    gateway token, labelled with whichever client came first: the token list
    named one client for both, and an owner revoking it (meaning that
    connector) cut the other off too, its earlier access tokens refused."""

    class _Labelling:
        def __init__(self) -> None:
            self.labels: list[str] = []

        def create_token(self, member_id: str, **kwargs: object) -> object:
            self.labels.append(str(kwargs["label"]))
            made = f"rct_minted_{len(self.labels)}"

            class Made:
                token = made

            return Made()

    admin = _Labelling()
    minted = MemberTokens(admin)  # type: ignore[arg-type]
    settings = OAuthSettings(issuer=issuer.issuer, resource=RESOURCE)
    verifier = Verifier(settings, client_of=lambda token: None, minted=minted)  # type: ignore[arg-type,return-value]
    first = verifier._check_jwt(issuer.issue(RESOURCE, client_id="assistant-a"))
    second = verifier._check_jwt(issuer.issue(RESOURCE, client_id="assistant-b"))
    assert isinstance(first, MemberAccess) and isinstance(second, MemberAccess)
    assert first.gateway_token != second.gateway_token
    assert admin.labels == ["mcp-oauth assistant-a member-1", "mcp-oauth assistant-b member-1"]
    # An owner revokes assistant-a's token: assistant-b's access tokens still serve.
    b_before = issuer.issue(RESOURCE, client_id="assistant-b")
    minted.refused(first.gateway_token)
    again = verifier._check_jwt(b_before)
    assert isinstance(again, MemberAccess) and again.gateway_token == second.gateway_token
