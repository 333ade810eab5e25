from __future__ import annotations

from pydantic import Field, field_validator

from recallatron.settings import GATEWAY_ADDRESS, RankPeer, StorePeer
from services.gateway.review_web import origins


class GatewaySettings(StorePeer, RankPeer):
    gateway_listen: str = GATEWAY_ADDRESS
    store_timeout_seconds: float = Field(default=5.0, gt=0)
    rank_timeout_seconds: float = Field(default=5.0, gt=0)
    # Operator token for workspace creation; empty disables the admin surface
    # for everything but owners. `recallatron up` generates one locally.
    admin_token: str = ""
    # Calls per second each bearer token may make (a token bucket holding
    # `rate_limit_burst`); over it, RESOURCE_EXHAUSTED. 0 turns the limit off.
    # Generous by default so agents, tests and benchmarks are not throttled.
    rate_limit_per_second: float = Field(default=1000.0, ge=0)
    rate_limit_burst: int = Field(default=2000, ge=1)
    # Failed authentications (tokens the store does not know) per client
    # address: a bucket of `auth_failure_burst` refilled at this rate; when it
    # is empty, unknown tokens from that address get RESOURCE_EXHAUSTED without
    # asking the store. Known tokens are not affected. 0 turns it off.
    auth_failures_per_second: float = Field(default=10.0, ge=0)
    auth_failure_burst: int = Field(default=100, ge=1)
    # Shared with the project's fronts in other processes (the MCP server's
    # RECALLATRON_FORWARDING_SECRET): the end user's address they forward
    # with it counts for the allowance above instead of the front's own.
    # Empty: only this process's own fronts (HTTP/JSON, the review page) do.
    forwarding_secret: str = ""
    # A workspace's calls served at once by this gateway (recallatron/settings.py):
    # 2, because each recall below it keeps both cores of a small machine busy
    # (docs/reliability.md, "Fair sharing": another workspace's p50 stays within
    # 2x of idle at 2, not at 4). One token's outstanding calls (running or
    # waiting) within that share.
    workspace_concurrency: int = Field(default=2, ge=1)
    # Alone, a workspace keeps both cores busy only with more recalls in
    # flight than 2 (measured at 8 clients: 104 against 90 recalls/s, the
    # mean of three rounds; docs/reliability.md, "Fair sharing").
    workspace_concurrency_alone: int = Field(default=4, ge=0)
    token_outstanding: int = Field(default=48, ge=0)
    # Below a workspace's share plus its queue (2 + 64): 1,000 calls sent at
    # once on one connection wait in the client, not here (docs/reliability.md).
    max_streams_per_connection: int = Field(default=64, ge=0)
    # Authenticated tokens are remembered this long (0: ask the store on every
    # call), and only while the store's revocation stream is live: a revoked
    # token is refused as soon as the revocation reaches this gateway.
    auth_cache_seconds: float = Field(default=30.0, ge=0)
    auth_cache_entries: int = Field(default=10_000, ge=0)
    # The dedup review page (HTTP): host:port ("host:0" picks a free port);
    # "0" or empty turns the page off.
    review_listen: str = "127.0.0.1:7410"
    # The page's public origin(s), comma-separated ("https://review.example.com"),
    # when a proxy in front rewrites Host: then only these may post its forms
    # (unset, a form's Origin must name the Host). X-Forwarded-Host is never
    # believed: anyone may send it (review_web/origins.py).
    review_public_origins: str = ""
    # HTTP/JSON (the Connect protocol, services/gateway/httpjson/): host:port
    # ("host:0" picks a free port); "0" or empty turns it off.
    http_listen: str = "127.0.0.1:7420"
    # HTTP/JSON connections one client address may hold open at once (over it,
    # 503 for that address): one address cannot take the server's 1,000. Behind
    # an ingress every client is the ingress's address: raise it there.
    http_connections_per_address: int = Field(default=100, ge=1)
    # Bytes of HTTP/JSON request bodies this process holds at once (each up
    # to RECALLATRON_MAX_MESSAGE_BYTES, held from its reading to its call's
    # end): over it, 503 unavailable, the body unread. Well under the pod's
    # 384Mi (docs/kubernetes.md); at least the message limit, or the largest
    # bodies are never taken.
    http_body_budget_bytes: int = Field(default=64 * 1024 * 1024, ge=1)

    @field_validator("review_public_origins")
    @classmethod
    def _origins(cls, value: str) -> str:
        # A mistyped origin stops the start, not every form later.
        origins.parse(value)
        return value
