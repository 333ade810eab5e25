"""ListEntityMerges in pages (design §8.5): every merge in force is reached,
however many there are, so any of them can be undone; a caller from before
paging (no page_size) is answered as before; a page's token goes on from
the last merge it answered, whatever was undone meanwhile."""

from __future__ import annotations

import grpc
import pytest

from recallatron.client import Client
from services.store.domain.entity_merge import MAX_MERGES
from tests.conftest import Team

pytestmark = pytest.mark.integration

GROUP = 20  # MAX_ENTITY_GROUP: a merged entity holds at most 20


def merge_stars(ada: Client, groups: int) -> list[str]:
    """``groups`` memories each naming GROUP entities, each group merged into
    its first entity: (GROUP - 1) merges a group. Their ids, oldest first."""
    done: list[str] = []
    for g in range(groups):
        names = [f"group {g} entity {i}" for i in range(GROUP)]
        memory = ada.remember(f"Group {g}", "Many names.", mention_names=names).memory
        ids = {m.name: m.entity_id for m in memory.mentions}
        for name in names[1:]:
            done.append(ada.merge_entities(ids[names[0]], ids[name]).merge.id)
    return done


def every_page(ada: Client, page_size: int) -> list[list[str]]:
    pages: list[list[str]] = []
    token = ""
    while True:
        answer = ada.entity_merges(page_size=page_size, page_token=token)
        pages.append([m.id for m in answer.merges])
        token = answer.next_page_token
        if not token:
            return pages
        assert len(pages) < 100, "the pages never end"


def test_a_merge_past_the_first_page_s_reach_is_listed_and_undone(team: Team) -> None:
    ada = team.clients["ada"]
    made = merge_stars(ada, -(-(MAX_MERGES + 1) // (GROUP - 1)))
    assert len(made) > MAX_MERGES
    newest_first = list(reversed(made))

    pages = every_page(ada, MAX_MERGES)
    assert [len(p) for p in pages] == [MAX_MERGES, len(made) - MAX_MERGES]
    assert [i for p in pages for i in p] == newest_first

    # Callers from before paging are answered as before: the newest, 50 by default.
    assert [m.id for m in ada.entity_merges().merges] == newest_first[:50]
    assert [m.id for m in ada.entity_merges(limit=MAX_MERGES).merges] == pages[0]

    # The oldest merge, beyond any one answer, can be undone.
    oldest = pages[-1][-1]
    ada.undo_entity_merge(oldest)
    assert [i for p in every_page(ada, MAX_MERGES) for i in p] == newest_first[:-1]


def test_a_page_token_goes_on_from_its_last_merge(team: Team) -> None:
    ada = team.clients["ada"]
    made = list(reversed(merge_stars(ada, 1)))
    first = ada.entity_merges(page_size=3)
    assert [m.id for m in first.merges] == made[:3] and first.next_page_token
    # Undone meanwhile, on this page and on the next: nothing is skipped or repeated.
    ada.undo_entity_merge(made[1])
    ada.undo_entity_merge(made[3])
    rest: list[str] = []
    token = first.next_page_token
    while token:
        answer = ada.entity_merges(page_size=3, page_token=token)
        rest += [m.id for m in answer.merges]
        token = answer.next_page_token
    assert rest == made[4:]


def test_bad_page_arguments_name_their_field(team: Team) -> None:
    ada = team.clients["ada"]
    for kwargs, field in (
        ({"page_size": MAX_MERGES + 1}, "page_size"),
        ({"page_size": -1}, "page_size"),
        ({"page_size": 5, "limit": 5}, "page_size"),
        ({"page_token": "not a token"}, "page_token"),
        ({"page_token": "eyJ3IjogIm1lbW9yaWVzIn0="}, "page_token"),  # another listing's
    ):
        with pytest.raises(grpc.RpcError) as err:
            ada.entity_merges(**kwargs)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, kwargs
        assert (err.value.details() or "").startswith(field), (kwargs, err.value.details())


def test_a_refused_count_says_that_0_is_taken(team: Team) -> None:
    """The refusals said [1, most] while 0 is taken (as the default)."""
    ada = team.clients["ada"]
    ada.entity_pairs(limit=0)
    ada.entity_merges(limit=0, page_size=0)
    for call, field, told in (
        (
            lambda: ada.entity_pairs(limit=101),
            "limit",
            "must lie in [0, 100]; 0 is the default, 20",
        ),
        (
            lambda: ada.entity_merges(limit=-1),
            "limit",
            "must lie in [0, 200]; 0 is the default, 50",
        ),
        (
            lambda: ada.entity_merges(page_size=201),
            "page_size",
            "must lie in [0, 200]; 0 is the default, 50",
        ),
    ):
        with pytest.raises(grpc.RpcError) as err:
            call()
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert err.value.details() == f"{field}: {told}"
