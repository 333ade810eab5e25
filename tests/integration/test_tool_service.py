"""The store's ToolService (tools.proto): the public tool messages, for exactly
the member the call's assertion vouches for; and `remember`'s occurred_at,
the field capture uses to place a memory in the member's episode."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import grpc
import pytest

from recallatron import convert, internal_auth
from recallatron.grpcclient import make_channel
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from recallatron.v1 import tools_pb2_grpc
from recallatron_devkit.stack import Stack
from tests.conftest import Team

pytestmark = pytest.mark.integration

REMEMBER = "/recallatron.v1.ToolService/Remember"


def _remember(team: Team, title: str, at: datetime) -> pb.RememberResponse:
    ada = team.clients["ada"]
    request = pb.RememberRequest(
        request_id=f"{title}-{at.timestamp()}",
        kind=cpb.KIND_NOTE,
        title=title,
        occurred_at=convert.timestamp(at),
    )
    return ada.call(ada.memory.Remember, request)  # type: ignore[no-any-return]


def test_a_memory_that_occurred_earlier_joins_the_episode_open_then(team: Team) -> None:
    start = datetime.now(UTC) - timedelta(days=2)
    first = _remember(team, "Standup: the build is red", start).memory
    second = _remember(team, "Standup: Bob fixes the build", start + timedelta(minutes=20)).memory
    later = _remember(team, "Retro: builds are green again", start + timedelta(hours=5)).memory
    assert first.episode_id and first.episode_id == second.episode_id
    assert later.episode_id and later.episode_id != first.episode_id


def test_occurred_at_in_the_future_is_refused_by_name_and_writes_nothing(team: Team) -> None:
    with pytest.raises(grpc.RpcError) as err:
        _remember(team, "From tomorrow", datetime.now(UTC) + timedelta(days=1))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "occurred_at" in (err.value.details() or "")
    assert not team.clients["ada"].recall("tomorrow", mode="lexical").outcome.results


def test_the_tool_service_acts_only_for_a_member_assertion(stack: Stack, team: Team) -> None:
    signer = internal_auth.Signer(stack.internal_key, "test")
    channel = make_channel(stack.address("store"))
    tools = tools_pb2_grpc.ToolServiceStub(channel)
    request = pb.RememberRequest(request_id="svc", kind=cpb.KIND_NOTE, title="As a service")
    try:
        for token in (signer.service([REMEMBER]), signer.operator([REMEMBER])):
            with pytest.raises(grpc.RpcError) as err:
                tools.Remember(request, metadata=internal_auth.metadata(token), timeout=30)
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        who = cpb.Caller(
            workspace_id=team.workspace_id,
            member_id=team.members["bob"],
            role=cpb.ROLE_MEMBER,
            purpose=cpb.PURPOSE_ASSIST,
        )
        # The request's own purpose is the gateway's: the assertion's stands.
        request.purpose = cpb.PURPOSE_AUDIT
        done = tools.Remember(
            request, metadata=internal_auth.metadata(signer.member(who, [REMEMBER])), timeout=30
        )
        assert done.memory.created_by == team.members["bob"]
        assert list(done.memory.purposes) == [cpb.PURPOSE_ASSIST]
    finally:
        channel.close()
