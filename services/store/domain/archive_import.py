"""Importing an archive as a new workspace (docs/export.md).

The archive is read and checked whole before anything is made (format
version, schema, digests, references, the members file). Then the
workspace is created through the control plane, its members are created,
and the rows go into its new database in one transaction, with their ids
as they were: memory, entity, claim and episode ids are the same in the
copy; member ids are the new members'. The derived state (lexical
statistics, provenance, the embedding queue) is computed as the migrations
compute it for existing rows. An import that fails after the workspace was
made removes it again, database and control-plane rows. Until its last step
the workspace is marked as being imported and served to nobody, and the
importing process holds the slug's claim (import_claims.py): a killed
import's workspace is removed by the next import of its slug."""

from __future__ import annotations

import base64
import logging
import time
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from recallatron import errors
from recallatron.embed_input import EMBED_INPUT_VERSION
from services.store.domain import archive_plan as plan
from services.store.domain.archive_format import TIME_FIELDS
from services.store.domain.archive_members import plan_members
from services.store.domain.archive_times import times_ahead
from services.store.domain.control import ControlPlane
from services.store.domain.control_names import SLUG_RULE, slug_ok
from services.store.domain.graph_rules import name_key
from services.store.domain.import_claims import claim, remove_unfinished
from services.store.infrastructure.db import Databases
from services.store.sql import archive_queries as q

Progress = Callable[[int], None]
# Provenance folds until nothing changes; a derivation chain this deep is absurd.
MAX_FOLD_ROUNDS = 100

log = logging.getLogger("recallatron.store.archive")


