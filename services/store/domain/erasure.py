"""Forget, completely (design §8.6): what forget cannot do inside a
transaction. A client's request id is kept only as a hash, so a descriptive
one ("remember-bobs-diagnosis") never reaches a page; and `scrub` rewrites
what still holds a forgotten memory's text after forget has committed: the
dead tuples of the workspace's tables and indexes, the planner statistics
sampled from them, and the WAL that logged them (docs/reliability.md,
"Forget and what keeps a copy")."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql

from recallatron import errors
from services.store.domain.control import ControlPlane
from services.store.infrastructure.db import Databases

# The stored form of a request id: sha256 of "<member id>:<request id>",
# hex. The member id salts it (one member's ids cannot be matched against
# another's); migration 0010 rewrote the rows made before it the same way.
REQUEST_KEY_VERSION = "sha256"


def fingerprint(tool: str, *parts: Any) -> bytes:
    """What a write asked for, as a hash: the same for the same request in any
    process (sets sorted, records by field, times in UTC, ids in canonical
    form), so a retry that repeats its request replays it and one that does
    not is refused. ``parts`` given positionally are taken as they are (a
    caller passes ids there already checked, so canonical)."""
    text = json.dumps([tool, *(_canonical(p) for p in parts)], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).digest()


# The fields of a request's records that hold ids (an entity's, an episode's,
# a memory's, a member's): the API takes an id in any spelling of a UUID, so
# a retry may spell it otherwise. Only these: text that reads like a UUID (a
# title, a claim's value) is compared as written.
_ID_FIELD = re.compile(r".*_ids?|audience")


def _canonical(value: Any, is_id: bool = False) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _canonical(getattr(value, f.name), bool(_ID_FIELD.fullmatch(f.name)))
            for f in dataclasses.fields(value)
        }
    if isinstance(value, (set, frozenset)):
        return sorted((_canonical(v, is_id) for v in value), key=repr)
    if isinstance(value, (list, tuple)):
        return [_canonical(v, is_id) for v in value]
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if is_id and isinstance(value, str):
        return _id_form(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    # A sentinel such as "not given": its type names it.
    return type(value).__name__


def _id_form(value: str) -> str:
    """An id in its canonical form, as the tools check it (validation.uuid_str);
    a value that is no UUID, which its tool refuses, as it is."""
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return value


def request_key(member_id: str, request_id: str) -> str:
    """The key a request id is kept under: one that is a UUID in its canonical
    form, so a retry may spell it otherwise, as any id."""
    return _hashed(member_id, _id_form(request_id))


def request_keys(member_id: str, request_id: str) -> tuple[str, ...]:
    """The keys a request id may have been kept under: :func:`request_key`,
    then the id as spelled, which a request made before UUIDs were read in
    canonical form was kept under (a retry of it with the same spelling still
    replays)."""
    keys = (request_key(member_id, request_id), _hashed(member_id, request_id))
    return keys[:1] if keys[0] == keys[1] else keys


def _hashed(member_id: str, request_id: str) -> str:
    # Lower case: Postgres writes a uuid so (migration 0010 hashes uuid::text).
    return hashlib.sha256(f"{member_id.lower()}:{request_id}".encode()).hexdigest()


# -- scrub -----------------------------------------------------------------------

# Every table of the workspace's own schema: forget touches several (memory,
# its GIN index, term_stat, the embedding tables, request_key, audit_log), and
# a table forget does not touch costs only its rewrite.
WORKSPACE_TABLES = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'm') ORDER BY c.relname
"""
# Copies a table's live rows into new files (indexes rebuilt, statistics
# sampled afresh); the table's name comes from WORKSPACE_TABLES.
REWRITE_TABLE = "VACUUM (FULL, ANALYZE) {}"
# ANALYZE samples column values (most common values, histogram bounds) into
# pg_statistic; the rows it replaces are dead tuples of that catalog.
STATISTICS_CATALOG = "VACUUM FULL pg_catalog.pg_statistic"
WAL_FILES = "SELECT count(*) FROM pg_ls_waldir()"
# Segments kept beyond what recovery needs (wal_keep_size) stay on disk, so
# the cycle must reach past them too.
WAL_KEPT_SEGMENTS = """
SELECT ceil(pg_size_bytes(current_setting('wal_keep_size'))::numeric
            / pg_size_bytes(current_setting('wal_segment_size')))::int
"""
# A rewrite waits this long for its table's lock, then steps back: while its
# ACCESS EXCLUSIVE request waits (behind a transaction left open on the
# table), every call on the table queues behind it, so the workspace would
# stop for as long as that transaction lasts.
LOCK_TIMEOUT = "SET lock_timeout = '1s'"
# Between two tries, the calls that queued behind the request go through.
LOCK_RETRY_PAUSE_SECONDS = 1.0
# A table held longer than this ends the scrub (what it rewrote stays so).
LOCK_GIVE_UP_SECONDS = 600.0
SWITCH_WAL = "SELECT pg_switch_wal()"
CHECKPOINT = "CHECKPOINT"
# What keeps old WAL out of this command's reach.
ARCHIVING = "SELECT current_setting('archive_mode')"
SLOTS = "SELECT slot_name FROM pg_replication_slots ORDER BY 1"


