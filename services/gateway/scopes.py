"""Token scopes (design §3; issue 21), enforced here and nowhere else: a token
may be limited to some purposes and to the read-only calls. Two checks, each
at the one point every call passes:

- the call: :func:`check_call`, from ``Auth.member`` (every call that
  authenticates a member token), by the method being served;
- the purpose: :func:`check_purpose`, from ``server.caller`` (every identity
  the gateway sends to store or rank is built there).

A scoped token is for an agent: it never reaches the calls that change who
may do what (members, tokens, settings), so it cannot mint itself a wider
token. Refusals are PERMISSION_DENIED and name the scope."""

from __future__ import annotations

from typing import cast

from recallatron import errors
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2

_SERVICES = gateway_pb2.DESCRIPTOR.services_by_name


def _methods(service: str, names: tuple[str, ...]) -> frozenset[str]:
    full = _SERVICES[service].full_name
    for name in names:
        assert name in _SERVICES[service].methods_by_name, name
    return frozenset(f"/{full}/{name}" for name in names)


# What a read-only token may call: the calls that change nothing.
READ_ONLY_CALLS = (
    _methods(
        "MemoryService", ("Recall", "Read", "DescribeTools", "Lookup", "Neighbors", "Timeline")
    )
    | _methods("ReviewService", ("ListDuplicatePairs", "ListEntityPairs", "ListEntityMerges"))
    | _methods("AdminService", ("GetSettings", "GetStatus"))
)
# What any scoped token may call: the tools and the review, and reading the
# settings and status; not the calls that manage members, tokens or settings.
SCOPED_CALLS = (
    _methods("MemoryService", tuple(_SERVICES["MemoryService"].methods_by_name))
    | _methods("ReviewService", tuple(_SERVICES["ReviewService"].methods_by_name))
    | _methods("AdminService", ("GetSettings", "GetStatus"))
)


def _purpose_name(value: int) -> str:
    # A stored int: Name wants the enum's ValueType (a NewType of int).
    return cpb.Purpose.Name(cast(cpb.Purpose.ValueType, value)).removeprefix("PURPOSE_").lower()


def describe(purposes: frozenset[int], read_only: bool) -> str:
    parts = []
    if purposes:
        parts.append("purposes " + ", ".join(_purpose_name(p) for p in sorted(purposes)))
    if read_only:
        parts.append("read-only")
    return "; ".join(parts)


def check_call(purposes: frozenset[int], read_only: bool, method: str) -> None:
    """Refuses a call outside the token's scope (the method's full name)."""
    if not purposes and not read_only:
        return
    name = method.rsplit("/", 1)[-1] or "this call"
    if read_only and method not in READ_ONLY_CALLS:
        raise errors.PermissionDenied(
            f"token scope: read-only ({describe(purposes, read_only)}); {name} is not"
        )
    if method not in SCOPED_CALLS:
        raise errors.PermissionDenied(
            f"token scope: {describe(purposes, read_only)}; {name} needs an unscoped token"
        )


def check_purpose(purposes: frozenset[int], read_only: bool, purpose: int) -> None:
    """Refuses a purpose outside the token's scope (``purpose`` already defaulted)."""
    if purposes and purpose not in purposes:
        raise errors.PermissionDenied(
            f"purpose: token scope is {describe(purposes, read_only)}; "
            f"{_purpose_name(purpose)} is outside it"
        )
