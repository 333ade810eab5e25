"""`recallatron migrate` against the real stack: a generated old store goes
in, counts match the generator's, the old graph's properties and edges arrive
as claims (through the gateway's lookup and neighbors, and in SQL), a rerun
changes nothing, an interrupted run finished by a rerun equals a clean run,
folded patches are honoured, history is the owner's alone; and the opt-in
expiry gate."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest

from recallatron.client import Client
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from recallatron.v1 import store_pb2, store_pb2_grpc
from recallatron_cli.main import main as cli_main
from recallatron_devkit.legacy_corpus import START
from recallatron_devkit.legacy_fixture import SCHEMA, generate
from recallatron_devkit.legacy_truth import Truth
from recallatron_devkit.stack import Stack
from services.store.domain.administration import ACTIONS as ADMIN_ACTIONS
from services.store.infrastructure.db import with_database
from services.store.legacy import plan
from tests import dbutil, internal
from tests.conftest import Team, make_team

pytestmark = pytest.mark.integration

# The migration's own tables, beside those dbutil.checksum covers.
HISTORY_TABLES = ("history_entry", "history_term_stat", "history_corpus_stat", "legacy_import")

# Everything the migration writes, without what differs between two runs of
# the same data in two workspaces: audit ids and times, and the owner's
# member id (ids are keyed by the owner's handle, the same in both).
DUMP = {
    "history_entry": "SELECT id, owner_member_id, chat_id, role, text, search::text,"
    " occurred_at FROM history_entry",
    "history_term_stat": "SELECT * FROM history_term_stat",
    "history_corpus_stat": "SELECT * FROM history_corpus_stat",
    "legacy_import": "SELECT * FROM legacy_import",
    "memory": "SELECT id, kind, title, body, search::text, confidence, origin, revision,"
    " superseded_by_id, invalidated_at, audience_member_id, purposes, created_by, created_at,"
    " updated_at FROM memory",
    "entity": "SELECT * FROM entity",
    "mention": "SELECT * FROM mention",
    "attribute_claim": "SELECT * FROM attribute_claim",
    "relation_claim": "SELECT * FROM relation_claim",
    "memory_revision": "SELECT memory_id, revision, action, changed_by, reason, changed_at"
    " FROM memory_revision",
    "term_stat": "SELECT * FROM term_stat",
    "corpus_stat": "SELECT * FROM corpus_stat",
    # What the migration wrote: not the entries of the team's own making
    # (members and tokens, whose ids differ from team to team).
    "audit_log": "SELECT member_id, action, memory_id, request_id, detail FROM audit_log"
    f" WHERE action <> ALL (ARRAY{list(ADMIN_ACTIONS)})",
    "embedding_queue": "SELECT count(*) FROM (SELECT memory_id FROM embedding_job"
    " UNION SELECT memory_id FROM memory_embedding) queued",
}


@dataclass
class OldStore:
    sqlite: Path
    graph: Path
    truth: Truth


@dataclass
class Migrated:
    team: Team
    report: dict[str, Any]


def env(stack: Stack) -> dict[str, str]:
    return {**os.environ, "RECALLATRON_DATABASE_URL": stack.database_url}


def migrate_args(old: OldStore, team: Team, *extra: str) -> list[str]:
    return [
        "migrate",
        "--sqlite",
        str(old.sqlite),
        "--graph",
        str(old.graph),
        "--workspace",
        team.slug,
        "--owner",
        "ada",
        "--json",
        *extra,
    ]


def run_cli(stack: Stack, args: list[str]) -> tuple[int, str, str]:
    """The command in-process (the subprocess start-up is paid only where a
    process has to be killed)."""
    out, err = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    os.environ["RECALLATRON_DATABASE_URL"] = stack.database_url
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli_main(args)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return code, out.getvalue(), err.getvalue()


def migrate(stack: Stack, old: OldStore, team: Team, *extra: str) -> dict[str, Any]:
    code, out, err = run_cli(stack, migrate_args(old, team, *extra))
    assert code == 0, err
    return json.loads(out)


def data_dump(stack: Stack, team: Team) -> dict[str, list[str]]:
    owner = team.members["ada"]
    out = {}
    with psycopg.connect(dbutil.workspace_url(stack, team.database_name)) as conn:
        for name, sql in DUMP.items():
            rows = [repr(r).replace(owner, "OWNER") for r in conn.execute(sql)]  # type: ignore[call-overload]
            out[name] = sorted(rows)
    return out


def history_checksum(stack: Stack, team: Team) -> dict[str, Any]:
    return {
        t: dbutil.query(
            stack,
            team.database_name,
            f"SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), ''))"
            f" FROM {t} t",
        )
        for t in HISTORY_TABLES
    }


@pytest.fixture(scope="module")
def old_store(tmp_path_factory: pytest.TempPathFactory) -> OldStore:
    out = tmp_path_factory.mktemp("old-store")
    truth = generate(out, seed=7)
    return OldStore(out / "old-store.sqlite", out / "graph.jsonl", truth)


@pytest.fixture(scope="module")
def migrated(stack: Stack, operator: Client, old_store: OldStore) -> Iterator[Migrated]:
    team = make_team(stack, operator, ("ada", "bob"))
    yield Migrated(team, migrate(stack, old_store, team))
    for client in team.clients.values():
        client.close()


def test_counts_match_the_generator(stack: Stack, migrated: Migrated, old_store: OldStore) -> None:
    t, r, team = old_store.truth, migrated.report, migrated.team
    assert r["complete"] and not r["dry_run"]
    assert r["turns"] == {
        "read": t.turns,
        "imported": t.history_entries,
        "already_present": 0,
        "skipped": {"empty text": t.turns_empty},
    }
    items = r["memory_items"]
    assert (items["read"], items["imported"]) == (t.memory_items, t.memories)
    assert items["skipped"] == {
        f"not confirmed (status {s})": n for s, n in t.statuses.items() if s != "confirmed"
    }
    assert items["kinds_mapped"] == t.kinds_mapped
    assert r["entities"]["imported"] == t.entities_created
    assert r["entities"]["read"] == t.entities
    assert r["entities"]["typed"] == t.entities_typed
    assert r["entities"]["skipped"] == {"superseded (its replacement is used)": t.supersessions}
    mentions = r["mentions"]
    assert mentions["read"] == t.edges
    assert (mentions["imported"], mentions["redirected"]) == (t.mentions, t.mentions_redirected)
    assert mentions["skipped"]["unknown entity"] == t.mentions_unknown_entity
    assert (
        mentions["skipped"]["same entity as another edge, after supersession"]
        == t.mentions_same_after_supersession
    )
    assert r["graph"]["malformed"] == t.malformed_lines
    assert r["graph"]["orphan_patches"] == t.orphan_patches
    assert r["not_carried"] == {
        "session_digests": {
            "read": t.session_digests,
            "reason": "session digests summarise turns that are imported as history themselves",
        }
    }
    assert r["entity_records"] == {
        "read": t.entities,
        "imported": t.record_memories,
        "already_present": 0,
        "skipped": {},
        "mentions": t.record_mentions,
    }
    assert r["attribute_claims"] == {
        "read": t.attribute_claims + sum(t.attribute_claims_skipped.values()),
        "imported": t.attribute_claims,
        "already_present": 0,
        "skipped": t.attribute_claims_skipped,
        "retired": t.attribute_claims_retired,
    }
    assert r["relation_claims"] == {
        "read": t.entity_edges,
        "imported": t.relation_claims,
        "already_present": 0,
        "skipped": {},
        "retired": t.relation_claims_retired,
    }
    assert t.relation_claims == t.entity_edges == 160
    assert r["supersessions"] == {
        "read": t.entities_superseded,
        "imported": t.supersessions,
        "already_present": 0,
        "skipped": {},
    }

    def one(sql: str, *params: object) -> Any:
        return dbutil.query(stack, team.database_name, sql, params)[0][0]

    owner = team.members["ada"]
    assert one("SELECT count(*) FROM history_entry") == t.history_entries
    assert one("SELECT count(DISTINCT owner_member_id)::text FROM history_entry") == "1"
    # Analysed once written, not left to autovacuum's next visit.
    analysed = "SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relname = %s"
    assert one(analysed, "history_entry") and one(analysed, "memory")
    memories = t.memories + t.record_memories
    assert one("SELECT count(*) FROM memory WHERE origin = 'migrated'") == memories
    # Memories by the ledger's kind of old record.
    assert dict(
        dbutil.query(
            stack,
            team.database_name,
            "SELECT l.source, count(m.id) FROM legacy_import l"
            " LEFT JOIN memory m ON m.id = l.target_id GROUP BY l.source",
        )
    ) == {
        "turn": 0,
        "entity": 0,
        "memory_item": t.memories,
        "entity_record": t.record_memories,
    }
    assert one("SELECT count(*) FROM legacy_import WHERE source = 'entity'") == t.entities_created
    # Record memories are the owner's: the old graph knew no audience.
    assert one("SELECT count(*) FROM memory WHERE audience_member_id IS NULL") == t.memories_shared
    assert one("SELECT count(*) FROM entity") == t.entities_created
    assert one("SELECT count(*) FROM entity WHERE type IS NOT NULL") == t.entities_typed
    assert one("SELECT count(*) FROM mention") == t.mentions + t.record_mentions
    assert (
        one(
            "SELECT count(*) FROM memory WHERE created_by = %s AND purposes = '{assist}'"
            " AND (audience_member_id IS NULL OR audience_member_id = %s)",
            owner,
            owner,
        )
        == memories
    )
    queued = one(DUMP["embedding_queue"])
    # A superseded memory keeps its vector (migration 0062: it is current for a
    # caller who may not see its successor), so every imported memory is queued.
    assert queued == memories, "every imported memory is queued for the embedding job"
    # Original times kept.
    old = sqlite3.connect(old_store.sqlite)
    item_id, created, updated = old.execute(
        "SELECT id, created_at, updated_at FROM memory_items"
        " WHERE status = 'confirmed' AND updated_at IS NOT NULL ORDER BY id LIMIT 1"
    ).fetchone()
    old.close()
    memory_id = plan.Ids("ada").memory_item(item_id)
    times = dbutil.query(
        stack,
        team.database_name,
        "SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),"
        " to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
        " FROM memory WHERE id = %s",
        (memory_id,),
    )
    assert times == [(created, updated)]


def test_second_run_changes_nothing(stack: Stack, migrated: Migrated, old_store: OldStore) -> None:
    team, t = migrated.team, old_store.truth
    before = (dbutil.checksum(stack, team.database_name), history_checksum(stack, team))
    again = migrate(stack, old_store, team)
    assert (dbutil.checksum(stack, team.database_name), history_checksum(stack, team)) == before
    assert again["turns"]["imported"] == 0 and again["turns"]["already_present"] == (
        t.history_entries
    )
    assert again["memory_items"]["imported"] == 0
    assert again["memory_items"]["already_present"] == t.memories
    assert again["entities"]["imported"] == 0
    assert again["entities"]["already_present"] == t.entities_created
    assert again["mentions"]["imported"] == 0
    assert again["mentions"]["already_present"] == t.mentions
    for section, present in (
        ("entity_records", t.record_memories),
        ("attribute_claims", t.attribute_claims),
        ("relation_claims", t.relation_claims),
        ("supersessions", t.supersessions),
    ):
        assert again[section]["imported"] == 0, section
        assert again[section]["already_present"] == present, section
    assert again["entity_records"]["mentions"] == 0
    assert again["attribute_claims"]["retired"] == again["relation_claims"]["retired"] == 0


@pytest.fixture(scope="module")
def second_team(stack: Stack, operator: Client) -> Iterator[Team]:
    """A workspace for the dry run and then the interrupted runs (the
    databases of a session add up: one for both)."""
    team = make_team(stack, operator, ("ada", "bob"))
    yield team
    for client in team.clients.values():
        client.close()


def test_dry_run_writes_nothing_and_counts_the_same(
    stack: Stack, second_team: Team, migrated: Migrated, old_store: OldStore
) -> None:
    team = second_team
    before = (dbutil.checksum(stack, team.database_name), history_checksum(stack, team))
    dry = migrate(stack, old_store, team, "--dry-run")
    assert (dbutil.checksum(stack, team.database_name), history_checksum(stack, team)) == before
    real = migrated.report
    sections = (
        "turns",
        "memory_items",
        "entities",
        "mentions",
        "entity_records",
        "attribute_claims",
        "relation_claims",
        "supersessions",
        "not_carried",
        "graph",
    )
    for section in sections:
        assert dry[section] == real[section], section
    assert dry["dry_run"] is True


def test_refusals_name_the_argument(
    stack: Stack, migrated: Migrated, old_store: OldStore, tmp_path: Path
) -> None:
    team = migrated.team
    before = history_checksum(stack, team)
    args = migrate_args(old_store, team)
    cases: list[tuple[list[str], str]] = [
        ([*args[:8], "bob", "--json"], "--owner: bob is not an owner"),
        # A handle is one in any case: found so.
        ([*args[:8], "BOB", "--json"], "--owner: bob is not an owner"),
        ([*args[:8], "nobody", "--json"], "--owner: no member 'nobody'"),
        ([*args[:6], "no-such-workspace", *args[7:]], "--workspace: no workspace"),
        ([args[0], "--sqlite", str(tmp_path / "x.sqlite"), *args[3:]], "--sqlite: no such file"),
        ([*args, "--batch-size", "0"], "--batch-size"),
    ]
    for argv, message in cases:
        code, _, err = run_cli(stack, argv)
        assert code == 2 and message in err, (argv, err)
    assert history_checksum(stack, team) == before


def test_a_removed_owner_is_refused_before_anything_is_written(
    stack: Stack, operator: Client, old_store: OldStore
) -> None:
    """A removed owner kept their role on the record: the run wrote every turn
    as their history, then every memory was refused by the database (exit 2,
    no report, every rerun the same)."""
    team = make_team(stack, operator, ("ada", "cy"))
    former = operator.create_member(team.workspace_id, "dee", owner=True).member
    operator.remove_member(former.id, "erase")
    before = history_checksum(stack, team)
    argv = migrate_args(old_store, team)
    for given in ("dee", former.id):
        code, _, err = run_cli(stack, [*argv[:8], given, "--json"])
        assert code == 2 and f"--owner: no member {given!r}" in err, err
    assert history_checksum(stack, team) == before
    for client in team.clients.values():
        client.close()


def test_a_rerun_reports_a_supersede_patch_it_does_not_apply(
    stack: Stack, operator: Client, tmp_path: Path
) -> None:
    """A supersede patch appended to graph.jsonl after its record was imported
    is not applied by a rerun (reruns never revise earlier imports): the report
    said the supersession was already present, though nothing was superseded."""
    sqlite = tmp_path / "old.sqlite"
    conn = sqlite3.connect(sqlite)
    conn.executescript(SCHEMA)
    conn.execute(
        "INSERT INTO memory_items (id, kind, title, body, confidence, status, scope,"
        " source_chat_id, created_at, updated_at, confirmed_at)"
        " VALUES (1, 'fact', 'Robin works at Fernhill', 'body', 0.9, 'confirmed', NULL, NULL,"
        " '2026-01-01T00:00:00Z', NULL, NULL)"
    )
    conn.execute("INSERT INTO memory_item_entities VALUES (1, 'e1')")
    conn.commit()
    conn.close()
    graph = tmp_path / "graph.jsonl"
    records = [
        {"id": "e1", "name": "Robin", "type": "person", "properties": {"role": "designer"},
         "valid_from": "2026-01-01T00:00:00Z"},
        {"id": "e2", "name": "Robin Goodwin", "type": "person", "properties": {"role": "lead"},
         "valid_from": "2026-01-02T00:00:00Z"},
    ]  # fmt: skip
    graph.write_text("".join(json.dumps(r) + "\n" for r in records))
    team = make_team(stack, operator, ("ada",))
    old = OldStore(sqlite, graph, Truth(seed=0))
    first = migrate(stack, old, team)
    assert first["supersessions"]["read"] == 0
    with graph.open("a") as f:
        f.write(json.dumps({"patch": "supersede", "id": "e1", "superseded_by": "e2",
                            "at": "2026-03-01T00:00:00Z"}) + "\n")  # fmt: skip
    second = migrate(stack, old, team)
    supersessions = second["supersessions"]
    assert supersessions["read"] == 1 and supersessions["already_present"] == 0, supersessions
    assert sum(supersessions["skipped"].values()) == 1, supersessions
    superseded = dbutil.query(
        stack, team.database_name, "SELECT count(*) FROM memory WHERE superseded_by_id IS NOT NULL"
    )
    assert superseded == [(0,)]
    for client in team.clients.values():
        client.close()


def _start_and_stop(
    stack: Stack, args: list[str], sig: int, at: str = "importing turns: "
) -> tuple[int, str]:
    """Runs the command as a process and sends `sig` once it reports its first
    committed batch of a source (a progress line after every batch, starting
    with `at`). Returns the exit code and stdout."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "recallatron_cli.main", *args],
        env={**env(stack), "RECALLATRON_PROGRESS": "lines", "RECALLATRON_PROGRESS_SECONDS": "0"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith(at):
                proc.send_signal(sig)
                break
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out


def test_interrupted_runs_then_a_rerun_equal_one_clean_run(
    stack: Stack, second_team: Team, migrated: Migrated, old_store: OldStore
) -> None:
    team = second_team
    assert dbutil.query(stack, team.database_name, "SELECT count(*) FROM legacy_import") == [(0,)]
    args = migrate_args(old_store, team, "--batch-size", "50")

    # SIGTERM: the batch in flight rolls back, the report says so.
    code, out = _start_and_stop(stack, args, signal.SIGTERM)
    assert code == 130, out
    report = json.loads(out)
    assert report["complete"] is False and report["turns"]["imported"] > 0
    counted = dbutil.query(stack, team.database_name, "SELECT count(*) FROM history_entry")[0][0]
    assert counted == report["turns"]["imported"]

    # SIGKILL: no chance to tidy up at all.
    code, _ = _start_and_stop(stack, args, signal.SIGKILL)
    assert code == -signal.SIGKILL
    partial = dbutil.query(stack, team.database_name, "SELECT count(*) FROM legacy_import")[0][0]
    total = dbutil.query(stack, migrated.team.database_name, "SELECT count(*) FROM legacy_import")
    assert 0 < partial < total[0][0], "the kill landed mid-import"

    # SIGTERM among the entity records: the graph part resumes too. The
    # batch in flight commits, then the run stops (small batches, so that it
    # stops well before the last).
    small = migrate_args(old_store, team, "--batch-size", "20")
    code, out = _start_and_stop(stack, small, signal.SIGTERM, at="importing entity records: ")
    assert code == 130, out
    report = json.loads(out)
    records = report["entity_records"]
    assert 0 < records["imported"] < old_store.truth.record_memories
    written = dbutil.query(
        stack,
        team.database_name,
        "SELECT count(*) FROM legacy_import WHERE source = %s",
        ("entity_record",),
    )[0][0]
    assert written == records["imported"]
    assert report["memory_items"]["imported"] == 0, "stopped before the memory items"

    final = migrate(stack, old_store, team)
    assert final["complete"]
    assert final["turns"]["imported"] + final["turns"]["already_present"] == (
        old_store.truth.history_entries
    )
    assert data_dump(stack, team) == data_dump(stack, migrated.team)


def test_folded_patches_are_honoured(migrated: Migrated, old_store: OldStore) -> None:
    """A memory linked to a superseded entity mentions the replacement, by
    the replacement's name, through the end of a supersession chain."""
    t, ada = old_store.truth, migrated.team.clients["ada"]
    direct: dict[str, str] = {}
    for line in old_store.graph.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            obj = json.loads(line)
            if obj.get("patch") == "supersede":
                direct[obj["id"]] = obj["superseded_by"]
    chained = {old for old, new in direct.items() if new in direct}
    assert chained, "the generator writes supersession chains"
    old = sqlite3.connect(old_store.sqlite)
    edges = old.execute(
        "SELECT e.memory_id, e.entity_id FROM memory_item_entities e"
        " JOIN memory_items i ON i.id = e.memory_id WHERE i.status = 'confirmed'"
        " ORDER BY e.memory_id"
    ).fetchall()
    not_imported = old.execute(
        "SELECT id FROM memory_items WHERE status <> 'confirmed' ORDER BY id LIMIT 5"
    ).fetchall()
    old.close()
    ids = plan.Ids("ada")
    replaced = [(m, e) for m, e in edges if e in direct]
    in_chain = [(m, e) for m, e in replaced if e in chained]
    assert replaced and in_chain
    assert t.final_entity[in_chain[0][1]] == direct[direct[in_chain[0][1]]]
    for item_id, old_entity in [replaced[0], in_chain[0]]:
        final = t.final_entity[old_entity]
        memory = ada.read([ids.memory_item(item_id)]).memories[0]
        mentions = {(m.entity_id, m.name) for m in memory.mentions}
        assert (ids.entity(final), t.entity_names[final]) in mentions
        assert ids.entity(old_entity) not in {m.entity_id for m in memory.mentions}
        assert {m.name for m in memory.mentions} == {
            t.entity_names[e] for e in t.item_mentions[item_id]
        }
        assert memory.origin == cpb.ORIGIN_MIGRATED
    # Items the old store had not confirmed did not come over.
    for (item_id,) in not_imported:
        with pytest.raises(grpc.RpcError) as err:
            ada.read([ids.memory_item(item_id)])
        assert err.value.code() == grpc.StatusCode.NOT_FOUND


def _current(t: Truth) -> list[tuple[str, str, str, str]]:
    """The old edges stated by records nothing superseded."""
    return [r for r in t.relations if r[0] not in t.superseded_by]


def test_entity_graph_arrives_through_the_gateway(migrated: Migrated, old_store: OldStore) -> None:
    """Every final entity through `lookup`, as the owner: its type, its
    record's properties as current attribute claims (with the record's
    confidence, stated by its record memory), the edges of records nothing
    superseded as current relations both ways; with the history, the retired
    claims of the records superseded into it. Another member sees none of it."""
    t, team = old_store.truth, migrated.team
    ada, bob = team.clients["ada"], team.clients["bob"]
    ids = plan.Ids("ada")
    current = _current(t)
    finals = sorted(set(t.final_entity.values()))
    assert len(finals) == t.entities_created
    bob_saw = 0
    for old_id in finals:
        name = t.entity_names[old_id]
        cards = ada.lookup(name).entities
        assert [c.id for c in cards] == [ids.entity(old_id)], name
        card = cards[0]
        assert (card.name, card.type) == (name, t.entity_types[old_id])
        assert sorted((a.attribute, a.value) for a in card.attributes) == sorted(
            t.entity_attributes[old_id]
        ), name
        for a in card.attributes:
            assert a.memory_id == ids.entity_record(old_id)
            assert a.confidence == pytest.approx(t.entity_confidence[old_id])
            assert not a.HasField("retired_at")
        outgoing = sorted((p, ids.entity(o)) for _, s_, p, o in current if s_ == old_id)
        incoming = sorted((p, ids.entity(s_)) for _, s_, p, o in current if o == old_id)
        got = card.relations
        assert (
            sorted(
                (r.predicate, r.other.id)
                for r in got
                if r.direction == cpb.RELATION_DIRECTION_OUTGOING
            )
            == outgoing
        ), name
        assert (
            sorted(
                (r.predicate, r.other.id)
                for r in got
                if r.direction == cpb.RELATION_DIRECTION_INCOMING
            )
            == incoming
        ), name
        assert ids.entity_record(old_id) in card.mentioned_by

        folded_in = [e for e in t.superseded_by if t.final_entity[e] == old_id]
        if folded_in:
            history = ada.lookup(name, include_history=True).entities[0]
            retired = sorted(
                (a.attribute, a.value, a.memory_id)
                for a in history.attributes
                if a.HasField("retired_at")
            )
            assert retired == sorted(
                (attr, value, ids.entity_record(e))
                for e in folded_in
                for attr, value in t.entity_attributes[e]
            ), name

        # Bob may see the entity through a shared memory item, never the
        # owner's record claims.
        for c in bob.lookup(name).entities:
            bob_saw += 1
            assert (list(c.attributes), list(c.relations)) == ([], []), name
            assert ids.entity_record(old_id) not in c.mentioned_by
    assert bob_saw, "shared memory items make some entities visible to bob"

    # neighbors: one hop from each entity with edges is exactly its current
    # relations, both ways.
    touched = sorted({s_ for _, s_, _, _ in current} | {o for _, _, _, o in current})
    for old_id in touched[:40]:
        hood = ada.neighbors(ids.entity(old_id), hops=1)
        assert not hood.truncated
        edges = sorted((e.subject.id, e.predicate, e.object.id) for e in hood.edges)
        assert edges == sorted(
            (ids.entity(s_), p, ids.entity(o)) for _, s_, p, o in current if old_id in (s_, o)
        ), t.entity_names[old_id]
        assert all(e.memory_id for e in hood.edges)
    varied = ada.lookup(t.entity_names[t.varied_entity]).entities[0]
    assert {a.attribute: a.value for a in varied.attributes}["home_office"] == (
        '{"desk": 4, "floor": "2"}'
    )


def test_supersede_patches_become_supersession(
    stack: Stack, migrated: Migrated, old_store: OldStore
) -> None:
    t, team = old_store.truth, migrated.team
    ids = plan.Ids("ada")

    def rows(sql: str) -> list[tuple]:
        return dbutil.query(stack, team.database_name, sql)

    superseded = rows(
        "SELECT m.id::text, m.superseded_by_id::text, m.revision FROM memory m"
        " WHERE m.superseded_by_id IS NOT NULL"
    )
    assert sorted(superseded) == sorted(
        (ids.entity_record(old), ids.entity_record(new), 2) for old, new in t.superseded_by.items()
    )
    assert rows(
        "SELECT count(*) FROM memory_revision WHERE action = 'supersede'"
        " AND reason = 'supersede patch of the old store''s graph'"
    ) == [(t.supersessions,)]
    # The superseded records' claims are retired, at the patch time; nothing else is.
    for table, retired in (
        ("attribute_claim", t.attribute_claims_retired),
        ("relation_claim", t.relation_claims_retired),
    ):
        assert rows(f"SELECT count(*) FROM {table} WHERE retired_at IS NOT NULL") == [(retired,)]
        # Each by its record's supersede, as the supersede tool marks it
        # (workspace migration 0068).
        assert rows(
            f"SELECT count(*) FROM {table} WHERE (retired_at IS NOT NULL) <> retired_by_supersede"
        ) == [(0,)]
        assert rows(
            f"SELECT count(*) FROM {table} c JOIN memory m ON m.id = c.memory_id"
            " WHERE (c.retired_at IS NOT NULL) <> (m.superseded_by_id IS NOT NULL)"
            "    OR c.stated_at <> m.created_at OR c.retired_at < c.stated_at"
        ) == [(0,)]
        # Stated by record memories only, each with the record's confidence.
        assert rows(
            f"SELECT count(*) FROM {table} c WHERE NOT EXISTS (SELECT 1 FROM legacy_import l"
            " JOIN memory m ON m.id = l.target_id"
            " WHERE l.source = 'entity_record' AND l.target_id = c.memory_id"
            " AND m.confidence = c.confidence)"
        ) == [(0,)]
    # Every entity a claim names is mentioned by the stating memory.
    assert rows(
        "SELECT count(*) FROM (SELECT memory_id, entity_id FROM attribute_claim"
        " UNION SELECT memory_id, subject_id FROM relation_claim"
        " UNION SELECT memory_id, object_id FROM relation_claim) n"
        " WHERE NOT EXISTS (SELECT 1 FROM mention mn"
        " WHERE mn.memory_id = n.memory_id AND mn.entity_id = n.entity_id)"
    ) == [(0,)]
    # The superseded record reads as such through the gateway.
    old, new = next(iter(t.superseded_by.items()))
    memory = migrated.team.clients["ada"].read([ids.entity_record(old)]).memories[0]
    assert memory.superseded_by_id == ids.entity_record(new)
    assert memory.origin == cpb.ORIGIN_MIGRATED and old in memory.body
    assert t.entity_names[old] in memory.title


def test_superseded_records_answer_for_their_time(migrated: Migrated, old_store: OldStore) -> None:
    """`lookup` as of a time before a supersede patch answers with the claims
    of the records current then: the duplicate's before the patch (and before
    its replacement's record was written), a chain's middle between its two
    patches. The record times are the old store's, not the import's."""
    t, ada = old_store.truth, migrated.team.clients["ada"]
    ids = plan.Ids("ada")

    def at(text: str) -> datetime:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))

    def current_then(old_id: str, when: datetime) -> bool:
        ended = t.superseded_at.get(old_id)
        return at(t.record_valid_from[old_id]) <= when and (ended is None or at(ended) > when)

    targets = sorted({t.final_entity[e] for e in t.superseded_by})
    checked = 0
    for when in (START + timedelta(days=100), START + timedelta(days=130)):
        stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ")
        live = [e for e in t.record_valid_from if current_then(e, when)]
        for final in targets:
            folded = [e for e in live if t.final_entity[e] == final]
            cards = ada.lookup(t.entity_names[final], as_of=stamp).entities
            assert len(cards) == 1
            card = cards[0]
            assert sorted((a.attribute, a.value, a.memory_id) for a in card.attributes) == sorted(
                (attr, value, ids.entity_record(e))
                for e in folded
                for attr, value in t.entity_attributes[e]
            ), (stamp, final)
            outgoing = sorted(
                (p, ids.entity(o), ids.entity_record(r))
                for r, s_, p, o in t.relations
                if s_ == final and r in live
            )
            assert (
                sorted(
                    (x.predicate, x.other.id, x.memory_id)
                    for x in card.relations
                    if x.direction == cpb.RELATION_DIRECTION_OUTGOING
                )
                == outgoing
            ), (stamp, final)
            checked += bool(folded and any(e != final for e in folded))
    assert checked, "some duplicates' claims were current at the times asked"


