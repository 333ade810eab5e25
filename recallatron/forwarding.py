"""The end user's address on a call that one of the project's own fronts
makes for them: the gateway's HTTP/JSON adapter, the review page and the MCP
server call the gateway from one address each, and the gateway keeps its
failed-authentication allowance per address, so without this every user of
a front would share one allowance (a stranger's wrong tokens spending it for
all of them).

The address travels in metadata beside a secret the gateway knows: its own
process's (the adapter and the review page in the gateway's process) or
RECALLATRON_FORWARDING_SECRET, shared with fronts in other processes. The
gateway believes the address only with a secret it knows, so a client cannot
pick its own allowance."""

from __future__ import annotations

PEER_KEY = "recallatron-forwarded-peer"
PROOF_KEY = "recallatron-forwarded-proof"


def grpc_peer(client_address: str | None) -> str:
    """``client_address`` ("host:port", as an HTTP server reports it: the port
    follows the last colon) in gRPC's form ("ipv4:10.0.0.7:51234",
    "ipv6:[::1]:80"); "" without one."""
    if not client_address:
        return ""
    host, _, port = client_address.rpartition(":")
    host = host.strip("[]")
    kind = "ipv6" if ":" in host else "ipv4"
    shown = f"[{host}]" if kind == "ipv6" else host
    return f"{kind}:{shown}:{port}"


def metadata(client_address: str | None, secret: str) -> tuple[tuple[str, str], ...]:
    """What a front adds to a call it makes for ``client_address`` ("host:port",
    as an HTTP server reports it); nothing without either."""
    peer = grpc_peer(client_address)
    if not peer or not secret:
        return ()
    return ((PEER_KEY, peer), (PROOF_KEY, secret))