@dataclass
class ScrubReport:
    tables: list[str] = field(default_factory=list)
    wal_cycles: int = 0
    warnings: list[str] = field(default_factory=list)


def scrub(
    dbs: Databases,
    control: ControlPlane,
    workspace_id: str,
    log: Callable[[str], None] = lambda _msg: None,
    give_up_after: float = LOCK_GIVE_UP_SECONDS,
) -> ScrubReport:
    """Rewrites every table of one workspace's database (VACUUM FULL, which
    copies only live rows into new files and drops the old ones, indexes
    rebuilt), refreshes and compacts the statistics sampled from them, then
    cycles the WAL: each cycle (a segment switch and a checkpoint) lets
    Postgres remove or recycle the segments before it, and a recycled segment
    is overwritten by the next switch, so after one cycle more than the
    segments on disk no file of pg_wal holds WAL from before the rewrite.

    Needs the server's admin role (superuser, as `recallatron up` has). Takes
    each table's ACCESS EXCLUSIVE lock while it is rewritten: calls on that
    workspace wait for it (other workspaces do not), so run it in a quiet
    moment or a maintenance window (docs/reliability.md). A table another
    transaction holds is waited for in turns of a second that do not hold the
    calls up meanwhile; held ``give_up_after`` seconds, it ends the scrub."""
    ws = control.workspace(workspace_id)
    url = dbs.database_url(ws.server, ws.database_name)
    report = ScrubReport()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(LOCK_TIMEOUT)
        tables = [str(r[0]) for r in conn.execute(WORKSPACE_TABLES).fetchall()]
        for table in tables:
            statement = sql.SQL(REWRITE_TABLE).format(sql.Identifier("public", table))
            _when_free(conn, statement, table, log, give_up_after)
            report.tables.append(table)
            log(f"rewrote {table}")
        _when_free(conn, sql.SQL(STATISTICS_CATALOG), "pg_statistic", log, give_up_after)
        log("rewrote pg_statistic")
        _cycle_wal(conn, report, log)
    return report


def _when_free(
    conn: psycopg.Connection,
    statement: sql.SQL | sql.Composed,
    table: str,
    log: Callable[[str], None],
    give_up_after: float,
) -> None:
    """Runs ``statement`` (a rewrite of ``table``) once it gets the table's
    lock: tried for LOCK_TIMEOUT at a time, with pauses between that let the
    workspace's calls through; refused (Unavailable) once the table was held
    ``give_up_after`` seconds."""
    deadline = time.monotonic() + give_up_after
    said = False
    while True:
        try:
            conn.execute(statement)
            return
        except psycopg.errors.LockNotAvailable:
            if time.monotonic() >= deadline:
                raise errors.Unavailable(
                    f"scrub: {table} was held by another transaction for over "
                    f"{give_up_after:.0f} s (see pg_stat_activity); the tables rewritten "
                    "before it stay so; run it again"
                ) from None
            if not said:
                log(f"waiting for {table}: another transaction holds it")
                said = True
            time.sleep(LOCK_RETRY_PAUSE_SECONDS)


def scrub_server(
    dbs: Databases, server: str, log: Callable[[str], None] = lambda _msg: None
) -> ScrubReport:
    """What a deleted workspace leaves on its server (services/store/domain/
    deletion.py): its database's files went with the drop, but the WAL still
    holds what was written to it. Cycles the server's WAL as :func:`scrub`
    does, so that no file of pg_wal holds WAL from before the drop; the same
    warnings (archive, replication slots) apply."""
    report = ScrubReport()
    with psycopg.connect(dbs.server_url(server), autocommit=True) as conn:
        _cycle_wal(conn, report, log)
    return report


def _cycle_wal(conn: psycopg.Connection, report: ScrubReport, log: Callable[[str], None]) -> None:
    row = conn.execute(WAL_FILES).fetchone()
    kept = conn.execute(WAL_KEPT_SEGMENTS).fetchone()
    files = int(row[0]) if row else 0
    cycles = max(files, int(kept[0]) if kept and kept[0] else 0) + 2
    for _ in range(cycles):
        conn.execute(SWITCH_WAL)
        conn.execute(CHECKPOINT)
    report.wal_cycles = cycles
    log(f"cycled the WAL {cycles} times")
    archiving = conn.execute(ARCHIVING).fetchone()
    if archiving and archiving[0] != "off":
        report.warnings.append(
            "archive_mode is on: archived WAL segments keep the erased text until the "
            "archive's retention removes them"
        )
    slots = [str(r[0]) for r in conn.execute(SLOTS).fetchall()]
    if slots:
        report.warnings.append(
            "replication slots hold WAL back and replicas keep their own copy: "
            + ", ".join(slots)
            + " (scrub each replica, or rebuild it from a fresh base backup)"
        )
