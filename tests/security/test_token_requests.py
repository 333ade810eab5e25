"""Token calls with a client's request id (docs/api.md, Tokens): a retry of
CreateToken or RotateToken whose first answer was lost makes no second live
token; it is refused ALREADY_EXISTS naming request_id and the token the
first attempt made (its secret was shown once and is not kept). The same
id with another request is INVALID_ARGUMENT naming request_id; one caller's
ids are not another's. Labels and refusals: a label with control characters
is refused, a member of another workspace is named."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import grpc
import pytest

from recallatron.client import Client
from recallatron.v1 import store_pb2
from recallatron_cli.admin import token_line
from recallatron_devkit.stack import Stack
from tests.conftest import Team, make_team

pytestmark = pytest.mark.integration


def _refused(call: Callable[[], Any]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value


def _live(client: Client, member_id: str) -> list[str]:
    """The member's tokens neither revoked nor expired."""
    now = datetime.now(UTC)
    return [
        t.id
        for t in client.list_tokens(member_id).tokens
        if not t.HasField("revoked_at")
        and not (t.HasField("expires_at") and t.expires_at.ToDatetime(tzinfo=UTC) <= now)
    ]


def test_a_create_token_retried_with_its_request_id_makes_no_second_token(
    operator: Client, team: Team
) -> None:
    bob = team.members["bob"]
    before = set(_live(operator, bob))
    made = operator.create_token(bob, "ci", read_only=True, request_id="create-1")
    exc = _refused(lambda: operator.create_token(bob, "ci", read_only=True, request_id="create-1"))
    assert exc.code() == grpc.StatusCode.ALREADY_EXISTS, exc.details()
    assert "request_id" in str(exc.details()) and made.token_id in str(exc.details())
    assert set(_live(operator, bob)) - before == {made.token_id}
    # The same id with another request is refused, never answered as the first.
    other = _refused(lambda: operator.create_token(bob, "other", request_id="create-1"))
    assert other.code() == grpc.StatusCode.INVALID_ARGUMENT, other.details()
    assert str(other.details()).startswith("request_id:")
    assert set(_live(operator, bob)) - before == {made.token_id}
    # Without a request id every call makes a token, as before.
    operator.create_token(bob, "ci")
    operator.create_token(bob, "ci")
    assert len(set(_live(operator, bob)) - before) == 3


def test_a_rotation_retried_with_its_request_id_rotates_once(operator: Client, team: Team) -> None:
    bob = team.members["bob"]
    old = team.token_ids["bob"]
    rotated = operator.rotate_token(old, grace=timedelta(0), request_id="rotate-1")
    # Retried after the old token stopped (grace 0): still the first rotation's
    # answer, never "expired" and never a second new token.
    exc = _refused(lambda: operator.rotate_token(old, grace=timedelta(0), request_id="rotate-1"))
    assert exc.code() == grpc.StatusCode.ALREADY_EXISTS, exc.details()
    assert "request_id" in str(exc.details()) and rotated.token_id in str(exc.details())
    assert _live(operator, bob) == [rotated.token_id]
    # A create's request id is not a rotation's.
    operator.create_token(bob, "x", request_id="used-by-create")
    other = _refused(lambda: operator.rotate_token(rotated.token_id, request_id="used-by-create"))
    assert other.code() == grpc.StatusCode.INVALID_ARGUMENT, other.details()
    assert str(other.details()).startswith("request_id:")


def test_concurrent_duplicates_make_one_token(operator: Client, team: Team) -> None:
    cy = team.members["cy"]
    before = set(_live(operator, cy))

    def attempt(_: int) -> str:
        try:
            return operator.create_token(cy, "dup", request_id="dup-1").token_id
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.ALREADY_EXISTS, exc.details()
            return "refused"

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(attempt, range(4)))
    made = [a for a in answers if a != "refused"]
    assert len(made) == 1, answers
    assert set(_live(operator, cy)) - before == set(made)


