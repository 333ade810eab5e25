"""Which origins may post the review page's forms.

Unconfigured, a form's Origin must name the Host it was sent to. Behind a
proxy that rewrites Host (an ingress sending the Service's name), the
browser's Origin is the public address instead, which the page cannot learn
from the request without believing headers anyone may send
(X-Forwarded-Host); so the operator names the public origin(s):
RECALLATRON_REVIEW_PUBLIC_ORIGINS. Set, only those origins may post."""

from __future__ import annotations

from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}


def normalize(origin: str) -> str:
    """``origin`` as a browser serializes it (lower-case scheme and host, no
    default port), or ValueError for what is not an http(s) origin (a path,
    a query, credentials or an unknown scheme included)."""
    parts = urlsplit(origin.strip())
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"not an http(s) origin: {origin!r}")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise ValueError(f"an origin is scheme://host[:port] only: {origin!r}")
    port = parts.port  # ValueError for a port out of range or not a number
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    if port is None or port == DEFAULT_PORTS[scheme]:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def parse(text: str) -> frozenset[str]:
    """The origins of a comma-separated setting, normalized; empty: none."""
    return frozenset(normalize(item) for item in text.split(",") if item.strip())


def allowed(origin: str | None, host: str, public: frozenset[str]) -> bool:
    """Whether a form posted with ``origin`` to ``host`` comes from this page.
    No Origin: not a browser's cross-site post (browsers send it on every
    cross-site POST). With public origins configured, only those; otherwise
    the Origin must name the Host header. An Origin no parser reads is not
    this page's."""
    if not origin:
        return True
    if public:
        try:
            return normalize(origin) in public
        except ValueError:
            return False
    try:
        return urlsplit(origin).netloc == host
    except ValueError:
        return False
