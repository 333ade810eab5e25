"""The HTTP/JSON adapter's own parts, without a stack: the field a body that
does not decode is refused for, the Connect error it answers with, the
status codes carried over from gRPC, the forwarded client address, and the
OpenAPI document made from the descriptors."""

from __future__ import annotations

import base64
import json
from typing import Any

import grpc
import pytest
from connectrpc.code import Code
from google.rpc import error_details_pb2

from recallatron import wire
from recallatron.v1 import gateway_pb2
from recallatron.v1 import gateway_pb2 as pb
from services.gateway import forwarded
from services.gateway.httpjson.app import error_body
from services.gateway.httpjson.body import Refused, decode
from services.gateway.httpjson.openapi import document
from services.gateway.httpjson.relay import CODES, method_info, path

SERVICES = [
    gateway_pb2.DESCRIPTOR.services_by_name[n]
    for n in ("MemoryService", "ReviewService", "AdminService")
]


def refused_json(cls: type[Any], body: bytes, field: str) -> Refused:
    """The refusal of ``body`` read as a JSON ``cls``: a bad request naming ``field``."""
    with pytest.raises(Refused) as refused:
        decode(cls, body, "application/json")
    assert (refused.value.status, refused.value.code) == (400, "invalid_argument")
    assert refused.value.field == field, refused.value.message
    return refused.value


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"limit": "abc"}', "limit"),
        (b'{"noSuchField": 1}', "noSuchField"),
        (b'{"filters": {"kinds": ["NOPE"]}}', "filters.kinds"),
        (b'{"filters": {"bogus": true}}', "filters.bogus"),
        (b'{"skip_rerank": []}', "skip_rerank"),
        (b"not json", "request"),
        (b"[1]", "request"),
        (b'{"query": "\\u0000', "request"),
    ],
)
def test_a_body_that_is_no_request_is_refused_naming_the_field(body: bytes, field: str) -> None:
    assert "\n" not in refused_json(pb.RecallRequest, body, field).message


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"claims": [{}, {"validUntil": 5}]}', "claims[1].validUntil"),
        (b'{"claims": [{}, {"attribute": 5}]}', "claims[1].attribute"),
        (b'{"claims": [{"confidence": "high"}]}', "claims[0].confidence"),
        (b'{"claims": [{}, {"entity": {"name": 7}}]}', "claims[1].entity.name"),
        (b'{"relations": [{}, {}, {"subject": {"type": []}}]}', "relations[2].subject.type"),
        (b'{"mentions": [{"name": "x"}, {"name": 5}]}', "mentions[1].name"),
        (b'{"aboutIds": ["a", 5]}', "aboutIds"),
    ],
)
def test_a_value_in_a_list_of_messages_is_named_with_its_index(body: bytes, field: str) -> None:
    """Which of a hundred claims is wrong: the refusal named "claims.attribute"
    (or "claims.validUntil", though the parser said "claims[1]")."""
    refused_json(pb.RememberRequest, body, field)


@pytest.mark.parametrize(
    ("cls", "body", "field"),
    [
        (pb.RecallRequest, b'{"query": "a", "limit": 3, "query": "b"}', "query"),
        (pb.RecallRequest, b'{"filters": {"kinds": [], "kinds": []}}', "filters.kinds"),
        (pb.RecallRequest, b'{"query": "a", "filters": {"a": 1, "a": 2}}', "filters.a"),
        (
            pb.RememberRequest,
            b'{"title": "t", "mentions": [{"name": "x"}, {"name": "y", "name": "z"}]}',
            "mentions[1].name",
        ),
        (pb.RecallRequest, b'{"query": "a", "q\\u0075ery": "b"}', "query"),
    ],
)
def test_a_key_given_twice_is_refused_naming_its_path(
    cls: type[Any], body: bytes, field: str
) -> None:
    """The refusal named the whole body ("request"), not the key."""
    assert "twice" in refused_json(cls, body, field).message