def recall(client: Client, query: str, include_history: bool, mode: int = 1) -> pb.RecallResponse:
    request = pb.RecallRequest(
        query=query, mode=mode, include_history=include_history, skip_rerank=True
    )
    return client.call(client.memory.Recall, request)


def test_history_is_the_owners_alone(stack: Stack, migrated: Migrated, old_store: OldStore) -> None:
    team, t = migrated.team, old_store.truth
    ada, bob = team.clients["ada"], team.clients["bob"]
    for word, (turn_id, text) in t.needles.items():
        outcome = recall(ada, word, include_history=True).outcome
        assert [h.text for h in outcome.history] == [text]
        assert outcome.history[0].id == plan.Ids("ada").turn(turn_id)
        assert outcome.history[0].score > 0 and outcome.history[0].chat_id
        # Its own list: the turn is not a memory.
        assert not any(r.memory.body == text for r in outcome.results)
        assert not recall(ada, word, include_history=False).outcome.history
        # For anyone else, history does not exist: no entries, no error.
        assert not recall(bob, word, include_history=True).outcome.history
    # Hybrid too, beside the memories the owner may see.
    outcome = recall(ada, "invoice template billing rewrite", True, mode=3).outcome
    assert outcome.results and outcome.history

    # The store answers nobody but an owner of the workspace, whatever role
    # the request claims; row-level security holds beneath that.
    word = next(iter(t.needles))
    channel = internal.channel(stack, "store")
    store = store_pb2_grpc.StoreServiceStub(channel)

    def search(member: str, role: int) -> list[str]:
        caller = cpb.Caller(
            workspace_id=team.workspace_id, member_id=member, purpose=cpb.PURPOSE_ASSIST, role=role
        )
        request = store_pb2.SearchHistoryRequest(caller=caller, query=word, limit=5)
        return [e.text for e in store.SearchHistory(request, timeout=10).entries]

    assert search(team.members["ada"], cpb.ROLE_OWNER) == [t.needles[word][1]]
    assert search(team.members["bob"], cpb.ROLE_MEMBER) == []
    assert search(team.members["bob"], cpb.ROLE_OWNER) == []
    channel.close()

    app_url = with_database(stack.database_url, team.database_name, user="recallatron_app")
    with psycopg.connect(app_url) as conn:
        for member, expected in ((team.members["bob"], 0), (team.members["ada"], None)):
            conn.execute("SELECT set_config('recallatron.member_id', %s, true)", (member,))
            seen = conn.execute("SELECT count(*) FROM history_entry").fetchone()
            stats = conn.execute("SELECT count(*) FROM history_term_stat").fetchone()
            assert seen is not None and stats is not None
            if expected == 0:
                assert (seen[0], stats[0]) == (0, 0)
            else:
                assert seen[0] == t.history_entries and stats[0] > 0
            conn.rollback()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT count(*) FROM legacy_import")


