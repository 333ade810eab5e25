"""Hypothesis-generated requests for every tool, capture, review and the admin
surface, through the gateway: a few thousand calls, and none may end in a
server fault (UNKNOWN, INTERNAL) or a dependency error, nor name a memory
the caller may not see."""

from __future__ import annotations

from collections import Counter
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recallatron.client import Client
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from recallatron.v1 import store_pb2
from recallatron_devkit.stack import Stack
from tests.conftest import Team, make_team
from tests.faults.stackutil import record

pytestmark = pytest.mark.integration

FAULTS = {
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.DATA_LOSS,
}
CALLS: Counter[str] = Counter()

# Text with the characters that break naive code: tsquery and SQL syntax,
# NUL, control characters, surrogate-free Unicode.
hostile = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("&|!():*'\\;%_$<->\"\x00\n\t ")),
        st.characters(exclude_categories=("Cs",)),
    ),
    max_size=60,
)
big_int = st.integers(-(2**31), 2**31 - 1)
enum_int = st.one_of(st.integers(-3, 8), big_int)


@pytest.fixture(scope="module")
def fuzz_world(stack: Stack, operator: Client) -> tuple[Team, dict[str, list[str]]]:
    team = make_team(stack, operator, ("ada", "bob"))
    other = make_team(stack, operator, ("zed",))
    ada, bob = team.clients["ada"], team.clients["bob"]
    visible = [
        ada.remember(f"fuzz seed {i}", "shared", audience_to="workspace").memory.id
        for i in range(3)
    ]
    hidden = [bob.remember("bob secret fuzz").memory.id]
    foreign = [other.clients["zed"].remember("zed fuzz", audience_to="workspace").memory.id]
    return team, {"visible": visible, "secret": hidden + foreign}


def ids_strategy(pool: dict[str, list[str]]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(pool["visible"] + pool["secret"]),
        st.uuids().map(str),
        hostile,
    )


def _call(client: Client, stub: Any, method: str, request: Any, secrets: list[str]) -> None:
    CALLS[method] += 1
    try:
        client.call(getattr(stub, method), request, timeout=30)
    except grpc.RpcError as exc:
        code, details = exc.code(), exc.details() or ""  # type: ignore[attr-defined]
        assert code not in FAULTS, (method, request, code, details)
        for secret in secrets:
            assert secret not in details or secret in str(request), (method, details)


SETTINGS = settings(
    max_examples=1200,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
    database=None,
)


@SETTINGS
@given(data=st.data())
def test_fuzz_recall(fuzz_world, data) -> None:  # type: ignore[no-untyped-def]
    team, pool = fuzz_world
    request = pb.RecallRequest(
        query=data.draw(hostile),
        mode=data.draw(st.integers(-1, 4)),
        limit=data.draw(st.one_of(st.integers(-2, 60), big_int)),
        purpose=data.draw(st.integers(-1, 5)),
        filters=cpb.RecallFilters(
            kinds=data.draw(st.lists(st.integers(-1, 6), max_size=3)),
            mention_entity_ids=data.draw(st.lists(ids_strategy(pool), max_size=2)),
            include_superseded=data.draw(st.booleans()),
        ),
        skip_rerank=data.draw(st.booleans()),
        include_history=data.draw(st.booleans()),
    )
    client = team.clients[data.draw(st.sampled_from(["ada", "bob"]))]
    _call(client, client.memory, "Recall", request, pool["secret"])


