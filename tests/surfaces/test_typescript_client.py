"""The TypeScript client (clients/typescript/), built by `make ts-client`,
run with node against the local stack: its example remembers a memory the
gRPC API then reads, and its recall answers exactly as gRPC's and HTTP/JSON's
do; a refusal reaches it with its code and the field it names."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

from recallatron.client import Client
from recallatron.v1 import gateway_pb2 as pb
from recallatron_devkit.stack import Stack
from tests.surfaces.httpjson import QUERY, Member, call, owner_with_memories

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "clients" / "typescript" / "dist" / "examples" / "memory.js"


@pytest.fixture(scope="module")
def example() -> Path:
    """The compiled example; built here when `make test` has not built it."""
    if not EXAMPLE.exists():
        subprocess.run(["make", "-s", "ts-client"], cwd=REPO, check=True)
    assert shutil.which("node"), "node is needed for the TypeScript client"
    return EXAMPLE


@pytest.fixture(scope="module")
def owner(stack: Stack, operator: Client) -> Iterator[Member]:
    member = owner_with_memories(stack, operator)
    yield member
    member.client.close()


def node(
    stack: Stack, example: Path, token: str, *args: str, **more: str
) -> tuple[int, dict[str, Any]]:
    return run(example, *args, RECALLATRON_URL=stack.http_url, RECALLATRON_TOKEN=token, **more)


def run(example: Path, *args: str, **env: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        ["node", str(example), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.strip(), done.stderr
    return done.returncode, json.loads(done.stdout)


def nowhere() -> str:
    """host:port that nothing listens on: a call that reaches the wire there
    fails Unavailable, so any other answer came from the client itself."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        host, port = s.getsockname()
    return f"{host}:{port}"


def offline(example: Path, *args: str, **more: str) -> tuple[int, dict[str, Any]]:
    """The example against `nowhere`, over the client's own transport or
    (RECALLATRON_GRPC) one of the caller's, which takes no baseUrl."""
    return run(example, *args, **{"RECALLATRON_URL": f"http://{nowhere()}", **more})


def refused(printed: dict[str, Any]) -> tuple[str, list[str]]:
    error = printed.get("error", {})
    return error.get("code"), error.get("fields")


def test_an_integer_the_wire_cannot_carry_is_refused_before_sending(example: Path) -> None:
    """A limit of NaN or an infinity went as JSON null, so the server answered
    with its default; over gRPC it failed naming no field."""
    for transport in ({}, {"RECALLATRON_URL": "", "RECALLATRON_GRPC": nowhere()}):
        for limit in ("NaN", "Infinity", "-Infinity", "2.5", "3000000000"):
            code, printed = offline(example, "recall", QUERY, limit, **transport)
            assert (code, refused(printed)) == (1, ("InvalidArgument", ["limit"])), printed
            assert printed["error"]["message"].startswith("limit: "), printed
        code, printed = offline(example, "recall", QUERY, "3", **transport)
        assert refused(printed) == ("Unavailable", []), printed


def test_a_timeout_of_0_sets_no_deadline_and_a_bad_one_is_refused(example: Path) -> None:
    """timeoutMs 0 means no client deadline, so the call reaches the wire
    (Unavailable here, not DeadlineExceeded). A negative timeout went without
    any deadline, NaN and Infinity expired every call at once (a timer of
    1 ms); each is now refused naming timeoutMs."""
    for own in ("", "1"):
        code, printed = offline(
            example, "recall", QUERY, RECALLATRON_TIMEOUT_MS="0", RECALLATRON_OWN_TRANSPORT=own
        )
        assert refused(printed) == ("Unavailable", []), (own, printed)
        for bad in ("-1", "NaN", "Infinity", "1.5"):
            code, printed = offline(
                example, "recall", QUERY, RECALLATRON_TIMEOUT_MS=bad, RECALLATRON_OWN_TRANSPORT=own
            )
            assert (code, refused(printed)) == (1, ("InvalidArgument", ["timeoutMs"])), printed


def test_base_url_is_needed_only_without_a_transport(example: Path) -> None:
    """The example gives no baseUrl with a transport of its own (which failed
    to compile while baseUrl was required); without either the client names
    baseUrl instead of failing on an empty address."""
    code, printed = offline(example, "recall", QUERY, RECALLATRON_URL="")
    assert (code, refused(printed)) == (1, ("InvalidArgument", ["baseUrl"])), printed
    code, printed = offline(
        example, "recall", QUERY, RECALLATRON_URL="", RECALLATRON_GRPC=nowhere()
    )
    assert refused(printed) == ("Unavailable", []), printed


