"""An admin call's client request id (docs/api.md, Request ids): CreateWorkspace,
CreateMember, CreateToken and RotateToken take one. The control plane keeps,
with what a request made, a key (a hash of who asked and the id, as a write's
request key) and a hash of what was asked, so that a retry is told from
another request under the same id. One caller's ids are one set across these
calls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recallatron import errors
from services.store.sql import queries as q


@dataclass(frozen=True)
class AdminRequest:
    key: str
    call: str
    asked: bytes
    # The key of the id as spelled, when not ``key`` (erasure.request_keys):
    # a token made before request ids were read in canonical form has it.
    spelled_key: str | None = None


def earlier(conn: Any, request: AdminRequest) -> tuple[str, str, bytes] | None:
    """(its id, the call, what was asked) of what an earlier attempt under
    the request's id made; None when there was none."""
    row = conn.execute(q.REQUEST_MADE, {"key": request.key}).fetchone()
    if row is None and request.spelled_key is not None:
        row = conn.execute(q.REQUEST_MADE, {"key": request.spelled_key}).fetchone()
    return None if row is None else (str(row[0]), row[1], bytes(row[2]))


def reused(request: AdminRequest, call: str, asked: bytes) -> errors.InvalidArgument | None:
    """The refusal of an id an earlier attempt of another call or another
    request used (``call``, ``asked``); None when it was this request."""
    if call != request.call:
        return errors.InvalidArgument("request_id", f"already used for a different call ({call})")
    if asked != request.asked:
        # Answering with the first request's result would acknowledge a
        # request that was never made.
        return errors.InvalidArgument(
            "request_id",
            f"already used for another {call} request; a retry repeats its request exactly",
        )
    return None


def replayed(conn: Any, request: AdminRequest | None) -> str | None:
    """The id of what this request's earlier attempt made (a workspace, a
    member); None when there was none (or no request id). Another request
    under the id is refused."""
    found = None if request is None else earlier(conn, request)
    if request is None or found is None:
        return None
    refusal = reused(request, found[1], found[2])
    if refusal is not None:
        raise refusal
    return found[0]


def record(conn: Any, request: AdminRequest | None, workspace_id: str, made_id: str) -> None:
    """Kept with what the request made, in the transaction that made it."""
    if request is not None:
        conn.execute(
            q.INSERT_CREATE_REQUEST,
            {
                "key": request.key,
                "call": request.call,
                "asked": request.asked,
                "workspace_id": workspace_id,
                "made_id": made_id,
            },
        )


def take_turn(conn: Any, request: AdminRequest | None) -> str | None:
    """The request's turn taken in ``conn``'s transaction (concurrent attempts
    of it wait for each other), then :func:`replayed`."""
    if request is None:
        return None
    conn.execute(q.REQUEST_TURN, (request.key,))
    return replayed(conn, request)
