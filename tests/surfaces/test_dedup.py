"""Dedup pairs through the gateway's ReviewService against the real stack:
no pair ever carries a memory the member may not see (audience, purpose,
forgotten), dismissals are refused exactly like missing rows when a memory is
not visible, "keep both" is never proposed again, and the window holds the
newest memories."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from functools import partial

import grpc
import pytest

from recallatron.client import Client
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import store_pb2, store_pb2_grpc
from recallatron.vocabulary import ANSWER_BUDGET_BYTES, MAX_CLAIM_VALUE
from recallatron_devkit.stack import Stack
from tests import dbutil, internal
from tests.conftest import Team
from tests.surfaces.dedup_data import NEAR_DUPLICATES, UNRELATED, wait_embedded

pytestmark = pytest.mark.integration


def pairs_of(client: Client, purpose: str = "assist") -> set[frozenset[str]]:
    resp = client.duplicate_pairs(purpose=purpose)
    cosines = [p.cosine for p in resp.pairs]
    assert cosines == sorted(cosines, reverse=True), "best first"
    assert all(0.80 <= c <= 1.0 for c in cosines)
    for p in resp.pairs:
        # Each side is a full memory this member can read for this purpose.
        read = client.read([p.first.id, p.second.id], purpose=purpose).memories
        assert [m.id for m in read] == [p.first.id, p.second.id]
        assert p.first.title and p.second.title
    return {frozenset((p.first.id, p.second.id)) for p in resp.pairs}


def refused(fn) -> grpc.RpcError:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as err:
        fn()
    return err.value


def test_pairs_never_show_what_the_member_may_not_see(stack: Stack, team: Team) -> None:
    ada, bob, cy = (team.clients[h] for h in ("ada", "bob", "cy"))
    (a1, a2), (b1, b2), (w, a3), (c1, c2), (f1, f2) = NEAR_DUPLICATES
    # Private near-duplicates of two members, side by side in one workspace.
    ada1 = ada.remember(*a1).memory.id
    ada2 = ada.remember(*a2).memory.id
    bob1 = bob.remember(*b1).memory.id
    bob2 = bob.remember(*b2).memory.id
    # A workspace memory close to one only ada may see.
    shared = cy.remember(*w, audience_to="workspace").memory.id
    ada3 = ada.remember(*a3).memory.id
    # Close to each other, but stored for audit only.
    audit1 = cy.remember(*c1, audience_to="workspace", purposes=["audit"]).memory.id
    audit2 = cy.remember(*c2, audience_to="workspace", purposes=["audit"]).memory.id
    # A pair ada will forget half of.
    gone1 = ada.remember(*f1).memory.id
    gone2 = ada.remember(*f2).memory.id
    others = [ada.remember(*u, audience_to="workspace").memory.id for u in UNRELATED]
    everything = [ada1, ada2, bob1, bob2, shared, ada3, audit1, audit2, gone1, gone2, *others]
    wait_embedded(stack, team, everything)

    assert pairs_of(ada) == {
        frozenset((ada1, ada2)),
        frozenset((shared, ada3)),
        frozenset((gone1, gone2)),
    }
    assert pairs_of(bob) == {frozenset((bob1, bob2))}
    assert pairs_of(cy) == set()
    assert pairs_of(cy, "audit") == pairs_of(ada, "audit") == {frozenset((audit1, audit2))}

    # Dismissing a pair with a memory one may not see reads exactly like
    # dismissing an id that does not exist in its place, and writes nothing.
    def alike(dismiss: Callable[..., object], pair: tuple[str, str], seen: set[str]) -> None:
        err = refused(lambda: dismiss(*pair))
        ghost = refused(lambda: dismiss(*(i if i in seen else str(uuid.uuid4()) for i in pair)))
        assert (err.code(), err.details()) == (ghost.code(), ghost.details())
        assert err.code() == grpc.StatusCode.NOT_FOUND

    for pair in ((ada1, ada2), (shared, ada3), (bob1, ada1)):
        alike(bob.dismiss_pair, pair, {bob1, bob2, shared})
    alike(ada.dismiss_pair, (audit1, audit2), set())  # assist: not visible
    # Each names the field whose memory is not found, the first when both are not.
    assert refused(lambda: bob.dismiss_pair(shared, ada3)).details() == (
        "second_id: memory not found"
    )
    assert refused(lambda: bob.dismiss_pair(ada1, ada2)).details() == "first_id: memory not found"
    assert dbutil.query(stack, team.database_name, "SELECT count(*) FROM dismissed_pair") == [(0,)]

    # Keep both: never proposed again, for anyone (a judgement on the two memories).
    ada.dismiss_pair(ada3, shared)  # either order
    ada.dismiss_pair(shared, ada3)  # idempotent
    assert frozenset((shared, ada3)) not in pairs_of(ada)
    cy.dismiss_pair(audit1, audit2, purpose="audit")
    assert pairs_of(ada, "audit") == set()

    # A forgotten memory leaves its pairs.
    ada.forget(gone1, "duplicate")
    assert pairs_of(ada) == {frozenset((ada1, ada2))}


@pytest.fixture
def three_close(stack: Stack, team: Team) -> tuple[str, str, str]:
    """Ada's three memories, each close to the others, oldest first, embedded."""
    ada = team.clients["ada"]
    (p, q), _, _, _, _ = NEAR_DUPLICATES
    oldest = ada.remember(*p).memory.id
    middle = ada.remember(*q).memory.id
    newest = ada.remember(p[0] + ".", p[1]).memory.id
    wait_embedded(stack, team, [oldest, middle, newest])
    return oldest, middle, newest


