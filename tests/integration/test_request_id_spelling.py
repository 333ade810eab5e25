"""A retry and the spelling of its ids (docs/api.md, errors): every id is
taken in any spelling of a UUID, so a retry that spells one of its ids
otherwise (upper case, braces, no hyphens) is the same request and replays;
text that merely reads like a UUID is still text, compared as written."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.conftest import Team

pytestmark = pytest.mark.integration

WHEN = "2026-11-30T10:00:00Z"


def _spelled(canonical: str) -> str:
    """The same id, spelled as no id is handed out."""
    return "{" + canonical.upper() + "}"


def _bare(canonical: str) -> str:
    return uuid.UUID(canonical).hex.upper()


def _entity(team: Team) -> str:
    ada = team.clients["ada"]
    made = ada.remember("Robin joins", audience_to="workspace", mention_names=["Robin"]).memory
    return str(made.mentions[0].entity_id)


def test_a_remember_retried_with_its_ids_spelled_otherwise_replays(team: Team) -> None:
    ada = team.clients["ada"]
    episode = ada.create_episode("Standup", WHEN, audience_to="workspace").episode_id
    about = ada.remember("Context", audience_to="workspace").memory.id
    entity = _entity(team)
    bob = team.members["bob"]
    rid = str(uuid.uuid4())

    def remember(spell: Any) -> Any:
        return ada.remember(
            "Robin leads the standup",
            audience_to=spell(bob),
            episode_id=spell(episode),
            about=[spell(about)],
            mention_ids=[spell(entity)],
            claims=[{"entity": {"entity_id": spell(entity)}, "attribute": "role", "value": "lead"}],
            request_id=rid,
        )

    first = remember(str)
    for spell in (str.upper, _spelled, _bare):
        again = remember(spell)
        assert again.replayed and again.memory.id == first.memory.id, spell


def test_a_derive_retried_with_its_ids_spelled_otherwise_replays(team: Team) -> None:
    ada = team.clients["ada"]
    a = ada.remember("First", audience_to="workspace").memory.id
    b = ada.remember("Second", audience_to="workspace").memory.id
    entity = _entity(team)
    rid = str(uuid.uuid4())

    def derive(spell: Any) -> Any:
        return ada.derive(
            [spell(a), spell(b)], "From both", mention_ids=[spell(entity)], request_id=rid
        )

    first = derive(str)
    for spell in (str.upper, _spelled, _bare):
        again = derive(spell)
        assert again.replayed and again.memory.id == first.memory.id, spell


def test_a_revision_retried_with_its_ids_spelled_otherwise_replays(team: Team) -> None:
    ada = team.clients["ada"]
    entity = _entity(team)
    source = ada.remember("Source", audience_to="workspace").memory.id
    old = ada.remember("Old", audience_to="workspace").memory.id
    fixed = ada.remember("Typo", audience_to="workspace").memory.id
    gone = ada.remember("Withdrawn", audience_to="workspace").memory.id
    rids = {tool: str(uuid.uuid4()) for tool in ("supersede", "correct", "forget")}
    claim = {"attribute": "role", "value": "lead"}

    calls: dict[str, Callable[[Callable[[str], str]], Any]] = {
        "supersede": lambda spell: ada.supersede(
            spell(old), 1, "New", sources=[spell(source)], mention_ids=[spell(entity)],
            claims=[{"entity": {"entity_id": spell(entity)}, **claim}],
            request_id=rids["supersede"],
        ),
        "correct": lambda spell: ada.correct(
            spell(fixed), 1, "typo", body="fixed",
            claims=[{"entity": {"entity_id": spell(entity)}, **claim}],
            request_id=rids["correct"],
        ),
        "forget": lambda spell: ada.forget(spell(gone), "withdrawn", request_id=rids["forget"]),
    }  # fmt: skip
    for tool, call in calls.items():
        first = call(str)
        for spell in (str.upper, _spelled, _bare):
            again = call(spell)
            assert again.replayed, (tool, spell)
            if tool != "forget":
                assert again.memory.id == first.memory.id, (tool, spell)


def test_text_that_reads_like_a_uuid_is_compared_as_written(team: Team) -> None:
    """Only ids are compared in their canonical form: a title or a claim's
    value that happens to be a UUID in another case is another request."""
    ada = team.clients["ada"]
    text = str(uuid.uuid4())
    for asked in (
        {"title": "Ticket", "claims": [{"entity": {"name": "Ticket"}, "attribute": "ref"}]},
        {"title": "Ticket"},
    ):
        rid = str(uuid.uuid4())

        def remember(value: str, asked: dict[str, Any] = asked, rid: str = rid) -> Any:
            more = dict(asked)
            if "claims" in more:
                more["claims"] = [{**more["claims"][0], "value": value}]
            else:
                more["title"] = value
            return ada.remember(request_id=rid, **more)

        remember(text)
        with pytest.raises(grpc.RpcError) as refused:
            remember(text.upper())
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "request_id" in str(refused.value.details())


def test_a_request_id_that_is_a_uuid_is_the_same_in_any_spelling(
    stack: Stack, team: Team, operator: Client
) -> None:
    """The request id itself, when a UUID, as any id; one kept before in
    another spelling (under the hash of that spelling) still replays spelled so."""
    ada = team.clients["ada"]
    rid = str(uuid.uuid4())
    first = ada.remember("Once", request_id=rid.upper()).memory
    for spell in (str, _spelled, _bare):
        again = ada.remember("Once", request_id=spell(rid))
        assert again.replayed and again.memory.id == first.id, spell

    kept = str(uuid.uuid4())
    made = ada.remember("Kept before", request_id=kept.upper()).memory
    member = team.members["ada"]
    # As a store before this one kept it: the hash of the id as spelled.
    assert dbutil.query(
        stack, team.database_name,
        "UPDATE request_key SET request_id = %s WHERE request_id = %s RETURNING 1",
        (_hashed(member, kept.upper()), _hashed(member, kept)),
    ) == [(1,)]  # fmt: skip
    again = ada.remember("Kept before", request_id=kept.upper())
    assert again.replayed and again.memory.id == made.id

    token_rid = str(uuid.uuid4())
    token = operator.create_token(team.members["bob"], "ci", request_id=token_rid).token_id
    with pytest.raises(grpc.RpcError) as retried:
        operator.create_token(team.members["bob"], "ci", request_id=_spelled(token_rid))
    assert retried.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert token in str(retried.value.details())


def _hashed(member_id: str, request_id: str) -> str:
    return hashlib.sha256(f"{member_id}:{request_id}".encode()).hexdigest()
