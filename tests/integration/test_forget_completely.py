"""Forget, completely (design §8.6): request ids are stored only as
hashes (idempotency kept), and after forget and the operator's `recallatron
scrub` no file of the data directory holds a forgotten memory's title, body
or request id."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from services.store.domain.erasure import request_key
from tests import dbutil
from tests.conftest import Team, wait_for

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
MIGRATION = REPO / "services/store/sql/migrations/workspace/0010_forget_completely.sql"


def test_request_ids_are_stored_as_hashes(stack: Stack, team: Team) -> None:
    ada = team.clients["ada"]
    rid = f"remember-ada-private-{uuid.uuid4().hex}"
    m = ada.remember("Hashed request id", audience_to="workspace", request_id=rid).memory
    # A retry is still recognised by its hash.
    again = ada.remember("Hashed request id", audience_to="workspace", request_id=rid)
    assert again.replayed and again.memory.id == m.id
    forget_rid = f"forget-it-{uuid.uuid4().hex}"
    ada.forget(m.id, "asked", request_id=forget_rid)
    dump = dbutil.pg_dump(stack, team.database_name)
    assert rid not in dump and forget_rid not in dump
    member = team.members["ada"]
    keys = dbutil.query(
        stack,
        team.database_name,
        "SELECT request_id FROM request_key WHERE memory_id = %s",
        (m.id,),
    )
    assert {k[0] for k in keys} == {request_key(member, rid), request_key(member, forget_rid)}
    audited = dbutil.query(
        stack,
        team.database_name,
        "SELECT request_id FROM audit_log WHERE memory_id = %s ORDER BY id",
        (m.id,),
    )
    assert [a[0] for a in audited] == [request_key(member, rid), request_key(member, forget_rid)]
    assert ada.forget(m.id, "asked", request_id=forget_rid).replayed


def test_the_schema_says_request_ids_are_hashes(stack: Stack, team: Team) -> None:
    """Rows written with the plain id were rewritten by migration 0010 (a
    database that old is refused by the workspace baseline, which replaces
    it); the schema still says what the columns hold."""
    said = dbutil.query(
        stack,
        team.database_name,
        "SELECT col_description(%s::regclass, 2), col_description(%s::regclass, 6)",
        ("request_key", "audit_log"),
    )
    note = 'sha256 hex of "<member id>:<client request id>" (services/store/erasure.py)'
    assert said == [(note, note)]


def _grep(directory: Path, needles: list[str]) -> list[str]:
    """``grep -F`` of every file under ``directory`` (binary files as text):
    one line per file and needle found. A file the running server removes
    while grep walks the directory (a dropped database's relation cache, a
    recycled WAL segment) is no file that keeps the text: grep says it
    vanished and exits 2, which is taken as its other answers are; any other
    error fails."""
    found = []
    for needle in needles:
        done = subprocess.run(
            ["grep", "-rlaF", "--", needle, str(directory)], capture_output=True, text=True
        )
        errors = done.stderr.splitlines()
        vanished = all(e.endswith(": No such file or directory") for e in errors)
        assert done.returncode in (0, 1) or (done.returncode == 2 and vanished), done.stderr
        found += [f"{path}: {needle}" for path in done.stdout.split()]
    return found


def _scrub(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    """`recallatron scrub` with ``args`` on the stack's server, run to its end."""
    return subprocess.run(
        [sys.executable, "-m", "recallatron_cli.main", "scrub", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "RECALLATRON_DATABASE_URL": stack.database_url},
        cwd=REPO,
        timeout=600,
    )


def _named(stack: Stack, database: str, hits: list[str]) -> list[str]:
    """Each hit in a relation's file with the relation's name."""
    out = []
    for hit in hits:
        path, _, needle = hit.partition(": ")
        node = Path(path).name.split(".")[0].split("_")[0]
        name = ""
        if "/base/" in path and node.isdigit():
            rows = dbutil.query(
                stack, database, "SELECT pg_filenode_relation(0, %s)::text", (node,)
            )
            name = f" ({rows[0][0]})" if rows and rows[0][0] else ""
        out.append(f"{path}{name}: {needle}")
    return out


