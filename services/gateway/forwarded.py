"""The client address of a call the gateway's own HTTP/JSON adapter relays
(services/gateway/httpjson/): the adapter calls the gateway's gRPC port from
inside the process, so every relayed call would otherwise come from the
loopback address and share one bucket of the failed-authentication limit.

The adapter sends the HTTP client's address in metadata with a secret made
afresh by each process; the gateway believes the address only with that
secret, so a gRPC client cannot choose its own bucket."""

from __future__ import annotations

import hmac
import secrets

import grpc

PEER_KEY = "recallatron-forwarded-peer"
PROOF_KEY = "recallatron-forwarded-proof"
_SECRET = secrets.token_hex(32)


def metadata(client_address: str | None) -> tuple[tuple[str, str], ...]:
    """What the adapter adds to a relayed call for ``client_address``
    ("host:port", as an HTTP server reports it)."""
    if not client_address:
        return ()
    host, _, port = client_address.rpartition(":")
    kind = "ipv6" if ":" in host else "ipv4"
    if kind == "ipv6" and not host.startswith("["):
        host = f"[{host}]"
    return ((PEER_KEY, f"{kind}:{host}:{port}"), (PROOF_KEY, _SECRET))


def peer(context: grpc.ServicerContext) -> str:
    """The caller's address in gRPC's form ("ipv4:10.0.0.7:51234"): the one
    the adapter forwarded with this process's secret, else the connection's."""
    found: dict[str, str] = {}
    for key, value in context.invocation_metadata():
        if key in (PEER_KEY, PROOF_KEY):
            found[key] = str(value)
    proof = found.get(PROOF_KEY, "")
    if PEER_KEY in found and proof and hmac.compare_digest(proof, _SECRET):
        return found[PEER_KEY]
    return str(context.peer())
