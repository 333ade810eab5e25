"""Every answer that carries what members wrote stays bounded, however large
that grew: a page of long memories, a lookup of many large entity cards, the
entity pairs of the review, and recall's memories, entity cards and history
each answer what fits their size budget and say how to get the rest (a page
token, a "more" mark, the names to look up), so that no member's data makes a
call exceed the gRPC message limit (RESOURCE_EXHAUSTED) for everyone."""

from __future__ import annotations

from typing import Any

import grpc
import psycopg
import pytest

from recallatron.client import Client
from recallatron.vocabulary import (
    ANSWER_BUDGET_BYTES,
    BESIDE_BUDGET_BYTES,
    MAX_BODY,
    MAX_CLAIM_VALUE,
    MAX_CLAIMS,
    MAX_ENTITY_NAME,
    MAX_MENTIONS,
    MAX_RECALL_ENTITIES,
    MAX_RELATIONS,
    MAX_TITLE,
)
from recallatron_devkit.stack import Stack
from tests.conftest import Team
from tests.dbutil import workspace_url

pytestmark = pytest.mark.integration

# Four UTF-8 bytes a character (twelve as a JSON \u escape pair): the widest
# text a member may write within the character limits.
WIDE = "\N{GRINNING FACE}"
# What an answer may take beside its budgeted part: ids, times, scores.
SLACK = 256 * 1024


def _claims(entity: dict[str, str], prefix: str) -> list[dict[str, Any]]:
    """As many claims as one write may state about ``entity``, each value as
    wide as a value may be (about 800 kB in all)."""
    return [
        {"entity": entity, "attribute": f"{prefix}{i}", "value": WIDE * MAX_CLAIM_VALUE}
        for i in range(MAX_CLAIMS)
    ]


def _quarries(ada: Client, count: int, writes_each: int = 1) -> list[str]:
    """``count`` entities all named Quarry (each write's names are entities of
    its own), each stated ``writes_each`` times 100 wide claims: a card of
    about 800 kB a write. Their ids."""
    ids = []
    for n in range(count):
        first = ada.remember(
            f"Quarry ledger {n}",
            "Quarry ledger.",
            audience_to="workspace",
            claims=_claims({"name": "Quarry"}, "a"),
        ).memory
        entity = first.mentions[0].entity_id
        for more in range(1, writes_each):
            ada.remember(
                f"Quarry ledger {n} addendum {more}",
                "Quarry ledger.",
                audience_to="workspace",
                claims=_claims({"entity_id": entity}, f"w{more}_"),
            )
        ids.append(entity)
    return ids


def test_a_page_of_long_memories_is_answered_within_the_budget(team: Team) -> None:
    # A hundred memories as long as they may be: about 8.15 MB on one page of
    # a hundred, within 3% of the 8 MiB message limit.
    ada = team.clients["ada"]
    ids = [
        ada.remember(WIDE * MAX_TITLE, WIDE * MAX_BODY, audience_to="workspace").memory.id
        for _ in range(100)
    ]
    listed: list[str] = []
    token = ""
    while True:
        page = ada.list_memories(page_size=100, page_token=token)
        assert page.ByteSize() <= ANSWER_BUDGET_BYTES + SLACK
        assert page.memories, "every page answers at least one memory"
        listed += [m.id for m in page.memories]
        token = page.next_page_token
        if not token:
            break
    # Newest first, each once, none left out.
    assert listed == ids[::-1]


def test_a_lookup_of_many_large_cards_pages_within_the_budget(team: Team) -> None:
    # Twelve entities named Quarry with 800 kB of claims each: 9.7 MB of cards.
    ada = team.clients["ada"]
    quarries = _quarries(ada, 12)
    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        answer = ada.lookup("Quarry", page_token=token)
        pages += 1
        assert answer.ByteSize() <= ANSWER_BUDGET_BYTES + SLACK
        assert answer.entities, "every page answers at least one card"
        for card in answer.entities:
            assert len(card.attributes) == MAX_CLAIMS and not card.truncated
        seen += [c.id for c in answer.entities]
        token = answer.next_page_token
        if not token:
            break
    assert sorted(seen) == sorted(quarries) and pages > 1
    # A token belongs to its lookup.
    first = ada.lookup("Quarry").next_page_token
    with pytest.raises(grpc.RpcError) as refused:
        ada.lookup("Robin", page_token=first)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "page_token" in (refused.value.details() or "")


def test_a_lookup_forgotten_from_between_its_pages_still_answers_every_other_card(
    team: Team,
) -> None:
    """The next page starts after the entities answered, not after a count of
    cards: one of them forgotten between the pages left the next page a card
    short (the list moved up one under the count)."""
    from services.store.domain import page_tokens

    ada = team.clients["ada"]
    quarries = _quarries(ada, 6)  # about 4.8 MB of cards: two pages
    first = ada.lookup("Quarry")
    assert first.next_page_token and len(first.entities) < len(quarries)
    gone = first.entities[0]
    ada.forget(gone.mentioned_by[0], "between the pages")
    seen = [c.id for c in first.entities]
    token = first.next_page_token
    while token:
        page = ada.lookup("Quarry", page_token=token)
        seen += [c.id for c in page.entities]
        token = page.next_page_token
    assert sorted(seen) == sorted(quarries), set(quarries) - set(seen)
    # The entities answered are the token's own: anything else is refused.
    real = page_tokens.decode(first.next_page_token)
    changes: list[dict[str, Any]] = [{"seen": []}, {"seen": ["x"]}, {"seen": "abc"}, {"seen": None}]
    for change in changes:
        crafted = page_tokens.encode({**real, **change})
        with pytest.raises(grpc.RpcError) as refused:
            ada.lookup("Quarry", page_token=crafted)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, change
        assert "page_token" in (refused.value.details() or "")