def test_scrub_leaves_no_copy_of_a_forgotten_memory_on_disk(stack: Stack, team: Team) -> None:
    ada = team.clients["ada"]
    tag = uuid.uuid4().hex
    title = f"Canary zqtitle{tag[:12]}"
    body = f"The canary's secret body zqbody{tag[12:24]} must leave no trace."
    rid = f"zqrequest-{tag}"
    mention = f"Zqmention {tag[24:30]}"
    value = f"zqvalue{tag[:8]}"
    m = ada.remember(
        title,
        body,
        audience_to="workspace",
        request_id=rid,
        mention_names=[mention],
        claims=[{"entity": {"name": mention}, "attribute": "secret", "value": value}],
    ).memory
    # Let the embedding job and autovacuum see it, as in real use.
    ada.recall(title, mode="lexical")
    ada.forget(m.id, "canary", request_id=rid + "-forget")
    # What an operator might try first: neither removes the dead tuples' text.
    with psycopg.connect(dbutil.workspace_url(stack, team.database_name), autocommit=True) as c:
        c.execute("CHECKPOINT")
        c.execute("VACUUM")
    data = stack.state_dir / "pgdata"
    # Each string, and each distinctive word alone (the search index and
    # term_stat keep words, not the whole text).
    needles = [title, body, rid, f"zqtitle{tag[:12]}", f"zqbody{tag[12:24]}", mention, value]
    before = _grep(data, needles)
    # What forget, a checkpoint and a plain VACUUM leave (the heap, the
    # search index, term_stat, the WAL): the check can fail.
    assert any(title in line or f"zqtitle{tag[:12]}" in line for line in before), before
    named = _named(stack, team.database_name, before)
    started = time.monotonic()
    done = _scrub(stack, "--workspace", team.slug)
    assert done.returncode == 0, done.stderr
    assert f"scrubbed {team.slug}" in done.stdout
    elapsed = time.monotonic() - started
    after = _grep(data, needles)
    print(f"grep -rlaF over {data} after forget: {len(before)} hits", *named, sep="\n  ")
    print(f"recallatron scrub --workspace {team.slug} ({elapsed:.1f} s):\n{done.stdout}")
    print(f"after scrub: {len(after)} hits", *after, sep="\n  ")
    assert after == []
    # The workspace still works after its tables were rewritten.
    kept = ada.remember("After the scrub", audience_to="workspace").memory
    assert ada.read([kept.id]).memories[0].title == "After the scrub"


def test_forget_leaves_no_hash_of_the_text_beside_its_request_id(
    stack: Stack, operator: Client, team: Team
) -> None:
    """A write's request id keeps a hash of what it asked (migration 0027), its
    text included: after forget (or a removed member's erase), anyone holding
    the database or a backup could confirm a guess of the forgotten text
    against it. Forget clears the hashes of the memory's writes."""
    from recallatron.v1 import common_pb2 as cpb
    from recallatron.v1 import gateway_pb2 as gpb
    from services.store.api.messages import new_memory
    from services.store.domain.erasure import fingerprint

    ada, bob = team.clients["ada"], team.clients["bob"]
    title, body = "Bob's diagnosis", "Bob has been diagnosed with type 2 diabetes."
    memory = ada.remember(title, body, audience_to="workspace").memory
    corrected = ada.correct(memory.id, memory.revision, "more precise", body=body + " In May.")
    private = bob.remember("Bob's own note", "Bob's pension number is 4471.").memory

    def kept(memory_id: str) -> list[bytes]:
        rows = dbutil.query(
            stack,
            team.database_name,
            # The forget's own key hashes its id and reason: none of the text.
            "SELECT fingerprint FROM request_key"
            " WHERE memory_id = %s AND fingerprint IS NOT NULL AND tool <> 'forget'",
            (memory_id,),
        )
        return [bytes(r[0]) for r in rows]

    asked = gpb.RememberRequest(
        kind=cpb.KIND_NOTE, title=title, body=body, audience=cpb.Audience(workspace=True)
    )
    guess = fingerprint("remember", new_memory(asked))
    assert guess in kept(memory.id) and len(kept(memory.id)) == 2  # remember, correct
    assert corrected.memory.revision == 2 and kept(private.id)
    ada.forget(memory.id, "medical, asked to forget")
    assert kept(memory.id) == []
    operator.remove_member(team.members["bob"], "erase")
    assert kept(private.id) == []


