"""The migration report's dense-floor section: the floor's rule run on the
migrated corpus, advisory (the workspace's floor is left as it was)."""

from __future__ import annotations

import contextlib
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from recallatron.client import Client
from recallatron.embed_input import compose
from recallatron_cli.main import main as cli_main
from recallatron_devkit.legacy_fixture import generate
from recallatron_devkit.stack import Stack
from services.store.domain.floor import build_queries
from tests import dbutil
from tests.conftest import Team, make_team
from tests.integration.test_calibrate_floor import FACTS, floor_of
from tests.legacy.test_migration_odd_stores import AT
from tests.legacy.test_migration_odd_stores import old_store as hand_made_store

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def old_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("old-store-floor")
    generate(out, seed=11)
    return out / "old-store.sqlite", out / "graph.jsonl"


@pytest.fixture(scope="module")
def pair(stack: Stack, operator: Client) -> Iterator[Team]:
    """One workspace: the second test's run is a rerun (nothing to import)."""
    team = make_team(stack, operator, ("ada",))
    yield team
    for client in team.clients.values():
        client.close()


def migrate(stack: Stack, old: tuple[Path, Path], team: Team, *extra: str) -> dict[str, object]:
    """The command in-process, with the settings the stack gives its
    embedding job (the embed service's address and the internal key)."""
    out, err = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    os.environ.update(stack.env_for("embedding-job"))
    args = ["migrate", "--sqlite", str(old[0]), "--graph", str(old[1])]
    args += ["--workspace", team.slug, "--owner", "ada", "--json", *extra]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli_main(args)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert code == 0, err.getvalue()
    report: dict[str, object] = json.loads(out.getvalue())
    return report


def test_the_report_runs_the_floor_rule_on_the_migrated_corpus(
    stack: Stack, pair: Team, old_store: tuple[Path, Path]
) -> None:
    before = floor_of(stack, pair.workspace_id)
    report = migrate(stack, old_store, pair)
    section = report["dense_floor"]
    assert isinstance(section, dict) and section["computed"] is True, section
    assert section["memories"] > 0 and section["pairs"] > 0
    assert section["pairs_kept"] == 1.0
    assert 0 < section["floor"] <= section["lowest_pair_cosine"]
    if section["meets_rule"]:
        assert section["off_topic_blocked"] >= 0.95
    assert section["current_floor"] == pytest.approx(before)
    # Advisory: the workspace's floor is as it was.
    assert floor_of(stack, pair.workspace_id) == before


def test_the_floor_check_can_be_left_out(
    stack: Stack, pair: Team, old_store: tuple[Path, Path]
) -> None:
    report = migrate(stack, old_store, pair, "--no-floor-check")
    assert report["dense_floor"] == {"computed": False, "reason": "not checked"}


def test_the_reports_pair_cosines_are_the_ones_recall_compares_with_the_floor(
    stack: Stack, operator: Client, tmp_path: Path
) -> None:
    """Recall embeds its query on the embed service's query graph; the report
    embedded its queries on the exact graph, whose cosines differ in the
    third decimal, so the lowest pair it reported kept at a floor was not
    the cosine recall compares with that floor."""
    item = (
        "INSERT INTO memory_items VALUES (?, 'fact', ?, ?, 0.9, 'confirmed', NULL, NULL, ?, ?, ?)"
    )
    items = [(item, (i, f"Fact {i}", fact, AT, AT, AT)) for i, fact in enumerate(FACTS[:8])]
    old = hand_made_store(tmp_path, [], [], *items)
    team = make_team(stack, operator, ("ada",))
    ada = team.clients["ada"]
    try:
        section = migrate(stack, old, team)["dense_floor"]
        assert isinstance(section, dict) and section["computed"] is True, section
        rows = dbutil.query(
            stack,
            team.database_name,
            "SELECT id::text, title, body FROM memory WHERE origin = 'migrated'"
            " AND invalidated_at IS NULL AND superseded_by_id IS NULL",
        )
        ada.wait_embedded(timeout=120)
        pairs, _ = build_queries([compose(str(r[1]), str(r[2])) for r in rows])
        assert len(pairs) == section["pairs"]
        cosines = []
        for query, i in pairs:
            results = ada.recall(query, mode="dense", skip_rerank=True, limit=50)
            own = [
                r.scores.dense_cosine for r in results.outcome.results if r.memory.id == rows[i][0]
            ]
            assert own, query
            cosines.append(own[0])
        assert min(cosines) == pytest.approx(section["lowest_pair_cosine"], abs=2e-4)
    finally:
        ada.close()
