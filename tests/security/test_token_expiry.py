"""Tokens that expire, rotation and the token list (design §3; issue 34): an
expired token is UNAUTHENTICATED at every gateway on its next call, cached or
not, with a message that says it expired and never whose it was; a rotation
gives a working token of the same scope and lifetime and ends the old one
after its grace; the list shows expiry and last use and never a secret; a bad
duration is INVALID_ARGUMENT naming its field and creates nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from recallatron.client import Client
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from recallatron.v1 import store_pb2
from recallatron_cli.main import main
from recallatron_devkit.stack import Stack
from tests.conftest import Team, make_team, wait_for
from tests.replicas import second_gateway as second_gateway  # the fixture

pytestmark = pytest.mark.integration


def error(call: Callable[[], Any]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value


def refused_as_expired(client: Client, memory_id: str) -> bool:
    """True once a call is UNAUTHENTICATED for expiry; False while it works."""
    try:
        client.read([memory_id])
    except grpc.RpcError as exc:
        assert exc.code() == grpc.StatusCode.UNAUTHENTICATED, exc.details()
        assert "expired" in str(exc.details()), exc.details()
        return True
    return False


def wait_refused(client: Client, memory_id: str, timeout: float) -> None:
    wait_for(lambda: refused_as_expired(client, memory_id), "the token refused", timeout)


def listed(owner: Client, member_id: str, token_id: str) -> store_pb2.TokenSummary:
    return next(t for t in owner.list_tokens(member_id).tokens if t.id == token_id)


def test_an_expired_token_is_refused_at_every_gateway(
    stack: Stack, team: Team, second_gateway: str
) -> None:
    ada = team.clients["ada"]
    bob_id = team.members["bob"]
    memory_id = ada.remember("expiring", audience_to="workspace").memory.id
    made = ada.create_token(bob_id, "short", expires_in=timedelta(seconds=5))
    assert made.HasField("expires_at")
    here = Client(stack.gateway, made.token)
    there = Client(second_gateway, made.token)
    # Works before its expiry, twice on each gateway: the second answer may
    # come from each gateway's cache, which then must not outlive the token.
    for client in (here, there, here, there):
        assert client.read([memory_id]).memories[0].id == memory_id
    # Well under the caches' 30 s age: only the expiry can end the entries.
    for client in (here, there):
        wait_refused(client, memory_id, 20)
    details = str(error(lambda: here.read([memory_id])).details())
    assert bob_id not in details and "bob" not in details
    # An expired token cannot be rotated back to life.
    failed = error(lambda: ada.rotate_token(made.token_id))
    assert failed.code() == grpc.StatusCode.FAILED_PRECONDITION
    here.close()
    there.close()


def test_rotation_keeps_scope_and_lifetime_and_ends_the_old_token_after_its_grace(
    stack: Stack, team: Team, second_gateway: str
) -> None:
    ada = team.clients["ada"]
    bob_id = team.members["bob"]
    memory_id = ada.remember("rotating", audience_to="workspace").memory.id
    old = ada.create_token(
        bob_id, "rotate me", ["assist"], read_only=True, expires_in=timedelta(days=30)
    )
    old_clients = [Client(stack.gateway, old.token), Client(second_gateway, old.token)]
    for client in old_clients:
        client.read([memory_id])

    rotated = ada.rotate_token(old.token_id, grace=timedelta(seconds=4))
    assert rotated.token != old.token and rotated.token_id != old.token_id
    new = Client(stack.gateway, rotated.token)
    assert new.read([memory_id]).memories[0].id == memory_id
    # The same scope ...
    denied = error(lambda: new.remember("not allowed"))
    assert denied.code() == grpc.StatusCode.PERMISSION_DENIED
    summary = listed(ada, bob_id, rotated.token_id)
    assert summary.read_only and list(summary.purposes) == [cpb.PURPOSE_ASSIST]
    assert summary.label == "rotate me"
    # ... and the same lifetime, from now.
    new_expiry = rotated.expires_at.ToDatetime(tzinfo=UTC)
    assert abs(new_expiry - (datetime.now(UTC) + timedelta(days=30))) < timedelta(minutes=5)
    # The old one works during its grace, at both gateways, then is refused.
    for client in old_clients:
        assert client.read([memory_id]).memories[0].id == memory_id
    for client in old_clients:
        wait_refused(client, memory_id, 30)
    assert new.read([memory_id]).memories[0].id == memory_id
    for client in (*old_clients, new):
        client.close()


def test_grace_zero_ends_the_old_token_at_once(
    stack: Stack, team: Team, second_gateway: str
) -> None:
    ada = team.clients["ada"]
    bob = team.clients["bob"]
    memory_id = ada.remember("at once", audience_to="workspace").memory.id
    elsewhere = Client(second_gateway, bob.token)
    assert elsewhere.read([memory_id]).memories  # cached there too
    assert bob.read([memory_id]).memories
    rotated = ada.rotate_token(team.token_ids["bob"], grace=timedelta(0))
    # This gateway at once; the other as soon as the store's stream tells it.
    assert refused_as_expired(bob, memory_id)
    wait_refused(elsewhere, memory_id, 10)
    assert rotated.old_expires_at.ToDatetime(tzinfo=UTC) <= datetime.now(UTC)
    fresh = Client(second_gateway, rotated.token)
    assert fresh.read([memory_id]).memories[0].id == memory_id
    fresh.close()
    elsewhere.close()


def test_an_expired_token_cannot_be_rotated_and_the_refusal_names_it(
    stack: Stack, operator: Client, team: Team
) -> None:
    """FAILED_PRECONDITION naming token_id (the PreconditionFailure every
    other token call's precondition carries), and nothing is made."""
    bob_id = team.members["bob"]
    made = operator.create_token(bob_id, "short", expires_in=timedelta(seconds=1))
    short = Client(stack.gateway, made.token)
    memory_id = team.clients["ada"].remember("expired rotation", audience_to="workspace").memory.id
    wait_refused(short, memory_id, 30)
    short.close()
    before = len(operator.list_tokens(bob_id).tokens)
    exc = error(lambda: operator.rotate_token(made.token_id, grace=timedelta(0)))
    assert exc.code() == grpc.StatusCode.FAILED_PRECONDITION, exc.details()
    assert "token_id" in str(exc.details()) and "expired" in str(exc.details())
    status = rpc_status.from_call(exc)
    failure = error_details_pb2.PreconditionFailure()
    assert status is not None and any(d.Unpack(failure) for d in status.details), status
    assert [v.subject for v in failure.violations] == ["token_id"]
    assert len(operator.list_tokens(bob_id).tokens) == before


def test_the_list_shows_expiry_and_last_use_never_a_secret(
    stack: Stack, operator: Client, team: Team
) -> None:
    ada = team.clients["ada"]
    bob_id = team.members["bob"]
    made = ada.create_token(bob_id, "listed", expires_in=timedelta(hours=12))
    before = listed(ada, bob_id, made.token_id)
    assert not before.HasField("last_used_at") and not before.HasField("revoked_at")
    expires = before.expires_at.ToDatetime(tzinfo=UTC)
    assert abs(expires - (datetime.now(UTC) + timedelta(hours=12))) < timedelta(minutes=5)
    assert before.member_handle == "bob" and before.label == "listed"

    user = Client(stack.gateway, made.token)
    memory_id = ada.remember("last use", audience_to="workspace").memory.id
    user.read([memory_id])
    used = listed(ada, bob_id, made.token_id).last_used_at.ToDatetime(tzinfo=UTC)
    assert abs(used - datetime.now(UTC)) < timedelta(minutes=5)
    # Asked again past every cache (a revocation empties them): within the
    # minute, last use is not written again.
    ada.revoke_token(team.token_ids["cy"])
    user.read([memory_id])
    assert listed(ada, bob_id, made.token_id).last_used_at.ToDatetime(tzinfo=UTC) == used
    user.close()

    answer = ada.list_tokens(bob_id)
    text = str(answer)
    assert made.token not in text and team.clients["bob"].token not in text
    assert "sha256" not in text and "hash" not in text
    # An owner may list the whole workspace; the operator names a member.
    everyone = {t.member_handle for t in ada.list_tokens().tokens}
    assert everyone == {"ada", "bob", "cy"}
    revoked = listed(operator, team.members["cy"], team.token_ids["cy"])
    assert revoked.HasField("revoked_at")
    needs_member = error(lambda: operator.list_tokens())
    assert needs_member.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "member_id" in str(needs_member.details())
    # A member who is not an owner may not.
    refused = error(lambda: team.clients["bob"].list_tokens(bob_id))
    assert refused.code() == grpc.StatusCode.PERMISSION_DENIED


def test_another_workspace_owner_can_neither_list_nor_rotate(
    stack: Stack, operator: Client, team: Team
) -> None:
    other = make_team(stack, operator, ("zed",))
    zed = other.clients["zed"]
    assert error(lambda: zed.list_tokens(team.members["bob"])).code() == grpc.StatusCode.NOT_FOUND
    failed = error(lambda: zed.rotate_token(team.token_ids["bob"]))
    assert failed.code() == grpc.StatusCode.NOT_FOUND
    zed.close()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("expires_in", Duration(seconds=-5)),
        ("expires_in", Duration(seconds=0)),
        ("expires_in", Duration(seconds=3651 * 86400)),
        ("expires_in", Duration(seconds=10, nanos=-3)),
        ("grace", Duration(seconds=-1)),
        ("grace", Duration(seconds=91 * 86400)),
    ],
)
def test_a_bad_duration_names_its_field_and_creates_nothing(
    team: Team, field: str, value: Duration
) -> None:
    ada = team.clients["ada"]
    bob_id = team.members["bob"]
    before = ada.list_tokens(bob_id)
    if field == "expires_in":
        create = pb.AdminServiceCreateTokenRequest(member_id=bob_id, expires_in=value)
        failed = error(lambda: ada.call(ada.admin.CreateToken, create))
    else:
        rotate = pb.AdminServiceRotateTokenRequest(token_id=team.token_ids["bob"], grace=value)
        failed = error(lambda: ada.call(ada.admin.RotateToken, rotate))
    assert failed.code() == grpc.StatusCode.INVALID_ARGUMENT, failed.details()
    assert str(failed.details()).startswith(f"{field}:"), failed.details()
    assert ada.list_tokens(bob_id) == before


