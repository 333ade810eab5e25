"""Every method of the gateway's public services, found from the descriptors
(a new method is fuzzed without a change here), called through the real stack
with requests built field by field from its input message
(tests/security/protofuzz.py), mixed with ids of a seeded world.

Design §9: every call ends in a refusal or an answer, never a fault (UNKNOWN,
INTERNAL, UNAVAILABLE, DEADLINE_EXCEEDED); an INVALID_ARGUMENT names a field;
a batch of refused calls leaves the workspace's tables as they were. After the
run no service has logged a traceback."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import Descriptor, MethodDescriptor
from google.protobuf.message import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recallatron.client import Client
from recallatron.grpcclient import peer_status
from recallatron.v1 import gateway_pb2 as pb
from recallatron.v1 import gateway_pb2_grpc
from recallatron_devkit.stack import Stack
from tests.conftest import Team, make_team
from tests.dbutil import checksum
from tests.faults.stackutil import record
from tests.security.protofuzz import draw_message

pytestmark = pytest.mark.integration

FAULTS = {
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.DATA_LOSS,
}
SERVICES = ("MemoryService", "ReviewService", "AdminService")
METHODS: dict[str, list[MethodDescriptor]] = {
    name: list(pb.DESCRIPTOR.services_by_name[name].methods) for name in SERVICES
}
# Calls fired together, then checked together (one checksum per batch).
BATCH = 20
CALLS: Counter[str] = Counter()
# How the calls ended, by status (OK for an answer): for the record.
CODES: Counter[str] = Counter()
# The fewest calls one run of this module makes (issue 35).
MIN_CALLS = 20_000


@dataclass(repr=False)
class World:
    team: Team
    # Who calls each service: members for the tools and review, the owner and
    # the operator for admin.
    callers: dict[str, list[Client]]
    pools: dict[str, tuple[str, ...]]
    # The workspace tables' digest after the last batch.
    last_checksum: dict[str, str] = field(default_factory=dict)
    log_offsets: dict[Path, int] = field(default_factory=dict)

    def pool(self, field_name: str) -> tuple[str, ...]:
        for key in ("entity", "episode", "member", "workspace", "token"):
            if key in field_name:
                return self.pools[key]
        return self.pools["memory"] + self.pools["entity"] + self.pools["episode"]


@pytest.fixture(scope="module")
def world(stack: Stack, operator: Client) -> World:
    offsets = {log: log.stat().st_size for log in stack.log_dir.glob("*.log")}
    team = make_team(stack, operator, ("ada", "bob", "cy"))
    ada, bob = team.clients["ada"], team.clients["bob"]
    memories = [
        ada.remember(
            f"fuzz seed {i}",
            "Ada and Bob met Carol at Acme",
            audience_to="workspace",
            mention_names=["Carol", "Acme"],
        ).memory
        for i in range(3)
    ]
    memories.append(bob.remember("bob's own fuzz seed", mention_names=["Dave"]).memory)
    entities = sorted({m.entity_id for mem in memories for m in mem.mentions if m.entity_id})
    episode = ada.create_episode(
        "fuzz episode", "2026-01-01T00:00:00Z", audience_to="workspace"
    ).episode_id
    # A token nobody here calls with: revoking or rotating it costs nothing.
    spare = operator.create_token(team.members["cy"], "spare").token_id
    return World(
        team,
        {
            "MemoryService": [ada, bob],
            "ReviewService": [ada, bob],
            "AdminService": [ada, operator],
        },
        {
            "memory": tuple(m.id for m in memories),
            "entity": tuple(entities),
            "episode": (episode,),
            # Not bob, who calls the tools: the operator may remove a member
            # named here (ada, the last owner, cannot be; cy calls nothing).
            "member": (team.members["ada"], team.members["cy"]),
            "workspace": (team.workspace_id,),
            "token": (spare,),
        },
        log_offsets=offsets,
    )


def _field_names(descriptor: Descriptor, seen: set[str] | None = None) -> set[str]:
    names: set[str] = set()
    seen = seen if seen is not None else set()
    if descriptor.full_name in seen:
        return names
    seen.add(descriptor.full_name)
    for f in descriptor.fields:
        names.add(f.name)
        if f.message_type is not None:
            names |= _field_names(f.message_type, seen)
    return names


def names_a_field(exc: grpc.RpcError, descriptor: Descriptor) -> bool:
    """A BadRequest violation with its field, or the message naming one of the
    request's fields."""
    status = peer_status(exc)
    if status.fields:
        return all(f.split(":", 1)[0].strip() for f in status.fields)
    words = set(re.findall(r"[a-z_]+", status.message))
    return bool(words & _field_names(descriptor))


