"""Token scopes (design §3; issue 21), enforced here and nowhere else: a token
may be limited to some purposes and to the read-only calls. Two checks, each
at the one point every call passes:

- the call: :func:`check_call`, from ``Auth.member`` (every call that
  authenticates a member token), by the method being served, and from
  ``Auth.admit`` before the HTTP/JSON adapter reads a call's body;
- the purpose: :func:`check_purpose`, from ``server.caller`` (every identity
  the gateway sends to store or rank is built there);
- the purposes a write gives its memory (or episode): :func:`written_purposes`,
  from ``server.Forwarding.forward`` (every write passes there). A token
  writes only for the purposes it holds, whatever purpose the call names.

A scoped token is for an agent: it never reaches the calls that change who
may do what (members, tokens, settings), so it cannot mint itself a wider
token. Refusals are PERMISSION_DENIED and name the scope."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from recallatron import errors
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2
from recallatron.vocabulary import HISTORY_PURPOSES

_SERVICES = gateway_pb2.DESCRIPTOR.services_by_name


def _methods(service: str, names: tuple[str, ...]) -> frozenset[str]:
    full = _SERVICES[service].full_name
    for name in names:
        assert name in _SERVICES[service].methods_by_name, name
    return frozenset(f"/{full}/{name}" for name in names)


# The calls answered without a token (their handlers ask for none), on every
# surface: gRPC, and the HTTP/JSON adapter, which checks every other call's
# token before it reads the body (Auth.admit).
OPEN_CALLS = _methods("MemoryService", ("DescribeTools",))
# What a read-only token may call: the calls that change nothing.
READ_ONLY_CALLS = (
    OPEN_CALLS
    | _methods(
        "MemoryService",
        (
            "Recall",
            "Read",
            "Lookup",
            "Neighbors",
            "Timeline",
            "ListMemories",
            "ListAuditEvents",
        ),
    )
    | _methods(
        "ReviewService", ("ListDuplicatePairs", "ListEntityPairs", "ListEntityMerges", "WhoAmI")
    )
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


def history_withheld(purposes: frozenset[int], read_only: bool, purpose: int) -> str:
    """Why recall leaves the owner's history out for ``purpose`` (the call's,
    already checked), naming the token's scope when it allows no purpose
    history serves; "" when history is for that purpose (HISTORY_PURPOSES)."""
    name = _purpose_name(purpose)
    if name in HISTORY_PURPOSES:
        return ""
    why = (
        f"history is conversation evidence, for the {' and '.join(HISTORY_PURPOSES)} "
        f"purposes only; this recall's purpose is {name}"
    )
    if purposes and not any(_purpose_name(p) in HISTORY_PURPOSES for p in purposes):
        why += f" (token scope is {describe(purposes, read_only)})"
    return why


# The writes whose purposes, left empty, come from the memories they build on
# (derive's sources, supersede's replaced memory); any other write left empty
# gets DEFAULT_PURPOSES (gateway.proto: "Default: {assist}").
INHERITING_CALLS = _methods("MemoryService", ("Derive", "Supersede"))
DEFAULT_PURPOSES = (cpb.PURPOSE_ASSIST,)


def written_purposes(
    purposes: frozenset[int], read_only: bool, method: str, asked: Sequence[int], purpose: int
) -> list[int] | None:
    """Refuses a write whose memory purposes (``asked``, or their default) reach
    past the token's scope. The purposes to send instead of ``asked``, or None
    to send them as they are. ``purpose`` is the call's, already checked."""
    if not purposes:
        return None
    if not asked:
        if method in INHERITING_CALLS:
            # What the memory would inherit is unknown here and may reach past
            # the scope: narrowed to the call's purpose, which every memory the
            # write builds on has (each must be visible for it).
            return [purpose]
        asked = DEFAULT_PURPOSES
    # UNSPECIFIED is no purpose: the store refuses it, naming the field.
    outside = sorted({p for p in asked if p and p not in purposes})
    if outside:
        raise errors.PermissionDenied(
            f"purposes: token scope is {describe(purposes, read_only)}; "
            f"{', '.join(_purpose_name(p) for p in outside)} outside it"
        )
    return None
