"""Entity pairs once merges are in force (design §8.5): the pairs inside a
merged group, and the many rows one pair of groups makes, never crowd out a
pair still to decide on."""

from __future__ import annotations

import pytest

from recallatron_devkit.stack import Stack
from tests.conftest import Team
from tests.surfaces.dedup_data import wait_embedded
from tests.surfaces.entity_data import entity

pytestmark = pytest.mark.integration


def test_a_large_merged_group_leaves_the_other_pairs_proposed(stack: Stack, team: Team) -> None:
    ada = team.clients["ada"]
    # Fourteen entities named Robin, each from its own memory (nothing merges
    # them on write), all saying the same: every two are a same-name pair.
    robins = [
        ada.remember(
            "Robin is on call", "Robin is on call this week.", mention_names=["Robin"]
        ).memory
        for _ in range(14)
    ]
    kims = [
        ada.remember("Kim joined", "Kim joined ops in May.", mention_names=["Kim"]).memory,
        ada.remember("Kim's desk", "Kim sits by the window.", mention_names=["Kim"]).memory,
    ]
    wait_embedded(stack, team, [m.id for m in robins + kims])
    ids = [entity(m, "Robin") for m in robins]
    kim_pair = frozenset(entity(m, "Kim") for m in kims)
    for other in ids[1:]:
        ada.merge_entities(ids[0], other)

    answer = ada.entity_pairs()
    shown = [frozenset((p.first.id, p.second.id)) for p in answer.pairs]
    # The Robins are one entity now: nothing of them is left to propose, and
    # the Kims are.
    assert shown == [kim_pair], (shown, answer.more)

    # A lone Robin beside the group: one proposal, however many members.
    lone = ada.remember(
        "Robin is on call", "Robin is on call this week.", mention_names=["Robin"]
    ).memory
    wait_embedded(stack, team, [lone.id])
    alone = entity(lone, "Robin")
    pairs = ada.entity_pairs(limit=2).pairs
    assert len(pairs) == 2
    by_group = [{p.first.id, p.second.id} for p in pairs]
    assert by_group[0] == {ids[0], alone} and by_group[1] == set(kim_pair)
    assert [m.id for m in pairs[0].first.merged or pairs[0].second.merged] == ids[1:]
    # Kept apart through any member: the groups are kept apart.
    ada.keep_entities_apart(alone, ids[7])
    shown = [frozenset((p.first.id, p.second.id)) for p in ada.entity_pairs(limit=1).pairs]
    assert shown == [kim_pair]
