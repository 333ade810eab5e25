"""HTTP/JSON (the Connect protocol, services/gateway/httpjson/) beside gRPC:
the same recall gives the same answer; errors keep their gRPC code, message
and details, with the Connect code and HTTP status of that code; every
method of the public services is reachable, and bad input to any of them is
a 4xx naming the field; the OpenAPI document lists every method."""

from __future__ import annotations

import gzip
import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any, cast

import pytest
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message_factory import GetMessageClass

from recallatron import wire
from recallatron.client import Client
from recallatron.v1 import common_pb2, gateway_pb2
from recallatron.v1 import gateway_pb2 as pb
from recallatron_devkit.stack import Stack
from tests.surfaces.httpjson import QUERY, Member, call, owner_with_memories, violations

pytestmark = pytest.mark.integration

SERVICES = [
    gateway_pb2.DESCRIPTOR.services_by_name[name]
    for name in ("MemoryService", "ReviewService", "AdminService")
]
METHODS = [m for s in SERVICES for m in s.methods]


@pytest.fixture(scope="module")
def owner(stack: Stack, operator: Client) -> Iterator[Member]:
    member = owner_with_memories(stack, operator)
    yield member
    member.client.close()


def test_recall_gives_the_same_answer_as_grpc(stack: Stack, owner: Member) -> None:
    by_grpc = owner.client.recall(QUERY, limit=5)
    assert by_grpc.outcome.results, "the memories were not recalled at all"
    status, answer = call(
        stack.http_url,
        "recallatron.v1.MemoryService/Recall",
        {"query": QUERY, "limit": 5},
        owner.token,
    )
    assert status == 200, answer
    by_http = json_format.ParseDict(answer, pb.RecallResponse())
    assert by_http == by_grpc
    # The JSON is the proto3 mapping: json names, enums by name.
    first = answer["outcome"]["results"][0]["memory"]
    assert {"id", "title", "createdAt"} <= set(first)
    assert answer["outcome"]["mode"].startswith("RECALL_MODE_")


def test_errors_keep_their_code_message_and_details(stack: Stack, owner: Member) -> None:
    recall = "recallatron.v1.MemoryService/Recall"
    status, answer = call(stack.http_url, recall, {"query": QUERY}, None)
    assert (status, answer["code"]) == (401, "unauthenticated")
    assert "authorization" in answer["message"]
    status, answer = call(stack.http_url, recall, {"query": QUERY}, "rc_not_a_token")
    assert (status, answer["code"]) == (401, "unauthenticated")
    # An owner's call made with a member's token is the operator's only.
    status, answer = call(
        stack.http_url, "recallatron.v1.AdminService/CreateWorkspace", {"slug": "x"}, owner.token
    )
    assert (status, answer["code"]) == (403, "permission_denied")
    # Refused by the gateway's own checks, with the field named as JSON names it.
    status, answer = call(stack.http_url, recall, {"query": QUERY, "limit": 99}, owner.token)
    assert (status, answer["code"]) == (400, "invalid_argument")
    assert violations(answer) == ["limit"]
    missing = str(uuid.uuid4())
    status, answer = call(
        stack.http_url, "recallatron.v1.MemoryService/Read", {"ids": [missing]}, owner.token
    )
    assert (status, answer["code"]) == (404, "not_found")
    # A lost race: ABORTED, with the current revision in its ErrorInfo.
    made = owner.client.remember("A note", "to correct", audience_to="workspace").memory
    status, answer = call(
        stack.http_url,
        "recallatron.v1.MemoryService/Correct",
        {
            "id": made.id,
            "expectedRevision": 7,
            "body": "new",
            "reason": "typo",
            "requestId": str(uuid.uuid4()),
        },
        owner.token,
    )
    assert (status, answer["code"]) == (409, "aborted"), answer
    info = [d for d in answer["details"] if d["type"] == "google.rpc.ErrorInfo"]
    assert info and info[0]["debug"]["metadata"]["current_revision"] == "1"


