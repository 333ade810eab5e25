"""The embedding job (design §6): vectors after commit, replaced on correct,
kept on supersede (naming the successor), gone on forget, a backlog that
survives the embed service being down, several workers without double work,
and rebuild after a stamp change."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

import numpy as np
import psycopg
import pytest

from recallatron.embed_input import EMBED_INPUT_VERSION
from recallatron.packed_vectors import pack
from recallatron.v1 import embed_pb2
from recallatron_devkit.stack import Stack
from services.embed.models import BiEncoder
from services.embedding_job.embedder import Embedder
from services.embedding_job.job import Batch, EmbeddingJob, embed_input
from services.store.domain.control import ControlPlane
from services.store.infrastructure.db import CONTROL_DATABASE, Databases, with_database
from services.store.settings import StoreSettings
from tests import dbutil
from tests.conftest import Team, free_port, wait_for

pytestmark = pytest.mark.integration

VECTOR = "SELECT embedding::text, input_version FROM memory_embedding WHERE memory_id = %s"


def vector_of(stack: Stack, team: Team, memory_id: str) -> np.ndarray | None:
    rows = dbutil.query(stack, team.database_name, VECTOR, (memory_id,))
    if not rows:
        return None
    assert rows[0][1] == EMBED_INPUT_VERSION
    return np.array([float(x) for x in rows[0][0].strip("[]").split(",")], dtype=np.float32)


@pytest.fixture(scope="module")
def encoder(prepared_models_dir) -> BiEncoder:  # type: ignore[no-untyped-def]
    return BiEncoder(prepared_models_dir / "all-MiniLM-L6-v2")


def test_vector_follows_the_memory(stack: Stack, team: Team, encoder: BiEncoder) -> None:
    ada = team.clients["ada"]
    m = ada.remember("Lunch order", "Ada orders the falafel wrap", audience_to="workspace").memory
    first = wait_for(lambda: vector_of(stack, team, m.id), "the first vector")
    expected = encoder.embed([embed_input("Lunch order", "Ada orders the falafel wrap")])[0]
    assert float(np.dot(first, expected)) > 0.9999
    ada.correct(m.id, 1, "changed her mind", body="Ada orders the lentil soup")

    def replaced() -> np.ndarray | None:
        v = vector_of(stack, team, m.id)
        return v if v is not None and float(np.dot(v, first)) < 0.9999 else None

    second = wait_for(replaced, "the corrected text's vector")
    expected = encoder.embed([embed_input("Lunch order", "Ada orders the lentil soup")])[0]
    assert float(np.dot(second, expected)) > 0.9999
    new = ada.supersede(m.id, 2, "Lunch order, final", "Soup it is").memory
    # Kept, its copy naming the successor (migration 0062): recall finds a
    # superseded memory when asked, or when its successor is hidden.
    kept = vector_of(stack, team, m.id)
    assert kept is not None and float(np.dot(kept, second)) > 0.9999
    successor_copy = "SELECT superseded_by_id::text FROM memory_embedding WHERE memory_id = %s"
    assert dbutil.query(stack, team.database_name, successor_copy, (m.id,)) == [(new.id,)]
    wait_for(lambda: vector_of(stack, team, new.id), "the successor's vector")
    ada.forget(new.id, "not worth keeping")
    assert vector_of(stack, team, new.id) is None


def test_backlog_survives_the_embed_service_being_down(stack: Stack, team: Team) -> None:
    ada = team.clients["ada"]
    ada.wait_embedded(timeout=120)
    stack.stop_service("embed")
    try:
        made = [
            ada.remember(f"Written while embed is down {i}", audience_to="workspace").memory.id
            for i in range(40)
        ]
        time.sleep(1.0)
        status = ada.status()
        assert status.pending >= 40  # writes succeeded; the backlog grew
    finally:
        stack.start_service("embed")
        stack.wait_serving("embed")
    started = time.monotonic()
    drained = ada.wait_embedded(timeout=180, poll=0.2)
    elapsed = time.monotonic() - started
    assert drained.pending == 0
    for memory_id in made:
        assert vector_of(stack, team, memory_id) is not None
    print(f"backlog of {len(made)} drained {elapsed:.1f}s after the embed service returned")


def _embedded_total(port: int) -> float | None:
    """The worker's count of stored vectors; None while it is not up yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("recallatron_embedding_job_embedded_total "):
            return float(line.split()[1])
    return None