@pytest.mark.parametrize(
    ("cls", "body", "field"),
    [
        (
            pb.RecallRequest,
            b'{"skipRerank": true, "query": "a", "skip_rerank": false}',
            "skip_rerank",
        ),
        (pb.RecallRequest, b'{"skip_rerank": false, "skipRerank": true}', "skipRerank"),
        (
            pb.RecallRequest,
            b'{"filters": {"include_superseded": true, "includeSuperseded": false}}',
            "filters.includeSuperseded",
        ),
        (
            pb.RememberRequest,
            b'{"title": "t", "claims": [{}, {"validFrom": "2026-01-01T00:00:00Z",'
            b' "valid_from": "2020-01-01T00:00:00Z"}]}',
            "claims[1].valid_from",
        ),
    ],
)
def test_a_field_given_by_both_its_names_is_refused_naming_the_second(
    cls: type[Any], body: bytes, field: str
) -> None:
    """Both names of one field (its JSON name and its proto name) in one
    object were taken, the last one given winning, where a key given twice
    is refused."""
    assert "twice" in refused_json(cls, body, field).message


@pytest.mark.parametrize(
    ("cls", "body", "field"),
    [
        (
            pb.RememberRequest,
            b'{"title": "t", "audience": {"workspace": true, "memberId": "m"}}',
            "audience.memberId",
        ),
        (
            pb.RememberRequest,
            b'{"title": "t", "audience": {"member_id": "m", "workspace": false}}',
            "audience.workspace",
        ),
        (
            pb.RememberRequest,
            b'{"title": "t", "mentions": [{"name": "x"}, {"entity_id": "e", "name": "y"}]}',
            "mentions[1].name",
        ),
    ],
)
def test_a_oneof_given_two_members_is_refused_naming_the_second(
    cls: type[Any], body: bytes, field: str
) -> None:
    """The refusal named only the field holding the oneof ("audience")."""
    refused_json(cls, body, field)


def test_a_oneof_member_given_null_is_no_member() -> None:
    body = b'{"title": "t", "audience": {"workspace": null, "memberId": "m"}}'
    request = decode(pb.RememberRequest, body, "application/json")
    assert isinstance(request, pb.RememberRequest)
    assert request.audience.WhichOneof("scope") == "member_id"


@pytest.mark.parametrize(
    ("cls", "body", "field"),
    [
        (pb.RememberRequest, b'{"title": "t", "audience": []}', "audience"),
        (pb.RememberRequest, b'{"title": "t", "audience": "x"}', "audience"),
        (pb.RememberRequest, b'{"title": "t", "audience": [1, 2]}', "audience"),
        (pb.RecallRequest, b'{"filters": [{"kinds": ["KIND_NOTE"]}]}', "filters"),
        (pb.RememberRequest, b'{"title": "t", "mentions": [{"name": "a"}, []]}', "mentions[1]"),
        (pb.RememberRequest, b'{"title": "t", "mentions": ["x"]}', "mentions[0]"),
    ],
)
def test_a_message_given_no_json_object_is_refused_naming_it(
    cls: type[Any], body: bytes, field: str
) -> None:
    """The parser took an array for a message (an empty audience, an empty
    mention), and refused a string or an array of scalars naming a field
    that is not there (audience.x, audience.1, mentions.x)."""
    assert refused_json(cls, body, field).message == "must be a JSON object"


def test_a_binary_body_names_the_string_field_that_is_not_utf8() -> None:
    with pytest.raises(Refused) as refused:
        decode(pb.RecallRequest, b"\x0a\x02\xff\xfe", "application/proto")
    assert refused.value.field == "query"
    decode(pb.RecallRequest, pb.RecallRequest(query="ok").SerializeToString(), "application/proto")
    decode(pb.RecallRequest, b'{"query": "ok", "skipRerank": true}', "application/json")


