"""The client address of a call one of the project's fronts makes for an end
user (recallatron/forwarding.py): the gateway's HTTP/JSON adapter and the
review page in this process, with a secret made afresh by it, and fronts in
other processes (the MCP server) with RECALLATRON_FORWARDING_SECRET when it
is set. Without a secret this gateway knows, the connection's address
counts, so a gRPC client cannot choose its own bucket."""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Iterable

import grpc

from recallatron import forwarding
from recallatron.client import Client
from recallatron.forwarding import PEER_KEY, PROOF_KEY

__all__ = [
    "PEER_KEY",
    "PROOF_KEY",
    "configure",
    "for_peer",
    "for_user",
    "http_peer",
    "metadata",
    "peer",
    "peer_of",
]

_SECRET = secrets.token_hex(32)
# The secret shared with fronts in other processes ("": none).
_shared = ""


def configure(shared_secret: str) -> None:
    """The forwarding secret of the settings, believed beside this process's."""
    global _shared
    _shared = shared_secret


def metadata(client_address: str | None) -> tuple[tuple[str, str], ...]:
    """What a front in this process adds to a call it relays for
    ``client_address`` ("host:port", as an HTTP server reports it)."""
    return forwarding.metadata(client_address, _SECRET)


def for_user(client: Client, client_address: str | None) -> Client:
    """``client`` calling for the end user at ``client_address`` (the review
    page): with the shared secret when there is one, which a gateway in
    another process knows too (the page run on its own), else this
    process's."""
    return client.for_address(client_address, _shared or _SECRET)


def _known(proof: str) -> bool:
    return hmac.compare_digest(proof.encode(), _SECRET.encode()) or bool(
        _shared and hmac.compare_digest(proof.encode(), _shared.encode())
    )


def peer_of(metadata: Iterable[tuple[str, object]], connection: str) -> str:
    """The caller's address in gRPC's form ("ipv4:10.0.0.7:51234"): the one a
    front forwarded in ``metadata`` with a secret this gateway knows, else
    ``connection``'s."""
    found: dict[str, str] = {}
    for key, value in metadata:
        if key in (PEER_KEY, PROOF_KEY):
            found[key] = str(value)
    proof = found.get(PROOF_KEY, "")
    if PEER_KEY in found and proof and _known(proof):
        return found[PEER_KEY]
    return connection


def peer(context: grpc.ServicerContext) -> str:
    """A gRPC caller's address (:func:`peer_of`)."""
    return peer_of(context.invocation_metadata(), str(context.peer()))


def http_peer(headers: Iterable[tuple[str, str]], client_address: str | None) -> str:
    """An HTTP caller's address, taken as a gRPC caller's is: a front's
    forwarded one (the same names, as headers) with a secret this gateway
    knows, else the connection's ("host:port", as the HTTP server reports it)."""
    named = ((key.lower(), value) for key, value in headers)
    return peer_of(named, forwarding.grpc_peer(client_address))


def for_peer(address: str) -> tuple[tuple[str, str], ...]:
    """What a front in this process adds to a call it relays for a caller
    whose address (gRPC's form) it already knows; nothing for ""."""
    return ((PEER_KEY, address), (PROOF_KEY, _SECRET)) if address else ()