def test_entity_pairs_of_large_cards_are_answered_within_the_budget(team: Team) -> None:
    # Six entities named Quarry, 800 kB of claims each: fifteen pairs, 24 MB
    # as two cards each.
    ada = team.clients["ada"]
    quarries = set(_quarries(ada, 6))
    answer = ada.entity_pairs(limit=20)
    assert answer.more and answer.pairs
    assert answer.ByteSize() <= ANSWER_BUDGET_BYTES + SLACK
    # Keeping apart what was shown brings the rest.
    decided = 0
    while answer.pairs:
        for pair in answer.pairs:
            assert {pair.first.id, pair.second.id} <= quarries
            ada.keep_entities_apart(pair.first.id, pair.second.id)
            decided += 1
        answer = ada.entity_pairs(limit=20)
        assert answer.ByteSize() <= ANSWER_BUDGET_BYTES + SLACK
    assert decided == 15 and not answer.more


def _long_name(n: int) -> str:
    """A name as long as one may be (200 characters, 800 bytes), ``n`` telling it apart."""
    return WIDE * (MAX_ENTITY_NAME - 3) + f"{n:03d}"


def test_a_recall_hydrating_many_long_memories_answers_within_the_budget(team: Team) -> None:
    # A hundred long memories mentioning fifty long names each, every one a
    # match, and a rerank depth of 100: the store read all hundred for rank,
    # about 9.4 MB, past the limit, and every recall of the term failed.
    ada = team.clients["ada"]
    ada.update_settings(rerank_depth=100)
    names = [_long_name(i) for i in range(MAX_MENTIONS)]
    for n in range(100):
        ada.remember(f"Ledger {n}", WIDE * MAX_BODY, audience_to="workspace", mention_names=names)
    outcome = ada.recall("ledger", mode="lexical", limit=50).outcome
    assert len(outcome.results) == 50
    results = sum(r.memory.ByteSize() for r in outcome.results)
    assert results <= ANSWER_BUDGET_BYTES + SLACK
    assert outcome.ByteSize() <= ANSWER_BUDGET_BYTES + 2 * BESIDE_BUDGET_BYTES + SLACK
    # The rows keep their text; provenance past the budget is left out, counted.
    assert all(len(r.memory.body) == MAX_BODY for r in outcome.results)
    cut = [r.memory for r in outcome.results if r.memory.provenance_cut]
    assert cut and all(m.omitted.mentions == MAX_MENTIONS and not m.mentions for m in cut)


def test_a_recall_naming_large_entities_answers_the_cards_that_fit(team: Team) -> None:
    # Four entities of one long name, each stated 200 wide claims and 200
    # relations (about 2 MB a card), and a small one named Quarry: the five
    # cards a recall naming them carried passed the limit with the memories
    # found beside them.
    ada = team.clients["ada"]
    small = ada.remember(
        "Quarry site",
        "The quarry is in Lisbon.",
        audience_to="workspace",
        claims=[{"entity": {"name": "Quarry"}, "attribute": "city", "value": "Lisbon"}],
    ).memory.mentions[0]
    name = "Quarry " + WIDE * (MAX_ENTITY_NAME - 10)
    large = set()
    for n in range(MAX_RECALL_ENTITIES - 1):
        entity: dict[str, str] = {"name": name}
        for write in range(2):
            memory = ada.remember(
                f"Quarry ledger {n} {write}",
                WIDE * MAX_BODY,
                audience_to="workspace",
                claims=_claims(entity, f"w{write}_"),
                relations=[
                    {
                        "subject": entity,
                        "predicate": "holds",
                        "object": {"name": _long_name(i)},
                    }
                    for i in range(MAX_RELATIONS)
                ],
            ).memory
            entity = {"entity_id": next(m.entity_id for m in memory.mentions if m.name == name)}
        large.add(entity["entity_id"])
    outcome = ada.recall(name, mode="lexical").outcome
    assert not outcome.entities_unavailable_reason
    assert outcome.ByteSize() <= ANSWER_BUDGET_BYTES + 2 * BESIDE_BUDGET_BYTES + SLACK
    assert sum(c.ByteSize() for c in outcome.entities) <= BESIDE_BUDGET_BYTES
    # The small card fits; the large ones are named, to be looked up.
    assert [c.id for c in outcome.entities] == [small.entity_id]
    assert {e.id for e in outcome.more_entities} == large
    assert {e.name for e in outcome.more_entities} == {name}


# An owner's history as the migration imports it, turns as long as it takes
# them (200,000 characters).
HISTORY_TURN = """
INSERT INTO history_entry (id, owner_member_id, chat_id, role, text, occurred_at)
SELECT gen_random_uuid(), %s, 'chat', 'user', 'quetzal ' || repeat(%s, 199990),
       now() - make_interval(secs => i)
FROM generate_series(1, %s) AS i
"""


def test_a_recall_with_long_history_answers_the_turns_that_fit(stack: Stack, team: Team) -> None:
    # Twelve matching turns of 800 kB each: 9.6 MB of history evidence.
    with psycopg.connect(workspace_url(stack, team.database_name), autocommit=True) as conn:
        conn.execute(HISTORY_TURN, (team.members["ada"], WIDE, 12))
    ada = team.clients["ada"]
    outcome = ada.recall("quetzal", mode="lexical", limit=12, include_history=True).outcome
    assert not outcome.history_unavailable_reason
    assert outcome.history
    assert sum(h.ByteSize() for h in outcome.history) <= BESIDE_BUDGET_BYTES
    assert len(outcome.history) + outcome.history_left_out == 12
    assert outcome.ByteSize() <= ANSWER_BUDGET_BYTES + 2 * BESIDE_BUDGET_BYTES + SLACK
