"""Tokens made or rotated at the moment their member is removed: the member
holds no new token (docs/api.md, RemoveMember: "it can hold no new token"),
whichever of the two calls reaches the control plane first. The token call
is held between its checks and its insert (the member's token turn, an
advisory lock the test takes) while the removal runs to its end."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import psycopg
import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from services.store.domain.erasure import request_key
from services.store.domain.member_removal import OPERATOR_ID
from services.store.infrastructure.db import CONTROL_DATABASE, with_database
from tests.conftest import Team, wait_for

pytestmark = pytest.mark.integration

# services/store/sql/queries.py TOKEN_TURN: (7407, hashtext(member id)).
TOKEN_TURN_CLASS = 7407


def _control(stack: Stack) -> psycopg.Connection:
    return psycopg.connect(with_database(stack.database_url, CONTROL_DATABASE), autocommit=True)


@contextmanager
def token_turn_held(stack: Stack, member_id: str) -> Iterator[psycopg.Connection]:
    """The member's token turn taken, so that a token call waits inside its
    transaction, after its checks of the member; released on leaving."""
    with _control(stack) as conn:
        conn.execute(
            "SELECT pg_advisory_lock(%s, hashtext(%s::text))", (TOKEN_TURN_CLASS, member_id)
        )
        try:
            yield conn
        finally:
            conn.execute(
                "SELECT pg_advisory_unlock(%s, hashtext(%s::text))", (TOKEN_TURN_CLASS, member_id)
            )


def _waiting_for_turn(conn: psycopg.Connection) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
        "AND classid = %s",
        (TOKEN_TURN_CLASS,),
    ).fetchone()
    return row is not None and int(row[0]) > 0


def _refused(call: Callable[[], Any]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value


def _live_tokens(operator: Client, member_id: str) -> list[str]:
    return [t.label for t in operator.list_tokens(member_id).tokens if not t.HasField("revoked_at")]


@pytest.mark.parametrize("how", ["create", "rotate"])
def test_a_member_removed_while_a_token_is_made_holds_no_live_token(
    stack: Stack, operator: Client, team: Team, how: str
) -> None:
    """Made at the moment of the removal: either refused (FAILED_PRECONDITION
    naming member_id, or NOT_FOUND for a rotated token the removal revoked)
    or made before the removal, which then revokes it; never a live token
    listed for a removed member, nor a removal or token call failing on the
    other's locks."""
    bob = team.members["bob"]
    make: Callable[[], Any] = (
        (lambda: operator.create_token(bob, "racing"))
        if how == "create"
        else (lambda: operator.rotate_token(team.token_ids["bob"], grace=timedelta(hours=1)))
    )
    with ThreadPoolExecutor(2) as pool:
        with token_turn_held(stack, bob) as held:
            made = pool.submit(make)
            wait_for(lambda: _waiting_for_turn(held), "the token call waiting for its turn")
            removal = pool.submit(operator.remove_member, bob, "erase")
            # The removal runs as far as the token call lets it.
            wait_for(lambda: removal.done() or _blocked_removal(held), "the removal under way")
        failed = made.exception(timeout=60)
        removed = removal.result(timeout=60)
    assert removed.member_id == bob
    if failed is not None:
        assert isinstance(failed, grpc.RpcError), failed
        assert failed.code() in (
            grpc.StatusCode.FAILED_PRECONDITION,
            grpc.StatusCode.NOT_FOUND,
        ), (failed.code(), failed.details())
    assert _live_tokens(operator, bob) == [], f"a live token listed for a removed member ({how})"
    if failed is None:
        token = made.result().token
        assert _refused(lambda: Client(stack.gateway, token).who_am_i()).code() == (
            grpc.StatusCode.UNAUTHENTICATED
        )


def _blocked_removal(conn: psycopg.Connection) -> bool:
    """The removal waits for a row the token call holds (its member's or
    its token's)."""
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND wait_event <> 'advisory'"
    ).fetchone()
    return row is not None and int(row[0]) > 0


# services/store/sql/queries.py REQUEST_TURN: (7411, hashtext(request key)).
REQUEST_TURN_CLASS = 7411


def test_two_rotations_of_one_token_without_grace_make_one_new_token(
    stack: Stack, operator: Client, team: Team
) -> None:
    """Two rotations of a token with grace 0 (a leaked token rolled from two
    places at once): the one that comes second is refused, never a second
    new token from a token the first one ended. The second is held in its
    transaction (its request id's turn, taken by the test) from before the
    first starts until the first has committed."""
    bob = team.members["bob"]
    old = team.token_ids["bob"]
    second_id = f"second-{uuid.uuid4().hex}"
    # The operator's request key (services/store/domain/administration.py).
    key = request_key(OPERATOR_ID, second_id)
    with ThreadPoolExecutor(1) as pool, _control(stack) as held:
        held.execute("SELECT pg_advisory_lock(%s, hashtext(%s::text))", (REQUEST_TURN_CLASS, key))
        try:
            second = pool.submit(
                operator.rotate_token, old, grace=timedelta(0), request_id=second_id
            )
            wait_for(lambda: _waiting_for(held, REQUEST_TURN_CLASS), "the second rotation waiting")
            first = operator.rotate_token(old, grace=timedelta(0))
        finally:
            held.execute(
                "SELECT pg_advisory_unlock(%s, hashtext(%s::text))", (REQUEST_TURN_CLASS, key)
            )
        failed = second.exception(timeout=60)
    assert failed is not None, "both rotations of one token without grace made a new token"
    assert isinstance(failed, grpc.RpcError), failed
    assert failed.code() in (
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.NOT_FOUND,
    ), (failed.code(), failed.details())
    assert "token_id" in str(failed.details()), failed.details()
    listed = operator.list_tokens(bob).tokens
    live = [t.id for t in listed if not t.HasField("revoked_at") and _live(t)]
    assert live == [first.token_id], live


def _waiting_for(conn: psycopg.Connection, lock_class: int) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
        "AND classid = %s",
        (lock_class,),
    ).fetchone()
    return row is not None and int(row[0]) > 0


def _live(token: Any) -> bool:
    """Not expired (the list shows ended tokens too)."""
    if not token.HasField("expires_at"):
        return True
    return bool(token.expires_at.ToDatetime(tzinfo=UTC) > datetime.now(UTC))