def test_the_token_commands(stack: Stack, team: Team, capsys: pytest.CaptureFixture[str]) -> None:
    ada = ["--gateway", stack.gateway, "--token", team.clients["ada"].token]
    bob_id = team.members["bob"]

    assert main(["admin", *ada, "create-token", bob_id, "--expires-in", "90d", "--json"]) == 0
    made = json.loads(capsys.readouterr().out)
    expires = datetime.fromisoformat(made["expires_at"].replace("Z", "+00:00"))
    assert abs(expires - (datetime.now(UTC) + timedelta(days=90))) < timedelta(minutes=5)

    assert main(["admin", *ada, "list-tokens", "--member", bob_id, "--json"]) == 0
    tokens = json.loads(capsys.readouterr().out)["tokens"]
    mine = next(t for t in tokens if t["id"] == made["token_id"])
    assert mine["expires_at"] == made["expires_at"] and "token" not in mine
    assert made["token"] not in json.dumps(tokens)
    assert main(["admin", *ada, "list-tokens", "--member", bob_id]) == 0
    text = capsys.readouterr().out
    assert made["token_id"] in text and "active" in text and made["token"] not in text

    assert main(["admin", *ada, "rotate-token", made["token_id"], "--grace", "0", "--json"]) == 0
    rotated = json.loads(capsys.readouterr().out)
    assert rotated["token"] and rotated["token_id"] != made["token_id"]
    assert main(["admin", *ada, "rotate-token", rotated["token_id"], "--grace", "1h"]) == 0
    out = capsys.readouterr().out
    assert "shown once" in out and "works until" in out

    # A malformed duration is refused before any call, naming the field.
    assert main(["admin", *ada, "create-token", bob_id, "--expires-in", "ninety days"]) == 2
    assert "error: INVALID_ARGUMENT: expires_in" in capsys.readouterr().err
    # An absurd one by the gateway, also naming it.
    assert main(["admin", *ada, "create-token", bob_id, "--expires-in", "99999d"]) == 1
    assert "INVALID_ARGUMENT: expires_in" in capsys.readouterr().err
    assert main(["admin", *ada, "rotate-token", rotated["token_id"], "--grace=-1h"]) == 2
    assert "error: INVALID_ARGUMENT: grace" in capsys.readouterr().err


class _Behind(datetime):
    """The clock of a machine a few seconds behind the server's."""

    @classmethod
    def now(cls, tz: Any = None) -> Any:
        return datetime.now(tz) - timedelta(seconds=5)


def test_rotating_with_no_grace_says_the_old_token_stopped_on_a_clock_behind(
    stack: Stack, team: Team, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`rotate-token --grace 0` ends the old token at the server's time; the
    command compared that time with its own clock, so from a machine a few
    seconds behind the server it said the old token "works until" a moment
    that read as still to come, though it was refused already."""
    monkeypatch.setattr("recallatron_cli.admin.datetime", _Behind)
    ada = ["--gateway", stack.gateway, "--token", team.clients["ada"].token]
    old = team.clients["ada"].create_token(team.members["bob"], "skewed")
    assert main(["admin", *ada, "rotate-token", old.token_id, "--grace", "0"]) == 0
    out = capsys.readouterr().out
    assert f"the old token {old.token_id} stops now" in out, out
    assert "works until" not in out
    refused = error(lambda: Client(stack.gateway, old.token).who_am_i())
    assert refused.code() == grpc.StatusCode.UNAUTHENTICATED