def test_the_callers_deadline_reaches_the_call(stack: Stack, owner: Member) -> None:
    recall = "recallatron.v1.MemoryService/Recall"
    timeout = {"Connect-Timeout-Ms": "1"}
    status, answer = call(stack.http_url, recall, {"query": QUERY}, owner.token, headers=timeout)
    assert (status, answer["code"]) == (504, "deadline_exceeded"), answer
    timeout = {"Connect-Timeout-Ms": "60000"}
    status, answer = call(stack.http_url, recall, {"query": QUERY}, owner.token, headers=timeout)
    assert status == 200, answer


def _rpc_total(stack: Stack, method: str, code: str) -> float:
    port = stack.config.metrics_ports["gateway"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    wanted = f'recallatron_rpc_total{{code="{code}",method="{method}"}}'
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(wanted)
    )


def test_calls_are_counted_in_the_grpc_metrics(stack: Stack, owner: Member) -> None:
    method = "/recallatron.v1.MemoryService/Lookup"
    ok, bad = _rpc_total(stack, method, "OK"), _rpc_total(stack, method, "INVALID_ARGUMENT")
    status, _ = call(stack.http_url, method[1:], {"name": "standup"}, owner.token)
    assert status == 200
    status, _ = call(stack.http_url, method[1:], {"name": []}, owner.token)
    assert status == 400
    assert _rpc_total(stack, method, "OK") == ok + 1
    assert _rpc_total(stack, method, "INVALID_ARGUMENT") == bad + 1


def _wrong_value(field: FieldDescriptor) -> Any:
    """A JSON value no proto3 JSON parser takes for ``field``."""
    if field.is_repeated or field.message_type is not None:
        return 5
    return {}


@pytest.mark.parametrize("method", METHODS, ids=lambda m: f"{m.containing_service.name}.{m.name}")
def test_every_method_answers_bad_input_with_a_4xx_naming_the_field(
    stack: Stack, owner: Member, method: Any
) -> None:
    path = f"{method.containing_service.full_name}/{method.name}"
    request_fields = cast(Descriptor, GetMessageClass(method.input_type).DESCRIPTOR).fields
    # Reachable: the empty request is served or refused, never not found or a 5xx,
    # and a refusal of a field names one of the request's.
    status, answer = call(stack.http_url, path, {}, owner.token)
    assert status == 200 or 400 <= status < 500, (status, answer)
    assert answer.get("code") != "unimplemented", answer
    if answer.get("code") == "invalid_argument":
        named = violations(answer)
        assert named, answer
        # As the caller's JSON names it.
        assert named[0].split(".")[0].split("[")[0] in {f.json_name for f in request_fields}, answer
    # A field the request does not have.
    status, answer = call(stack.http_url, path, {"noSuchField": 1}, owner.token)
    assert (status, answer["code"]) == (400, "invalid_argument"), answer
    assert violations(answer) == ["noSuchField"]
    # A value of the wrong type, for each of the request's fields.
    for field in request_fields:
        body = {field.json_name: _wrong_value(field)}
        status, answer = call(stack.http_url, path, body, owner.token)
        assert (status, answer["code"]) == (400, "invalid_argument"), (field.name, answer)
        assert violations(answer) == [field.json_name], answer


def test_bodies_that_are_not_requests(stack: Stack, owner: Member) -> None:
    recall = "recallatron.v1.MemoryService/Recall"
    status, answer = call(stack.http_url, recall, b"not json", owner.token)
    assert (status, answer["code"]) == (400, "invalid_argument")
    assert violations(answer) == ["request"]
    status, answer = call(
        stack.http_url, recall, b"\x0a\x02\xff\xfe", owner.token, "application/proto"
    )
    assert (status, answer["code"]) == (400, "invalid_argument")
    assert violations(answer) == ["query"]
    assert answer["message"] == f"query: {wire.NOT_UTF8}", answer
    status, answer = call(stack.http_url, recall, b"\x0a\x05ab", owner.token, "application/proto")
    assert (status, answer["message"]) == (400, f"request: {wire.MALFORMED}"), answer
    status, _ = call(stack.http_url, recall, b"{}", owner.token, "text/plain")
    assert status == 415
    # Binary protobuf and a gzip body are the same call.
    request = pb.RecallRequest(query=QUERY, limit=3)
    status, _ = call(
        stack.http_url, recall, request.SerializeToString(), owner.token, "application/proto"
    )
    assert status == 200
    status, answer = call(
        stack.http_url,
        recall,
        gzip.compress(json_format.MessageToJson(request).encode()),
        owner.token,
        headers={"Content-Encoding": "gzip"},
    )
    assert status == 200 and answer["outcome"]["results"], answer


