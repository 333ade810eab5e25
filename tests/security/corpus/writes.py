"""The bad-input corpus's cases for remember and derive."""

from __future__ import annotations

import uuid

from recallatron.v1 import common_pb2 as cpb
from tests.security.corpus.base import (
    BAD_UUIDS,
    INVALID,
    NOT_FOUND,
    SPELLINGS,
    SQL,
    Case,
    _mentioned_twice,
    derive,
    remember,
)

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
