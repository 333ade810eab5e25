"""The bad-input corpus's cases for read, recall, capture and review."""

from __future__ import annotations

import uuid

from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from tests.security.corpus.base import (
    BAD_UUIDS,
    INVALID,
    NOT_FOUND,
    OK,
    SQL,
    UNICODE_UUID,
    Case,
    recall,
)

CASES: list[Case] = []


def add(*cases: Case) -> None:
    CASES.extend(cases)


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
        "second_id: memory not found",
    ),
    Case(
        "dismiss other workspace",
        "review",
        "DismissDuplicatePair",
        lambda i: pb.DismissDuplicatePairRequest(first_id=i["foreign"], second_id=i["memory"]),
        NOT_FOUND,
        "first_id: memory not found",
    ),
)


# -- entity merges: a hidden entity, another workspace's and one that does not
# exist are refused alike, naming the field that holds it -------------------
add(
    Case(
        "merge kept hidden",
        "review",
        "MergeEntities",
        lambda i: pb.MergeEntitiesRequest(kept_id=i["hidden_entity"], merged_id=i["entity"]),
        NOT_FOUND,
        "kept_id: entity not found",
    ),
    Case(
        "merge merged other workspace",
        "review",
        "MergeEntities",
        lambda i: pb.MergeEntitiesRequest(kept_id=i["entity"], merged_id=i["foreign_entity"]),
        NOT_FOUND,
        "merged_id: entity not found",
    ),
    Case(
        "merge merged unknown",
        "review",
        "MergeEntities",
        lambda i: pb.MergeEntitiesRequest(kept_id=i["entity"], merged_id=str(uuid.uuid4())),
        NOT_FOUND,
        "merged_id: entity not found",
    ),
    Case(
        "merge neither found",
        "review",
        "MergeEntities",
        lambda i: pb.MergeEntitiesRequest(
            kept_id=i["foreign_entity"], merged_id=i["hidden_entity"]
        ),
        NOT_FOUND,
        "kept_id: entity not found",
    ),
    Case(
        "apart first hidden",
        "review",
        "KeepEntitiesApart",
        lambda i: pb.KeepEntitiesApartRequest(first_id=i["hidden_entity"], second_id=i["entity"]),
        NOT_FOUND,
        "first_id: entity not found",
    ),
    Case(
        "apart second other workspace",
        "review",
        "KeepEntitiesApart",
        lambda i: pb.KeepEntitiesApartRequest(first_id=i["entity"], second_id=i["foreign_entity"]),
        NOT_FOUND,
        "second_id: entity not found",
    ),
    Case(
        "apart second unknown",
        "review",
        "KeepEntitiesApart",
        lambda i: pb.KeepEntitiesApartRequest(first_id=i["entity"], second_id=str(uuid.uuid4())),
        NOT_FOUND,
        "second_id: entity not found",
    ),
    Case(
        "undo unknown",
        "review",
        "UndoEntityMerge",
        lambda i: pb.UndoEntityMergeRequest(merge_id=str(uuid.uuid4())),
        NOT_FOUND,
        "merge_id: no merge in force",
    ),
    Case(
        "undo bad uuid",
        "review",
        "UndoEntityMerge",
        lambda i: pb.UndoEntityMergeRequest(merge_id="x"),
        INVALID,
        "merge_id",
    ),
)