def global_backlog(stack: Stack) -> int:
    """Queued memories across every workspace (the workers serve them all)."""
    with psycopg.connect(with_database(stack.database_url, CONTROL_DATABASE)) as conn:
        databases = [r[0] for r in conn.execute("SELECT database_name FROM workspace")]
    return sum(
        dbutil.query(stack, db, "SELECT count(*) FROM embedding_job")[0][0] for db in databases
    )


def test_two_workers_embed_every_memory_exactly_once(stack: Stack, team: Team) -> None:
    ada = team.clients["ada"]
    wait_for(lambda: global_backlog(stack) == 0 or None, "an empty queue")
    stack.stop_service("embedding-job")
    workers: list[subprocess.Popen[bytes]] = []
    ports = [free_port(), free_port()]
    try:
        for port in ports:
            env = {
                **stack.env_for("embedding-job"),
                "RECALLATRON_METRICS_PORT": str(port),
                "RECALLATRON_JOB_BATCH_SIZE": "4",
                "RECALLATRON_JOB_POLL_SECONDS": "0.05",
            }
            workers.append(
                subprocess.Popen(
                    [sys.executable, "-m", "recallatron_cli.main", "embed-job"], env=env
                )
            )
        # Both workers are up and polling before the work arrives, so both get some.
        for port in ports:
            wait_for(partial(_embedded_total, port), "the worker to start", timeout=60)
        made = [
            ada.remember(f"Batch item {i}", f"body {i}", audience_to="workspace").memory.id
            for i in range(150)
        ]
        ada.wait_embedded(timeout=300, poll=0.2)
        totals = [_embedded_total(p) or 0.0 for p in ports]
    finally:
        for w in workers:
            w.terminate()
            w.wait(30)
        stack.start_service("embedding-job")
    # Both worked, and together they stored each queued vector once: a
    # vector stored twice would show in the sum.
    assert all(t > 0 for t in totals), totals
    assert sum(totals) == len(made)
    rows = dbutil.query(
        stack,
        team.database_name,
        "SELECT count(*), count(DISTINCT memory_id) FROM memory_embedding"
        " WHERE memory_id = ANY(%s::uuid[])",
        (made,),
    )
    assert rows[0] == (150, 150)


class FixedEmbedder:
    """Stands in for the embed service: the rule under test is the job's own
    (a vector goes in only for the text that was embedded)."""

    model = "fixed-test-model"

    def embed(self, texts: list[str]) -> tuple[str, list[list[float]]]:
        return self.model, [[1.0] + [0.0] * 383 for _ in texts]

    def model_id(self) -> str:
        return self.model


EmbeddingJobParts = tuple[StoreSettings, Databases]


