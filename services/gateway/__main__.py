"""`python -m services.gateway`: the public gateway."""

from __future__ import annotations

import os

from recallatron import internal_auth, tracing
from recallatron.grpcclient import peer_serving
from recallatron.grpcserver import Server, add_methods
from recallatron.logs import configure_logging
from recallatron.v1 import gateway_pb2, gateway_pb2_grpc
from services.gateway import forwarded
from services.gateway.auth import Auth
from services.gateway.authcache import AuthCache, RevocationWatcher
from services.gateway.httpjson import HttpJsonApp, HttpJsonServer
from services.gateway.peers import Peers
from services.gateway.ratelimit import FailureLimiter, RateLimiter, fair_key_of
from services.gateway.review import ReviewServicer
from services.gateway.review_web import ReviewWeb, gateway_target
from services.gateway.server import AdminServicer, MemoryServicer
from services.gateway.settings import GatewaySettings

# Readiness asks the store's health this often, on the gateway's own channel
# to it (no new connection), each answer within STORE_CHECK_TIMEOUT_SECONDS.
STORE_CHECK_SECONDS = 2.0
STORE_CHECK_TIMEOUT_SECONDS = 3.0


def main() -> None:
    settings = GatewaySettings()
    log = configure_logging("gateway", settings.log_level)
    services = gateway_pb2.DESCRIPTOR.services_by_name
    cache = AuthCache(settings.auth_cache_seconds, settings.auth_cache_entries)
    server = Server(
        settings,
        [services[name].full_name for name in ("MemoryService", "AdminService", "ReviewService")],
        # Calls are served fairly by workspace once their token is known.
        key_of=fair_key_of(cache.workspace_of),
    )
    peers = Peers(settings)
    forwarded.configure(settings.forwarding_secret)
    watch = internal_auth.store_method("WatchRevocations")
    watcher = RevocationWatcher(peers.store_channel, cache, lambda: peers.signer.service([watch]))
    auth = Auth(
        peers,
        settings.admin_token,
        RateLimiter(settings.rate_limit_per_second, settings.rate_limit_burst),
        cache,
        FailureLimiter(settings.auth_failures_per_second, settings.auth_failure_burst),
    )
    # The tools the store answers as they are, forwarded from one table
    # (services.gateway.server.Forwarding.handlers); the rest by the servicers.
    for name, servicer in (
        ("MemoryService", MemoryServicer(peers, auth)),
        ("ReviewService", ReviewServicer(peers, auth)),
    ):
        add_methods(server.grpc_server, services[name], servicer.handlers(services[name]))
    gateway_pb2_grpc.add_AdminServiceServicer_to_server(
        AdminServicer(peers, auth), server.grpc_server
    )
    port = server.start(settings.gateway_listen)
    log.info("listening", extra={"port": port})
    # The dedup review page calls this gateway's own gRPC API with each person's token.
    review = None
    if settings.review_listen not in ("", "0"):
        review = ReviewWeb(
            settings.review_listen,
            gateway_target(settings.gateway_listen, port),
            settings.review_public_origins,
        )
        # Like RECALLATRON_PORT_FILE: tells a parent that asked for port 0 where it is.
        port_file = os.environ.get("RECALLATRON_REVIEW_PORT_FILE", "")
        log.info("review page", extra={"port": review.start(port_file)})
    # HTTP/JSON: each call's token checked by this gateway's authentication
    # before its body is read, then relayed to its own gRPC port (httpjson/).
    http = None
    if settings.http_listen not in ("", "0"):
        app = HttpJsonApp(
            gateway_target(settings.gateway_listen, port),
            settings,
            [services[name] for name in ("MemoryService", "ReviewService", "AdminService")],
            auth,
            body_budget=settings.http_body_budget_bytes,
        )
        http = HttpJsonServer(settings.http_listen, app, settings.http_connections_per_address)
        http_port = http.start(os.environ.get("RECALLATRON_HTTP_PORT_FILE", ""))
        log.info("http/json", extra={"port": http_port})
    # The gateway can answer (auth needs the store) once the store serves;
    # until then it reports NOT_SERVING.
    while not server.stopped.is_set() and not peer_serving(peers.store_channel):
        server.stopped.wait(0.5)
    watcher.start()
    # Ready while the store serves: every call is authenticated there. A
    # store outage takes the gateway out of its Service; liveness stays.
    server.follow_readiness(
        lambda: peer_serving(peers.store_channel, STORE_CHECK_TIMEOUT_SECONDS),
        STORE_CHECK_SECONDS,
        "store",
    )
    log.info("serving")

    def before_drain(grace: float) -> None:
        # HTTP/JSON first, while the gRPC server its calls are relayed to
        # still serves: its calls in flight finish, and a kept-alive
        # connection is closed (its client goes elsewhere) instead of
        # answered unavailable through a server that is draining.
        if http:
            http.stop(grace)

    def on_stop() -> None:
        watcher.close()
        if review:
            review.stop()

    server.wait_for_termination(on_stop=on_stop, before_drain=before_drain)


if __name__ == "__main__":
    tracing.setup("gateway")
    main()
