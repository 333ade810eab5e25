"""Entity merge, decided by a person (design §8.5), through the gateway on real
Postgres: the proposals and their rules, an owner's merge, keep apart and
undo; lookup, neighbors, timeline and recall answering through one entity
after a merge and exactly as before after its undo; and the trust rules: a
proposal or a merge never reaches an entity the reviewer cannot see
evidence for, and only an owner decides."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import grpc
import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from services.store.domain.entity_merge import CONTEXT_MIN_COSINE
from tests import dbutil
from tests.conftest import Team, make_team
from tests.surfaces.dedup_data import NEAR_DUPLICATES, UNRELATED, wait_embedded
from tests.surfaces.entity_data import entity, write_robins

pytestmark = pytest.mark.integration


def rpc_error(fn) -> grpc.RpcError:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as err:
        fn()
    return err.value


def graph_view(client: Client, names: list[str], ids: list[str]) -> dict[str, object]:
    """Everything lookup, neighbors and timeline answer about these, as JSON."""

    def js(msg) -> object:  # type: ignore[no-untyped-def]
        return json_format.MessageToDict(msg)

    return {
        "lookup": {n: js(client.lookup(n)) for n in names},
        "neighbors": {i: js(client.neighbors(i, hops=2)) for i in ids},
        "timeline": {i: js(client.timeline(i)) for i in ids},
    }


@pytest.fixture
def robins(team: Team) -> dict[str, str]:
    return write_robins(team.clients["ada"])


def test_proposes_a_name_prefix_with_a_shared_co_mention(
    team: Team, robins: dict[str, str]
) -> None:
    ada = team.clients["ada"]
    pairs = ada.entity_pairs().pairs
    found = [p for p in pairs if {p.first.id, p.second.id} == {robins["goodwin"], robins["robin"]}]
    assert len(found) == 1
    pair = found[0]
    assert "name_prefix" in pair.reasons
    # Each side carries its visible evidence: attributes, relations, mentions.
    cards = {pair.first.id: pair.first, pair.second.id: pair.second}
    assert [a.value for a in cards[robins["goodwin"]].attributes] == ["Lisbon"]
    assert [a.value for a in cards[robins["robin"]].attributes] == ["release reviewer"]
    assert cards[robins["robin"]].mentioned_by == [robins["second_memory"]]
    assert [r.predicate for r in cards[robins["goodwin"]].relations] == ["leads"]
    # Apollo is co-mentioned, never proposed with a Robin.
    assert all(robins["apollo"] not in (p.first.id, p.second.id) for p in pairs)


def kim_park_three_ways(ada: Client) -> tuple[str, str, str]:
    """Three entities for one person: by name, by the same name spelled
    otherwise, and by an alias; nothing merges them on write."""
    a = ada.remember("Kim joined", "Kim joined ops.", mention_names=["Kim Park"]).memory
    b = ada.remember("Kim left", "Kim left ops.", mention_names=["kim  park"]).memory
    c = ada.remember(
        "KP",
        "KP runs the on-call rota.",
        mention_names=["K. P."],
        aliases=[{"entity": {"name": "K. P."}, "alias": "Kim Park"}],
    ).memory
    return entity(a, "Kim Park"), entity(b, "kim  park"), entity(c, "K. P.")


def test_same_names_and_aliases_are_proposed(team: Team) -> None:
    ada = team.clients["ada"]
    pa, pb, pc = kim_park_three_ways(ada)
    assert len({pa, pb, pc}) == 3  # three entities: nothing merged them on write
    reasons = {
        frozenset((p.first.id, p.second.id)): set(p.reasons) for p in ada.entity_pairs().pairs
    }
    assert "same_name" in reasons[frozenset((pa, pb))]
    assert "same_alias" in reasons[frozenset((pa, pc))]
    assert "same_alias" in reasons[frozenset((pb, pc))]


def test_close_mention_contexts_are_proposed(stack: Stack, team: Team) -> None:
    """Two differently named entities whose memories say the same thing (and
    which no memory names together) are proposed on their contexts alone;
    entities of unrelated memories are not."""
    ada = team.clients["ada"]
    (first, second), *others = NEAR_DUPLICATES
    a = ada.remember(*first, mention_names=["staging-db"]).memory
    b = ada.remember(*second, mention_names=["The weekend database"]).memory
    rest = [
        ada.remember(title, body, mention_names=[f"topic {i}"]).memory
        for i, (title, body) in enumerate([p for pair in others for p in pair[:1]] + UNRELATED)
    ]
    wait_embedded(stack, team, [a.id, b.id, *(m.id for m in rest)])
    pairs = {frozenset((p.first.id, p.second.id)): p for p in ada.entity_pairs().pairs}
    pair = pairs[frozenset((entity(a, "staging-db"), entity(b, "The weekend database")))]
    assert list(pair.reasons) == ["close_context"]
    assert pair.HasField("context_cosine") and pair.context_cosine >= CONTEXT_MIN_COSINE
    topics = {entity(m, m.mentions[0].name) for m in rest}
    assert not [p for p in pairs if p <= topics]


def test_merge_answers_as_one_and_undo_restores_everything(
    stack: Stack, team: Team, robins: dict[str, str]
) -> None:
    ada = team.clients["ada"]
    ids = [robins["goodwin"], robins["robin"], robins["apollo"]]
    names = ["Robin Goodwin", "Robin", "Apollo"]
    before = graph_view(ada, names, ids)

    done = ada.merge_entities(robins["goodwin"], robins["robin"])
    assert done.created and done.merge.kept.name == "Robin Goodwin"
    assert done.merge.merged.name == "Robin"
    # Deciding again writes nothing a second time.
    again = ada.merge_entities(robins["goodwin"], robins["robin"])
    assert not again.created and again.merge.id == done.merge.id
    assert dbutil.query(stack, team.database_name, "SELECT count(*) FROM entity_merge")[0][0] == 1

    # lookup: either name finds one card, under the kept entity, listing both.
    for name in ("Robin Goodwin", "Robin"):
        cards = ada.lookup(name).entities
        assert len(cards) == 1, name
        card = cards[0]
        assert card.id == robins["goodwin"] and card.name == "Robin Goodwin"
        assert [(m.id, m.name) for m in card.merged] == [(robins["robin"], "Robin")]
        assert sorted(a.value for a in card.attributes) == ["Lisbon", "release reviewer"]
        assert sorted(r.predicate for r in card.relations) == ["leads", "reviews"]
        assert set(card.mentioned_by) == {robins["first_memory"], robins["second_memory"]}
    # Apollo's card sees one person on both relations.
    apollo = ada.lookup("Apollo").entities[0]
    assert {r.other.id for r in apollo.relations} == {robins["goodwin"]}

    # neighbors: from either member, one node for the person.
    for start in (robins["goodwin"], robins["robin"]):
        found = ada.neighbors(start, hops=1)
        nodes = {n.entity.id: n for n in found.nodes}
        assert set(nodes) == {robins["goodwin"], robins["apollo"]}
        assert [m.name for m in nodes[robins["goodwin"]].merged] == ["Robin"]
        assert {(e.subject.id, e.predicate) for e in found.edges} == {
            (robins["goodwin"], "leads"),
            (robins["goodwin"], "reviews"),
        }
    # timeline: the merged entity's events are the group's.
    events = ada.timeline(robins["robin"]).events
    assert {e.memory_id for e in events if e.kind == "memory"} == {
        robins["first_memory"],
        robins["second_memory"],
    }
    assert {e.entity_id for e in events if e.entity_id} == {robins["goodwin"]}

    # recall: the card lists both names; the mention filter takes in both.
    resp = ada.recall("what does Robin do", mode="lexical")
    assert [c.id for c in resp.outcome.entities] == [robins["goodwin"]]
    assert [m.name for m in resp.outcome.entities[0].merged] == ["Robin"]
    filtered = ada.recall("Apollo", mode="lexical", mention_ids=[robins["goodwin"]])
    assert {r.memory.id for r in filtered.outcome.results} == {
        robins["first_memory"],
        robins["second_memory"],
    }
    # A merged pair is not proposed again.
    assert all(
        {p.first.id, p.second.id} != {robins["goodwin"], robins["robin"]}
        for p in ada.entity_pairs().pairs
    )
    assert [m.id for m in ada.entity_merges().merges] == [done.merge.id]

    ada.undo_entity_merge(done.merge.id)
    assert graph_view(ada, names, ids) == before
    assert len(ada.entity_merges().merges) == 0
    assert rpc_error(lambda: ada.undo_entity_merge(done.merge.id)).code() == (
        grpc.StatusCode.NOT_FOUND
    )
    # Proposed again once undone.
    assert any(
        {p.first.id, p.second.id} == {robins["goodwin"], robins["robin"]}
        for p in ada.entity_pairs().pairs
    )


def test_the_same_merge_at_once_is_written_once(
    stack: Stack, team: Team, robins: dict[str, str]
) -> None:
    ada = team.clients["ada"]
    pair = [(robins["goodwin"], robins["robin"]), (robins["robin"], robins["goodwin"])]
    with ThreadPoolExecutor(8) as pool:
        done = list(pool.map(lambda i: ada.merge_entities(*pair[i % 2]), range(8)))
    assert sum(d.created for d in done) == 1
    assert len({d.merge.id for d in done}) == 1
    rows = dbutil.query(stack, team.database_name, "SELECT count(*) FROM entity_merge")
    assert rows == [(1,)]


def test_keep_apart_is_never_proposed_again(team: Team, robins: dict[str, str]) -> None:
    ada = team.clients["ada"]
    ada.keep_entities_apart(robins["robin"], robins["goodwin"])
    ada.keep_entities_apart(robins["goodwin"], robins["robin"])  # idempotent
    assert all(
        {p.first.id, p.second.id} != {robins["goodwin"], robins["robin"]}
        for p in ada.entity_pairs().pairs
    )
    # Kept apart, not merged: both still answer alone.
    assert [c.id for c in ada.lookup("Robin").entities] == [robins["robin"]]


def test_a_pair_kept_apart_stays_apart_when_one_side_is_a_merged_group(team: Team) -> None:
    """The pair is shown, and kept apart, as its groups' heads: a member of a
    group kept apart from an entity is never proposed with it again either."""
    ada = team.clients["ada"]
    pa, pb, pc = kim_park_three_ways(ada)
    ada.merge_entities(pa, pc)
    shown = {frozenset((p.first.id, p.second.id)) for p in ada.entity_pairs().pairs}
    assert frozenset((pa, pb)) in shown
    ada.keep_entities_apart(pb, pa)
    assert all({p.first.id, p.second.id} != {pa, pb} for p in ada.entity_pairs().pairs), (
        "proposed again through the group's other member"
    )


def test_only_owners_decide_and_bad_input_names_the_field(
    team: Team, robins: dict[str, str]
) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    for call in (
        lambda: bob.entity_pairs(),
        lambda: bob.merge_entities(robins["goodwin"], robins["robin"]),
        lambda: bob.keep_entities_apart(robins["goodwin"], robins["robin"]),
        lambda: bob.entity_merges(),
    ):
        assert rpc_error(call).code() == grpc.StatusCode.PERMISSION_DENIED
    err = rpc_error(lambda: ada.merge_entities("nope", robins["robin"]))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "kept_id" in (err.details() or "")
    err = rpc_error(lambda: ada.merge_entities(robins["robin"], robins["robin"]))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "merged_id" in (err.details() or "")
    err = rpc_error(lambda: ada.merge_entities(robins["goodwin"], str(uuid.uuid4())))
    assert err.code() == grpc.StatusCode.NOT_FOUND
    err = rpc_error(lambda: ada.entity_pairs(limit=101))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "limit" in (err.details() or "")
    assert len(ada.entity_merges().merges) == 0


def test_nothing_reaches_an_entity_the_reviewer_cannot_see(
    stack: Stack, operator: Client, team: Team
) -> None:
    """Olga (a second owner) holds a private "Robin"; Ada sees only the
    workspace one. Ada is never proposed the pair, cannot merge with the
    hidden entity (not found, as for an id that does not exist), and Olga's
    merge changes nothing Ada sees."""
    ada = team.clients["ada"]
    olga_member = operator.create_member(team.workspace_id, "olga", owner=True).member
    olga = Client(stack.gateway, operator.create_token(olga_member.id, "test").token)
    try:
        shared = ada.remember(
            "Robin is on call",
            "Robin is on call this week.",
            mention_names=["Robin"],
            audience_to="workspace",
        ).memory
        private = olga.remember(
            "Robin's salary",
            "Robin asked Olga for a raise.",
            mention_names=["Robin"],
            audience_to=olga_member.id,
            claims=[{"entity": {"name": "Robin"}, "attribute": "salary_band", "value": "B4"}],
        ).memory
        seen, hidden = entity(shared, "Robin"), entity(private, "Robin")
        assert all(hidden not in (p.first.id, p.second.id) for p in ada.entity_pairs().pairs)
        olga_pairs = [
            p for p in olga.entity_pairs().pairs if {p.first.id, p.second.id} == {seen, hidden}
        ]
        assert len(olga_pairs) == 1 and "same_name" in olga_pairs[0].reasons

        # Refused as an id nothing has, naming the field that holds it.
        nowhere = str(uuid.uuid4())
        for call, hiding, field in (
            (ada.merge_entities, (seen, hidden), "merged_id"),
            (ada.merge_entities, (hidden, seen), "kept_id"),
            (ada.keep_entities_apart, (seen, hidden), "second_id"),
            (ada.keep_entities_apart, (hidden, seen), "first_id"),
        ):
            missing = rpc_error(partial(call, *(nowhere if i == hidden else i for i in hiding)))
            hidden_err = rpc_error(partial(call, *hiding))
            assert (hidden_err.code(), hidden_err.details()) == (missing.code(), missing.details())
            assert (missing.code(), missing.details()) == (
                grpc.StatusCode.NOT_FOUND,
                f"{field}: entity not found",
            )

        merge = olga.merge_entities(seen, hidden).merge
        card = ada.lookup("Robin").entities
        assert [(c.id, list(c.merged), len(c.attributes)) for c in card] == [(seen, [], 0)]
        assert ada.entity_merges().merges == []
        assert rpc_error(lambda: ada.undo_entity_merge(merge.id)).code() == (
            grpc.StatusCode.NOT_FOUND
        )
        # Olga sees one Robin with her private claim.
        mine = olga.lookup("Robin").entities
        assert len(mine) == 1 and [m.id for m in mine[0].merged] == [hidden]
        assert [a.value for a in mine[0].attributes] == ["B4"]

        # Forgetting the only evidence for the hidden entity ends the merge.
        olga.forget(private.id, "asked to")
        assert olga.entity_merges().merges == []
        rows = dbutil.query(stack, team.database_name, "SELECT count(*) FROM entity_merge")
        assert rows[0][0] == 0
    finally:
        olga.close()


NAMES = ["Robin", "Robin Goodwin", "robin", "Goodwin", "Ada", "Ada Lovelace", "Apollo"]


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    writes=st.lists(
        st.tuples(
            st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True),
            st.sampled_from(["Robin and Ada shipped Apollo.", "Lunch is at noon."]),
        ),
        min_size=2,
        max_size=6,
    )
)
def test_no_merge_without_a_decision(
    stack: Stack, operator: Client, writes: list[tuple[list[str], str]]
) -> None:
    """Whatever the names and however strong the proposals (identical
    names, prefixes, identical texts: context cosine 1), nothing merges:
    every entity still answers alone and no merge is recorded."""
    team = make_team(stack, operator, ("ada",))
    ada = team.clients["ada"]
    try:
        created: set[str] = set()
        memories = []
        for names, body in writes:
            memory = ada.remember(body[:40], body, mention_names=names).memory
            memories.append(memory.id)
            created |= {m.entity_id for m in memory.mentions}
        wait_embedded(stack, team, memories)
        pairs = ada.entity_pairs(limit=100).pairs
        assert all(p.first.id != p.second.id and not p.first.merged for p in pairs)
        seen: set[str] = set()
        for name in {n for names, _ in writes for n in names}:
            for card in ada.lookup(name).entities:
                assert not card.merged
                seen.add(card.id)
        assert seen == created
        assert ada.entity_merges().merges == []
        rows = dbutil.query(stack, team.database_name, "SELECT count(*) FROM entity_merge")
        assert rows[0][0] == 0
    finally:
        ada.close()


def test_a_list_cut_by_its_limit_says_more_pairs_wait(team: Team) -> None:
    """A list of exactly `limit` pairs read the same whether others waited
    past it or none did: `more` was set only by the answer's size budget."""
    ada = team.clients["ada"]
    kim_park_three_ways(ada)
    whole = ada.entity_pairs(limit=3)
    assert len(whole.pairs) == 3 and not whole.more, whole
    cut = ada.entity_pairs(limit=2)
    assert len(cut.pairs) == 2 and cut.more, cut
    # The embedding job may still reorder them: the cut ones are of the whole.
    keys = [frozenset((p.first.id, p.second.id)) for p in (*whole.pairs, *cut.pairs)]
    assert set(keys[3:]) < set(keys[:3]), keys
    assert not ada.entity_pairs(limit=4).more