def test_forget_leaves_no_reason_of_a_change_that_may_quote_the_text(
    stack: Stack, team: Team
) -> None:
    """A correct's and a supersede's reasons are the caller's words about the
    change, and agents write the old value in them ("was: ..."): once the
    memory is forgotten, its revision history and audit trail keep who and
    when, not why (forget's own reason stays, as documented, and the tool's
    description tells agents never to repeat the content in it)."""
    ada = team.clients["ada"]
    first = ada.remember("Locker code", "The locker code is 8817.").memory
    corrected = ada.correct(
        first.id, first.revision, "was quinzelle 8811", body="The locker code is 8817."
    ).memory
    successor = ada.supersede(
        first.id, corrected.revision, "Locker code", "Now 9902.", reason="replaced vorpaline 8817"
    ).memory
    dump = dbutil.pg_dump(stack, team.database_name)
    assert "quinzelle" in dump and "vorpaline" in dump  # kept while the memories live
    ada.forget(successor.id, "no longer needed")
    ada.forget(first.id, "no longer needed")
    dump = dbutil.pg_dump(stack, team.database_name)
    assert "quinzelle" not in dump
    assert "vorpaline" not in dump
    assert "no longer needed" in dump  # who, when and forget's own reason stay
    actions = dbutil.query(
        stack,
        team.database_name,
        "SELECT action FROM memory_revision WHERE memory_id = %s ORDER BY id",
        (first.id,),
    )
    assert [a for (a,) in actions] == ["create", "correct", "supersede", "forget"]


def test_forgetting_a_replaced_memory_leaves_no_hash_of_the_supersede_s_reason(
    stack: Stack, team: Team
) -> None:
    """A supersede's reason often quotes the memory it replaces ("replaced
    ..."), and forgetting that memory drops the reason from its history and
    audit (migration 0037) while the successor lives on. The supersede's
    request id, kept under the successor, hashed the reason too: holding the
    database, one could confirm a guess of the reason, and so of the
    forgotten text, against it."""
    from recallatron.v1 import common_pb2 as cpb
    from recallatron.v1 import gateway_pb2 as gpb
    from services.store.api.messages import new_memory
    from services.store.domain.erasure import fingerprint

    ada = team.clients["ada"]
    old = ada.remember("Locker code", "The locker code is 8817.").memory
    reason = "replaced the code vorpaline 8817"
    rid = str(uuid.uuid4())
    successor = ada.supersede(
        old.id, old.revision, "Locker code", "Now 9902.", reason=reason, request_id=rid
    ).memory
    asked = gpb.SupersedeRequest(kind=cpb.KIND_NOTE, title="Locker code", body="Now 9902.")
    guess = fingerprint("supersede", old.id, old.revision, new_memory(asked), reason, [], False)

    def hashes() -> list[bytes]:
        rows = dbutil.query(
            stack,
            team.database_name,
            "SELECT fingerprint FROM request_key WHERE fingerprint IS NOT NULL",
        )
        return [bytes(r[0]) for r in rows]

    assert guess in hashes()  # kept while the memory it replaced lives
    ada.forget(old.id, "no longer needed")
    assert guess not in hashes()
    # The successor lives on, and a retry of its supersede still replays.
    again = ada.supersede(
        old.id, old.revision, "Locker code", "Now 9902.", reason=reason, request_id=rid
    )
    assert again.replayed and again.memory.id == successor.id


