"""Recall's filters are checked at the gateway, before any work: a refused
filter (too many entities, a duplicate, a malformed id, a kind that is none)
costs no rank call, no query embedding and no store call, over gRPC and over
HTTP/JSON alike, and is refused with the rule and the field the store's own
check names."""

from __future__ import annotations

import urllib.request
import uuid
from typing import Any

import grpc
import pytest

from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from recallatron.vocabulary import MAX_FILTER_ENTITIES
from recallatron_devkit.stack import Stack
from tests.conftest import Team
from tests.faults.stackutil import field_violations
from tests.surfaces.httpjson import call, violations

pytestmark = pytest.mark.integration

ID = str(uuid.uuid4())
# (filters as proto fields, the field named, words of the rule)
BAD: dict[str, tuple[dict[str, Any], str, str]] = {
    "too many entities": (
        {"mention_entity_ids": [str(uuid.uuid4()) for _ in range(MAX_FILTER_ENTITIES + 1)]},
        "filters.mention_entity_ids",
        f"at most {MAX_FILTER_ENTITIES} allowed",
    ),
    "a duplicate entity": (
        {"mention_entity_ids": [ID, ID.upper()]},
        "filters.mention_entity_ids",
        "contains duplicates",
    ),
    "a malformed entity": (
        {"mention_entity_ids": [ID, "not-a-uuid"]},
        "filters.mention_entity_ids[1]",
        "must be a UUID",
    ),
    "an unspecified kind": ({"kinds": [cpb.KIND_NOTE, 0]}, "filters.kinds[1]", "must be a kind"),
    "an unknown kind": ({"kinds": [99]}, "filters.kinds[0]", "unknown value 99"),
}
# Every call a recall makes behind the gateway.
WORK = (
    ("rank", "/recallatron.v1.RankService/Rank"),
    ("store", "/recallatron.v1.StoreService/LexicalCandidates"),
    ("store", "/recallatron.v1.StoreService/DenseCandidates"),
    ("store", "/recallatron.v1.StoreService/NamedEntities"),
)


def _calls(stack: Stack) -> dict[str, float]:
    """Each call of WORK made so far, whatever its answer."""
    counted: dict[str, float] = {}
    for service, method in WORK:
        port = stack.config.metrics_ports[service]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
            text = resp.read().decode()
        counted[method] = sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("recallatron_rpc_total{") and f'method="{method}"' in line
        )
    return counted


def _json_path(field: str) -> str:
    return field.replace("mention_entity_ids", "mentionEntityIds")


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_filter_is_refused_before_any_work(stack: Stack, team: Team, case: str) -> None:
    filters, field, rule = BAD[case]
    ada = team.clients["ada"]
    ada.recall("warm up the channels")  # so that the counts below move only by our calls
    before = _calls(stack)

    with pytest.raises(grpc.RpcError) as err:
        ada.call(
            ada.memory.Recall,
            pb.RecallRequest(query="standup", filters=cpb.RecallFilters(**filters)),
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    assert err.value.details() == f"{field}: {rule}"
    assert field_violations(err.value) == [field]

    as_json: dict[str, Any] = {
        "mentionEntityIds": filters.get("mention_entity_ids", []),
        "kinds": filters.get("kinds", []),
    }
    status, answer = call(
        stack.http_url,
        "recallatron.v1.MemoryService/Recall",
        {"query": "standup", "filters": as_json},
        ada.token,
    )
    assert (status, answer["code"]) == (400, "invalid_argument"), answer
    assert rule in answer["message"], answer
    assert violations(answer) == [_json_path(field)]

    assert _calls(stack) == before
