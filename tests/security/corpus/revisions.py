"""The bad-input corpus's cases for correct, supersede and forget."""

from __future__ import annotations

from recallatron.v1 import common_pb2 as cpb
from tests.security.corpus.base import (
    ABORTED,
    BAD_UUIDS,
    INVALID,
    NOT_FOUND,
    PRECONDITION,
    Case,
    correct,
    forget,
    supersede,
)

CASES: list[Case] = []


def add(*cases: Case) -> None:
    CASES.extend(cases)


# -- correct -------------------------------------------------------------------
add(
    Case(
        "correct other workspace",
        "memory",
        "Correct",
        lambda i: correct(i, id=i["foreign"]),
        NOT_FOUND,
        "id: ",
    ),
    Case(
        "correct forgotten",
        "memory",
        "Correct",
        lambda i: correct(i, id=i["forgotten"]),
        NOT_FOUND,
        "id: ",
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
        "id: ",
        who="bob",
    ),
    Case(
        "correct with wrong purpose",
        "memory",
        "Correct",
        lambda i: correct(i, purpose=cpb.PURPOSE_AUTOMATE),
        NOT_FOUND,
        "id: ",
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
        "id: ",
    ),
    Case(
        "supersede hidden",
        "memory",
        "Supersede",
        lambda i: supersede(i, id=i["hidden"]),
        NOT_FOUND,
        "id: ",
    ),
    Case(
        "supersede forgotten",
        "memory",
        "Supersede",
        lambda i: supersede(i, id=i["forgotten"]),
        NOT_FOUND,
        "id: ",
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
        "id: ",
    ),
    Case(
        "forget hidden",
        "memory",
        "Forget",
        lambda i: forget(i, id=i["hidden"]),
        NOT_FOUND,
        "id: ",
    ),
    Case(
        "forget forgotten again",
        "memory",
        "Forget",
        lambda i: forget(i, id=i["forgotten"]),
        NOT_FOUND,
        "id: ",
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
        "id: ",
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
