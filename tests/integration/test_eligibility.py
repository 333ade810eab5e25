"""Eligibility (design §4) over random members, audiences, purposes and
derivation chains: no tool reveals a memory the caller may not see, and a
derived memory carries exactly the intersection of its sources' trust."""

from __future__ import annotations

import uuid

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recallatron.client import Client
from recallatron.vocabulary import MODES, PURPOSE, PURPOSES
from services.store.domain.trust import Trust, eligible, intersect
from tests.conftest import make_team

pytestmark = pytest.mark.integration

HANDLES = ("ada", "bob", "cy")

memory_specs = st.lists(
    st.tuples(
        st.sampled_from(HANDLES),  # creator
        st.sampled_from(("workspace", *HANDLES)),  # audience
        st.frozensets(st.sampled_from(PURPOSES), min_size=1),
    ),
    min_size=2,
    max_size=6,
)
derive_specs = st.lists(
    st.tuples(
        st.sampled_from(HANDLES),
        st.sampled_from(PURPOSES),
        st.lists(st.integers(0, 20), min_size=1, max_size=3),
    ),
    max_size=4,
)


def _visible(client: Client, memory_id: str, purpose: str) -> bool:
    try:
        return client.read([memory_id], purpose=purpose).memories[0].id == memory_id
    except grpc.RpcError as exc:
        assert exc.code() == grpc.StatusCode.NOT_FOUND
        # Exactly what an id that never existed gets.
        assert exc.details() == f"ids: not found: {memory_id}"
        return False


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(memories=memory_specs, derivations=derive_specs, forget_first=st.booleans())
def test_no_tool_reveals_what_the_caller_may_not_see(
    stack,
    operator,
    memories,
    derivations,
    forget_first,  # type: ignore[no-untyped-def]
) -> None:
    team = make_team(stack, operator, HANDLES)
    truth: dict[str, tuple[Trust, bool]] = {}
    order: list[str] = []
    # Each told memory's title holds a word no other memory has: a rare-term
    # lexical query finds it alone, through the GIN index (migration 0006).
    rare: dict[str, str] = {}
    for creator, audience, purposes in memories:
        aud = "workspace" if audience == "workspace" else team.members[audience]
        word = "rare" + "".join(chr(ord("a") + int(c, 16)) for c in uuid.uuid4().hex[:8])
        m = (
            team.clients[creator]
            .remember(f"memory {word}", audience_to=aud, purposes=sorted(purposes))
            .memory
        )
        rare[m.id] = word
        truth[m.id] = (Trust(None if audience == "workspace" else aud, purposes), False)
        order.append(m.id)
    for handle, purpose, picks in derivations:
        member = team.members[handle]
        sources = list(dict.fromkeys(order[i % len(order)] for i in picks))
        can_see = all(eligible(truth[s][0], truth[s][1], member, purpose) for s in sources)
        try:
            d = team.clients[handle].derive(sources, "derived", purpose=purpose).memory
        except grpc.RpcError as exc:
            assert not can_see and exc.code() == grpc.StatusCode.NOT_FOUND, exc.details()
            continue
        assert can_see
        expected = intersect([truth[s][0] for s in sources])
        got_audience = d.audience.member_id if d.audience.member_id else None
        assert (got_audience, set(d.purposes)) == (
            expected.audience,
            {PURPOSE.value(p) for p in expected.purposes},
        )
        truth[d.id] = (expected, False)
        order.append(d.id)
    if forget_first:
        first = order[0]
        creator_trust = truth[first][0]
        for handle in HANDLES:
            for purpose in PURPOSES:
                if eligible(creator_trust, False, team.members[handle], purpose):
                    team.clients[handle].forget(first, "test", purpose=purpose)
                    truth[first] = (creator_trust, True)
                    break
            if truth[first][1]:
                break
    for handle in HANDLES:
        member = team.members[handle]
        for purpose in PURPOSES:
            for memory_id, (trust, forgotten) in truth.items():
                assert _visible(team.clients[handle], memory_id, purpose) == eligible(
                    trust, forgotten, member, purpose
                ), (handle, purpose, trust, forgotten)
    # Recall, every arm and with filters, and dedup proposals: nothing outside
    # the caller's eligible set, in the results, the pairs or the counts.
    team.clients[HANDLES[0]].wait_embedded(timeout=120, poll=0.2)
    for handle in HANDLES:
        member = team.members[handle]
        for purpose in PURPOSES:
            allowed = {
                i for i, (trust, gone) in truth.items() if eligible(trust, gone, member, purpose)
            }
            for mode in MODES:
                outcome = (
                    team.clients[handle]
                    .recall("memory derived", mode=mode, limit=50, purpose=purpose)
                    .outcome
                )
                got = {r.memory.id for r in outcome.results}
                assert got <= allowed, (handle, purpose, mode)
                assert outcome.counts.admitted <= len(allowed)
                assert outcome.counts.lexical <= len(allowed)
                assert outcome.counts.dense <= len(allowed)
            client = team.clients[handle]
            filtered = client.recall(
                "memory derived",
                limit=50,
                purpose=purpose,
                kinds=["summary", "note"],
                include_superseded=True,
            ).outcome
            assert {r.memory.id for r in filtered.results} <= allowed
            for memory_id, word in rare.items():
                outcome = client.recall(word, mode="lexical", purpose=purpose).outcome
                got = {r.memory.id for r in outcome.results}
                assert got == ({memory_id} & allowed), (handle, purpose, word)
                assert outcome.counts.lexical == len(got)
            # Dedup proposals: both sides of every pair are the caller's to see.
            for pair in client.duplicate_pairs(purpose=purpose).pairs:
                assert {pair.first.id, pair.second.id} <= allowed, (handle, purpose)
    for client in team.clients.values():
        client.close()
