"""Every validation rule of the write tools: the status code, the field named
in the message and the rich details, and not one row changed."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from tests import dbutil
from tests.conftest import Team
from tests.faults.stackutil import field_violations

pytestmark = pytest.mark.integration

INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND


def remember(**fields: Any) -> pb.RememberRequest:
    base: dict[str, Any] = {"request_id": str(uuid.uuid4()), "kind": cpb.KIND_NOTE, "title": "t"}
    base.update(fields)
    return pb.RememberRequest(**base)


# (name, tool, request builder given fixture ids, expected code, field named)
Case = tuple[str, str, Callable[[dict[str, str]], Any], grpc.StatusCode, str]

CASES: list[Case] = [
    ("no request id", "Remember", lambda ids: remember(request_id=""), INVALID, "request_id"),
    (
        "long request id",
        "Remember",
        lambda ids: remember(request_id="r" * 129),
        INVALID,
        "request_id",
    ),
    ("no kind", "Remember", lambda ids: remember(kind=0), INVALID, "kind"),
    ("unknown kind", "Remember", lambda ids: remember(kind=9), INVALID, "kind"),
    ("empty title", "Remember", lambda ids: remember(title="  "), INVALID, "title"),
    # Zero-width spaces, a byte-order mark, a control: a title that shows nothing.
    (
        "invisible title",
        "Remember",
        lambda ids: remember(title="\u200b\ufeff \u2060\x1b"),
        INVALID,
        "title",
    ),
    (
        "correct to an invisible title",
        "Correct",
        lambda ids: pb.CorrectRequest(
            request_id="c-zw", id=ids["memory"], expected_revision=1, title="\u200b", reason="r"
        ),
        INVALID,
        "title",
    ),
    ("long title", "Remember", lambda ids: remember(title="x" * 301), INVALID, "title"),
    ("NUL in title", "Remember", lambda ids: remember(title="a\x00b"), INVALID, "title"),
    ("long body", "Remember", lambda ids: remember(body="x" * 20001), INVALID, "body"),
    # Text is kept in Unicode NFC (migration 0038), where U+FB2C is three code
    # points and U+1D15E two: the limits hold for what is kept.
    (
        "long title once in NFC",
        "Remember",
        lambda ids: remember(title="\ufb2c" * 101),
        INVALID,
        "title",
    ),
    (
        "long body once in NFC",
        "Remember",
        lambda ids: remember(body="\U0001d15e" * 10001),
        INVALID,
        "body",
    ),
    (
        "derive long title once in NFC",
        "Derive",
        lambda ids: pb.DeriveRequest(
            request_id="d-nfc", kind=1, title="\ufb2c" * 101, source_ids=[ids["memory"]]
        ),
        INVALID,
        "title",
    ),
    (
        "correct long title once in NFC",
        "Correct",
        lambda ids: pb.CorrectRequest(
            request_id="c-nfc",
            id=ids["memory"],
            expected_revision=1,
            title="\ufb2c" * 101,
            reason="r",
        ),
        INVALID,
        "title",
    ),
    (
        "supersede long body once in NFC",
        "Supersede",
        lambda ids: pb.SupersedeRequest(
            request_id="s-nfc",
            id=ids["memory"],
            expected_revision=1,
            kind=1,
            title="t",
            body="\U0001d15e" * 10001,
        ),
        INVALID,
        "body",
    ),
    ("confidence > 1", "Remember", lambda ids: remember(confidence=1.5), INVALID, "confidence"),
    ("confidence < 0", "Remember", lambda ids: remember(confidence=-0.1), INVALID, "confidence"),
    (
        "confidence NaN",
        "Remember",
        lambda ids: remember(confidence=float("nan")),
        INVALID,
        "confidence",
    ),
    ("unknown purpose", "Remember", lambda ids: remember(purposes=[7]), INVALID, "purposes"),
    ("unspecified purpose", "Remember", lambda ids: remember(purposes=[0]), INVALID, "purposes"),
    ("caller purpose unknown", "Remember", lambda ids: remember(purpose=12), INVALID, "purpose"),
    (
        "audience bad uuid",
        "Remember",
        lambda ids: remember(audience=cpb.Audience(member_id="nope")),
        INVALID,
        "audience.member_id",
    ),
    (
        "audience not a member",
        "Remember",
        lambda ids: remember(audience=cpb.Audience(member_id=str(uuid.uuid4()))),
        INVALID,
        "audience.member_id",
    ),
    (
        "audience member of another workspace",
        "Remember",
        lambda ids: remember(audience=cpb.Audience(member_id=ids["stranger"])),
        INVALID,
        "audience.member_id",
    ),
    (
        "audience workspace=false",
        "Remember",
        lambda ids: remember(audience=cpb.Audience(workspace=False)),
        INVALID,
        "audience",
    ),
    (
        "empty mention",
        "Remember",
        lambda ids: remember(mentions=[cpb.MentionInput()]),
        INVALID,
        "mentions[0]",
    ),
    (
        "mention bad uuid",
        "Remember",
        lambda ids: remember(mentions=[cpb.MentionInput(entity_id="x")]),
        INVALID,
        "mentions[0].entity_id",
    ),
    (
        "mention unknown entity",
        "Remember",
        lambda ids: remember(mentions=[cpb.MentionInput(entity_id=str(uuid.uuid4()))]),
        NOT_FOUND,
        "mentions[0].entity_id",
    ),
    (
        "mention blank name",
        "Remember",
        lambda ids: remember(mentions=[cpb.MentionInput(name=" ")]),
        INVALID,
        "mentions[0].name",
    ),
    (
        "too many mentions",
        "Remember",
        lambda ids: remember(mentions=[cpb.MentionInput(name=f"n{i}") for i in range(51)]),
        INVALID,
        "mentions",
    ),
    (
        "duplicate mention",
        "Remember",
        lambda ids: remember(mentions=[cpb.MentionInput(entity_id=ids["entity"])] * 2),
        INVALID,
        "mentions",
    ),
    (
        "about bad uuid",
        "Remember",
        lambda ids: remember(about_ids=["1234"]),
        INVALID,
        "about_ids[0]",
    ),
    (
        "about duplicate",
        "Remember",
        lambda ids: remember(about_ids=[ids["memory"]] * 2),
        INVALID,
        "about_ids",
    ),
    (
        "about unknown",
        "Remember",
        lambda ids: remember(about_ids=[str(uuid.uuid4())]),
        NOT_FOUND,
        "about_ids",
    ),
    (
        "about invisible",
        "Remember",
        lambda ids: remember(about_ids=[ids["hidden"]]),
        NOT_FOUND,
        "about_ids",
    ),
    (
        "derive no sources",
        "Derive",
        lambda ids: pb.DeriveRequest(request_id="d1", kind=1, title="t"),
        INVALID,
        "source_ids",
    ),
    (
        "derive bad source",
        "Derive",
        lambda ids: pb.DeriveRequest(request_id="d2", kind=1, title="t", source_ids=["x"]),
        INVALID,
        "source_ids[0]",
    ),
    (
        "derive duplicate source",
        "Derive",
        lambda ids: pb.DeriveRequest(
            request_id="d3", kind=1, title="t", source_ids=[ids["memory"]] * 2
        ),
        INVALID,
        "source_ids",
    ),
    (
        "derive no title",
        "Derive",
        lambda ids: pb.DeriveRequest(request_id="d4", kind=1, source_ids=[ids["memory"]]),
        INVALID,
        "title",
    ),
    (
        "correct bad id",
        "Correct",
        lambda ids: pb.CorrectRequest(
            request_id="c1", id="x", expected_revision=1, body="b", reason="r"
        ),
        INVALID,
        "id",
    ),
    (
        "correct revision 0",
        "Correct",
        lambda ids: pb.CorrectRequest(
            request_id="c2", id=ids["memory"], expected_revision=0, body="b", reason="r"
        ),
        INVALID,
        "expected_revision",
    ),
    (
        "correct nothing to change",
        "Correct",
        lambda ids: pb.CorrectRequest(
            request_id="c3", id=ids["memory"], expected_revision=1, reason="r"
        ),
        INVALID,
        "title",
    ),
    (
        "correct no reason",
        "Correct",
        lambda ids: pb.CorrectRequest(
            request_id="c4", id=ids["memory"], expected_revision=1, body="b"
        ),
        INVALID,
        "reason",
    ),
    (
        "correct stale revision",
        "Correct",
        lambda ids: pb.CorrectRequest(
            request_id="c5", id=ids["memory"], expected_revision=7, body="b", reason="r"
        ),
        grpc.StatusCode.ABORTED,
        "expected_revision",
    ),
    (
        "correct invisible",
        "Correct",
        lambda ids: pb.CorrectRequest(
            request_id="c6", id=ids["hidden"], expected_revision=1, body="b", reason="r"
        ),
        NOT_FOUND,
        "memory",
    ),
    (
        "correct empty title",
        "Correct",
        lambda ids: pb.CorrectRequest(
            request_id="c7", id=ids["memory"], expected_revision=1, title="", reason="r"
        ),
        INVALID,
        "title",
    ),
    (
        "supersede no kind",
        "Supersede",
        lambda ids: pb.SupersedeRequest(
            request_id="s1", id=ids["memory"], expected_revision=1, title="t"
        ),
        INVALID,
        "kind",
    ),
    (
        "supersede stale",
        "Supersede",
        lambda ids: pb.SupersedeRequest(
            request_id="s2", id=ids["memory"], expected_revision=3, kind=1, title="t"
        ),
        grpc.StatusCode.ABORTED,
        "expected_revision",
    ),
    (
        "forget no reason",
        "Forget",
        lambda ids: pb.ForgetRequest(request_id="f1", id=ids["memory"]),
        INVALID,
        "reason",
    ),
    (
        "forget long reason",
        "Forget",
        lambda ids: pb.ForgetRequest(request_id="f2", id=ids["memory"], reason="r" * 1001),
        INVALID,
        "reason",
    ),
    (
        "forget unknown",
        "Forget",
        lambda ids: pb.ForgetRequest(request_id="f3", id=str(uuid.uuid4()), reason="r"),
        NOT_FOUND,
        "memory",
    ),
    ("read nothing", "Read", lambda ids: pb.ReadRequest(), INVALID, "ids"),
    (
        "read bad uuid",
        "Read",
        lambda ids: pb.ReadRequest(ids=["x'; DROP TABLE memory;--"]),
        INVALID,
        "ids[0]",
    ),
    (
        "read too many",
        "Read",
        lambda ids: pb.ReadRequest(ids=[str(uuid.uuid4()) for _ in range(101)]),
        INVALID,
        "ids",
    ),
    ("recall empty query", "Recall", lambda ids: pb.RecallRequest(query=" "), INVALID, "query"),
    (
        "recall huge limit",
        "Recall",
        lambda ids: pb.RecallRequest(query="q", limit=51),
        INVALID,
        "limit",
    ),
    (
        "recall negative limit",
        "Recall",
        lambda ids: pb.RecallRequest(query="q", limit=-1),
        INVALID,
        "limit",
    ),
    # A closed set's list holds each of its values at most once in length: more
    # entries only repeat one, and each costs the services a check (two
    # million kinds in one recall used to answer UNAVAILABLE after seconds).
    (
        "recall kinds past the set",
        "Recall",
        lambda ids: pb.RecallRequest(query="q", filters=cpb.RecallFilters(kinds=[1] * 5)),
        INVALID,
        "filters.kinds",
    ),
    (
        "recall two million kinds",
        "Recall",
        lambda ids: pb.RecallRequest(query="q", filters=cpb.RecallFilters(kinds=[1] * 2_000_000)),
        INVALID,
        "filters.kinds",
    ),
    (
        "remember purposes past the set",
        "Remember",
        lambda ids: remember(purposes=[cpb.PURPOSE_ASSIST] * 5),
        INVALID,
        "purposes",
    ),
    (
        "list kinds past the set",
        "ListMemories",
        lambda ids: pb.ListMemoriesRequest(kinds=[1] * 5),
        INVALID,
        "kinds",
    ),
    (
        "recall unknown mode",
        "Recall",
        lambda ids: pb.RecallRequest(query="q", mode=9),
        INVALID,
        "mode",
    ),
]


@pytest.fixture(scope="module")
def fixture_ids(stack, operator) -> tuple[Team, dict[str, str]]:  # type: ignore[no-untyped-def]
    from tests.conftest import make_team

    team = make_team(stack, operator, ("ada", "bob"))
    other = make_team(stack, operator, ("zed",))
    ada = team.clients["ada"]
    m = ada.remember("fixture", audience_to="workspace", mention_names=["thing"]).memory
    hidden = team.clients["bob"].remember("bob only").memory
    return team, {
        "memory": m.id,
        "entity": m.mentions[0].entity_id,
        "hidden": hidden.id,
        "stranger": other.members["zed"],
    }


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_naming_the_field(stack, fixture_ids, case: Case) -> None:  # type: ignore[no-untyped-def]
    team, ids = fixture_ids
    _, tool, build, code, field = case
    client = team.clients["ada"]
    before = dbutil.checksum(stack, team.database_name)
    with pytest.raises(grpc.RpcError) as err:
        client.call(getattr(client.memory, tool), build(ids))
    assert err.value.code() == code, err.value.details()
    assert field in err.value.details()
    if code == INVALID:
        violations = field_violations(err.value)
        assert violations and field in violations[0]
    # Hidden ids never appear in an answer.
    assert ids["hidden"] not in err.value.details()
    assert dbutil.checksum(stack, team.database_name) == before


def test_a_memory_without_a_kind_is_told_the_kind_is_required(stack, fixture_ids) -> None:  # type: ignore[no-untyped-def]
    """No kind sent (as from HTTP/JSON without "kind") is not an unknown one."""
    team, _ = fixture_ids
    client = team.clients["ada"]
    with pytest.raises(grpc.RpcError) as err:
        client.call(client.memory.Remember, remember(kind=0))
    assert err.value.details() == "kind: is required: one of note, fact, decision or summary"
    with pytest.raises(grpc.RpcError) as err:
        client.call(client.memory.Remember, remember(kind=9))
    assert err.value.details().startswith("kind: unknown value 9")