@pytest.mark.parametrize(
    ("body", "field", "said"),
    [
        (b"\x0a\x02\xff\xfe", "query", wire.NOT_UTF8),
        (b"\x0a\x05ab", "request", wire.MALFORMED),
        (b"\x8a", "request", wire.MALFORMED),
    ],
    ids=["not utf8", "past the end", "cut tag"],
)
def test_a_binary_body_is_refused_saying_why_as_grpc_is(body: bytes, field: str, said: str) -> None:
    """A bare "could not be decoded" answered both a string that is not UTF-8
    and bytes that are no message, where gRPC's refusal tells them apart."""
    with pytest.raises(Refused) as refused:
        decode(pb.RecallRequest, body, "application/proto")
    assert (refused.value.field, refused.value.message) == (field, said)
    assert (field, said) == wire.decode_refusal(pb.RecallRequest.DESCRIPTOR, body)


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-32-le"])
def test_a_json_body_in_another_encoding_is_refused(encoding: str) -> None:
    """JSON on this surface is UTF-8 (a charset=utf-16 is 415), but a body in
    UTF-16 or UTF-32 without a charset was read as the request all the same."""
    refused_json(pb.RecallRequest, '{"query": "when"}'.encode(encoding), "request")


@pytest.mark.parametrize(
    ("body", "field", "at"),
    [
        (b'{"query": "a\xff"}', "query", 12),
        (b'{"query": "\xed\xa0\x80"}', "query", 11),  # a surrogate, encoded
        (b'{"query": "a", "filters": {"kinds": ["\xc3"]}}', "filters.kinds[0]", 38),
        (b'{"qu\xffery": "a"}', "request", 4),
        (b'{"query": "a"}\xff', "request", 14),
    ],
    ids=["stray byte", "encoded surrogate", "nested", "in a key", "after the object"],
)
def test_a_json_body_that_is_not_utf8_is_refused_saying_so(
    body: bytes, field: str, at: int
) -> None:
    """Refused naming the whole request in the codec's words ("'utf-8' codec
    can't decode byte 0xff in position 12"), where a binary body's refusal
    names the string field."""
    refused = refused_json(pb.RecallRequest, body, field)
    assert refused.message == f"not valid UTF-8 at byte {at} (a JSON body must be UTF-8)"


def test_the_error_body_is_connects_with_a_bad_request() -> None:
    body: dict[str, Any] = json.loads(
        error_body(Refused(400, "invalid_argument", "must be a JSON object", "request"))
    )
    assert body["code"] == "invalid_argument"
    assert body["message"] == "request: must be a JSON object"
    (detail,) = body["details"]
    assert detail["type"] == "google.rpc.BadRequest"
    value = base64.b64decode(detail["value"] + "===")
    parsed = error_details_pb2.BadRequest.FromString(value)
    assert [v.field for v in parsed.field_violations] == ["request"]
    assert detail["debug"]["fieldViolations"][0]["field"] == "request"
    # Without a field, no details.
    assert "details" not in json.loads(error_body(Refused(415, "unimplemented", "no")))


def test_every_grpc_status_has_the_connect_code_of_its_name() -> None:
    for status in grpc.StatusCode:
        if status == grpc.StatusCode.OK:
            continue
        assert CODES[status].name.replace("CANCELED", "CANCELLED") == status.name
    assert CODES[grpc.StatusCode.CANCELLED] is Code.CANCELED


class _Context:
    def __init__(self, metadata: tuple[tuple[str, str], ...], peer: str) -> None:
        self._metadata, self._peer = metadata, peer

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def peer(self) -> str:
        return self._peer


def peer_of(metadata: tuple[tuple[str, str], ...], peer: str) -> str:
    """The caller's address the gateway takes from a call with ``metadata`` from ``peer``."""
    return forwarded.peer(_Context(metadata, peer))  # type: ignore[arg-type]


def test_a_forwarded_address_counts_only_with_this_process_secret() -> None:
    sent = forwarded.metadata("10.1.2.3:5555")
    assert peer_of(sent, "ipv4:127.0.0.1:4000") == "ipv4:10.1.2.3:5555"
    assert peer_of(forwarded.metadata("::1:80"), "x") == "ipv6:[::1]:80"
    forged = ((forwarded.PEER_KEY, "ipv4:10.9.9.9:1"), (forwarded.PROOF_KEY, "guess"))
    assert peer_of(forged, "ipv4:127.0.0.1:4000") == "ipv4:127.0.0.1:4000"
    alone = ((forwarded.PEER_KEY, "ipv4:10.9.9.9:1"),)
    assert peer_of(alone, "ipv4:127.0.0.1:4000") == "ipv4:127.0.0.1:4000"
    assert forwarded.metadata(None) == ()


