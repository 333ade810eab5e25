"""A change of a workspace's settings changes the fields it names and no
other (design §3: "workspace settings, changed by an owner through an admin
call"): one store replica reading its cached settings, or two owners
changing two fields at once, never write back a value someone else has
just changed."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from recallatron_devkit.stack import Stack
from tests.conftest import Team

pytestmark = pytest.mark.integration


@pytest.fixture
def replicas(stack: Stack) -> Iterator[list[Any]]:
    """Two store replicas' control planes: each its own cache and pool."""
    from services.store.domain.control import ControlPlane
    from services.store.infrastructure.db import Databases
    from services.store.settings import StoreSettings

    made = [
        Databases(
            StoreSettings(
                database_url=stack.database_url,
                app_password=stack.app_password,
                control_pool_max_size=4,
            )
        )
        for _ in range(2)
    ]
    try:
        for dbs in made:
            dbs.bootstrap()
        yield [ControlPlane(dbs) for dbs in made]
    finally:
        for dbs in made:
            dbs.close()


def test_a_replica_with_cached_settings_keeps_anothers_change(
    team: Team, replicas: list[Any]
) -> None:
    first, second = replicas
    assert first.settings(team.workspace_id).dense_floor == pytest.approx(0.30)  # now cached
    second.update_settings(team.workspace_id, {"dense_floor": 0.42})
    first.update_settings(team.workspace_id, {"rerank_depth": 7})

    for control in replicas:
        now = control.settings(team.workspace_id, fresh=True)
        assert (now.dense_floor, now.rerank_depth) == (pytest.approx(0.42), 7)


def test_changes_of_different_fields_at_once_all_stand(team: Team, replicas: list[Any]) -> None:
    changes: list[dict[str, Any]] = [
        {"dense_floor": 0.41},
        {"rerank_depth": 9},
        {"expiry_days": 30},
        {"members_may_edit": True},
        {"default_recall_mode": "lexical"},
    ]
    with ThreadPoolExecutor(len(changes)) as pool:
        list(
            pool.map(
                lambda i: replicas[i % 2].update_settings(team.workspace_id, changes[i]),
                range(len(changes)),
            )
        )
    now = replicas[0].settings(team.workspace_id, fresh=True).to_json()
    for change in changes:
        for key, value in change.items():
            assert now[key] == pytest.approx(value), key


def test_a_change_returns_the_settings_before_and_after(team: Team, replicas: list[Any]) -> None:
    control = replicas[0]
    control.update_settings(team.workspace_id, {"rerank_depth": 11})
    before, after = control.change_settings(team.workspace_id, {"dense_floor": 0.5})
    assert (before.rerank_depth, before.dense_floor) == (11, pytest.approx(0.30))
    assert (after.rerank_depth, after.dense_floor) == (11, pytest.approx(0.5))


def test_an_invalid_change_names_the_field_and_writes_nothing(
    team: Team, replicas: list[Any]
) -> None:
    from recallatron import errors

    control = replicas[0]
    control.update_settings(team.workspace_id, {"dense_floor": 0.33})
    with pytest.raises(errors.InvalidArgument) as info:
        control.update_settings(team.workspace_id, {"dense_floor": 0.5, "rerank_depth": 1000})
    assert "rerank_depth" in str(info.value)
    now = control.settings(team.workspace_id, fresh=True)
    assert (now.dense_floor, now.rerank_depth) == (pytest.approx(0.33), 20)


def test_settings_read_back_are_the_control_planes_not_a_cached_copy(
    team: Team, replicas: list[Any]
) -> None:
    from recallatron.v1 import gateway_pb2 as pb

    ada = team.clients["ada"]

    def floor() -> float:
        return float(ada.ask(ada.admin.GetSettings, pb.GetSettingsRequest).settings.dense_floor)

    assert floor() == pytest.approx(0.30)  # the stack's store holds the record now
    replicas[0].update_settings(team.workspace_id, {"dense_floor": 0.44})  # another replica
    assert floor() == pytest.approx(0.44)


def test_closing_members_may_edit_holds_at_once_on_every_replica(stack: Stack, team: Team) -> None:
    """A store replica kept the workspace's settings for 5 s: after an owner
    closed ``members_may_edit``, a member whose calls reached another replica
    could still change the owner's workspace memories until its copy aged."""
    import uuid

    from recallatron import errors
    from services.store.domain.control import ControlPlane
    from services.store.domain.memories import MemoryStore
    from services.store.infrastructure.db import Caller
    from tests import dbutil

    ada = team.clients["ada"]
    with dbutil.store_databases(stack) as dbs:
        replica = MemoryStore(dbs, ControlPlane(dbs))
        bob = Caller(team.workspace_id, team.members["bob"], "assist", "member")
        ada.update_settings(members_may_edit=True)
        budget = ada.remember("Budget", "The budget is 10k.", audience_to="workspace").memory
        replica.correct(bob, str(uuid.uuid4()), budget.id, 1, None, "12k", None, "cached open")
        ada.update_settings(members_may_edit=False)  # through the stack's own store
        with pytest.raises(errors.PermissionDenied):
            replica.correct(bob, str(uuid.uuid4()), budget.id, 2, None, "1M", None, "closed")
    assert [m.body for m in ada.read([budget.id]).memories] == ["12k"]


def test_a_replicas_recall_settings_follow_the_settings_cache_seconds(
    monkeypatch: pytest.MonkeyPatch, stack: Stack, team: Team, replicas: list[Any]
) -> None:
    """The store reads dense_floor and the expiry gate for recall from its
    cached workspace record: RECALLATRON_SETTINGS_CACHE_SECONDS, rank's setting
    for the mode and rerank depth, governs that copy too (0: read every time),
    so a change made through another replica is recalled with as soon."""
    from services.store.domain.control import ControlPlane
    from tests import dbutil

    monkeypatch.setenv("RECALLATRON_SETTINGS_CACHE_SECONDS", "0")
    with dbutil.store_databases(stack) as dbs:
        replica = ControlPlane(dbs)
        before = replica.settings(team.workspace_id)  # what its recall reads
        replicas[0].update_settings(team.workspace_id, {"dense_floor": 0.47, "expiry_days": 9})
        after = replica.settings(team.workspace_id)
    assert before.dense_floor != pytest.approx(0.47)
    assert after.dense_floor == pytest.approx(0.47) and after.expiry_days == 9