def test_headers_the_gateway_cannot_read_are_refused_not_failed(
    stack: Stack, owner: Member
) -> None:
    """A header value that is not UTF-8, and a bearer token holding a control
    character, are the client's mistakes (4xx), not the server's (500)."""
    recall = "recallatron.v1.MemoryService/Recall"
    body = {"query": QUERY, "limit": 1}
    status, answer = call(
        stack.http_url, recall, body, owner.token, headers={"User-Agent": "caf\xe9"}
    )
    assert (status, answer["code"]) == (400, "invalid_argument"), answer
    assert "user-agent" in answer["message"]
    status, answer = call(stack.http_url, recall, body, "a\tb")
    assert (status, answer["code"]) == (401, "unauthenticated"), answer


def test_the_openapi_document_lists_every_method(stack: Stack) -> None:
    with urllib.request.urlopen(f"{stack.http_url}/openapi.json", timeout=30) as resp:
        doc = json.loads(resp.read())
    assert doc["openapi"].startswith("3.1")
    assert set(doc["paths"]) == {f"/{m.containing_service.full_name}/{m.name}" for m in METHODS}
    recall = doc["paths"]["/recallatron.v1.MemoryService/Recall"]["post"]
    ref = recall["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    schema = doc["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert schema["properties"]["query"] == {"type": "string"}
    assert schema["properties"]["skipRerank"] == {"type": "boolean"}
    # Every call needs the bearer token but the open ones (DescribeTools).
    assert doc["security"] == [{"bearer": []}]
    opened = {p for p, item in doc["paths"].items() if item["post"].get("security") == []}
    assert opened == {"/recallatron.v1.MemoryService/DescribeTools"}
    head = urllib.request.Request(f"{stack.http_url}/openapi.json", method="HEAD")
    with urllib.request.urlopen(head, timeout=30) as resp:
        assert resp.status == 200 and resp.read() == b""
    # Any other method was answered the document.
    post = urllib.request.Request(f"{stack.http_url}/openapi.json", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(post, timeout=30)
    assert (refused.value.code, refused.value.headers["allow"]) == (405, "GET, HEAD")
    assert json.loads(refused.value.read())["code"] == "unimplemented"


@pytest.mark.parametrize(
    "content_type",
    ["application/json;charset=utf-8", 'application/json; charset="UTF-8"', "Application/JSON"],
)
def test_every_spelling_of_json_is_json(stack: Stack, owner: Member, content_type: str) -> None:
    """Media types are case-insensitive with optional spaces (RFC 9110): these
    were answered 415 (the last with no Connect error body at all)."""
    status, answer = call(
        stack.http_url,
        "recallatron.v1.MemoryService/Recall",
        {"query": QUERY},
        owner.token,
        content_type=content_type,
    )
    assert status == 200, answer


def test_a_refusal_names_fields_as_json_names_them(stack: Stack, owner: Member) -> None:
    """The gateway's own refusals named expires_in where the body's own
    decode named expiresIn: one field, two names in one surface."""
    token_call = "recallatron.v1.AdminService/CreateToken"
    me = {"memberId": owner.member_id}
    _, malformed = call(stack.http_url, token_call, {**me, "expiresIn": "5"}, owner.token)
    _, negative = call(stack.http_url, token_call, {**me, "expiresIn": "-5s"}, owner.token)
    assert violations(malformed) == violations(negative) == ["expiresIn"]
    assert negative["message"].startswith("expiresIn:")


def test_a_timeout_that_is_not_a_positive_count_is_refused(stack: Stack, owner: Member) -> None:
    """Connect-Timeout-Ms of -5, and later 0, ran the call with no time left
    (504, counted as a deadline passed); "abc" was refused already."""
    for value in ("-5", "0", "abc", "12345678901"):
        status, answer = call(
            stack.http_url,
            "recallatron.v1.MemoryService/Recall",
            {"query": QUERY},
            owner.token,
            headers={"Connect-Timeout-Ms": value},
        )
        assert (status, answer.get("code")) == (400, "invalid_argument"), (value, answer)


def test_a_call_without_a_known_token_is_refused_before_its_body_is_read(
    stack: Stack, owner: Member
) -> None:
    """The adapter read and decoded a body (up to 8 MB of JSON, or a few kB of
    gzip inflating past that) before the token was checked, so anyone could
    keep it busy. The token comes first: a body that is no request at all,
    however large, is refused 401 when the token is missing or unknown, and
    is the caller's mistake (4xx naming it) only for a known token."""
    recall = "recallatron.v1.MemoryService/Recall"
    malformed = b"[" * (4 * 1024 * 1024)  # 4 MB, not a request, nested past any parser
    bomb = gzip.compress(b"{" * (9 * 1024 * 1024))  # 9 kB on the wire, past the limit inflated
    gzipped = {"Content-Encoding": "gzip"}
    for token in (None, "rc_not_a_token"):
        for body, headers in ((b"not json", {}), (malformed, {}), (bomb, gzipped)):
            status, answer = call(stack.http_url, recall, body, token, headers=headers)
            assert (status, answer.get("code")) == (401, "unauthenticated"), (
                token,
                len(body),
                answer,
            )
            assert "authorization" in answer["message"], answer
    # A known token's body is read and decoded as before.
    status, answer = call(stack.http_url, recall, b"not json", owner.token)
    assert (status, answer["code"]) == (400, "invalid_argument"), answer
    assert violations(answer) == ["request"]
    status, answer = call(stack.http_url, recall, bomb, owner.token, headers=gzipped)
    assert (status, answer["code"]) == (429, "resource_exhausted"), answer


def test_describe_tools_answers_without_a_token(stack: Stack) -> None:
    """As over gRPC: the one call that needs no token needs none here either,
    and a token it does not need is not checked."""
    describe = "recallatron.v1.MemoryService/DescribeTools"
    for token in (None, "rc_not_a_token"):
        status, answer = call(stack.http_url, describe, {}, token)
        assert status == 200, answer
        assert {t["name"] for t in answer["tools"]} >= {"recall", "remember"}, answer


def test_a_gzip_body_is_inflated_whole_or_refused(stack: Stack, owner: Member) -> None:
    """Only the first member of a gzip body was inflated and a stream cut
    short was taken as what it held so far: a remember whose body came in two
    members was stored without the second's fields (200), one cut short was
    stored, and a JSON body in two members was refused as not JSON."""
    remember = "recallatron.v1.MemoryService/Remember"
    gzipped = {"Content-Encoding": "gzip"}
    first = pb.RememberRequest(
        request_id=str(uuid.uuid4()),
        kind=common_pb2.KIND_FACT,
        title="Two members",
        body="the second holds confidence",
    )
    first.audience.workspace = True
    second = pb.RememberRequest(confidence=0.25)
    # Concatenated protobuf messages merge; concatenated gzip members are one body (RFC 1952).
    body = gzip.compress(first.SerializeToString()) + gzip.compress(second.SerializeToString())
    status, answer = call(
        stack.http_url, remember, body, owner.token, "application/proto", headers=gzipped
    )
    assert status == 200, answer
    made = pb.RememberResponse.FromString(answer["proto"]).memory
    assert made.confidence == pytest.approx(0.25), made
    text = json.dumps({"query": QUERY, "limit": 2}).encode()
    status, answer = call(
        stack.http_url,
        "recallatron.v1.MemoryService/Recall",
        gzip.compress(text[:9]) + gzip.compress(text[9:]),
        owner.token,
        headers=gzipped,
    )
    assert status == 200 and answer["outcome"]["results"], answer
    # Cut short (its trailer lost), or with bytes after it that are no gzip member.
    whole = gzip.compress(first.SerializeToString())
    for broken in (whole[:-8], whole + b"junk"):
        status, answer = call(
            stack.http_url, remember, broken, owner.token, "application/proto", headers=gzipped
        )
        assert (status, answer.get("code")) == (400, "invalid_argument"), answer
        assert violations(answer) == ["request"], answer


def test_an_enum_given_as_a_fraction_is_refused_naming_the_field(
    stack: Stack, owner: Member
) -> None:
    """proto3 JSON takes an enum as its name or its number; the parser read
    1.5 as 1, so a remember with "kind": 1.5 was stored as a note."""
    remember = "recallatron.v1.MemoryService/Remember"
    recall = "recallatron.v1.MemoryService/Recall"
    before = call(stack.http_url, "recallatron.v1.MemoryService/ListMemories", {}, owner.token)[1]
    for method, body, field in (
        (remember, {"requestId": "f1", "kind": 1.5, "title": "A fraction of a kind"}, "kind"),
        (remember, {"requestId": "f2", "kind": 1, "title": "t", "purposes": [1, 2.5]}, "purposes"),
        (recall, {"query": QUERY, "filters": {"kinds": [0.5]}}, "filters.kinds"),
    ):
        status, answer = call(stack.http_url, method, body, owner.token)
        assert (status, answer.get("code")) == (400, "invalid_argument"), (body, answer)
        assert violations(answer) == [field], answer
    after = call(stack.http_url, "recallatron.v1.MemoryService/ListMemories", {}, owner.token)[1]
    assert after == before
    # A whole number written as one (1.0) is the number, as for any integer field.
    whole = {"requestId": "f3", "kind": 1.0, "title": "Whole"}
    status, answer = call(stack.http_url, remember, whole, owner.token)
    assert status == 200, answer


def test_a_confidence_that_is_no_number_is_refused_naming_it(stack: Stack, owner: Member) -> None:
    """A bare NaN or Infinity is not JSON: refused as a malformed body is,
    saying where (it was refused naming the whole request, as a parse error).
    proto3 JSON reads "NaN" and "Infinity" as strings for a double: those
    reach the check of the field and are refused naming it, as is a number
    past a double's range."""
    remember = "recallatron.v1.MemoryService/Remember"
    before = call(stack.http_url, "recallatron.v1.MemoryService/ListMemories", {}, owner.token)[1]
    for constant in (b"NaN", b"Infinity", b"-Infinity"):
        body = b'{"requestId": "n1", "title": "A claim", "confidence": ' + constant + b"}"
        status, answer = call(stack.http_url, remember, body, owner.token)
        assert (status, answer.get("code")) == (400, "invalid_argument"), answer
        assert violations(answer) == ["request"], answer
        assert "is not JSON: line 1 column 55" in answer["message"], answer
    for value in (b'"NaN"', b'"Infinity"', b'"-Infinity"', b"1e999", b'"high"'):
        body = b'{"requestId": "n2", "kind": 2, "title": "A claim", "confidence": ' + value + b"}"
        status, answer = call(stack.http_url, remember, body, owner.token)
        assert (status, answer.get("code")) == (400, "invalid_argument"), (value, answer)
        assert violations(answer) == ["confidence"], (value, answer)
    after = call(stack.http_url, "recallatron.v1.MemoryService/ListMemories", {}, owner.token)[1]
    assert after == before


def test_recalls_limit_is_refused_as_the_api_doc_shows(stack: Stack, owner: Member) -> None:
    """docs/api.md's example refusal (a limit of 99) is the one recall gives
    past 50 and below 0; 0 is no refusal but DEFAULT_RECALL_LIMIT."""
    recall = "recallatron.v1.MemoryService/Recall"
    status, answer = call(stack.http_url, recall, {"query": QUERY, "limit": 0}, owner.token)
    assert status == 200 and answer["outcome"]["results"], answer
    for limit in (51, 99, -1):
        status, answer = call(stack.http_url, recall, {"query": QUERY, "limit": limit}, owner.token)
        rule = "must be 0 (the default, 10) or lie in [1, 50]"
        assert (status, answer["message"]) == (400, f"limit: {rule}"), answer
        debug = answer["details"][0]["debug"]
        assert debug == {"fieldViolations": [{"field": "limit", "description": rule}]}