def test_recall_answers_alike_through_grpc_http_and_typescript(
    stack: Stack, example: Path, owner: Member
) -> None:
    by_grpc = owner.client.recall(QUERY, limit=5)
    assert by_grpc.outcome.results, "the memories were not recalled at all"
    status, answer = call(
        stack.http_url,
        "recallatron.v1.MemoryService/Recall",
        {"query": QUERY, "limit": 5},
        owner.token,
    )
    assert status == 200, answer
    code, printed = node(stack, example, owner.token, "recall", QUERY, "5")
    assert code == 0, printed
    by_http = json_format.ParseDict(answer, pb.RecallResponse())
    by_typescript = json_format.ParseDict(printed, pb.RecallResponse())
    assert by_http == by_grpc
    assert by_typescript == by_grpc


def test_typescript_remembers_what_grpc_reads(stack: Stack, example: Path, owner: Member) -> None:
    code, printed = node(
        stack, example, owner.token, "remember", "Lunch is at noon", "The canteen opens at 12."
    )
    assert code == 0, printed
    made = json_format.ParseDict(printed, pb.RememberResponse()).memory
    read = owner.client.read([made.id]).memories
    assert [m.title for m in read] == ["Lunch is at noon"]
    assert read[0].body == "The canteen opens at 12."


def test_a_typescript_retry_of_the_same_request_stores_one_memory(
    stack: Stack, example: Path, owner: Member
) -> None:
    """The client made a new request id on every call: a caller retrying the
    same request stored the memory twice."""
    code, printed = node(
        stack,
        example,
        owner.token,
        "remember",
        "Retried once",
        "Sent twice.",
        RECALLATRON_RETRY="1",
    )
    assert code == 0, printed
    again = json_format.ParseDict(printed, pb.RememberResponse())
    assert again.replayed
    found = owner.client.recall("Retried once sent twice", mode="lexical").outcome.results
    assert [r.memory.id for r in found if r.memory.title == "Retried once"] == [again.memory.id]


def test_a_refusal_reaches_typescript_with_its_code_and_field(
    stack: Stack, example: Path, owner: Member
) -> None:
    code, printed = node(stack, example, owner.token, "recall", QUERY, "99")
    assert code == 1
    assert printed["error"]["code"] == "InvalidArgument"
    assert printed["error"]["fields"] == ["limit"]
    code, printed = node(stack, example, "rc_not_a_token", "recall", QUERY)
    assert code == 1
    assert printed["error"]["code"] == "Unauthenticated"


def test_a_transport_of_the_callers_own_still_carries_the_token(
    stack: Stack, example: Path, owner: Member
) -> None:
    code, printed = node(
        stack, example, owner.token, "recall", QUERY, "3", RECALLATRON_OWN_TRANSPORT="1"
    )
    assert code == 0, printed
    assert printed["outcome"]["results"], printed


def test_a_transport_of_the_callers_own_still_keeps_the_deadline(
    stack: Stack, example: Path, owner: Member
) -> None:
    """timeoutMs was applied only to the transport the client made: with one
    of the caller's own, a call had no deadline at all (this recall answered)."""
    for own in ("", "1"):
        code, printed = node(
            stack,
            example,
            owner.token,
            "recall",
            QUERY,
            RECALLATRON_OWN_TRANSPORT=own,
            RECALLATRON_TIMEOUT_MS="1",
        )
        refused = printed.get("error", {}).get("code")
        assert (code, refused) == (1, "DeadlineExceeded"), (own, printed)


def test_a_callers_own_authorization_header_wins(
    stack: Stack, example: Path, owner: Member
) -> None:
    """The client's own transport set its token over the Authorization header
    a call gave (one given in the options kept it): this recall, whose header
    carries the member's token, was refused with the client's bad one."""
    for own in ("", "1"):
        code, printed = node(
            stack,
            example,
            "rc_not_a_token",
            "recall",
            QUERY,
            "3",
            RECALLATRON_OWN_TRANSPORT=own,
            RECALLATRON_CALL_TOKEN=owner.token,
        )
        assert code == 0, (own, printed)
        assert printed["outcome"]["results"], (own, printed)


def test_a_refusal_over_the_grpc_transport_names_its_field(
    stack: Stack, example: Path, owner: Member
) -> None:
    """fieldViolations read only the JSON copy ("debug") of a detail, which
    the Connect protocol's errors carry and gRPC's trailers do not: over the
    gRPC transport (the other the client offers) a refusal of `limit` named
    no field."""
    code, printed = node(
        stack, example, owner.token, "recall", QUERY, "3", RECALLATRON_GRPC=stack.gateway
    )
    assert code == 0, printed
    assert printed["outcome"]["results"], printed
    code, printed = node(
        stack, example, owner.token, "recall", QUERY, "99", RECALLATRON_GRPC=stack.gateway
    )
    assert code == 1
    assert printed["error"]["code"] == "InvalidArgument"
    assert printed["error"]["fields"] == ["limit"]