def job_databases(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> EmbeddingJobParts:
    """The embedding job's settings and databases, as its process has them."""
    for key, value in stack.env_for("embedding-job").items():
        monkeypatch.setenv(key, value)
    settings = StoreSettings()
    dbs = Databases(settings, process="embedding job")
    assert dbs.wait_and_bootstrap(threading.Event())
    return settings, dbs


def backlog(stack: Stack, database: str) -> int:
    """Queued memories of one workspace."""
    return int(dbutil.query(stack, database, "SELECT count(*) FROM embedding_job")[0][0])


@contextmanager
def job_alone(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, database: str | None = None
) -> Iterator[EmbeddingJobParts]:
    """The stack's embedding job stopped once its queue is empty (every
    workspace's, or only ``database``'s: the session stack may hold a long
    backlog of other tests' bulk-written memories), and its settings and
    databases held here to drive a job by hand; the stack's job started
    again after."""
    if database is None:
        wait_for(lambda: global_backlog(stack) == 0 or None, "an empty queue")
    else:
        wait_for(lambda: backlog(stack, database) == 0 or None, f"an empty queue in {database}")
    stack.stop_service("embedding-job")
    settings, dbs = job_databases(stack, monkeypatch)
    try:
        yield settings, dbs
    finally:
        dbs.close()
        stack.start_service("embedding-job")


def vectors_of(stack: Stack, team: Team, model: str) -> set[str]:
    """The memories holding a vector of ``model``."""
    rows = dbutil.query(
        stack,
        team.database_name,
        "SELECT memory_id::text FROM memory_embedding WHERE model_id = %s",
        (model,),
    )
    return {r[0] for r in rows}


def test_a_batch_stores_only_the_rows_whose_text_it_embedded(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One memory of a claimed batch is corrected while the batch is being
    embedded: the others' vectors are stored, its own is not, and its new
    text stays queued (the batch is completed in one statement)."""
    ada = team.clients["ada"]
    with job_alone(stack, monkeypatch) as (settings, dbs):
        made = [
            ada.remember(f"Batch rule {i}", f"body {i}", audience_to="workspace").memory
            for i in range(3)
        ]
        job = EmbeddingJob(settings, dbs, ControlPlane(dbs), embedder=FixedEmbedder())  # type: ignore[arg-type]
        batch = job.claim(team.workspace_id)
        assert sorted(r[0] for r in batch.rows) == sorted(m.id for m in made)
        ada.correct(made[1].id, made[1].revision, "typo", body="body one, corrected")
        assert job.process(batch) == 2
        assert vectors_of(stack, team, FixedEmbedder.model) == {made[0].id, made[2].id}
        queued = dbutil.query(
            stack, team.database_name, "SELECT memory_id::text, text_revision FROM embedding_job"
        )
        assert queued == [(made[1].id, made[1].revision + 1)]


# Queued memories that make a claim's scan take long enough (tens of ms) for
# a correct to commit inside it.
FILLER = """
INSERT INTO memory (id, kind, title, body, confidence, origin, purposes, created_by,
                    audience_member_id, provenance_audience, provenance_purposes)
SELECT gen_random_uuid(), 'note', 'claim filler ' || g, 'filler body ' || g, 0.5, 'told',
       '{assist}', %(m)s, %(m)s, %(m)s, '{assist}'
FROM generate_series(1, %(n)s) g
"""


def test_a_claim_never_pairs_a_new_revision_with_the_old_text(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A correct that commits while a claim runs (after the claim's snapshot,
    before it locks the queue row) made the claim return the queue row's new
    revision with the memory's old text, read in the same statement: the old
    text was embedded and stored as the new one's, and nothing stayed queued.
    Corrects are committed at a spread of moments inside claims; every text a
    claim returns must be its revision's."""
    ada = team.clients["ada"]
    url = dbutil.workspace_url(stack, team.database_name)
    old, new = "The gate code is 4711.", "The gate code was retired."
    with job_alone(stack, monkeypatch) as (settings, dbs), _claim_fillers_removed(url):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(FILLER, {"m": team.members["bob"], "n": 20_000})
        job = EmbeddingJob(settings, dbs, ControlPlane(dbs), embedder=FixedEmbedder())  # type: ignore[arg-type]
        started = time.monotonic()
        job.claim(team.workspace_id)
        scan = time.monotonic() - started  # how long one claim takes here
        paired = []
        for attempt in range(20):
            memory = ada.remember("Gate", old, audience_to="workspace").memory
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(  # first in the queue's order
                    "UPDATE embedding_job SET enqueued_at = '2000-01-01' WHERE memory_id = %s",
                    (memory.id,),
                )
            writer = psycopg.connect(url)  # the correct's own statement, held open
            writer.execute(
                "UPDATE memory SET body = %s, revision = revision + 1 WHERE id = %s",
                (new, memory.id),
            )
            got: list[Batch] = []
            claim = threading.Thread(
                target=lambda into=got: into.append(job.claim(team.workspace_id))
            )
            claim.start()
            time.sleep(scan * (attempt % 10) / 10)
            writer.commit()
            writer.close()
            claim.join()
            paired += [(r[1], r[3]) for r in got[0].rows if r[0] == memory.id]
        assert paired, "no claim returned the corrected memory"
        assert all((revision, body) in ((1, old), (2, new)) for revision, body in paired), paired


@contextmanager
def _claim_fillers_removed(url: str) -> Iterator[None]:
    """The claim race's queue left empty after it, whatever became of it."""
    try:
        yield
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "DELETE FROM embedding_job WHERE memory_id IN"
                " (SELECT id FROM memory WHERE title LIKE 'claim filler %%' OR title = 'Gate')"
            )


class AnswersBadly(FixedEmbedder):
    """An embed service answering one text of each batch with a vector no
    model gives (too short, NaN, all zero), the others with good ones."""

    def __init__(self, bad: list[float]) -> None:
        self.bad = bad

    def embed(self, texts: list[str]) -> tuple[str, list[list[float]]]:
        model, vectors = super().embed(texts)
        return model, [self.bad, *vectors[1:]]


@pytest.mark.parametrize(
    "bad",
    [[0.1] * 383, [float("nan")] + [0.0] * 383, [0.0] * 384],
    ids=["383 numbers", "NaN", "zero"],
)
def test_a_vector_no_model_gives_fails_its_row_alone(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch, bad: list[float]
) -> None:
    """The job stored what the embed service answered unchecked: a zero
    vector went in (its cosine is NaN, which passes any floor); one of the
    wrong length or with a NaN was refused by Postgres for the whole batch,
    whose good rows were then never stored, nor the bad one parked, the batch
    tried again without end."""
    ada = team.clients["ada"]
    with job_alone(stack, monkeypatch) as (settings, dbs):
        made = [
            ada.remember(f"Vector rule {i}", f"body {i}", audience_to="workspace").memory
            for i in range(3)
        ]
        job = EmbeddingJob(settings, dbs, ControlPlane(dbs), embedder=AnswersBadly(bad))  # type: ignore[arg-type]
        batch = job.claim(team.workspace_id)
        assert job.process(batch) == 2
        first = batch.rows[0][0]
        assert vectors_of(stack, team, FixedEmbedder.model) == {m.id for m in made} - {first}
        failed = dbutil.query(
            stack, team.database_name, "SELECT memory_id::text, last_error FROM embedding_job"
        )
        assert [r[0] for r in failed] == [first]
        assert "vector" in failed[0][1]
        # Nothing left for the stack's job (it would embed the row for real).
        dbutil.query(stack, team.database_name, "DELETE FROM embedding_job RETURNING 1")


class PacksBadly:
    """The embed service's stub answering packed bytes, a value short for
    the texts of ``bad`` in them."""

    def __init__(self, bad: str) -> None:
        self.bad = bad

    def Embed(self, request: embed_pb2.EmbedRequest, timeout: float) -> embed_pb2.EmbedResponse:
        good = pack(np.array([1.0] + [0.0] * 383))
        return embed_pb2.EmbedResponse(
            model_id=FixedEmbedder.model,
            vectors=[
                embed_pb2.Vector(packed=good[:-4] if self.bad in t else good) for t in request.texts
            ],
        )


def test_packed_bytes_of_a_wrong_length_fail_their_row_alone(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bytes that are no vector fail the batch's call as a refused call
    does: each row is tried alone, the others' vectors go in, and the one
    answered so fails with the reason, storing nothing."""
    ada = team.clients["ada"]
    with job_alone(stack, monkeypatch) as (settings, dbs):
        made = [
            ada.remember(f"Packed rule {i}", f"body {i}", audience_to="workspace").memory
            for i in range(3)
        ]
        embedder = Embedder("127.0.0.1:9", 1.0)
        embedder.stub = PacksBadly("Packed rule 1")  # type: ignore[assignment]
        job = EmbeddingJob(settings, dbs, ControlPlane(dbs), embedder=embedder)
        assert job.process(job.claim(team.workspace_id)) == 2
        assert vectors_of(stack, team, FixedEmbedder.model) == {made[0].id, made[2].id}
        failed = dbutil.query(
            stack, team.database_name, "SELECT memory_id::text, last_error FROM embedding_job"
        )
        assert [r[0] for r in failed] == [made[1].id]
        assert "INTERNAL" in failed[0][1] and "vectors[0].packed: must hold 384" in failed[0][1]
        # Nothing left for the stack's job (it would embed the row for real).
        dbutil.query(stack, team.database_name, "DELETE FROM embedding_job RETURNING 1")


def test_a_new_input_version_is_rebuilt_and_old_rows_unused(stack: Stack, team: Team) -> None:
    ada = team.clients["ada"]
    for i in range(5):
        ada.remember(
            f"Rebuild candidate {i}", "Rebuilds keep recall working", audience_to="workspace"
        )
    ada.wait_embedded(timeout=120)
    assert ada.recall("rebuild candidate", mode="dense").outcome.dense_available
    # Pretend every vector was written under an older embed-input version.
    dbutil.query(
        stack,
        team.database_name,
        "UPDATE memory_embedding SET input_version = 'title-body-v0' RETURNING 1",
    )
    out = ada.recall("rebuild candidate", mode="dense").outcome
    assert not out.dense_available  # stale rows are not used
    proc = subprocess.run(
        [sys.executable, "-m", "recallatron_cli.main", "rebuild", "--workspace", team.slug],
        env=stack.env_for("embedding-job"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "stale vectors removed" in proc.stdout
    assert f"{team.slug}: embedding: 5/5 memories (100%), done in" in proc.stderr  # progress
    rows = dbutil.query(
        stack, team.database_name, "SELECT input_version, count(*) FROM memory_embedding GROUP BY 1"
    )
    assert [r[0] for r in rows] == [EMBED_INPUT_VERSION]
    live = dbutil.query(
        stack,
        team.database_name,
        "SELECT count(*) FROM memory WHERE invalidated_at IS NULL AND superseded_by_id IS NULL",
    )[0][0]
    assert rows[0][1] == live
    out = ada.recall("rebuild candidate", mode="dense").outcome
    assert out.dense_available and out.results
    # By id as well; a workspace that does not exist is named in the refusal.
    for given, code, said in (
        (team.workspace_id, 0, f"{team.slug}: 0 memories queued"),
        ("no-such-team", 1, "no workspace 'no-such-team'"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "recallatron_cli.main", "rebuild", "--workspace", given],
            env=stack.env_for("embedding-job"),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == code, proc.stderr
        assert said in proc.stdout + proc.stderr


def test_a_long_private_memory_does_not_stall_its_neighbours(
    stack: Stack, team: Team, encoder: BiEncoder
) -> None:
    """The store takes bodies of up to 20,000 characters; the model reads 256
    tokens. One such memory (private to bob) is embedded from what the model
    reads, and the 20 memories cy writes beside it are embedded too."""
    bob, cy = team.clients["bob"], team.clients["cy"]
    words = " ".join(f"harbour{i} crane{i % 7} manifest" for i in range(1_000))
    body = words[:8_500]
    long = bob.remember("Shipping ledger", body).memory
    neighbours = [
        cy.remember(f"Neighbour {i}", f"cy's note number {i}").memory.id for i in range(20)
    ]

    def all_embedded() -> bool:
        return all(vector_of(stack, team, m) is not None for m in [long.id, *neighbours])

    wait_for(all_embedded, "the long memory and its 20 neighbours to be embedded", timeout=60)
    # What the model reads of the whole text is what was embedded.
    expected = encoder.embed([embed_input("Shipping ledger", body)])[0]
    got = vector_of(stack, team, long.id)
    assert got is not None and float(np.dot(got, expected)) > 0.9999


# When the planner's statistics of the memory table were last gathered, and
# how many rows it has counted since (design §10: background work follows the
# writes; autovacuum alone reaches a database only once per naptime).
STATISTICS = """
SELECT greatest(last_analyze, last_autoanalyze), n_live_tup
FROM pg_stat_user_tables WHERE relname = 'memory'
"""


def test_the_planners_statistics_follow_a_workspaces_writes(stack: Stack, team: Team) -> None:
    ada = team.clients["ada"]
    before = dbutil.query(stack, team.database_name, "SELECT now()")[0][0]
    for i in range(120):
        ada.remember(f"Statistics note {i}", f"Body of note {i} about the rota")
    ada.wait_embedded(timeout=120)

    def analyzed() -> bool:
        at, _ = dbutil.query(stack, team.database_name, STATISTICS)[0]
        return at is not None and at > before

    # Without them a workspace just filled is planned from default estimates
    # (a recall took 2.7x as long at 10,000 memories) until autovacuum comes.
    wait_for(analyzed, "the memory table analyzed after the writes", timeout=60)
    estimate = dbutil.query(
        stack, team.database_name, "SELECT reltuples FROM pg_class WHERE relname = 'memory'"
    )[0][0]
    assert estimate >= 50


def test_past_the_vacuum_rule_the_database_is_vacuumed_through_a_pooled_connection(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VACUUM runs outside a transaction only: the job's pooled connection
    runs it, then serves the job's next statements as before."""
    settings, dbs = job_databases(stack, monkeypatch)
    try:
        job = EmbeddingJob(settings, dbs, ControlPlane(dbs), embedder=FixedEmbedder())  # type: ignore[arg-type]
        before = dbutil.query(stack, team.database_name, "SELECT now()")[0][0]
        assert job.wrote(team.workspace_id, 1_001) == 1_001
        vacuumed = dbutil.query(
            stack,
            team.database_name,
            "SELECT last_vacuum, last_analyze FROM pg_stat_user_tables WHERE relname = 'memory'",
        )[0]
        assert all(at is not None and at > before for at in vacuumed)
        assert job.backlog(team.workspace_id) == 0  # the pool's connection still serves
    finally:
        dbs.close()