@pytest.fixture
def store_as_ada(
    stack: Stack, team: Team
) -> Iterator[tuple[store_pb2_grpc.StoreServiceStub, cpb.Caller]]:
    """The store service, called directly, and Ada as its caller (an owner, for assist)."""
    channel = internal.channel(stack, "store")
    who = cpb.Caller(
        workspace_id=team.workspace_id,
        member_id=team.members["ada"],
        purpose=cpb.PURPOSE_ASSIST,
        role=cpb.ROLE_OWNER,
    )
    try:
        yield store_pb2_grpc.StoreServiceStub(channel), who
    finally:
        channel.close()


def window_pairs(
    store: store_pb2_grpc.StoreServiceStub, who: cpb.Caller, window: int
) -> set[frozenset[str]]:
    """The pairs among the newest ``window`` memories ``who`` may see."""
    req = store_pb2.StoreServiceListDuplicatePairsRequest(caller=who, window=window, min_cosine=0.8)
    return {frozenset((x.first_id, x.second_id)) for x in store.ListDuplicatePairs(req).pairs}


def test_window_holds_the_newest_memories(
    three_close: tuple[str, str, str],
    store_as_ada: tuple[store_pb2_grpc.StoreServiceStub, cpb.Caller],
) -> None:
    _, middle, newest = three_close
    store, who = store_as_ada
    pairs = partial(window_pairs, store, who)
    assert pairs(2) == {frozenset((middle, newest))}
    assert len(pairs(3)) == 3
    for window, field in ((501, "window"), (-1, "window")):
        req = store_pb2.StoreServiceListDuplicatePairsRequest(caller=who, window=window)
        err = refused(lambda r=req: store.ListDuplicatePairs(r))
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert str(err.details()).startswith(field)


