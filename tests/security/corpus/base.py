"""What every part of the bad-input corpus uses: the case, the status codes,
the request builders and the bad ids."""

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