def test_a_shared_secret_lets_a_front_in_another_process_forward() -> None:
    """The MCP server is another process: it forwards with the secret the
    settings share (RECALLATRON_FORWARDING_SECRET), believed beside the
    gateway's own; a wrong or empty one is not."""
    from recallatron import forwarding

    sent = forwarding.metadata("10.4.4.4:1", "shared-one")
    try:
        forwarded.configure("shared-one")
        assert peer_of(sent, "ipv4:127.0.0.1:9") == "ipv4:10.4.4.4:1"
        forwarded.configure("")
        assert peer_of(sent, "ipv4:127.0.0.1:9") == "ipv4:127.0.0.1:9"
        assert forwarding.metadata("10.4.4.4:1", "") == ()
    finally:
        forwarded.configure("")


def test_the_review_page_signs_in_for_the_person_s_address() -> None:
    """A token tried at sign-in spends the person's allowance of failed
    authentications at the gateway, not the page's (one address for all)."""
    from services.gateway.review_web import ReviewApp

    class Refused(grpc.RpcError):
        def code(self) -> grpc.StatusCode:
            return grpc.StatusCode.UNAUTHENTICATED

        def details(self) -> str:
            return "authorization: unknown or revoked token"

    class Gateway:
        def __init__(self) -> None:
            self.forwarded: tuple[tuple[str, str], ...] = ()

        def for_address(self, address: str | None, secret: str) -> Gateway:
            from recallatron import forwarding

            self.forwarded = forwarding.metadata(address, secret)
            return self

        def duplicate_pairs(self, **_: object) -> None:
            raise Refused()

        def close(self) -> None:
            pass

    gateway = Gateway()
    app = ReviewApp("127.0.0.1:1", lambda token: gateway)  # type: ignore[arg-type,return-value]
    response = app.handle("POST", "/signin", {}, {"token": "rc_wrong"}, "192.0.2.9:40000")
    assert response.status == 401
    assert peer_of(gateway.forwarded, "ipv4:127.0.0.1:9") == "ipv4:192.0.2.9:40000"


def test_the_openapi_document_has_every_method_of_the_descriptors() -> None:
    doc = document(SERVICES, "v1")
    methods = [m for s in SERVICES for m in s.methods]
    assert set(doc["paths"]) == {path(m) for m in methods}
    schemas = doc["components"]["schemas"]
    for m in methods:
        post = doc["paths"][path(m)]["post"]
        for schema in (
            post["requestBody"]["content"]["application/json"]["schema"],
            post["responses"]["200"]["content"]["application/json"]["schema"],
        ):
            name = schema["$ref"].rsplit("/", 1)[1]
            assert name in schemas
        info = method_info(m)
        assert (info.service_name, info.name) == (m.containing_service.full_name, m.name)
    recall = schemas["recallatron.v1.RecallRequest"]["properties"]
    assert recall["mode"]["enum"][0] == "RECALL_MODE_UNSPECIFIED"
    assert recall["filters"] == {"$ref": "#/components/schemas/recallatron.v1.RecallFilters"}
    remember = schemas["recallatron.v1.RememberRequest"]["properties"]
    assert remember["occurredAt"] == {"type": "string", "format": "date-time"}
    assert remember["purposes"]["type"] == "array"
    # Every reference resolves.
    refs = [r for r in _refs(doc)]
    assert refs and all(r.rsplit("/", 1)[1] in schemas for r in refs)
    json.dumps(doc)


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["$ref"]] if "$ref" in node else []
        return own + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def test_media_types_and_json_paths() -> None:
    from services.gateway.httpjson.body import media_type
    from services.gateway.httpjson.relay import json_path

    for given in ("application/json", "Application/JSON", "application/json;charset=utf-8",
                  'application/json ; charset="UTF-8"'):  # fmt: skip
        assert media_type(given) == "application/json", given
    assert media_type("application/proto") == "application/proto"
    for refused in ("text/plain", "application/json; charset=latin-1", "", "application/jsonx"):
        assert media_type(refused) is None, refused
    assert json_path("expires_in") == "expiresIn"
    assert json_path("filters.mention_entity_ids[2]") == "filters.mentionEntityIds[2]"
    assert json_path("claims[0].entity.entity_id") == "claims[0].entity.entityId"