def test_request_ids_are_each_callers_own(stack: Stack, operator: Client, team: Team) -> None:
    """An owner's request id and the operator's, the same string, are two
    requests (keyed by who asked, as a member's write ids are)."""
    owner = team.clients["ada"]
    bob = team.members["bob"]
    a = owner.create_token(bob, "owner's", request_id="same")
    b = operator.create_token(bob, "operator's", request_id="same")
    assert a.token_id != b.token_id
    # The request id's check holds for an owner too.
    exc = _refused(lambda: owner.create_token(bob, "owner's", request_id="same"))
    assert exc.code() == grpc.StatusCode.ALREADY_EXISTS, exc.details()
    other = make_team(stack, operator, ("dee",))
    try:
        # Another workspace's owner using the same id is another request.
        other.clients["dee"].create_token(other.members["dee"], "owner's", request_id="same")
    finally:
        for client in other.clients.values():
            client.close()


@pytest.mark.parametrize("label", ["\x1b[2J\x1b[31mci", "ci\nforged line", "\u202eic", "bell\x07"])
def test_a_label_with_control_characters_is_refused(
    operator: Client, team: Team, label: str
) -> None:
    """Such a label would act on the terminal that lists tokens (an escape
    sequence clears it or recolours it, a newline forges a line)."""
    bob = team.members["bob"]
    before = len(operator.list_tokens(bob).tokens)
    exc = _refused(lambda: operator.create_token(bob, label))
    assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, exc.details()
    assert str(exc.details()).startswith("label:"), exc.details()
    assert len(operator.list_tokens(bob).tokens) == before
    # Any other text is a label: quotes, accents, symbols.
    made = operator.create_token(bob, "ada's agent · café ✓")
    assert made.token_id in _live(operator, bob)


def test_a_kept_label_is_listed_with_its_control_characters_escaped() -> None:
    """One kept before such labels were refused: list-tokens writes it inert."""
    line = token_line(store_pb2.TokenSummary(id="t", label="\x1b[2Jci\n"))
    assert "\x1b" not in line and "\n" not in line
    assert "\\u001b[2Jci\\u000a" in line


def test_a_member_of_another_workspace_or_none_is_named(
    stack: Stack, operator: Client, team: Team
) -> None:
    """NOT_FOUND naming member_id, as ListTokens answers, alike for a member
    of another workspace and for none (an owner learns nothing of others)."""
    other = make_team(stack, operator, ("dee",))
    try:
        stranger = other.members["dee"]
        nobody = str(uuid.uuid4())
        owner = team.clients["ada"]
        for client, member_id in ((owner, stranger), (owner, nobody), (operator, nobody)):
            exc = _refused(partial(client.create_token, member_id, "x"))
            assert exc.code() == grpc.StatusCode.NOT_FOUND, exc.details()
            assert exc.details() == f"member_id: no member {member_id!r}"
            listed = _refused(partial(client.list_tokens, member_id))
            assert listed.details() == exc.details()
        assert len(operator.list_tokens(stranger).tokens) == 1
    finally:
        for c in other.clients.values():
            c.close()


def test_a_token_of_another_workspace_or_none_is_named(
    stack: Stack, operator: Client, team: Team
) -> None:
    """RevokeToken and RotateToken answer NOT_FOUND naming token_id, as
    CreateToken and ListTokens name member_id, alike for another workspace's
    token and for none; the other workspace's token is untouched."""
    other = make_team(stack, operator, ("dee",))
    try:
        theirs = other.token_ids["dee"]
        nobody = str(uuid.uuid4())
        owner = team.clients["ada"]
        for client, token_id in ((owner, theirs), (owner, nobody), (operator, nobody)):
            for call in (client.revoke_token, client.rotate_token):
                exc = _refused(partial(call, token_id))
                assert exc.code() == grpc.StatusCode.NOT_FOUND, exc.details()
                assert str(exc.details()).startswith(f"token_id: no token {token_id!r}")
        assert _live(operator, other.members["dee"]) == [theirs]
        # A revoked token is named as such when rotated.
        owner.revoke_token(team.token_ids["cy"])
        exc = _refused(partial(owner.rotate_token, team.token_ids["cy"]))
        assert exc.code() == grpc.StatusCode.NOT_FOUND, exc.details()
        assert str(exc.details()).endswith("or it was revoked"), exc.details()
    finally:
        for c in other.clients.values():
            c.close()
