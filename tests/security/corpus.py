"""Malformed and hostile requests for every tool and the admin surface, with
the documented answer: the status code and the field its message names.
(tests/integration/test_validation.py holds the first ~50 write rules; these
are others.) A builder gets the fixture ids and returns the request."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from recallatron.v1 import store_pb2

INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND
ABORTED = grpc.StatusCode.ABORTED
PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION
DENIED = grpc.StatusCode.PERMISSION_DENIED
UNAUTH = grpc.StatusCode.UNAUTHENTICATED
EXISTS = grpc.StatusCode.ALREADY_EXISTS
OK = grpc.StatusCode.OK

Ids = dict[str, str]


@dataclass(frozen=True)
class Case:
    name: str
    service: str  # memory, admin or review
    method: str
    build: Callable[[Ids], Any]
    code: grpc.StatusCode
    field: str  # named in the message; "" for OK
    who: str = "ada"  # ada (owner), bob (member), operator


def rid() -> str:
    return f"bad-{uuid.uuid4()}"


def remember(**f: Any) -> pb.RememberRequest:
    base: dict[str, Any] = {"request_id": rid(), "kind": cpb.KIND_NOTE, "title": "t"}
    return pb.RememberRequest(**{**base, **f})


def derive(ids: Ids, **f: Any) -> pb.DeriveRequest:
    base: dict[str, Any] = {
        "request_id": rid(),
        "kind": cpb.KIND_SUMMARY,
        "title": "t",
        "source_ids": [ids["memory"]],
    }
    return pb.DeriveRequest(**{**base, **f})


def correct(ids: Ids, **f: Any) -> pb.CorrectRequest:
    base: dict[str, Any] = {
        "request_id": rid(),
        "id": ids["memory"],
        "expected_revision": 1,
        "body": "b",
        "reason": "r",
    }
    return pb.CorrectRequest(**{**base, **f})


def supersede(ids: Ids, **f: Any) -> pb.SupersedeRequest:
    base: dict[str, Any] = {
        "request_id": rid(),
        "id": ids["memory"],
        "expected_revision": 1,
        "kind": cpb.KIND_NOTE,
        "title": "t",
    }
    return pb.SupersedeRequest(**{**base, **f})


def forget(ids: Ids, **f: Any) -> pb.ForgetRequest:
    base: dict[str, Any] = {"request_id": rid(), "id": ids["memory"], "reason": "r"}
    return pb.ForgetRequest(**{**base, **f})


def recall(**f: Any) -> pb.RecallRequest:
    return pb.RecallRequest(**{"query": "fixture", **f})


def settings(fields: list[str], **values: Any) -> pb.UpdateSettingsRequest:
    return pb.UpdateSettingsRequest(
        settings=store_pb2.WorkspaceSettings(**values), update_fields=fields
    )


SQL = "x'); DROP TABLE memory; --"
BAD_UUIDS = {
    "empty": "",
    "word": "nope",
    "sql": SQL,
    "short": "1234-5678",
    "braces": "{" + "0" * 31 + "}",
    "NUL": "00000000-0000-0000-0000-00000000000\x00",
}
# Python's UUID parser takes Unicode digits: this one parses (as the nil
# UUID) and answers like any id that does not exist.
UNICODE_UUID = "-".join("\u0660" * n for n in (8, 4, 4, 4, 12))
# One id spelled as it is handed out and as the tools also take it.
SPELLINGS: dict[str, Callable[[str], str]] = {
    "alike": str,
    "upper case": str.upper,
    "in braces": lambda id_: "{" + id_ + "}",
    "without hyphens": lambda id_: id_.replace("-", ""),
}


def _mentioned_twice(spell: Callable[[str], str]) -> Callable[[Ids], Any]:
    def build(i: Ids) -> pb.RememberRequest:
        same = [i["entity"], spell(i["entity"])]
        return remember(mentions=[cpb.MentionInput(entity_id=e) for e in same])

    return build


CASES: list[Case] = []


def add(*cases: Case) -> None:
    CASES.extend(cases)


# -- remember ------------------------------------------------------------------
add(
    Case(
        "remember request_id newline",
        "memory",
        "Remember",
        lambda i: remember(request_id="a\nb"),
        INVALID,
        "request_id",
    ),
    Case(
        "remember request_id NUL",
        "memory",
        "Remember",
        lambda i: remember(request_id="a\x00b"),
        INVALID,
        "request_id",
    ),
    Case(
        "remember request_id reused for another tool",
        "memory",
        "Remember",
        lambda i: remember(request_id=i["derive_rid"]),
        INVALID,
        "request_id",
    ),
    Case(
        "remember kind negative", "memory", "Remember", lambda i: remember(kind=-1), INVALID, "kind"
    ),
    Case(
        "remember kind huge",
        "memory",
        "Remember",
        lambda i: remember(kind=2**31 - 1),
        INVALID,
        "kind",
    ),
    Case(
        "remember title newline only",
        "memory",
        "Remember",
        lambda i: remember(title="\n\t"),
        INVALID,
        "title",
    ),
    Case(
        "remember title 301 multibyte",
        "memory",
        "Remember",
        lambda i: remember(title="é" * 301),
        INVALID,
        "title",
    ),
    Case(
        "remember title empty", "memory", "Remember", lambda i: remember(title=""), INVALID, "title"
    ),
    Case(
        "remember body NUL",
        "memory",
        "Remember",
        lambda i: remember(body="ok\x00"),
        INVALID,
        "body",
    ),
    Case(
        "remember body 20001 emoji",
        "memory",
        "Remember",
        lambda i: remember(body="😀" * 20001),
        INVALID,
        "body",
    ),
    Case(
        "remember confidence inf",
        "memory",
        "Remember",
        lambda i: remember(confidence=float("inf")),
        INVALID,
        "confidence",
    ),
    Case(
        "remember confidence -inf",
        "memory",
        "Remember",
        lambda i: remember(confidence=float("-inf")),
        INVALID,
        "confidence",
    ),
    Case(
        "remember confidence huge",
        "memory",
        "Remember",
        lambda i: remember(confidence=1e308),
        INVALID,
        "confidence",
    ),
    Case(
        "remember purposes negative",
        "memory",
        "Remember",
        lambda i: remember(purposes=[-3]),
        INVALID,
        "purposes",
    ),
    Case(
        "remember purposes one bad of two",
        "memory",
        "Remember",
        lambda i: remember(purposes=[1, 99]),
        INVALID,
        "purposes",
    ),
    Case(
        "remember caller purpose negative",
        "memory",
        "Remember",
        lambda i: remember(purpose=-1),
        INVALID,
        "purpose",
    ),
    Case(
        "remember audience member sql",
        "memory",
        "Remember",
        lambda i: remember(audience=cpb.Audience(member_id=SQL)),
        INVALID,
        "audience.member_id",
    ),
    Case(
        "remember audience empty member",
        "memory",
        "Remember",
        lambda i: remember(audience=cpb.Audience(member_id="")),
        INVALID,
        "audience",
    ),
    Case(
        "remember mention other workspace's entity",
        "memory",
        "Remember",
        lambda i: remember(mentions=[cpb.MentionInput(entity_id=i["foreign_entity"])]),
        NOT_FOUND,
        "mentions[0].entity_id",
    ),
    Case(
        "remember mention name NUL",
        "memory",
        "Remember",
        lambda i: remember(mentions=[cpb.MentionInput(name="a\x00")]),
        INVALID,
        "mentions[0].name",
    ),
    Case(
        "remember mention name 201",
        "memory",
        "Remember",
        lambda i: remember(mentions=[cpb.MentionInput(name="n" * 201)]),
        INVALID,
        "mentions[0].name",
    ),
    Case(
        "remember second mention bad",
        "memory",
        "Remember",
        lambda i: remember(mentions=[cpb.MentionInput(name="ok"), cpb.MentionInput(entity_id="x")]),
        INVALID,
        "mentions[1].entity_id",
    ),
    # The same entity twice, spelled alike or not: any spelling of a UUID is one id.
    *(
        Case(
            f"remember same entity mentioned twice {how}",
            "memory",
            "Remember",
            _mentioned_twice(spell),
            INVALID,
            "mentions",
        )
        for how, spell in SPELLINGS.items()
    ),
    Case(
        "remember about other workspace's memory",
        "memory",
        "Remember",
        lambda i: remember(about_ids=[i["foreign"]]),
        NOT_FOUND,
        "about_ids",
    ),
    Case(
        "remember about forgotten",
        "memory",
        "Remember",
        lambda i: remember(about_ids=[i["forgotten"]]),
        NOT_FOUND,
        "about_ids",
    ),
    Case(
        "remember about 51",
        "memory",
        "Remember",
        lambda i: remember(about_ids=[str(uuid.uuid4()) for _ in range(51)]),
        INVALID,
        "about_ids",
    ),
    Case(
        "remember about sql literal",
        "memory",
        "Remember",
        lambda i: remember(about_ids=[SQL]),
        INVALID,
        "about_ids[0]",
    ),
    Case(
        "remember about second bad",
        "memory",
        "Remember",
        lambda i: remember(about_ids=[i["memory"], "zz"]),
        INVALID,
        "about_ids[1]",
    ),
)
for label, value in BAD_UUIDS.items():
    if value:
        add(
            Case(
                f"remember about {label}",
                "memory",
                "Remember",
                lambda i, v=value: remember(about_ids=[v]),
                INVALID,
                "about_ids[0]",
            )
        )

# -- derive --------------------------------------------------------------------
add(
    Case(
        "derive from other workspace",
        "memory",
        "Derive",
        lambda i: derive(i, source_ids=[i["foreign"]]),
        NOT_FOUND,
        "source_ids",
    ),
    Case(
        "derive from hidden",
        "memory",
        "Derive",
        lambda i: derive(i, source_ids=[i["hidden"]]),
        NOT_FOUND,
        "source_ids",
    ),
    Case(
        "derive from forgotten",
        "memory",
        "Derive",
        lambda i: derive(i, source_ids=[i["forgotten"]]),
        NOT_FOUND,
        "source_ids",
    ),
    Case(
        "derive hidden among visible",
        "memory",
        "Derive",
        lambda i: derive(i, source_ids=[i["memory"], i["hidden"]]),
        NOT_FOUND,
        "source_ids",
    ),
    Case(
        "derive 51 sources",
        "memory",
        "Derive",
        lambda i: derive(i, source_ids=[str(uuid.uuid4()) for _ in range(51)]),
        INVALID,
        "source_ids",
    ),
    Case(
        "derive member-only with member-for-ada",
        "memory",
        "Derive",
        lambda i: derive(
            i, source_ids=[i["ada_only"], i["bob_shared"]], audience=cpb.Audience(workspace=True)
        ),
        INVALID,
        "audience",
    ),
    Case(
        "derive disjoint purposes",
        "memory",
        "Derive",
        lambda i: derive(i, source_ids=[i["memory"], i["audit_only"]]),
        NOT_FOUND,
        "source_ids",
    ),
    Case(
        "derive widen audience",
        "memory",
        "Derive",
        lambda i: derive(i, source_ids=[i["ada_only"]], audience=cpb.Audience(workspace=True)),
        INVALID,
        "audience",
    ),
    Case(
        "derive widen purposes",
        "memory",
        "Derive",
        lambda i: derive(i, purposes=[cpb.PURPOSE_AUDIT]),
        INVALID,
        "purposes",
    ),
    Case("derive kind unknown", "memory", "Derive", lambda i: derive(i, kind=42), INVALID, "kind"),
    Case(
        "derive title NUL", "memory", "Derive", lambda i: derive(i, title="\x00"), INVALID, "title"
    ),
    Case(
        "derive confidence NaN",
        "memory",
        "Derive",
        lambda i: derive(i, confidence=float("nan")),
        INVALID,
        "confidence",
    ),
    Case(
        "derive no request id",
        "memory",
        "Derive",
        lambda i: derive(i, request_id=""),
        INVALID,
        "request_id",
    ),
    Case(
        "derive purpose unknown",
        "memory",
        "Derive",
        lambda i: derive(i, purpose=5),
        INVALID,
        "purpose",
    ),
    Case(
        "derive audience other workspace member",
        "memory",
        "Derive",
        lambda i: derive(i, audience=cpb.Audience(member_id=i["stranger"])),
        INVALID,
        "audience.member_id",
    ),
)
for label, value in BAD_UUIDS.items():
    if value:
        add(
            Case(
                f"derive source {label}",
                "memory",
                "Derive",
                lambda i, v=value: derive(i, source_ids=[v]),
                INVALID,
                "source_ids[0]",
            )
        )

# -- correct -------------------------------------------------------------------
add(
    Case(
        "correct other workspace",
        "memory",
        "Correct",
        lambda i: correct(i, id=i["foreign"]),
        NOT_FOUND,
        "memory",
    ),
    Case(
        "correct forgotten",
        "memory",
        "Correct",
        lambda i: correct(i, id=i["forgotten"]),
        NOT_FOUND,
        "memory",
    ),
    Case(
        "correct superseded",
        "memory",
        "Correct",
        lambda i: correct(i, id=i["superseded"]),
        PRECONDITION,
        "id",
    ),
    Case(
        "correct negative revision",
        "memory",
        "Correct",
        lambda i: correct(i, expected_revision=-5),
        INVALID,
        "expected_revision",
    ),
    Case(
        "correct huge revision",
        "memory",
        "Correct",
        lambda i: correct(i, expected_revision=2**62),
        ABORTED,
        "expected_revision",
    ),
    Case(
        "correct revision 2 (stale)",
        "memory",
        "Correct",
        lambda i: correct(i, expected_revision=2),
        ABORTED,
        "expected_revision",
    ),
    Case(
        "correct title NUL",
        "memory",
        "Correct",
        lambda i: correct(i, title="a\x00"),
        INVALID,
        "title",
    ),
    Case(
        "correct title 301",
        "memory",
        "Correct",
        lambda i: correct(i, title="t" * 301),
        INVALID,
        "title",
    ),
    Case(
        "correct body 20001",
        "memory",
        "Correct",
        lambda i: correct(i, body="b" * 20001),
        INVALID,
        "body",
    ),
    Case(
        "correct body NUL", "memory", "Correct", lambda i: correct(i, body="\x00"), INVALID, "body"
    ),
    Case(
        "correct confidence 2",
        "memory",
        "Correct",
        lambda i: correct(i, confidence=2.0),
        INVALID,
        "confidence",
    ),
    Case(
        "correct confidence NaN",
        "memory",
        "Correct",
        lambda i: correct(i, confidence=float("nan")),
        INVALID,
        "confidence",
    ),
    Case(
        "correct reason NUL",
        "memory",
        "Correct",
        lambda i: correct(i, reason="\x00"),
        INVALID,
        "reason",
    ),
    Case(
        "correct reason 1001",
        "memory",
        "Correct",
        lambda i: correct(i, reason="r" * 1001),
        INVALID,
        "reason",
    ),
    Case(
        "correct reason blank",
        "memory",
        "Correct",
        lambda i: correct(i, reason="   "),
        INVALID,
        "reason",
    ),
    Case(
        "correct no request id",
        "memory",
        "Correct",
        lambda i: correct(i, request_id=""),
        INVALID,
        "request_id",
    ),
    Case(
        "correct purpose unknown",
        "memory",
        "Correct",
        lambda i: correct(i, purpose=77),
        INVALID,
        "purpose",
    ),
    Case(
        "correct by non-audience member",
        "memory",
        "Correct",
        lambda i: correct(i, id=i["ada_only"]),
        NOT_FOUND,
        "memory",
        who="bob",
    ),
    Case(
        "correct with wrong purpose",
        "memory",
        "Correct",
        lambda i: correct(i, purpose=cpb.PURPOSE_AUTOMATE),
        NOT_FOUND,
        "memory",
    ),
)
for label, value in BAD_UUIDS.items():
    add(
        Case(
            f"correct id {label}",
            "memory",
            "Correct",
            lambda i, v=value: correct(i, id=v),
            INVALID,
            "id",
        )
    )

# -- supersede -----------------------------------------------------------------
add(
    Case(
        "supersede other workspace",
        "memory",
        "Supersede",
        lambda i: supersede(i, id=i["foreign"]),
        NOT_FOUND,
        "memory",
    ),
    Case(
        "supersede hidden",
        "memory",
        "Supersede",
        lambda i: supersede(i, id=i["hidden"]),
        NOT_FOUND,
        "memory",
    ),
    Case(
        "supersede forgotten",
        "memory",
        "Supersede",
        lambda i: supersede(i, id=i["forgotten"]),
        NOT_FOUND,
        "memory",
    ),
    Case(
        "supersede already superseded",
        "memory",
        "Supersede",
        lambda i: supersede(i, id=i["superseded"]),
        PRECONDITION,
        "id",
    ),
    Case(
        "supersede revision 0",
        "memory",
        "Supersede",
        lambda i: supersede(i, expected_revision=0),
        INVALID,
        "expected_revision",
    ),
    Case(
        "supersede revision -1",
        "memory",
        "Supersede",
        lambda i: supersede(i, expected_revision=-1),
        INVALID,
        "expected_revision",
    ),
    Case(
        "supersede stale revision",
        "memory",
        "Supersede",
        lambda i: supersede(i, expected_revision=9),
        ABORTED,
        "expected_revision",
    ),
    Case(
        "supersede kind unknown",
        "memory",
        "Supersede",
        lambda i: supersede(i, kind=9),
        INVALID,
        "kind",
    ),
    Case(
        "supersede title blank",
        "memory",
        "Supersede",
        lambda i: supersede(i, title=" "),
        INVALID,
        "title",
    ),
    Case(
        "supersede body NUL",
        "memory",
        "Supersede",
        lambda i: supersede(i, body="\x00"),
        INVALID,
        "body",
    ),
    Case(
        "supersede reason 1001",
        "memory",
        "Supersede",
        lambda i: supersede(i, reason="r" * 1001),
        INVALID,
        "reason",
    ),
    Case(
        "supersede purposes unknown",
        "memory",
        "Supersede",
        lambda i: supersede(i, purposes=[9]),
        INVALID,
        "purposes",
    ),
    Case(
        "supersede audience bad",
        "memory",
        "Supersede",
        lambda i: supersede(i, audience=cpb.Audience(member_id="x")),
        INVALID,
        "audience.member_id",
    ),
    Case(
        "supersede mention bad",
        "memory",
        "Supersede",
        lambda i: supersede(i, mentions=[cpb.MentionInput(entity_id="x")]),
        INVALID,
        "mentions[0].entity_id",
    ),
    Case(
        "supersede same entity mentioned twice upper case",
        "memory",
        "Supersede",
        lambda i: supersede(
            i,
            mentions=[
                cpb.MentionInput(entity_id=i["entity"]),
                cpb.MentionInput(entity_id=i["entity"].upper()),
            ],
        ),
        INVALID,
        "mentions",
    ),
    Case(
        "supersede confidence -1",
        "memory",
        "Supersede",
        lambda i: supersede(i, confidence=-1.0),
        INVALID,
        "confidence",
    ),
    Case(
        "supersede no request id",
        "memory",
        "Supersede",
        lambda i: supersede(i, request_id=""),
        INVALID,
        "request_id",
    ),
)
for label, value in BAD_UUIDS.items():
    add(
        Case(
            f"supersede id {label}",
            "memory",
            "Supersede",
            lambda i, v=value: supersede(i, id=v),
            INVALID,
            "id",
        )
    )

# -- forget --------------------------------------------------------------------
add(
    Case(
        "forget other workspace",
        "memory",
        "Forget",
        lambda i: forget(i, id=i["foreign"]),
        NOT_FOUND,
        "memory",
    ),
    Case(
        "forget hidden",
        "memory",
        "Forget",
        lambda i: forget(i, id=i["hidden"]),
        NOT_FOUND,
        "memory",
    ),
    Case(
        "forget forgotten again",
        "memory",
        "Forget",
        lambda i: forget(i, id=i["forgotten"]),
        NOT_FOUND,
        "memory",
    ),
    Case(
        "forget reason NUL",
        "memory",
        "Forget",
        lambda i: forget(i, reason="\x00"),
        INVALID,
        "reason",
    ),
    Case(
        "forget reason blank",
        "memory",
        "Forget",
        lambda i: forget(i, reason=" \n"),
        INVALID,
        "reason",
    ),
    Case(
        "forget no request id",
        "memory",
        "Forget",
        lambda i: forget(i, request_id=""),
        INVALID,
        "request_id",
    ),
    Case(
        "forget request id 129",
        "memory",
        "Forget",
        lambda i: forget(i, request_id="f" * 129),
        INVALID,
        "request_id",
    ),
    Case(
        "forget purpose unknown",
        "memory",
        "Forget",
        lambda i: forget(i, purpose=-2),
        INVALID,
        "purpose",
    ),
    Case(
        "forget by non-audience member",
        "memory",
        "Forget",
        lambda i: forget(i, id=i["ada_only"]),
        NOT_FOUND,
        "memory",
        who="bob",
    ),
)
for label, value in BAD_UUIDS.items():
    add(
        Case(
            f"forget id {label}",
            "memory",
            "Forget",
            lambda i, v=value: forget(i, id=v),
            INVALID,
            "id",
        )
    )

# -- read ----------------------------------------------------------------------
add(
    Case(
        "read other workspace",
        "memory",
        "Read",
        lambda i: pb.ReadRequest(ids=[i["foreign"]]),
        NOT_FOUND,
        "ids",
    ),
    Case(
        "read hidden",
        "memory",
        "Read",
        lambda i: pb.ReadRequest(ids=[i["hidden"]]),
        NOT_FOUND,
        "ids",
    ),
    Case(
        "read forgotten",
        "memory",
        "Read",
        lambda i: pb.ReadRequest(ids=[i["forgotten"]]),
        NOT_FOUND,
        "ids",
    ),
    Case(
        "read visible plus hidden",
        "memory",
        "Read",
        lambda i: pb.ReadRequest(ids=[i["memory"], i["hidden"]]),
        NOT_FOUND,
        "ids",
    ),
    Case(
        "read purpose unknown",
        "memory",
        "Read",
        lambda i: pb.ReadRequest(ids=[i["memory"]], purpose=9),
        INVALID,
        "purpose",
    ),
    Case(
        "read wrong purpose",
        "memory",
        "Read",
        lambda i: pb.ReadRequest(ids=[i["audit_only"]]),
        NOT_FOUND,
        "ids",
    ),
    Case(
        "read unicode-digit uuid",
        "memory",
        "Read",
        lambda i: pb.ReadRequest(ids=[UNICODE_UUID]),
        NOT_FOUND,
        "ids",
    ),
    Case(
        "read second id bad",
        "memory",
        "Read",
        lambda i: pb.ReadRequest(ids=[i["memory"], "x"]),
        INVALID,
        "ids[1]",
    ),
)
for label, value in BAD_UUIDS.items():
    add(
        Case(
            f"read id {label}",
            "memory",
            "Read",
            lambda i, v=value: pb.ReadRequest(ids=[v]),
            INVALID,
            "ids[0]",
        )
    )

# -- recall: refused -------------------------------------------------------------
add(
    Case("recall NUL", "memory", "Recall", lambda i: recall(query="a\x00b"), INVALID, "query"),
    Case(
        "recall 2001 chars",
        "memory",
        "Recall",
        lambda i: recall(query="q" * 2001),
        INVALID,
        "query",
    ),
    Case(
        "recall only whitespace",
        "memory",
        "Recall",
        lambda i: recall(query="\t\n "),
        INVALID,
        "query",
    ),
    Case("recall empty", "memory", "Recall", lambda i: recall(query=""), INVALID, "query"),
    Case(
        "recall limit max int",
        "memory",
        "Recall",
        lambda i: recall(limit=2**31 - 1),
        INVALID,
        "limit",
    ),
    Case(
        "recall limit min int",
        "memory",
        "Recall",
        lambda i: recall(limit=-(2**31)),
        INVALID,
        "limit",
    ),
    Case("recall mode negative", "memory", "Recall", lambda i: recall(mode=-1), INVALID, "mode"),
    Case(
        "recall purpose unknown",
        "memory",
        "Recall",
        lambda i: recall(purpose=6),
        INVALID,
        "purpose",
    ),
    Case(
        "recall filter kind unknown",
        "memory",
        "Recall",
        lambda i: recall(filters=cpb.RecallFilters(kinds=[9])),
        INVALID,
        "filters.kinds",
    ),
    Case(
        "recall filter entity bad uuid",
        "memory",
        "Recall",
        lambda i: recall(filters=cpb.RecallFilters(mention_entity_ids=[SQL])),
        INVALID,
        "filters.mention_entity_ids",
    ),
)

# -- recall: hostile text that must answer normally ------------------------------
METACHAR_QUERIES = [
    "& | ! ( ) : * ' \\ ;",
    "fixture & | !",
    "!!!",
    "(((fixture",
    "fixture)))",
    "fixture:*",
    "':*",
    "a <-> b",
    "!(fixture | memory)",
    "fixture' OR '1'='1",
    SQL,
    "\\",
    "\\\\'",
    "$$; SELECT pg_sleep(10); $$",
    "%_%",
    "fixture; DELETE FROM memory",
    "\u202efixture",
    "fixture \U0001f600 \u0000".replace("\u0000", ""),
    "*",
    ":",
    "'",
    "&&&&&& ||||||",
]
for n, query in enumerate(METACHAR_QUERIES):
    for mode in (cpb.RECALL_MODE_LEXICAL, cpb.RECALL_MODE_HYBRID):
        add(
            Case(
                f"recall metachar {n} mode {mode}",
                "memory",
                "Recall",
                lambda i, q=query, m=mode: recall(query=q, mode=m),
                OK,
                "",
            )
        )

# -- capture -------------------------------------------------------------------
add(
    Case(
        "capture NUL",
        "memory",
        "Capture",
        lambda i: pb.CaptureRequest(text="remember this\x00"),
        INVALID,
        "text",
    ),
    Case(
        "capture 20001",
        "memory",
        "Capture",
        lambda i: pb.CaptureRequest(text="x" * 20001),
        INVALID,
        "text",
    ),
    Case(
        "capture for another member",
        "memory",
        "Capture",
        lambda i: pb.CaptureRequest(text="hello", speaker_member_id=i["bob"]),
        INVALID,
        "speaker_member_id",
    ),
    Case(
        "capture purpose unknown",
        "memory",
        "Capture",
        lambda i: pb.CaptureRequest(text="we decided to ship friday", purpose=8),
        INVALID,
        "purpose",
    ),
)

# -- review --------------------------------------------------------------------
add(
    Case(
        "pairs limit 201",
        "review",
        "ListDuplicatePairs",
        lambda i: pb.ListDuplicatePairsRequest(limit=201),
        INVALID,
        "limit",
    ),
    Case(
        "pairs limit negative",
        "review",
        "ListDuplicatePairs",
        lambda i: pb.ListDuplicatePairsRequest(limit=-1),
        INVALID,
        "limit",
    ),
    Case(
        "pairs purpose unknown",
        "review",
        "ListDuplicatePairs",
        lambda i: pb.ListDuplicatePairsRequest(purpose=9),
        INVALID,
        "purpose",
    ),
    Case(
        "dismiss bad uuid",
        "review",
        "DismissDuplicatePair",
        lambda i: pb.DismissDuplicatePairRequest(first_id="x", second_id=i["memory"]),
        INVALID,
        "first_id",
    ),
    Case(
        "dismiss hidden",
        "review",
        "DismissDuplicatePair",
        lambda i: pb.DismissDuplicatePairRequest(first_id=i["memory"], second_id=i["hidden"]),
        NOT_FOUND,
        "memory",
    ),
    Case(
        "dismiss other workspace",
        "review",
        "DismissDuplicatePair",
        lambda i: pb.DismissDuplicatePairRequest(first_id=i["foreign"], second_id=i["memory"]),
        NOT_FOUND,
        "memory",
    ),
)

# -- admin ---------------------------------------------------------------------
for label, slug in {
    "empty": "",
    "upper": "Acme",
    "leading dash": "-acme",
    "64 chars": "a" * 64,
    "space": "a b",
    "sql": SQL,
    "NUL": "ac\x00me",
    "unicode": "ácme",
}.items():
    add(
        Case(
            f"create workspace slug {label}",
            "admin",
            "CreateWorkspace",
            lambda i, s=slug: pb.AdminServiceCreateWorkspaceRequest(slug=s),
            INVALID,
            "slug",
            who="operator",
        )
    )
add(
    Case(
        "create workspace slug taken",
        "admin",
        "CreateWorkspace",
        lambda i: pb.AdminServiceCreateWorkspaceRequest(slug=i["slug"]),
        EXISTS,
        "slug",
        who="operator",
    ),
    Case(
        "create workspace by owner",
        "admin",
        "CreateWorkspace",
        lambda i: pb.AdminServiceCreateWorkspaceRequest(slug="never"),
        DENIED,
        "operator",
    ),
    Case(
        "create member bad handle",
        "admin",
        "CreateMember",
        lambda i: pb.AdminServiceCreateMemberRequest(handle="a b", role=cpb.ROLE_MEMBER),
        INVALID,
        "handle",
    ),
    Case(
        "create member handle sql",
        "admin",
        "CreateMember",
        lambda i: pb.AdminServiceCreateMemberRequest(handle=SQL, role=cpb.ROLE_MEMBER),
        INVALID,
        "handle",
    ),
    Case(
        "create member handle 64",
        "admin",
        "CreateMember",
        lambda i: pb.AdminServiceCreateMemberRequest(handle="h" * 64, role=cpb.ROLE_MEMBER),
        INVALID,
        "handle",
    ),
    Case(
        "create member handle NUL",
        "admin",
        "CreateMember",
        lambda i: pb.AdminServiceCreateMemberRequest(handle="a\x00", role=cpb.ROLE_MEMBER),
        INVALID,
        "handle",
    ),
    Case(
        "create member role unknown",
        "admin",
        "CreateMember",
        lambda i: pb.AdminServiceCreateMemberRequest(handle="newbie", role=7),
        INVALID,
        "role",
    ),
    Case(
        "create member other workspace",
        "admin",
        "CreateMember",
        lambda i: pb.AdminServiceCreateMemberRequest(
            workspace_id=i["foreign_ws"], handle="spy", role=cpb.ROLE_MEMBER
        ),
        NOT_FOUND,
        "workspace_id",
    ),
    Case(
        "create member by member",
        "admin",
        "CreateMember",
        lambda i: pb.AdminServiceCreateMemberRequest(handle="x", role=cpb.ROLE_MEMBER),
        DENIED,
        "owner",
        who="bob",
    ),
    Case(
        "create member operator bad workspace",
        "admin",
        "CreateMember",
        lambda i: pb.AdminServiceCreateMemberRequest(
            workspace_id="x", handle="x", role=cpb.ROLE_MEMBER
        ),
        INVALID,
        "workspace_id",
        who="operator",
    ),
    Case(
        "create member operator unknown workspace",
        "admin",
        "CreateMember",
        lambda i: pb.AdminServiceCreateMemberRequest(
            workspace_id=str(uuid.uuid4()), handle="x", role=cpb.ROLE_MEMBER
        ),
        NOT_FOUND,
        "workspace",
        who="operator",
    ),
    Case(
        "create token bad member",
        "admin",
        "CreateToken",
        lambda i: pb.AdminServiceCreateTokenRequest(member_id="x"),
        INVALID,
        "member_id",
    ),
    Case(
        "create token other workspace member",
        "admin",
        "CreateToken",
        lambda i: pb.AdminServiceCreateTokenRequest(member_id=i["stranger"]),
        NOT_FOUND,
        "member",
    ),
    Case(
        "create token label 201",
        "admin",
        "CreateToken",
        lambda i: pb.AdminServiceCreateTokenRequest(member_id=i["bob"], label="l" * 201),
        INVALID,
        "label",
    ),
    Case(
        "create token by member",
        "admin",
        "CreateToken",
        lambda i: pb.AdminServiceCreateTokenRequest(member_id=i["bob"]),
        DENIED,
        "owner",
        who="bob",
    ),
    Case(
        "revoke token bad uuid",
        "admin",
        "RevokeToken",
        lambda i: pb.AdminServiceRevokeTokenRequest(token_id=SQL),
        INVALID,
        "token_id",
    ),
    Case(
        "revoke token unknown",
        "admin",
        "RevokeToken",
        lambda i: pb.AdminServiceRevokeTokenRequest(token_id=str(uuid.uuid4())),
        NOT_FOUND,
        "token",
    ),
    Case(
        "revoke token of other workspace",
        "admin",
        "RevokeToken",
        lambda i: pb.AdminServiceRevokeTokenRequest(token_id=i["foreign_token"]),
        NOT_FOUND,
        "token",
    ),
    Case(
        "revoke token by member",
        "admin",
        "RevokeToken",
        lambda i: pb.AdminServiceRevokeTokenRequest(token_id=i["ada_token"]),
        DENIED,
        "owner",
        who="bob",
    ),
    Case(
        "settings dense_floor 1.5",
        "admin",
        "UpdateSettings",
        lambda i: settings(["dense_floor"], dense_floor=1.5),
        INVALID,
        "settings.dense_floor",
    ),
    Case(
        "settings dense_floor -0.1",
        "admin",
        "UpdateSettings",
        lambda i: settings(["dense_floor"], dense_floor=-0.1),
        INVALID,
        "settings.dense_floor",
    ),
    Case(
        "settings dense_floor NaN",
        "admin",
        "UpdateSettings",
        lambda i: settings(["dense_floor"], dense_floor=float("nan")),
        INVALID,
        "settings.dense_floor",
    ),
    Case(
        "settings rerank_depth 101",
        "admin",
        "UpdateSettings",
        lambda i: settings(["rerank_depth"], rerank_depth=101),
        INVALID,
        "settings.rerank_depth",
    ),
    Case(
        "settings rerank_depth -1",
        "admin",
        "UpdateSettings",
        lambda i: settings(["rerank_depth"], rerank_depth=-1),
        INVALID,
        "settings.rerank_depth",
    ),
    Case(
        "settings expiry -1",
        "admin",
        "UpdateSettings",
        lambda i: settings(["expiry_days"], expiry_days=-1),
        INVALID,
        "settings.expiry_days",
    ),
    Case(
        "settings expiry 36501",
        "admin",
        "UpdateSettings",
        lambda i: settings(["expiry_days"], expiry_days=36501),
        INVALID,
        "settings.expiry_days",
    ),
    Case(
        "settings mode unknown",
        "admin",
        "UpdateSettings",
        lambda i: settings(["default_recall_mode"], default_recall_mode=9),
        INVALID,
        "settings.default_recall_mode",
    ),
    Case(
        "settings mode unspecified",
        "admin",
        "UpdateSettings",
        lambda i: settings(["default_recall_mode"]),
        INVALID,
        "settings.default_recall_mode",
    ),
    Case(
        "settings field unknown",
        "admin",
        "UpdateSettings",
        lambda i: settings(["nope"]),
        INVALID,
        "update_fields",
    ),
    Case(
        "settings no fields",
        "admin",
        "UpdateSettings",
        lambda i: settings([]),
        INVALID,
        "update_fields",
    ),
    Case(
        "settings field sql",
        "admin",
        "UpdateSettings",
        lambda i: settings([SQL]),
        INVALID,
        "update_fields",
    ),
    Case(
        "settings by member",
        "admin",
        "UpdateSettings",
        lambda i: settings(["rerank_depth"], rerank_depth=5),
        DENIED,
        "owner",
        who="bob",
    ),
    Case(
        "status by member",
        "admin",
        "GetStatus",
        lambda i: pb.GetStatusRequest(),
        DENIED,
        "owner",
        who="bob",
    ),
    Case(
        "settings read by operator",
        "admin",
        "GetSettings",
        lambda i: pb.GetSettingsRequest(),
        UNAUTH,
        "authorization",
        who="operator",
    ),
)