def poll(check: Callable[[], bool], timeout: float = 15.0) -> bool:
    """Workspace settings are cached for a few seconds by the services."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.3)
    return check()


def test_expiry_gate_on_and_off(stack: Stack, operator: Client) -> None:
    team = make_team(stack, operator, ("ada",))
    ada = team.clients["ada"]
    made = [
        ada.remember(f"Heliotrope review {n}", f"The heliotrope dashboard, part {n}.").memory
        for n in range(3)
    ]
    fresh, old, renewed = (m.id for m in made)
    aged = (old, renewed)
    dbutil_exec(
        stack,
        team,
        "UPDATE memory SET created_at = now() - interval '400 days',"
        " updated_at = now() - interval '400 days' WHERE id = ANY(%s::uuid[])",
        (list(aged),),
    )

    def found() -> set[str]:
        return {r.memory.id for r in recall(ada, "heliotrope", False).outcome.results}

    assert found() == {fresh, old, renewed}, "off by default"
    ada.update_settings(expiry_days=365)
    assert poll(lambda: found() == {fresh}), found()
    # Renewed (corrected): back, and nothing was ever deleted.
    ada.correct(renewed, 1, "still true", body="The heliotrope dashboard, part 2, checked.")
    assert poll(lambda: found() == {fresh, renewed}), found()
    count = dbutil.query(stack, team.database_name, "SELECT count(*) FROM memory")[0][0]
    assert count == 3
    ada.update_settings(expiry_days=0)
    assert poll(lambda: found() == {fresh, old, renewed}), found()


def test_a_memory_renewed_without_new_text_is_back_in_both_arms(
    stack: Stack, operator: Client
) -> None:
    """A correct that changes a memory's confidence only renews it (its
    updated_at), as one that changes its text does: the dense arm's copy of
    that time (migration 0005) follows, so the expiry gate treats both arms
    alike. Before, the vector kept the old time and only the lexical arm
    found the renewed memory."""
    from tests.surfaces.dedup_data import wait_embedded

    team = make_team(stack, operator, ("ada",))
    ada = team.clients["ada"]
    made = [
        ada.remember(f"Marigold audit {n}", f"The marigold ledger review, part {n}.").memory
        for n in range(2)
    ]
    old, renewed = (m.id for m in made)
    wait_embedded(stack, team, [old, renewed])
    dbutil_exec(
        stack,
        team,
        "UPDATE memory SET created_at = now() - interval '400 days',"
        " updated_at = now() - interval '400 days' WHERE id = ANY(%s::uuid[])",
        ([old, renewed],),
    )
    # Their vectors' copies of the time, aged with them (as vectors written then).
    dbutil_exec(
        stack,
        team,
        "UPDATE memory_embedding SET memory_id = memory_id WHERE memory_id = ANY(%s::uuid[])",
        ([old, renewed],),
    )

    def found(mode: int) -> set[str]:
        return {r.memory.id for r in recall(ada, "marigold ledger", False, mode).outcome.results}

    ada.update_settings(expiry_days=365)
    assert poll(lambda: found(1) == set() and found(2) == set()), (found(1), found(2))
    ada.correct(renewed, 1, "checked again", confidence=0.9)
    assert poll(lambda: found(1) == {renewed} and found(2) == {renewed}), (found(1), found(2))


def dbutil_exec(stack: Stack, team: Team, sql: str, params: tuple[object, ...]) -> None:
    with psycopg.connect(dbutil.workspace_url(stack, team.database_name)) as conn:
        conn.execute(sql, params)  # type: ignore[arg-type]
