"""One write stating the same claim, relation or alias twice (docs/graph.md,
"Writing claims"): refused as a mention of one entity given twice is,
INVALID_ARGUMENT naming the second, nothing written; for remember, derive,
supersede and correct alike. The same is the same entity (any spelling of
its id, or one new name after folding), attribute or predicate, value as
written, and validity; an alias is the same after folding, as lookup
compares it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.conftest import Team

pytestmark = pytest.mark.integration

LISBON = {"entity": {"name": "Robin"}, "attribute": "city", "value": "Lisbon"}
LEADS = {"subject": {"name": "Robin"}, "predicate": "leads", "object": {"name": "Apollo"}}

# name -> (claims, relations, aliases, the second one's field); entity ids
# come from the workspace (the "{robin}" placeholder) when the case is built.
REPEATS: dict[str, tuple[list[Any], list[Any], list[Any], str]] = {
    "claim": ([LISBON, dict(LISBON)], [], [], "claims[1]"),
    "claim at another confidence": (
        [LISBON, {**LISBON, "confidence": 0.5}],
        [],
        [],
        "claims[1]",
    ),
    "claim on one new name spelled otherwise": (
        [LISBON, {**LISBON, "entity": {"name": " ROBIN"}}],
        [],
        [],
        "claims[1]",
    ),
    "claim on one id spelled otherwise": (
        [
            {**LISBON, "entity": {"entity_id": "{robin}"}},
            {**LISBON, "entity": {"entity_id": "{ROBIN}"}},
        ],
        [],
        [],
        "claims[1]",
    ),
    "relation": ([], [LEADS, LEADS, dict(LEADS)], [], "relations[1]"),
    "alias": (
        [],
        [],
        [
            {"entity": {"name": "Robin"}, "alias": "Rob"},
            {"entity": {"name": "Apollo"}, "alias": "Rob"},
            {"entity": {"name": "Robin"}, "alias": "rob "},
        ],
        "aliases[2]",
    ),
}


def _filled(items: list[Any], robin: str) -> list[Any]:
    """``items`` with the placeholders for Robin's id filled in."""
    out = []
    for item in items:
        entity = item.get("entity", {})
        spelled = {"{robin}": robin, "{ROBIN}": robin.upper()}.get(entity.get("entity_id", ""))
        out.append({**item, "entity": {"entity_id": spelled}} if spelled else item)
    return out


def _writes(ada: Client) -> dict[str, Callable[..., Any]]:
    source = ada.remember("Robin's notes", audience_to="workspace").memory
    old = ada.remember("Robin's city", audience_to="workspace").memory
    return {
        "remember": lambda **g: ada.remember("Robin moved", **g),
        "derive": lambda **g: ada.derive([source.id], "Robin moved", **g),
        "supersede": lambda **g: ada.supersede(old.id, old.revision, "Robin moved", **g),
        "correct": lambda **g: ada.correct(old.id, old.revision, "more precise", **g),
    }


@pytest.mark.parametrize("tool", ["remember", "derive", "supersede", "correct"])
def test_a_claim_repeated_in_one_write_is_refused_naming_it(
    stack: Stack, team: Team, tool: str
) -> None:
    ada = team.clients["ada"]
    robin = ada.remember("Met Robin", mention_names=["Robin"]).memory.mentions[0].entity_id
    write = _writes(ada)[tool]
    before = dbutil.checksum(stack, team.database_name)
    refused = {}
    for name, (claims, relations, aliases, _) in REPEATS.items():
        with pytest.raises(grpc.RpcError) as err:
            write(
                claims=_filled(claims, robin),
                relations=relations,
                aliases=_filled(aliases, robin),
            )
        refused[name] = (err.value.code(), (err.value.details() or "").split(":")[0])
    assert refused == {
        name: (grpc.StatusCode.INVALID_ARGUMENT, field)
        for name, (_, _, _, field) in REPEATS.items()
    }
    assert dbutil.checksum(stack, team.database_name) == before


def test_claims_that_differ_are_each_stated(team: Team) -> None:
    """Another value, another validity or another entity is another claim;
    one alias of two entities is two aliases."""
    ada = team.clients["ada"]
    memory = ada.remember(
        "Robin moved",
        claims=[
            LISBON,
            {**LISBON, "value": "Porto"},
            {**LISBON, "valid_from": "2024-01-01T00:00:00Z"},
            {**LISBON, "entity": {"name": "Robin Hood"}},
        ],
        relations=[LEADS, {**LEADS, "object": {"name": "Gemini"}}],
        aliases=[
            {"entity": {"name": "Robin"}, "alias": "Rob"},
            {"entity": {"name": "Apollo"}, "alias": "Rob"},
        ],
    ).memory
    assert len(memory.claims) == 4
    assert len(memory.relations) == 2
    assert len(memory.aliases) == 2