@pytest.mark.parametrize(
    ("body", "constant", "column"),
    [
        (b'{"title": "t", "confidence": NaN}', "NaN", 30),
        (b'{"title": "t", "confidence": Infinity}', "Infinity", 30),
        (b'{"title": "t", "confidence": -Infinity}', "-Infinity", 30),
        (b'{"title": "NaN, -Infinity", "claims": [{"confidence": NaN}]}', "NaN", 55),
    ],
)
def test_a_constant_json_has_not_is_refused_as_malformed_json(
    body: bytes, constant: str, column: int
) -> None:
    """NaN and Infinity are not JSON: the reader took them, and the parser
    then refused naming the whole request, not where the body went wrong."""
    where = f"line 1 column {column} (char {column - 1})"
    message = refused_json(pb.RememberRequest, body, "request").message
    assert message == f"{constant} is not JSON: {where}"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"title": "t", "confidence": 1e999}', "confidence"),
        (b'{"title": "t", "confidence": "high"}', "confidence"),
        (b'{"title": "t", "claims": [{"confidence": 1e999}]}', "claims[0].confidence"),
        (b'{"title": "t", "claims": [{"confidence": "high"}]}', "claims[0].confidence"),
    ],
)
def test_a_number_no_double_holds_is_refused_naming_its_field(body: bytes, field: str) -> None:
    """A number past a double's range, or a string that is no number, was
    refused naming the whole request (or only the list holding it)."""
    refused_json(pb.RememberRequest, body, field)


@pytest.mark.parametrize(
    ("cls", "key", "field"),
    [
        (pb.RecallRequest, "limit", "limit"),
        (pb.RememberRequest, "confidence", "confidence"),
        (pb.RememberRequest, "kind", "kind"),
    ],
)
def test_an_integer_of_thousands_of_digits_is_refused_naming_its_field(
    cls: type[Any], key: str, field: str
) -> None:
    """A whole number longer than Python reads as an int (4,300 digits) is
    JSON, and out of any field's range: it was refused naming the whole
    request, with the server's advice to raise its own digit limit."""
    for sign in ("", "-"):
        body = f'{{"{key}": {sign}1{"0" * 5000}}}'.encode()
        message = refused_json(cls, body, field).message
        assert "sys." not in message
        if key == "kind":
            assert message == "an enum's number is out of range"


def test_a_json_body_after_a_byte_order_mark_is_read_as_without_it() -> None:
    """RFC 8259 lets a parser ignore a UTF-8 byte-order mark, and some
    writers (PowerShell, Windows editors) put one first: it was refused as
    "must be a JSON object". A byte that is no UTF-8 after it is still said
    where it is in the body as sent."""
    bom = b"\xef\xbb\xbf"
    request = decode(pb.RecallRequest, bom + b' {"query": "when", "limit": 3}', "application/json")
    assert request == pb.RecallRequest(query="when", limit=3)
    refused = refused_json(pb.RecallRequest, bom + b'{"query": "a\xff"}', "query")
    assert refused.message == "not valid UTF-8 at byte 15 (a JSON body must be UTF-8)"
    refused_json(pb.RecallRequest, bom + b'{"query": "a", "query": "b"}', "query")
    # One mark, at the start only: JSON has no other place for it.
    refused_json(pb.RecallRequest, bom + bom + b'{"query": "a"}', "request")
    refused_json(pb.RecallRequest, b" " + bom + b'{"query": "a"}', "request")