@SETTINGS
@given(data=st.data())
def test_fuzz_read_and_writes(fuzz_world, data) -> None:  # type: ignore[no-untyped-def]
    team, pool = fuzz_world
    ids = ids_strategy(pool)
    rid = st.one_of(st.uuids().map(str), hostile)
    audience = st.one_of(
        st.none(),
        st.builds(cpb.Audience, workspace=st.booleans()),
        st.builds(
            cpb.Audience, member_id=st.one_of(st.sampled_from(list(team.members.values())), ids)
        ),
    )
    method = data.draw(
        st.sampled_from(["Read", "Remember", "Derive", "Correct", "Supersede", "Forget", "Capture"])
    )
    d = data.draw
    if method == "Read":
        request: Any = pb.ReadRequest(ids=d(st.lists(ids, max_size=4)), purpose=d(enum_int))
    elif method == "Remember":
        request = pb.RememberRequest(
            request_id=d(rid),
            kind=d(enum_int),
            title=d(hostile),
            body=d(hostile),
            purposes=d(st.lists(enum_int, max_size=3)),
            purpose=d(enum_int),
            mentions=[cpb.MentionInput(name=n) for n in d(st.lists(hostile, max_size=2))],
            about_ids=d(st.lists(ids, max_size=2)),
        )
        if (aud := d(audience)) is not None:
            request.audience.CopyFrom(aud)
        if d(st.booleans()):
            request.confidence = d(st.floats(allow_nan=True, allow_infinity=True))
    elif method == "Derive":
        request = pb.DeriveRequest(
            request_id=d(rid),
            source_ids=d(st.lists(ids, max_size=3)),
            kind=d(enum_int),
            title=d(hostile),
            body=d(hostile),
            purposes=d(st.lists(enum_int, max_size=3)),
            purpose=d(enum_int),
        )
        if (aud := d(audience)) is not None:
            request.audience.CopyFrom(aud)
    elif method == "Correct":
        request = pb.CorrectRequest(
            request_id=d(rid),
            id=d(ids),
            expected_revision=d(st.integers(-(2**63), 2**63 - 1)),
            reason=d(hostile),
            purpose=d(enum_int),
        )
        if d(st.booleans()):
            request.title = d(hostile)
        if d(st.booleans()):
            request.body = d(hostile)
    elif method == "Supersede":
        request = pb.SupersedeRequest(
            request_id=d(rid),
            id=d(ids),
            expected_revision=d(st.integers(-5, 5)),
            kind=d(enum_int),
            title=d(hostile),
            body=d(hostile),
            reason=d(hostile),
            purpose=d(enum_int),
        )
    elif method == "Forget":
        request = pb.ForgetRequest(
            request_id=d(rid), id=d(ids), reason=d(hostile), purpose=d(enum_int)
        )
    else:
        request = pb.CaptureRequest(
            request_id=d(st.one_of(st.just(""), rid)),
            text=d(hostile),
            purpose=d(enum_int),
            speaker_member_id=d(st.one_of(st.just(""), ids)),
        )
    client = team.clients[d(st.sampled_from(["ada", "bob"]))]
    _call(client, client.memory, method, request, pool["secret"])


@settings(
    max_examples=600,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
    database=None,
)
@given(data=st.data())
def test_fuzz_admin_and_review(fuzz_world, operator, data) -> None:  # type: ignore[no-untyped-def]
    team, pool = fuzz_world
    d = data.draw
    ids = ids_strategy(pool)
    method = d(
        st.sampled_from(
            [
                "CreateMember",
                "CreateToken",
                "RevokeToken",
                "UpdateSettings",
                "GetSettings",
                "GetStatus",
                "ListDuplicatePairs",
                "DismissDuplicatePair",
            ]
        )
    )
    # Names too long for a handle or a slug are refused before anything is made.
    junk = st.text(min_size=64, max_size=80).map(lambda s: s + "!")
    if method == "CreateMember":
        request: Any = pb.AdminServiceCreateMemberRequest(
            workspace_id=d(st.one_of(st.just(""), ids)), handle=d(junk), role=d(enum_int)
        )
    elif method == "CreateToken":
        request = pb.AdminServiceCreateTokenRequest(member_id=d(ids), label="l" * 201)
    elif method == "RevokeToken":
        request = pb.AdminServiceRevokeTokenRequest(
            token_id=d(st.one_of(st.uuids().map(str), hostile))
        )
    elif method == "UpdateSettings":
        request = pb.UpdateSettingsRequest(
            settings=store_pb2.WorkspaceSettings(
                default_recall_mode=d(enum_int),
                dense_floor=d(st.floats(allow_nan=True, allow_infinity=True)),
                rerank_depth=d(big_int),
                expiry_days=d(big_int),
            ),
            update_fields=d(
                st.lists(
                    st.one_of(
                        hostile,
                        st.sampled_from(
                            ["dense_floor", "rerank_depth", "expiry_days", "default_recall_mode"]
                        ),
                    ),
                    max_size=3,
                )
            ),
        )
    elif method == "GetSettings":
        request = pb.GetSettingsRequest()
    elif method == "GetStatus":
        request = pb.GetStatusRequest()
    elif method == "ListDuplicatePairs":
        request = pb.ListDuplicatePairsRequest(purpose=d(enum_int), limit=d(big_int))
    else:
        request = pb.DismissDuplicatePairRequest(
            first_id=d(ids), second_id=d(ids), purpose=d(enum_int)
        )
    client = d(st.sampled_from([team.clients["ada"], team.clients["bob"], operator]))
    stub = (
        client.review if method in ("ListDuplicatePairs", "DismissDuplicatePair") else client.admin
    )
    _call(client, stub, method, request, pool["secret"])


def test_fuzz_figures() -> None:
    """Runs last in the module: the call count the fuzzing above made."""
    total = sum(CALLS.values())
    record("fuzz", calls=total, by_method=dict(CALLS))
    assert total >= 3000