@dataclass
class ImportReport:
    workspace_id: str
    slug: str
    server: str
    members: list[dict[str, str]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    left_out: dict[str, int] = field(default_factory=dict)
    # Per record file, the records holding a time the service writes as it
    # happens later than this host's clock (archive_times): copied as they are.
    times_ahead: dict[str, int] = field(default_factory=dict)
    queued_for_embedding: int = 0
    seconds: float = 0.0
    # Where the time went: read (and check), rows (written), derived (state
    # computed), analyze.
    steps: dict[str, float] = field(default_factory=dict)
    # The workspace a killed import of the same slug had left, removed
    # first ("" when there was none).
    removed_unfinished: str = ""

    def to_json(self) -> dict[str, Any]:
        # Every field in order, the times rounded to the millisecond.
        return {
            **asdict(self),
            "seconds": round(self.seconds, 3),
            "steps": {k: round(v, 3) for k, v in self.steps.items()},
        }


class Importer:
    def __init__(self, dbs: Databases, control: ControlPlane) -> None:
        self.dbs = dbs
        self.control = control

    def check_target(self, slug: str, server: str) -> str:
        """The slug free and well formed, the server known: before the
        archive is read. Returns the server the workspace will be on."""
        if not slug_ok(slug):
            raise errors.InvalidArgument("as", SLUG_RULE)
        if any(w.slug == slug for w in self.control.all_workspace_locations()):
            raise errors.AlreadyExists(f"as: a workspace named {slug!r} exists")
        return self.control.choose_server(server)

    def import_archive(
        self,
        directory: Path,
        slug: str,
        server: str = "",
        members_file: Path | None = None,
        on_total: Callable[[str, int], None] = lambda _phase, _n: None,
        on_rows: Progress = lambda _n: None,
    ) -> ImportReport:
        """``on_total`` is told each phase ("reading", then "importing") and
        its rows; ``on_rows`` how many more are done."""
        if not slug_ok(slug):
            raise errors.InvalidArgument("as", SLUG_RULE)
        # Held to the end: a second import of the slug is refused meanwhile,
        # and a killed one's workspace is known as such by the claim it lost.
        with claim(self.dbs, slug) as held:
            removed = remove_unfinished(self.dbs, self.control, slug)
            report = self._import(
                held.finish, directory, slug, server, members_file, on_total, on_rows
            )
        report.removed_unfinished = removed.workspace_id if removed else ""
        return report

    def _import(
        self,
        finish: Callable[[str], None],
        directory: Path,
        slug: str,
        server: str,
        members_file: Path | None,
        on_total: Callable[[str, int], None],
        on_rows: Progress,
    ) -> ImportReport:
        began, now = time.monotonic(), datetime.now(UTC)
        server = self.check_target(slug, server)
        wanted = plan.read_members_file(members_file) if members_file else None
        archive = plan.read_archive(directory, on_total, on_rows)
        steps = {"read": time.monotonic() - began}
        members = plan_members(archive.members, wanted)
        selection = plan.select(archive, {m.source_id for m in members})
        on_total("importing", sum(len(v) for v in selection.records.values()))
        ws = self.control.create_workspace(slug, server, importing=True)
        report = ImportReport(ws.id, ws.slug, ws.server)
        try:
            self.control.update_settings(ws.id, archive.settings.to_json())
            mapping: dict[str, str] = {}
            for m in members:
                made = self.control.create_member(ws.id, m.handle, m.role, importing=True)
                mapping[m.source_id] = made.id
                report.members.append(
                    {"source_id": m.source_id, "id": made.id, "handle": m.handle, "role": m.role}
                )
            url = self.dbs.database_url(ws.server, ws.database_name)
            with psycopg.connect(url) as conn:
                try:
                    report.queued_for_embedding = _write(conn, selection, mapping, on_rows, steps)
                except (psycopg.errors.IntegrityError, psycopg.errors.DataError) as exc:
                    # What the checks before writing do not catch (a duplicate id,
                    # two ends of a pair in the wrong order): the database's
                    # refusal, naming the records and the key.
                    raise _refused(exc) from None
            analyzing = time.monotonic()
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(q.ANALYZE)
            steps["analyze"] = time.monotonic() - analyzing
            if report.queued_for_embedding:
                # Within the undo's reach: an import that says it failed
                # leaves no workspace behind.
                self.control.mark_work(ws.id)
            finish(ws.id)  # whole: served from now on
        except BaseException:
            try:
                self._undo(ws.id, ws.server, ws.database_name)
            except Exception:
                # The import's own error is the one to report.
                log.exception("the failed import's workspace %s could not be undone", ws.slug)
            raise
        report.counts = {k: len(v) for k, v in selection.records.items()}
        report.left_out = selection.left_out
        report.times_ahead = times_ahead(selection.records, now, TIME_FIELDS)
        report.seconds = time.monotonic() - began
        report.steps = steps
        return report

    def _undo(self, workspace_id: str, server: str, database: str) -> None:
        """The workspace made for a failed import goes again, whole."""
        with self.dbs.control_conn() as conn:
            conn.execute(q.DELETE_MEMBERS, (workspace_id,))
            conn.execute(q.DELETE_WORKSPACE, (workspace_id,))
        self.control.forget_workspace(workspace_id)
        self.dbs.forget_pools(server, database)
        with psycopg.connect(self.dbs.database_url(server, "postgres"), autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database))
            )


