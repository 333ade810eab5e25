"""Rank's workspace settings cache (services/rank/pipeline.py): a change is
seen within settings_cache_seconds, and what it holds is bounded, so the
settings of workspaces no longer recalled (deleted ones among them) are let
go rather than kept for the life of the process."""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import pytest

from services.rank import pipeline as rank_pipeline
from services.rank.pipeline import Pipeline, PipelineConfig
from services.rank.ports import WorkspaceSettings
from tests.recall.test_pipeline import FakeEmbed, FakeStore


@dataclass
class Clock:
    now: float = 1000.0

    def monotonic(self) -> float:
        return self.now

    def perf_counter(self) -> float:
        return self.now


@dataclass
class Loads:
    """The store's settings, a new object for each read, each watched."""

    modes: dict[str, str] = field(default_factory=dict)
    read: list[weakref.ref[WorkspaceSettings]] = field(default_factory=list)

    def __call__(self, workspace_id: str, timeout: float | None = None) -> WorkspaceSettings:
        value = WorkspaceSettings(default_recall_mode=self.modes.get(workspace_id, "hybrid"))
        self.read.append(weakref.ref(value))
        return value

    def held(self) -> int:
        return sum(1 for ref in self.read if ref() is not None)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    made = Clock()
    monkeypatch.setattr(rank_pipeline, "time", made)
    return made


def cached(loads: Loads, seconds: float) -> Any:
    store = FakeStore()
    store.settings = loads  # type: ignore[method-assign]
    return Pipeline(store, FakeEmbed(), PipelineConfig(settings_cache_seconds=seconds)).settings


def test_a_change_is_seen_once_the_cached_copy_is_older_than_its_seconds(clock: Clock) -> None:
    loads = Loads({"ws": "lexical"})
    cache = cached(loads, 5.0)
    assert cache.get("ws").default_recall_mode == "lexical"
    loads.modes["ws"] = "dense"
    clock.now += 4.9
    assert cache.get("ws").default_recall_mode == "lexical"  # reused: one read in 5 s
    clock.now += 0.2
    assert cache.get("ws").default_recall_mode == "dense"
    assert len(loads.read) == 2


def test_workspaces_no_longer_recalled_are_let_go_once_expired(clock: Clock) -> None:
    loads = Loads()
    cache = cached(loads, 5.0)
    for i in range(2_000):
        cache.get(f"gone-{i}")  # workspaces recalled once, then deleted
    clock.now += 6.0
    cache.get("still-used")
    assert loads.held() <= 1, f"{loads.held()} expired workspaces' settings still held"


def test_the_cache_holds_at_most_its_stated_number_of_workspaces(clock: Clock) -> None:
    loads = Loads()
    cache = cached(loads, 3600.0)
    most = rank_pipeline.SETTINGS_CACHE_ENTRIES
    for i in range(most + 500):
        cache.get(f"ws-{i}")
    assert loads.held() <= most
    # The newest are kept: a busy workspace is not read again for every recall.
    reads = len(loads.read)
    cache.get(f"ws-{most + 499}")
    assert len(loads.read) == reads
