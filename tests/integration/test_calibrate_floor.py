"""`recallatron calibrate-floor` beside the stack: the rule on the
workspace's own memories, printed with both rates, applied only when asked."""

from __future__ import annotations

import json
import subprocess
import sys

import psycopg
import pytest

from recallatron.embed_input import compose
from recallatron_devkit.stack import Stack
from services.store.domain.administration import ACTIONS
from services.store.domain.floor import build_queries
from services.store.infrastructure.db import CONTROL_DATABASE, with_database
from tests.conftest import Team

pytestmark = pytest.mark.integration

FACTS = [
    "Robin moved the Lisbon office to the harbour building in March",
    "The quarterly budget review happens on Thursday with the finance team",
    "Caroline adopted two cats named Oscar and Luna last spring",
    "The staging database is backed up every night at two o'clock",
    "Melanie painted a sunrise over the lake for her art class",
    "Our largest customer asked for invoices in euros from next year",
    "The support rota puts Jon on call during the first week of June",
    "Gina opened an online clothing store after losing her job",
    "The new laptop policy requires disk encryption on every machine",
    "Maria volunteers at the homeless shelter on Saturday mornings",
    "The marketing launch for the mobile app slipped to October",
    "John started training for a marathon with his running club",
]


def floor_of(stack: Stack, workspace_id: str) -> float:
    with psycopg.connect(with_database(stack.database_url, CONTROL_DATABASE)) as conn:
        row = conn.execute(
            "SELECT (settings->>'dense_floor')::float FROM workspace WHERE id = %s",
            (workspace_id,),
        ).fetchone()
    assert row is not None
    return float(row[0]) if row[0] is not None else 0.30


def calibrate(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "recallatron_cli.main", "calibrate-floor", *args],
        env=stack.env_for("embedding-job"),
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_calibrate_floor_prints_the_rule_and_applies_it_when_asked(
    stack: Stack, team: Team
) -> None:
    ada = team.clients["ada"]
    for i, fact in enumerate(FACTS):
        ada.remember(f"Fact {i}", fact, audience_to="workspace")
    ada.wait_embedded(timeout=120)
    before = floor_of(stack, team.workspace_id)

    shown = calibrate(stack, "--workspace", team.slug, "--json")
    assert shown.returncode == 0, shown.stderr
    result = json.loads(shown.stdout)
    assert result["memories"] == len(FACTS) and result["pairs"] == len(FACTS)
    assert result["off_topic_queries"] == len(FACTS)
    assert result["pairs_kept"] == 1.0
    assert 0 < result["floor"] <= result["lowest_pair_cosine"]
    if result["meets_rule"]:
        assert result["off_topic_blocked"] >= 0.95
    assert result["applied"] is False
    assert floor_of(stack, team.workspace_id) == before

    text = calibrate(stack, "--workspace", team.slug)
    assert text.returncode == 0, text.stderr
    assert f"floor {result['floor']:.2f}: blocks" in text.stdout
    assert "not applied" in text.stdout

    applied = calibrate(stack, "--workspace", team.workspace_id, "--apply", "--json")
    assert applied.returncode == 0, applied.stderr
    assert json.loads(applied.stdout)["applied"] is True
    assert floor_of(stack, team.workspace_id) == pytest.approx(result["floor"])


def test_calibrate_floor_names_an_unknown_workspace(stack: Stack) -> None:
    proc = calibrate(stack, "--workspace", "no-such-workspace")
    # The refusal every command gives: its line starts "error:" (it did not).
    assert proc.returncode == 1
    assert "error: no workspace 'no-such-workspace'\n" in proc.stderr


def test_applying_the_floor_is_in_the_workspaces_audit_log(stack: Stack, team: Team) -> None:
    """An owner reads who changed their workspace's settings (design §10):
    `--apply` changed the dense floor and wrote no entry, so the log showed
    nothing of a change that moves every recall."""
    ada = team.clients["ada"]
    for i, fact in enumerate(FACTS[:6]):
        ada.remember(f"Fact {i}", fact, audience_to="workspace")
    ada.wait_embedded(timeout=120)
    before = floor_of(stack, team.workspace_id)

    applied = calibrate(stack, "--workspace", team.slug, "--apply", "--json")
    assert applied.returncode == 0, applied.stderr
    chosen = json.loads(applied.stdout)["floor"]
    newest = ada.audit_events(actions=list(ACTIONS)).events[0]
    assert (newest.action, newest.member_handle) == ("update_settings", "operator"), newest
    changed = json.loads(newest.detail_json)["changed"]
    if chosen == pytest.approx(before):
        assert changed == {}
    else:
        assert changed == {"dense_floor": [pytest.approx(before), pytest.approx(chosen)]}


def test_the_pairs_cosines_are_the_ones_recall_compares_with_the_floor(
    stack: Stack, team: Team
) -> None:
    """The rule keeps every memory-shaped pair at the floor it chooses, so
    the cosine it reads for a pair must be the one recall compares with the
    floor. Recall embeds its query on the embed service's query graph; the
    command embedded its queries on the exact graph, whose cosines differ
    in the third decimal (the lowest pair: 0.9000 against recall's 0.8983), so a
    pair just above a whole percent could be under the floor it was reported
    kept at."""
    ada = team.clients["ada"]
    for i, fact in enumerate(FACTS[:6]):
        ada.remember(f"Fact {i}", fact, audience_to="workspace")
    ada.wait_embedded(timeout=120)

    shown = calibrate(stack, "--workspace", team.slug, "--json")
    assert shown.returncode == 0, shown.stderr
    reported = json.loads(shown.stdout)["lowest_pair_cosine"]

    pairs, _ = build_queries([compose(f"Fact {i}", f) for i, f in enumerate(FACTS[:6])])
    assert len(pairs) == 6
    cosines = []
    for query, i in pairs:
        results = ada.recall(query, mode="dense", skip_rerank=True).outcome.results
        own = [r.scores.dense_cosine for r in results if r.memory.title == f"Fact {i}"]
        assert own, query
        cosines.append(own[0])
    assert min(cosines) == pytest.approx(reported, abs=2e-4)


def test_nothing_to_calibrate_on_is_one_error_line_and_no_output(stack: Stack, team: Team) -> None:
    """A workspace the rule cannot judge ends the command as every failure
    does: one "error:" line on stderr, exit 1, nothing on stdout. It printed
    its reason on stdout, without the prefix, so `--json` gave a line that is
    not JSON and a script reading stderr saw nothing."""
    ada = team.clients["ada"]
    empty = calibrate(stack, "--workspace", team.slug, "--json")
    assert (empty.returncode, empty.stdout) == (1, ""), empty
    assert empty.stderr == (
        f"error: {team.slug}: no memory is embedded yet with the current model; nothing to do\n"
    )

    ada.remember("ok", "a b c", audience_to="workspace")  # no three content words
    ada.wait_embedded(timeout=120)
    few = calibrate(stack, "--workspace", team.slug, "--json")
    assert (few.returncode, few.stdout) == (1, ""), few
    assert few.stderr == (
        f"error: {team.slug}: too few memories with three content words to calibrate on\n"
    )