def _stub(client: Client, service: str) -> Any:
    return getattr(gateway_pb2_grpc, f"{service}Stub")(client.channel)


def run_batch(stack: Stack, w: World, service: str, draw: Callable[[Any], Any]) -> None:
    method_input = {m.name: m.input_type for m in METHODS[service]}
    # Every request is drawn before any is sent: Hypothesis may end an example
    # midway through its draws, and calls already sent would then have written
    # unseen by the checksum below.
    drawn = []
    for _ in range(BATCH):
        method = draw(st.sampled_from(METHODS[service]))
        request = draw_message(draw, method.input_type, w.pool)
        drawn.append((method, request, draw(st.sampled_from(w.callers[service]))))
    calls: list[tuple[str, Message, Any]] = []
    for method, request, client in drawn:
        stub_method = getattr(_stub(client, service), method.name)
        future = stub_method.future(request, metadata=client._md(), timeout=60)
        calls.append((method.name, request, future))
    try:
        refused_all = _check_answers(service, calls, method_input)
    finally:
        # A batch that failed may still have written: the next batch compares
        # against the tables as they are now.
        before, w.last_checksum = w.last_checksum, checksum(stack, w.team.database_name)
    if refused_all and before:
        changed = {t for t in w.last_checksum if w.last_checksum[t] != before.get(t)}
        assert not changed, (service, [(name, str(request)) for name, request, _ in calls], changed)


def _check_answers(
    service: str, calls: list[tuple[str, Message, Any]], method_input: dict[str, Descriptor]
) -> bool:
    """Asserts each call ended in an answer or a refusal; True when every
    one was refused."""
    for _, _, future in calls:
        future.exception()  # every call ended before any is judged
    refused_all = True
    for name, request, future in calls:
        CALLS[f"{service}.{name}"] += 1
        try:
            future.result()
            refused_all = False
            CODES[f"{name} OK"] += 1
        except grpc.RpcError as exc:
            code, details = exc.code(), exc.details()
            CODES[f"{name} {code.name}"] += 1
            assert code not in FAULTS, (service, name, request, code, details)
            if code == grpc.StatusCode.INVALID_ARGUMENT:
                assert names_a_field(exc, method_input[name]), (service, name, request, details)
    return refused_all


FUZZ = settings(
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
    database=None,
    max_examples=1,
)
EXAMPLES = {"MemoryService": 500, "ReviewService": 250, "AdminService": 250}


@settings(FUZZ, max_examples=EXAMPLES["MemoryService"] // 2)
@given(data=st.data())
def test_fuzz_memory_service(stack: Stack, world: World, data: st.DataObject) -> None:
    run_batch(stack, world, "MemoryService", data.draw)


@settings(FUZZ, max_examples=EXAMPLES["MemoryService"] // 2)
@given(data=st.data())
def test_fuzz_memory_service_more(stack: Stack, world: World, data: st.DataObject) -> None:
    # A second stream of the same service: its methods are most of the surface.
    run_batch(stack, world, "MemoryService", data.draw)


@settings(FUZZ, max_examples=EXAMPLES["ReviewService"])
@given(data=st.data())
def test_fuzz_review_service(stack: Stack, world: World, data: st.DataObject) -> None:
    run_batch(stack, world, "ReviewService", data.draw)


@settings(FUZZ, max_examples=EXAMPLES["AdminService"])
@given(data=st.data())
def test_fuzz_admin_service(stack: Stack, world: World, data: st.DataObject) -> None:
    run_batch(stack, world, "AdminService", data.draw)


def test_every_method_called_and_no_traceback_logged(world: World) -> None:
    """Runs last in the module: every public method was called, the run made
    its count of calls, and no service logged a traceback meanwhile."""
    total = sum(CALLS.values())
    record("descriptor-fuzz", calls=total, by_code=dict(CODES), by_method=dict(CALLS))
    called = {name.split(".", 1)[1] for name in CALLS}
    missing = {m.name for methods in METHODS.values() for m in methods} - called
    assert not missing
    assert total >= MIN_CALLS
    tracebacks = []
    for log, start in world.log_offsets.items():
        with log.open("rb") as handle:
            handle.seek(start)
            text = handle.read().decode(errors="replace")
        if "Traceback" in text:
            tracebacks.append(f"{log.name}: ...{text[text.index('Traceback') - 500 :][:3000]}")
    assert not tracebacks, "\n\n".join(tracebacks)