def test_window_counts_the_newest_memories_whether_embedded_or_not(
    stack: Stack,
    team: Team,
    three_close: tuple[str, str, str],
    store_as_ada: tuple[store_pb2_grpc.StoreServiceStub, cpb.Caller],
) -> None:
    # The window is the newest memories the member may see; one with no
    # vector yet (queued, or parked by the embedding job) still takes its
    # place in it, rather than letting the window reach back to older ones.
    oldest, middle, newest = three_close
    # The newest loses its vector, as one not yet embedded has none.
    dbutil.query(
        stack,
        team.database_name,
        "DELETE FROM memory_embedding WHERE memory_id = %s RETURNING memory_id",
        (newest,),
    )
    pairs = partial(window_pairs, *store_as_ada)
    # The two newest are `newest` (no vector) and `middle`: no pair.
    assert pairs(2) == set()
    assert pairs(3) == {frozenset((oldest, middle))}


def test_review_calls_validate_their_input(stack: Stack, team: Team) -> None:
    ada = team.clients["ada"]
    for limit in (-1, 201):
        err = refused(lambda n=limit: ada.duplicate_pairs(limit=n))
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "limit" in str(err.details())
    same = str(uuid.uuid4())
    err = refused(lambda: ada.dismiss_pair(same, same))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert str(err.details()).startswith("second_id")
    err = refused(lambda: ada.dismiss_pair("not-a-uuid", same))
    assert str(err.details()).startswith("first_id")
    anonymous = Client(stack.gateway, "not-a-token")
    try:
        err = refused(lambda: anonymous.duplicate_pairs())
        assert err.code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        anonymous.close()


def test_a_refused_limit_says_what_it_takes(team: Team) -> None:
    """The refusal said [1, 200] while 0 is taken (as the default)."""
    ada = team.clients["ada"]
    ada.duplicate_pairs(limit=0)
    for limit in (-1, 201):
        err = refused(lambda n=limit: ada.duplicate_pairs(limit=n))
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert err.details() == "limit: must lie in [0, 200]; 0 is the default, 50", limit


def test_pairs_of_large_memories_are_answered_within_the_budget(stack: Stack, team: Team) -> None:
    # Each memory states 100 claims of 2,000 four-byte characters (about
    # 800 kB; claims are not embedded): twelve such memories in six pairs
    # pass the 8 MiB message limit a list of pairs once had to fit whole.
    ada = team.clients["ada"]
    wide = "\N{GRINNING FACE}" * MAX_CLAIM_VALUE
    texts = [*NEAR_DUPLICATES, (UNRELATED[0], UNRELATED[0])]
    ids = []
    for n, pair in enumerate(texts):
        for side, (title, body) in enumerate(pair):
            claims = [
                {"entity": {"name": f"ledger {n} {side} {i}"}, "attribute": "note", "value": wide}
                for i in range(100)
            ]
            ids.append(ada.remember(title, body, claims=claims).memory.id)
    wait_embedded(stack, team, ids)

    first = ada.duplicate_pairs()
    assert first.more and 0 < len(first.pairs) < len(texts)
    assert first.ByteSize() < 2 * ANSWER_BUDGET_BYTES
    # Deciding on what was shown brings the rest.
    seen = 0
    answer = first
    while answer.pairs:
        seen += len(answer.pairs)
        for p in answer.pairs:
            assert len(p.first.claims) == len(p.second.claims) == 100
            ada.dismiss_pair(p.first.id, p.second.id)
        answer = ada.duplicate_pairs()
    assert seen == len(texts) and not answer.more


def test_a_list_cut_by_its_limit_says_more_pairs_wait(stack: Stack, team: Team) -> None:
    """A list of exactly `limit` pairs read the same whether others waited
    past it or none did: `more` was set only by the answer's size budget."""
    ada = team.clients["ada"]
    ids = [ada.remember(*side).memory.id for pair in NEAR_DUPLICATES[:2] for side in pair]
    wait_embedded(stack, team, ids)
    whole = ada.duplicate_pairs(limit=2)
    assert len(whole.pairs) == 2 and not whole.more, whole
    cut = ada.duplicate_pairs(limit=1)
    assert len(cut.pairs) == 1 and cut.more, cut
    assert cut.pairs[0] == whole.pairs[0]
    assert not ada.duplicate_pairs(limit=3).more