# What a claim records after its own fields: when it holds, how sure it is,
# when it was stated and retired.
_QUALIFIED = ("valid_from", "valid_until", "confidence", "stated_at", "retired_at")
# Record files whose rows go in field for field, in their COPY statements'
# column order; copied after the memories and entities they refer to, in this
# order.
_AS_THEY_ARE: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "revisions",
        q.COPY_REVISIONS,
        ("memory_id", "revision", "action", "changed_by", "reason", "changed_at"),
    ),
    ("links", q.COPY_LINKS, ("memory_id", "kind", "target_id")),
    ("mentions", q.COPY_MENTIONS, ("memory_id", "entity_id", "mentioned_at")),
    (
        "attribute_claims",
        q.COPY_ATTRIBUTES,
        ("id", "memory_id", "entity_id", "attribute", "value", *_QUALIFIED),
    ),
    (
        "relation_claims",
        q.COPY_RELATIONS,
        ("id", "memory_id", "subject_id", "predicate", "object_id", *_QUALIFIED),
    ),
    (
        "merges",
        q.COPY_MERGES,
        ("id", "kept_id", "merged_id", "decided_by", "decided_at", "undone_by", "undone_at"),
    ),
    ("pairs_apart", q.COPY_PAIRS_APART, ("first_id", "second_id", "decided_by", "decided_at")),
    (
        "dismissed_pairs",
        q.COPY_DISMISSED_PAIRS,
        ("first_id", "second_id", "dismissed_by", "dismissed_at"),
    ),
    ("history", q.COPY_HISTORY, ("id", "owner_member", "chat_id", "role", "text", "occurred_at")),
)
# Their fields a record may lack (one of an older format, or an added
# mention): NULL, as the column was before the field existed.
_OPTIONAL_FIELDS = frozenset({"mentioned_at"})
# Their fields that name a member: mapped to the copy's member ids.
_MEMBER_FIELDS = frozenset(
    {"changed_by", "decided_by", "undone_by", "dismissed_by", "owner_member"}
)


def _refused(exc: psycopg.Error) -> errors.InvalidArgument:
    diag = exc.diag
    what = f"{diag.table_name} records" if diag.table_name else "records"
    detail = f" ({diag.message_detail})" if diag.message_detail else ""
    return errors.InvalidArgument(
        "archive", f"its {what} were refused: {diag.message_primary}{detail}"
    )


def _write(
    conn: psycopg.Connection,
    selection: plan.Selection,
    mapping: dict[str, str],
    on_rows: Progress,
    steps: dict[str, float],
) -> int:
    """Every row in one transaction; returns how many memories wait for a vector."""
    rows = selection.records
    now = datetime.now(UTC).isoformat()

    def member(value: str | None) -> str | None:
        # A member the copy does not have keeps the source's id: attribution
        # to a former member, who can sign in nowhere in the copy.
        return None if value is None else mapping.get(value, value)

    writing = time.monotonic()
    row = conn.execute(q.EMPTY).fetchone()
    if row is None or not row[0]:
        raise errors.FailedPrecondition("the new workspace's database is not empty")
    for statement in q.TRIGGERS_OFF:
        conn.execute(statement)
    _copy(
        conn,
        q.COPY_EPISODES,
        on_rows,
        (
            (
                e["id"],
                e["title"],
                e["started_at"],
                e["ended_at"],
                member(e["audience_member"]),
                e["purposes"],
                member(e["speaker_member"]),
                member(e["created_by"]),
                e["created_at"],
            )
            for e in rows["episodes"]
        ),
    )
    _copy(
        conn,
        q.COPY_ENTITIES,
        on_rows,
        (
            (e["id"], e["name"], e["type"], name_key(e["name"]), e["created_at"])
            for e in rows["entities"]
        ),
    )
    _copy(
        conn,
        q.COPY_PARTICIPANTS,
        lambda _n: None,
        (
            (e["id"], member(p["member_id"]), p["entity_id"])
            for e in rows["episodes"]
            for p in e["participants"]
        ),
    )
    _copy(
        conn,
        q.COPY_MEMORIES,
        on_rows,
        (
            (
                m["id"],
                m["kind"],
                nfc(m["title"]),
                nfc(m["body"]),
                m["confidence"],
                m["origin"],
                m["revision"],
                m["superseded_by"],
                now if m["id"] in selection.hidden else m["forgotten_at"],
                plan.NOT_MAPPED_REASON
                if m["id"] in selection.hidden
                else ("" if m["forgotten_at"] else None),
                member(m["forgotten_by"]),
                member(m["audience_member"]),
                m["purposes"],
                member(m["created_by"]),
                m["created_at"],
                m["updated_at"],
                member(m["audience_member"]),
                m["purposes"],
                False,
                m["episode_id"],
            )
            for m in rows["memories"]
        ),
    )
    _copy(
        conn,
        q.COPY_ALIASES,
        on_rows,
        (
            (
                r["id"],
                r["memory_id"],
                r["entity_id"],
                r["alias"],
                name_key(r["alias"]),
                r["stated_at"],
                r["retired_at"],
            )
            for r in rows["aliases"]
        ),
    )
    for records, statement, fields in _AS_THEY_ARE:
        _copy(
            conn,
            statement,
            on_rows,
            (
                tuple(
                    member(r[f])
                    if f in _MEMBER_FIELDS
                    else (r.get(f) if f in _OPTIONAL_FIELDS else r[f])
                    for f in fields
                )
                for r in rows[records]
            ),
        )
    conn.execute(q.RESTORE_SUPERSEDED_UPDATED_AT)
    vectors = time.monotonic()
    # The vector indexes are built once over every row (far faster than a
    # graph insert per row), as the migrations define them.
    indexes = conn.execute(q.VECTOR_INDEXES).fetchall() if rows["vectors"] else []
    for name, _definition in indexes:
        conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(name)))
    _copy(
        conn,
        q.COPY_VECTORS,
        on_rows,
        (
            (
                v["memory_id"],
                v["model_id"],
                v["input_version"],
                v["created_at"],
                vector_text(v["vector"]),
            )
            for v in rows["vectors"]
        ),
    )
    if indexes:
        conn.execute(q.INDEX_BUILD_MEMORY)
        for _name, definition in indexes:
            conn.execute(sql.SQL(definition))  # as Postgres printed it
    deriving = time.monotonic()
    steps["rows"] = deriving - writing
    steps["vectors"] = deriving - vectors
    conn.execute(q.MARK_SUPERSEDE_RETIREMENTS)
    conn.execute(q.FILL_TERM_STATS)
    conn.execute(q.FILL_CORPUS_STATS)
    _fold_provenance(conn)
    conn.execute(q.VECTOR_PROVENANCE)
    queued = conn.execute(q.ENQUEUE_UNEMBEDDED, (EMBED_INPUT_VERSION,)).rowcount
    for statement in q.TRIGGERS_ON:
        conn.execute(statement)
    conn.commit()
    steps["derived"] = time.monotonic() - deriving
    return max(0, queued)