def test_forget_does_not_read_every_request_key_of_the_workspace(stack: Stack, team: Team) -> None:
    """Forget clears the fingerprints of the memory's writes, found by memory
    id: without an index on it, each forget (and each memory of a removed
    member's erase) read the whole request_key table, a row for every write
    the workspace ever made."""
    ada = team.clients["ada"]
    anchor = ada.remember("Anchor").memory
    url = dbutil.workspace_url(stack, team.database_name)
    with psycopg.connect(url, autocommit=True) as conn:
        # A workspace with a long history of writes.
        conn.execute(
            "INSERT INTO request_key (member_id, request_id, tool, memory_id, fingerprint)"
            " SELECT %s, md5(g::text), 'remember', %s, '\\x00'::bytea"
            " FROM generate_series(1, 200000) g",
            (team.members["ada"], anchor.id),
        )
        conn.execute("ANALYZE request_key")
        scans = "SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'request_key'"
        memory = ada.remember("To forget", "soon gone").memory

        def seq_scans() -> int:
            # This connection's own counts, flushed at once.
            conn.execute("SELECT pg_stat_force_next_flush()")
            conn.execute("SELECT pg_stat_clear_snapshot()")
            row = conn.execute(scans).fetchone()
            assert row is not None
            return int(row[0])

        before = seq_scans()
        # The tombstone as every path that forgets makes it (the triggers
        # do the rest), here so that its reads are this connection's to count.
        conn.execute(
            "UPDATE memory SET title = '', body = '', invalidated_at = now() WHERE id = %s",
            (memory.id,),
        )
        assert seq_scans() == before


# The scrub's statement waiting for a lock another transaction holds.
SCRUB_WAITING = """
SELECT count(*) FROM pg_stat_activity
WHERE datname = %s AND wait_event_type = 'Lock' AND query LIKE 'VACUUM (FULL%%'
"""


def test_a_scrub_waiting_for_a_table_does_not_hold_up_the_workspace(
    stack: Stack, team: Team
) -> None:
    """A transaction left open on `memory` (a long export, a session left idle
    in an open transaction) made the scrub wait for that table without end,
    and every call on the workspace then queued behind the scrub's lock
    request: a remember did not answer until the transaction ended. The scrub
    now waits its turn without holding the workspace up, and rewrites the
    table once it may."""
    ada = team.clients["ada"]
    ada.remember("Before the held scrub", audience_to="workspace")
    url = dbutil.workspace_url(stack, team.database_name)
    with psycopg.connect(url) as holder, psycopg.connect(url, autocommit=True) as admin:
        holder.execute("SELECT count(*) FROM memory")  # its transaction stays open
        proc = subprocess.Popen(
            [sys.executable, "-m", "recallatron_cli.main", "scrub", "--workspace", team.slug],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "RECALLATRON_DATABASE_URL": stack.database_url},
            cwd=REPO,
        )
        try:
            wait_for(
                lambda: admin.execute(SCRUB_WAITING, (team.database_name,)).fetchone()[0] > 0,  # type: ignore[index]
                "the scrub waiting for memory",
            )
            with ThreadPoolExecutor(1) as pool:
                made = pool.submit(ada.remember, "During the held scrub", audience_to="workspace")
                try:
                    kept = made.result(timeout=60).memory
                finally:
                    holder.rollback()  # ends the holder's transaction either way
            assert proc.poll() is None  # still waiting its turn, not given up
            out, err = proc.communicate(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, err
    assert f"scrubbed {team.slug}" in out
    assert "waiting for memory" in out, out
    assert ada.read([kept.id]).memories[0].title == "During the held scrub"
