"""Named SQL of the migration from the old store. Batches go in as arrays
(one statement per table per batch), never assembled from the old text."""

# -- control plane -------------------------------------------------------------

WORKSPACE_BY_SLUG_OR_ID = """
SELECT id::text, slug FROM workspace WHERE slug = %(w)s OR id::text = %(w)s
"""
MEMBER_BY_HANDLE_OR_ID = """
SELECT id::text, handle, role FROM member
WHERE workspace_id = %(ws)s AND (handle = %(m)s OR id::text = %(m)s)
"""

# -- workspace database ----------------------------------------------------------

# One migration at a time per workspace database (session-level lock). A
# run waits a little: the lock of a run just killed goes with its session,
# which the server notices shortly after.
LOCK_TIMEOUT = "SELECT set_config('lock_timeout', %s, false)"
LOCK = "SELECT pg_advisory_lock(%s)"
IMPORT_LOCK_KEY = 7_401_010
LOCK_WAIT = "20s"

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
INSERT INTO entity (id, name, created_at, name_key)
SELECT * FROM unnest(%s::uuid[], %s::text[], %s::timestamptz[], %s::text[])
ON CONFLICT (id) DO NOTHING
RETURNING id
"""
INSERT_MENTIONS = """
INSERT INTO mention (memory_id, entity_id)
SELECT * FROM unnest(%s::uuid[], %s::uuid[])
ON CONFLICT DO NOTHING
"""
INSERT_AUDIT = """
INSERT INTO audit_log (member_id, action, memory_id, detail)
SELECT %s, 'migrate', u.id, jsonb_build_object('source', 'memory_item', 'source_id', u.source_id)
FROM unnest(%s::uuid[], %s::text[]) AS u(id, source_id)
"""