def _copy(
    conn: psycopg.Connection, statement: str, on_rows: Progress, rows: Iterable[Sequence[Any]]
) -> None:
    count = 0
    with conn.cursor() as cur, cur.copy(statement) as copy:
        for row in rows:
            copy.write_row(row)
            count += 1
            if count % 1000 == 0:
                on_rows(1000)
    on_rows(count % 1000)


def _fold_provenance(conn: psycopg.Connection) -> None:
    """Each memory's provenance folded over its links until nothing changes
    (sources first, so one round usually settles it and one more proves it)."""
    for _ in range(MAX_FOLD_ROUNDS):
        before = conn.execute(q.PROVENANCE_DIGEST).fetchone()
        conn.execute(q.FOLD_PROVENANCE)
        conn.execute(q.MARK_FORGOTTEN_PROVENANCE)
        after = conn.execute(q.PROVENANCE_DIGEST).fetchone()
        if before == after:
            return
    raise errors.FailedPrecondition("links: the archive's links do not settle (a cycle?)")


def nfc(text: str) -> str:
    """A memory's text as every write stores it (workspace migration 0038):
    that migration's trigger is off while the rows go in, and an archive may
    hold another form (one exported before it, or edited by hand)."""
    return text if unicodedata.is_normalized("NFC", text) else unicodedata.normalize("NFC", text)


def vector_text(encoded: str) -> str:
    """pgvector's text form of a vector the archive holds as base64
    big-endian float32s (exactly: every float32 prints back to itself)."""
    floats = np.frombuffer(base64.b64decode(encoded), dtype=">f4").astype(np.float64)
    return "[" + ",".join(map(repr, floats.tolist())) + "]"
