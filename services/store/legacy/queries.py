"""Named SQL of the migration from the old store. Batches go in as arrays
(one statement per table per batch), never assembled from the old text."""

# -- control plane -------------------------------------------------------------

# A removed member is no member (their history would be read by nobody). A
# handle in any case (one a workspace, docs/api.md); the member named exactly
# first, so that of members an older database holds in two cases
# (migrations/control/0015) the one spelled so is found.
MEMBER_BY_HANDLE_OR_ID = """
SELECT id::text, handle, role, id::text = %(m)s OR handle = %(m)s FROM member
WHERE workspace_id = %(ws)s AND (lower(handle) = lower(%(m)s) OR id::text = %(m)s)
  AND removed_at IS NULL
ORDER BY id::text = %(m)s OR handle = %(m)s DESC, created_at, id
"""

# -- workspace database ----------------------------------------------------------

# The columns the database names when it refuses a row for a removed member
# (the pool's InvalidArgument field): a memory's audience or author
# (0067_baseline/04_memory.sql), a history entry's owner (the same). The owner
# was checked when the run began; a removal may come while it goes on.
REMOVED_MEMBER_COLUMNS = ("audience.member_id", "created_by", "owner_member_id")

# One migration at a time per workspace database (session-level lock). A
# run waits a little: the lock of a run just killed goes with its session,
# which the server notices shortly after.
LOCK_TIMEOUT = "SELECT set_config('lock_timeout', %s, false)"
LOCK = "SELECT pg_advisory_lock(%s)"
IMPORT_LOCK_KEY = 7_401_010
LOCK_WAIT = "20s"

# Which of these imported memories are superseded: a record imported before
# its supersede patch was appended is not (reruns never revise an import).
SUPERSEDED_AMONG = """
SELECT id::text FROM memory WHERE id = ANY(%s::uuid[]) AND superseded_by_id IS NOT NULL
"""
LEDGER_PRESENT = """
SELECT source_id FROM legacy_import
WHERE owner_member_id = %s AND source = %s AND source_id = ANY(%s::text[])
"""
INSERT_LEDGER = """
INSERT INTO legacy_import (owner_member_id, source, source_id, target_id)
SELECT %s, %s, u.source_id, u.target_id
FROM unnest(%s::text[], %s::uuid[]) AS u(source_id, target_id)
ON CONFLICT DO NOTHING
"""

# Turns as an earlier run imported them, to tell a rerun from another store.
HISTORY_AS_IMPORTED = """
SELECT id::text, chat_id, role, text, occurred_at FROM history_entry WHERE id = ANY(%s::uuid[])
"""
INSERT_HISTORY = """
INSERT INTO history_entry (id, owner_member_id, chat_id, role, text, occurred_at)
SELECT u.id, %s, u.chat_id, u.role, u.text, u.occurred_at
FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::text[], %s::timestamptz[])
     AS u(id, chat_id, role, text, occurred_at)
ON CONFLICT (id) DO NOTHING
RETURNING id
"""

# Origin `migrated` and the old times are what the app role's path cannot
# write; this runs as the database owner, the caller still set to the owner.
INSERT_MEMORIES = """
INSERT INTO memory (id, kind, title, body, confidence, origin, audience_member_id, purposes,
                    created_by, created_at, updated_at)
SELECT u.id, u.kind::memory_kind, u.title, u.body, u.confidence, 'migrated', u.audience,
       '{assist}'::purpose[], %s, u.created_at, u.updated_at
FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::text[], %s::float8[], %s::uuid[],
            %s::timestamptz[], %s::timestamptz[])
     AS u(id, kind, title, body, confidence, audience, created_at, updated_at)
ON CONFLICT (id) DO NOTHING
RETURNING id
"""
INSERT_ENTITIES = """
INSERT INTO entity (id, name, type, created_at, name_key)
SELECT * FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::timestamptz[], %s::text[])
ON CONFLICT (id) DO NOTHING
RETURNING id, type IS NOT NULL
"""
INSERT_MENTIONS = """
INSERT INTO mention (memory_id, entity_id)
SELECT * FROM unnest(%s::uuid[], %s::uuid[])
ON CONFLICT DO NOTHING
"""
INSERT_AUDIT = """
INSERT INTO audit_log (member_id, action, memory_id, detail)
SELECT %s, 'migrate', u.id, jsonb_build_object('source', %s::text, 'source_id', u.source_id)
FROM unnest(%s::uuid[], %s::text[]) AS u(id, source_id)
"""


def _insert_claims(table: str, own: str, own_types: str) -> str:
    """Into a claim table: the id and memory, its own columns (``own``, of
    ``own_types``), then its valid time, confidence and when it was stated
    and retired. Only a superseded record's claims are retired, by its
    supersede: current still for a caller who may see none of its
    successors (workspace migration 0068)."""
    return f"""
INSERT INTO {table} (id, memory_id, {own}, valid_from, valid_until, confidence,
                     stated_at, retired_at, retired_by_supersede)
SELECT u.*, u.retired_at IS NOT NULL
FROM unnest(%s::uuid[], %s::uuid[], {own_types},
            %s::timestamptz[], %s::timestamptz[], %s::float8[], %s::timestamptz[],
            %s::timestamptz[])
     AS u (id, memory_id, {own}, valid_from, valid_until, confidence, stated_at, retired_at)
ON CONFLICT (id) DO NOTHING
RETURNING id
"""


# A record memory's claims, stated when the record was written and, for a
# superseded record, retired when it was superseded: the old times, not the
# import's, so that every run writes the same rows.
INSERT_ATTRIBUTE_CLAIMS = _insert_claims(
    "attribute_claim", "entity_id, attribute, value", "%s::uuid[], %s::text[], %s::text[]"
)
INSERT_RELATION_CLAIMS = _insert_claims(
    "relation_claim", "subject_id, predicate, object_id", "%s::uuid[], %s::text[], %s::uuid[]"
)
# Supersession as the supersede tool leaves it: the pointer, the next
# revision (the update trigger drops the memory's embedding job), and a
# revision row at the old store's time. Only memories this transaction wrote.
SUPERSEDE = """
UPDATE memory m SET superseded_by_id = u.by_id, revision = m.revision + 1
FROM unnest(%s::uuid[], %s::uuid[]) AS u(id, by_id)
WHERE m.id = u.id AND m.superseded_by_id IS NULL AND created_in_this_transaction(m.id)
RETURNING m.id, m.revision
"""
INSERT_SUPERSEDE_REVISIONS = """
INSERT INTO memory_revision (memory_id, revision, action, changed_by, reason, changed_at)
SELECT u.id, u.revision, 'supersede', %s, %s, u.at
FROM unnest(%s::uuid[], %s::bigint[], %s::timestamptz[]) AS u(id, revision, at)
"""
# The whole database, once an import has committed.
ANALYZE = "ANALYZE"
