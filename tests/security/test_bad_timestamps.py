"""Timestamps outside what a Timestamp may hold (RFC 3339: years 1 to 9999,
nanos in [0, 1e9)) in any field of any public request: INVALID_ARGUMENT
naming the field, never INTERNAL, and nothing written. The fields come from
gateway.proto's descriptors, so a Timestamp field added later is covered
(and fails here until it has a base request below)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from recallatron.client import Client
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.conftest import Team, make_team
from tests.faults.stackutil import field_violations

pytestmark = pytest.mark.integration

TIMESTAMP = "google.protobuf.Timestamp"


def _timestamp_paths(message: Descriptor, prefix: str = "") -> Iterator[str]:
    """Each Timestamp field reachable from ``message``: a repeated field's
    element is written ``name[]``."""
    for fd in message.fields:
        if fd.message_type is None:
            continue
        path = prefix + fd.name + ("[]" if fd.is_repeated else "")
        if fd.message_type.full_name == TIMESTAMP:
            yield path
        elif fd.message_type.full_name != message.full_name:
            yield from _timestamp_paths(fd.message_type, path + ".")


FIELDS = [
    (service.name, method.name, path)
    for service in pb.DESCRIPTOR.services_by_name.values()
    for method in service.methods
    for path in _timestamp_paths(method.input_type)
]

# (seconds, nanos) no Timestamp may hold.
BAD = {
    "year-10000": (253402300800, 0),
    "before-year-1": (-62135596801, 0),
    "plus-2-62": (2**62, 0),
    "minus-2-62": (-(2**62), 0),
    "negative-nanos": (0, -1),
    "nanos-1e9": (0, 10**9),
}


def _claim() -> cpb.ClaimInput:
    return cpb.ClaimInput(entity=cpb.MentionInput(name="thing"), attribute="colour", value="red")


def _relation() -> cpb.RelationInput:
    return cpb.RelationInput(
        subject=cpb.MentionInput(name="thing"),
        predicate="near",
        object=cpb.MentionInput(name="other thing"),
    )


def _graph() -> dict[str, Any]:
    return {"claims": [_claim()], "relations": [_relation()]}


def _rid() -> str:
    return str(uuid.uuid4())


# A valid request per method with a Timestamp field, holding one element of
# each repeated field the paths pass through; ids are the fixture's rows.
BASE: dict[str, Callable[[dict[str, str]], Message]] = {
    "Remember": lambda ids: pb.RememberRequest(
        request_id=_rid(), kind=cpb.KIND_NOTE, title="a note", **_graph()
    ),
    "Derive": lambda ids: pb.DeriveRequest(
        request_id=_rid(),
        source_ids=[ids["memory"]],
        kind=cpb.KIND_SUMMARY,
        title="a summary",
        **_graph(),
    ),
    "Correct": lambda ids: pb.CorrectRequest(
        request_id=_rid(), id=ids["memory"], expected_revision=1, reason="fix", **_graph()
    ),
    "Supersede": lambda ids: pb.SupersedeRequest(
        request_id=_rid(),
        id=ids["memory"],
        expected_revision=1,
        kind=cpb.KIND_NOTE,
        title="newer",
        reason="newer",
        **_graph(),
    ),
    "Capture": lambda ids: pb.CaptureRequest(
        text="We decided to move the launch to Thursday because QA needs a day."
    ),
    "Lookup": lambda ids: pb.LookupRequest(name="thing"),
    "Neighbors": lambda ids: pb.NeighborsRequest(entity_id=ids["entity"], hops=1),
    "CreateEpisode": lambda ids: pb.CreateEpisodeRequest(
        title="an episode", started_at=Timestamp(seconds=1_700_000_000)
    ),
    "Timeline": lambda ids: pb.TimelineRequest(entity_id=ids["entity"]),
    "ListMemories": lambda ids: pb.ListMemoriesRequest(),
    "ListAuditEvents": lambda ids: pb.ListAuditEventsRequest(),
}

# Tables a write could touch beyond dbutil's: episodes.
EPISODE_TABLES = ("episode", "episode_participant")


def _state(stack: Stack, team: Team) -> dict[str, str]:
    out = dbutil.checksum(stack, team.database_name)
    for table in EPISODE_TABLES:
        rows = dbutil.query(
            stack,
            team.database_name,
            f"SELECT count(*) || ':' || coalesce(md5(string_agg(t::text, '|' ORDER BY t::text)), '')"  # noqa: E501
            f" FROM {table} t",
        )
        out[table] = str(rows[0][0])
    return out


def _set_bad(request: Message, path: str, seconds: int, nanos: int) -> str:
    """Sets the Timestamp at ``path`` to (seconds, nanos); returns the field
    name the answer should give (a repeated element as ``name[0]``)."""
    target: Any = request
    named = []
    parts = path.split(".")
    for part in parts[:-1]:
        if part.endswith("[]"):
            items = getattr(target, part[:-2])
            assert len(items) > 0, f"the base request needs an element in {part}"
            target = items[0]
            named.append(part[:-2] + "[0]")
        else:
            target = getattr(target, part)
            named.append(part)
    leaf = getattr(target, parts[-1])
    leaf.seconds = seconds
    leaf.nanos = nanos
    named.append(parts[-1])
    return ".".join(named)


def _stub(client: Client, service: str) -> Any:
    stubs = {"MemoryService": client.memory, "AdminService": client.admin}
    return stubs.get(service, client.review)


@pytest.fixture(scope="module")
def world(stack: Stack, operator: Client) -> Iterator[tuple[Team, dict[str, str]]]:
    team = make_team(stack, operator, ("ada",))
    m = team.clients["ada"].remember("fixture", "a memory", mention_names=["thing"]).memory
    yield team, {"memory": m.id, "entity": m.mentions[0].entity_id}
    for client in team.clients.values():
        client.close()


def test_every_timestamp_field_is_found() -> None:
    # The walk must find the fields this file was written against.
    found = {(m, p) for _, m, p in FIELDS}
    assert ("Lookup", "as_of") in found
    assert ("Remember", "claims[].valid_from") in found
    assert ("Timeline", "from") in found
    assert ("Capture", "occurred_at") in found


@pytest.mark.parametrize("bad", list(BAD.values()), ids=list(BAD))
@pytest.mark.parametrize("field", FIELDS, ids=[f"{m}.{p}" for _, m, p in FIELDS])
def test_an_out_of_range_timestamp_is_invalid_argument_naming_the_field(
    stack: Stack,
    world: tuple[Team, dict[str, str]],
    field: tuple[str, str, str],
    bad: tuple[int, int],
) -> None:
    team, ids = world
    service, method, path = field
    assert method in BASE, f"{service}.{method} has a Timestamp field: add its base request"
    request = BASE[method](ids)
    name = _set_bad(request, path, *bad)
    client = team.clients["ada"]
    before = _state(stack, team)
    with pytest.raises(grpc.RpcError) as err:
        client.call(getattr(_stub(client, service), method), request)
    code, details = err.value.code(), err.value.details() or ""
    assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, details)
    assert name in details, details
    assert field_violations(err.value) == [name]
    assert _state(stack, team) == before


# The extremes a Timestamp may hold: accepted or refused as any other time, never a fault.
EDGES = {"year-1": (-62135596800, 0), "year-9999": (253402300799, 999_999_999)}


@pytest.mark.parametrize("edge", list(EDGES.values()), ids=list(EDGES))
@pytest.mark.parametrize("field", FIELDS, ids=[f"{m}.{p}" for _, m, p in FIELDS])
def test_the_extreme_timestamps_are_no_fault(
    world: tuple[Team, dict[str, str]], field: tuple[str, str, str], edge: tuple[int, int]
) -> None:
    team, _ = world
    service, method, path = field
    client = team.clients["ada"]
    # A memory of its own: an accepted correction moves its revision.
    fresh = client.remember("edge", "a memory", mention_names=["thing"]).memory
    request = BASE[method]({"memory": fresh.id, "entity": fresh.mentions[0].entity_id})
    _set_bad(request, path, *edge)
    try:
        client.call(getattr(_stub(client, service), method), request)
    except grpc.RpcError as err:
        code = err.code()  # type: ignore[attr-defined]
        if code == grpc.StatusCode.NOT_FOUND:
            # A graph read as of a time before its entity was first mentioned
            # finds nothing (docs/graph.md): as it answers at any such time.
            _set_bad(request, path, 0, 0)
            with pytest.raises(grpc.RpcError) as then:
                client.call(getattr(_stub(client, service), method), request)
            assert then.value.code() == code, (then.value.code(), then.value.details())
            return
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, err.details())  # type: ignore[attr-defined]
