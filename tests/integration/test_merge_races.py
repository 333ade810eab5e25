"""Entity merges decided at the same moment (design §8.5): together they never
build a group past the bound a single merge is held to (MAX_ENTITY_GROUP)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from recallatron import errors
from recallatron.vocabulary import MAX_ENTITY_GROUP
from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.conftest import Team

pytestmark = pytest.mark.integration


def _entities(team: Team, prefix: str, count: int) -> list[str]:
    ada = team.clients["ada"]
    names = [f"{prefix} Quillon {i}" for i in range(count)]
    memory = ada.remember(f"The {prefix} crew", "Who is on it.", mention_names=names).memory
    by_name = {m.name: m.entity_id for m in memory.mentions}
    return [by_name[n] for n in names]


def _group(team: Team, ids: list[str]) -> None:
    ada = team.clients["ada"]
    for other in ids[1:]:
        ada.merge_entities(ids[0], other)


@contextlib.contextmanager
def _in_process_merges(stack: Stack) -> Iterator[Any]:
    from services.store.domain.control import ControlPlane
    from services.store.domain.entity_merge import EntityMergeStore

    with dbutil.store_databases(stack) as dbs:
        yield EntityMergeStore(ControlPlane(dbs))


def test_two_merges_at_once_stay_within_the_group_bound(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    from services.store.domain import entity_groups
    from services.store.infrastructure.db import Caller

    half = MAX_ENTITY_GROUP // 2
    first, second = _entities(team, "North", half), _entities(team, "South", half)
    lone = _entities(team, "Lone", 1)[0]
    _group(team, first)
    _group(team, second)
    # Each merge alone is within the bound; both together are one past it.
    assert half + 1 <= MAX_ENTITY_GROUP < 2 * half + 1
    barrier = threading.Barrier(2)
    real = entity_groups.groups

    def groups_then_wait(*args: Any, **kwargs: Any) -> Any:
        found = real(*args, **kwargs)
        # Both merges have read the groups (or one waits its turn: then the
        # other goes on at the barrier's limit).
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait(timeout=5)
        return found

    monkeypatch.setattr(entity_groups, "groups", groups_then_wait)
    caller = Caller(team.workspace_id, team.members["ada"], "assist", "owner")
    outcomes: list[str] = []
    with _in_process_merges(stack) as merges:

        def merge(kept: str) -> None:
            try:
                merges.merge(caller, kept, lone)
                outcomes.append("merged")
            except errors.FailedPrecondition as exc:
                outcomes.append(f"refused: {exc}")

        threads = [threading.Thread(target=merge, args=(k,)) for k in (first[0], second[0])]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with merges.transaction(caller) as conn:
            size = len(real(conn, [lone])[lone].ids)
    assert sorted(o.split(":")[0] for o in outcomes) == ["merged", "refused"], outcomes
    assert size == half + 1
