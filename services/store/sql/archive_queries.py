"""Named SQL of workspace archives (services/store/domain/archive_export.py and
archive_import.py; docs/export.md). Both run as the server's admin role on
the workspace database itself, outside row-level security: an archive holds
the whole workspace, and the import decides what the copy may show.

Each export query yields one JSON text per row, the archive's record as
docs/export.md describes it, in a stable order. Times are ISO 8601 in UTC
(the export sets the session's time zone)."""

from __future__ import annotations

# -- export (one REPEATABLE READ, READ ONLY transaction: one snapshot) ---------

EXPORT_SNAPSHOT = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
UTC_SESSION = "SET TIME ZONE 'UTC'"
# The transaction's first query: it takes the snapshot every read below sees.
SCHEMA_LEVEL = "SELECT max(version) FROM schema_migration"
# The members whose removal the snapshot holds (the removal's workspace step,
# services/store/domain/member_removal.py).
REMOVED_IN_SNAPSHOT = "SELECT member_id::text FROM removed_member"
# Of these members, those the snapshot still holds rows of that a removal
# erases or hands over (a current private memory, a private episode with its
# title): their removal's workspace step came after the snapshot.
STILL_HOLDING = """
SELECT m::text FROM unnest(%(members)s::uuid[]) AS m
WHERE EXISTS (SELECT 1 FROM memory
              WHERE audience_member_id = m AND invalidated_at IS NULL)
   OR EXISTS (SELECT 1 FROM episode WHERE audience_member_id = m AND title <> '')
"""
# Rows per record file, for the progress bar; history only of the members
# exported, as EXPORT_HISTORY.
EXPORT_COUNTS = """
SELECT (SELECT count(*) FROM episode), (SELECT count(*) FROM entity),
       (SELECT count(*) FROM memory), (SELECT count(*) FROM memory_revision),
       (SELECT count(*) FROM memory_link), (SELECT count(*) FROM mention),
       (SELECT count(*) FROM entity_alias), (SELECT count(*) FROM attribute_claim),
       (SELECT count(*) FROM relation_claim), (SELECT count(*) FROM entity_merge),
       (SELECT count(*) FROM entity_pair_apart), (SELECT count(*) FROM dismissed_pair),
       (SELECT count(*) FROM history_entry WHERE owner_member_id = ANY(%(members)s::uuid[])),
       (SELECT count(*) FROM memory_embedding)
"""

# Tombstones keep their id, trust fields and times; their text is already
# gone (forget empties it) and their forget reason is not exported.
EXPORT_MEMORIES = """
SELECT json_build_object(
    'id', id, 'kind', kind, 'title', title, 'body', body, 'confidence', confidence,
    'origin', origin, 'revision', revision, 'superseded_by', superseded_by_id,
    'forgotten_at', invalidated_at, 'forgotten_by', invalidated_by,
    'audience_member', audience_member_id, 'purposes', purposes,
    'created_by', created_by, 'created_at', created_at, 'updated_at', updated_at,
    'episode_id', episode_id)::text
FROM memory ORDER BY created_at, id
"""
# A tombstone's revisions keep who and when, not why (a reason may quote the text).
EXPORT_REVISIONS = """
SELECT json_build_object(
    'memory_id', r.memory_id, 'revision', r.revision, 'action', r.action,
    'changed_by', r.changed_by,
    'reason', CASE WHEN m.invalidated_at IS NULL THEN r.reason ELSE '' END,
    'changed_at', r.changed_at)::text
FROM memory_revision r JOIN memory m ON m.id = r.memory_id
ORDER BY r.id
"""
EXPORT_LINKS = """
SELECT json_build_object('memory_id', memory_id, 'kind', kind, 'target_id', target_id)::text
FROM memory_link ORDER BY memory_id, kind, target_id
"""
EXPORT_ENTITIES = """
SELECT json_build_object('id', id, 'name', name, 'type', type, 'created_at', created_at)::text
FROM entity ORDER BY created_at, id
"""
# `mentioned_at` only where set (a correction's mention, migration 0046): a
# mention as old as its memory is the record format 1 had.
EXPORT_MENTIONS = """
SELECT json_strip_nulls(json_build_object(
    'memory_id', memory_id, 'entity_id', entity_id, 'mentioned_at', mentioned_at))::text
FROM mention ORDER BY memory_id, entity_id
"""
EXPORT_ALIASES = """
SELECT json_build_object(
    'id', id, 'memory_id', memory_id, 'entity_id', entity_id, 'alias', alias,
    'stated_at', stated_at, 'retired_at', retired_at)::text
FROM entity_alias ORDER BY stated_at, id
"""
# What a claim (attribute_claim, relation_claim) records after its own fields:
# when it holds, how sure it is, when it was stated and retired.
_QUALIFIED_JSON = """'valid_from', valid_from, 'valid_until', valid_until,
    'confidence', confidence, 'stated_at', stated_at, 'retired_at', retired_at"""
EXPORT_ATTRIBUTES = f"""
SELECT json_build_object(
    'id', id, 'memory_id', memory_id, 'entity_id', entity_id, 'attribute', attribute,
    'value', value, {_QUALIFIED_JSON})::text
FROM attribute_claim ORDER BY stated_at, id
"""
EXPORT_RELATIONS = f"""
SELECT json_build_object(
    'id', id, 'memory_id', memory_id, 'subject_id', subject_id, 'predicate', predicate,
    'object_id', object_id, {_QUALIFIED_JSON})::text
FROM relation_claim ORDER BY stated_at, id
"""
EXPORT_EPISODES = """
SELECT json_build_object(
    'id', e.id, 'title', e.title, 'started_at', e.started_at, 'ended_at', e.ended_at,
    'audience_member', e.audience_member_id, 'purposes', e.purposes,
    'speaker_member', e.speaker_member_id, 'created_by', e.created_by,
    'created_at', e.created_at,
    'participants', coalesce((
        SELECT json_agg(json_build_object('member_id', p.member_id, 'entity_id', p.entity_id)
                        ORDER BY p.member_id, p.entity_id)
        FROM episode_participant p WHERE p.episode_id = e.id), '[]'::json))::text
FROM episode e ORDER BY e.created_at, e.id
"""
EXPORT_MERGES = """
SELECT json_build_object(
    'id', id, 'kept_id', kept_id, 'merged_id', merged_id, 'decided_by', decided_by,
    'decided_at', decided_at, 'undone_by', undone_by, 'undone_at', undone_at)::text
FROM entity_merge ORDER BY decided_at, id
"""
EXPORT_PAIRS_APART = """
SELECT json_build_object(
    'first_id', first_id, 'second_id', second_id, 'decided_by', decided_by,
    'decided_at', decided_at)::text
FROM entity_pair_apart ORDER BY first_id, second_id
"""
EXPORT_DISMISSED_PAIRS = """
SELECT json_build_object(
    'first_id', first_id, 'second_id', second_id, 'dismissed_by', dismissed_by,
    'dismissed_at', dismissed_at)::text
FROM dismissed_pair ORDER BY first_id, second_id
"""
# Owner-only evidence: a removed member's stays behind, with everything else
# no member of the archive may see. A chat id or role past its limit (kept
# before there was one) is written as archive_history.history_name writes it.
EXPORT_HISTORY = """
SELECT json_build_object(
    'id', id, 'owner_member', owner_member_id,
    'chat_id', CASE WHEN char_length(chat_id) <= %(chat_id_max)s THEN chat_id
        ELSE left(chat_id, %(chat_id_max)s - %(digest_hex)s - 1) || '…'
            || left(encode(sha256(convert_to(chat_id, 'UTF8')), 'hex'), %(digest_hex)s) END,
    'role', CASE WHEN char_length(role) <= %(role_max)s THEN role
        ELSE left(role, %(role_max)s - %(digest_hex)s - 1) || '…'
            || left(encode(sha256(convert_to(role, 'UTF8')), 'hex'), %(digest_hex)s) END,
    'text', text, 'occurred_at', occurred_at)::text
FROM history_entry WHERE owner_member_id = ANY(%(members)s::uuid[])
ORDER BY occurred_at, id
"""
# pgvector's binary form is a 4-byte header (dimensions, unused) and then
# big-endian float32s: the vector travels as those floats, base64.
# In the order the source's table holds them (ctid): the order its vector
# indexes were built in (a graph insert per vector as it was written, or a
# REINDEX reading the table). The import writes them in the archive's order
# and builds the copy's indexes over them in it. An HNSW graph depends on the
# order its vectors arrive in: built in memory_id order, the copy's dense arm
# returned another 100 candidates than the original's for 96 queries of 200
# at 10,500 memories, where rebuilding the original's own index changes
# 26-45 of them (docs/export.md, Benchmark).
EXPORT_VECTORS = """
SELECT json_build_object(
    'memory_id', memory_id, 'model_id', model_id, 'input_version', input_version,
    'created_at', created_at,
    'vector', translate(encode(substring(vector_send(embedding) FROM 5), 'base64'),
                        E'\\n', ''))::text
FROM memory_embedding ORDER BY ctid
"""

# -- import (one transaction on the new, empty database) ---------------------

# The row triggers that maintain derived state (statistics, provenance,
# revisions, the embedding queue) are off while the rows go in as they were;
# that state is then computed once, below, as the migrations compute it for
# existing rows. Constraints (foreign keys included) stay on.
TRIGGERS_OFF = (
    "ALTER TABLE memory DISABLE TRIGGER USER",
    "ALTER TABLE memory_link DISABLE TRIGGER USER",
)
TRIGGERS_ON = (
    "ALTER TABLE memory ENABLE TRIGGER USER",
    "ALTER TABLE memory_link ENABLE TRIGGER USER",
)
EMPTY = "SELECT NOT EXISTS (SELECT 1 FROM memory) AND NOT EXISTS (SELECT 1 FROM entity)"

COPY_EPISODES = """
COPY episode (id, title, started_at, ended_at, audience_member_id, purposes,
              speaker_member_id, created_by, created_at) FROM STDIN
"""
COPY_ENTITIES = "COPY entity (id, name, type, name_key, created_at) FROM STDIN"
COPY_PARTICIPANTS = "COPY episode_participant (episode_id, member_id, entity_id) FROM STDIN"
COPY_MEMORIES = """
COPY memory (id, kind, title, body, confidence, origin, revision, superseded_by_id,
             invalidated_at, invalidation_reason, invalidated_by, audience_member_id, purposes,
             created_by, created_at, updated_at, provenance_audience, provenance_purposes,
             provenance_forgotten, episode_id) FROM STDIN
"""
COPY_REVISIONS = """
COPY memory_revision (memory_id, revision, action, changed_by, reason, changed_at) FROM STDIN
"""
COPY_LINKS = "COPY memory_link (memory_id, kind, target_id) FROM STDIN"
COPY_MENTIONS = "COPY mention (memory_id, entity_id, mentioned_at) FROM STDIN"
COPY_ALIASES = """
COPY entity_alias (id, memory_id, entity_id, alias, alias_key, stated_at, retired_at) FROM STDIN
"""
# A claim's qualifiers and times, as columns (as _QUALIFIED_JSON above).
_QUALIFIED = "valid_from, valid_until, confidence, stated_at, retired_at"
COPY_ATTRIBUTES = f"""
COPY attribute_claim (id, memory_id, entity_id, attribute, value, {_QUALIFIED}) FROM STDIN
"""
COPY_RELATIONS = f"""
COPY relation_claim (id, memory_id, subject_id, predicate, object_id, {_QUALIFIED}) FROM STDIN
"""
COPY_MERGES = """
COPY entity_merge (id, kept_id, merged_id, decided_by, decided_at, undone_by, undone_at)
FROM STDIN
"""
COPY_PAIRS_APART = """
COPY entity_pair_apart (first_id, second_id, decided_by, decided_at) FROM STDIN
"""
COPY_DISMISSED_PAIRS = """
COPY dismissed_pair (first_id, second_id, dismissed_by, dismissed_at) FROM STDIN
"""
# History keeps its statement trigger on: it keeps the per-owner statistics.
COPY_HISTORY = """
COPY history_entry (id, owner_member_id, chat_id, role, text, occurred_at) FROM STDIN
"""
# The vector trigger stays on too: it copies the memory's trust fields and
# successor onto the vector, and drops the vector of a forgotten memory.
COPY_VECTORS = """
COPY memory_embedding (memory_id, model_id, input_version, created_at, embedding) FROM STDIN
"""

# The approximate (HNSW) indexes of the vectors, with their definitions:
# dropped before the vectors are copied and built again after, in one pass.
VECTOR_INDEXES = """
SELECT c.relname, pg_get_indexdef(i.indexrelid)
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_am a ON a.oid = c.relam
WHERE i.indrelid = 'memory_embedding'::regclass AND a.amname = 'hnsw'
ORDER BY c.relname
"""
INDEX_BUILD_MEMORY = "SET LOCAL maintenance_work_mem = '256MB'"

# Which statements their memory's supersede retired (they stay current for a
# caller who may see none of its successors): the archive holds when each was
# retired and the supersede revisions, from which migration 0068's function
# tells them exactly, as it did for the rows before it.
MARK_SUPERSEDE_RETIREMENTS = "SELECT mark_supersede_retirements()"
# A memory an earlier release's supersede renewed (updated_at the supersede's
# time) gets back its last create or correct's time, as migration 0074 gave
# the rows before it. Run before the vectors are copied: the memory's
# triggers are off, and a vector copies its memory's time when written.
RESTORE_SUPERSEDED_UPDATED_AT = "SELECT restore_superseded_updated_at()"
# The lexical arm's statistics, as migration 0006 computes them for existing rows.
FILL_TERM_STATS = """
INSERT INTO term_stat (lexeme, purpose, audience, shard, docs)
    SELECT l, p, stat_audience(m.audience_member_id), stat_shard(m.id), count(*)
    FROM memory m, unnest(tsvector_to_array(m.search)) AS l, unnest(m.purposes) AS p
    GROUP BY 1, 2, 3, 4
"""
FILL_CORPUS_STATS = """
INSERT INTO corpus_stat (purpose, audience, shard, docs)
    SELECT p, stat_audience(m.audience_member_id), stat_shard(m.id), count(*)
    FROM memory m, unnest(m.purposes) AS p
    WHERE m.invalidated_at IS NULL
    GROUP BY 1, 2, 3
"""
# Provenance (the permission walk's fold over links), to a fixed point, as
# migration 0006 computes it: sources before the memories derived from them.
FOLD_PROVENANCE = """
SELECT count(memory_provenance_fold(s.memory_id))
FROM (SELECT DISTINCT l.memory_id, m.created_at
      FROM memory_link l JOIN memory m ON m.id = l.memory_id
      ORDER BY m.created_at, l.memory_id) s
"""
MARK_FORGOTTEN_PROVENANCE = """
UPDATE memory m SET provenance_forgotten = true
WHERE NOT m.provenance_forgotten AND EXISTS (
    SELECT 1 FROM memory_link l JOIN memory t ON t.id = l.target_id
    WHERE l.memory_id = m.id AND (t.invalidated_at IS NOT NULL OR t.provenance_forgotten))
"""
PROVENANCE_DIGEST = """
SELECT md5(string_agg(id::text || coalesce(provenance_audience::text, '')
                      || provenance_purposes::text || provenance_forgotten::text,
                      ',' ORDER BY id))
FROM memory
"""
# The vectors' copies of the provenance just folded (migration 0045): the
# memory triggers that keep them equal are off during the import.
VECTOR_PROVENANCE = """
UPDATE memory_embedding e
SET provenance_audience = m.provenance_audience, provenance_purposes = m.provenance_purposes,
    provenance_forgotten = m.provenance_forgotten
FROM memory m
WHERE m.id = e.memory_id
  AND (e.provenance_audience, e.provenance_purposes, e.provenance_forgotten)
      IS DISTINCT FROM (m.provenance_audience, m.provenance_purposes, m.provenance_forgotten)
"""
# The embedding queue: every memory not forgotten (superseded ones too,
# migration 0062) without a vector of the current input version (a vector of
# another model waits for `recallatron rebuild`).
ENQUEUE_UNEMBEDDED = """
INSERT INTO embedding_job (memory_id, text_revision)
SELECT m.id, m.revision FROM memory m
WHERE m.invalidated_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM memory_embedding e
                  WHERE e.memory_id = m.id AND e.input_version = %s)
"""
ANALYZE = "ANALYZE"

# -- control plane: undoing an import that failed after its workspace was made --
DELETE_MEMBERS = "DELETE FROM member WHERE workspace_id = %s"
DELETE_WORKSPACE = "DELETE FROM workspace WHERE id = %s"
# Every member of the workspace, removed ones too: which of them the archive
# holds is decided by the workspace's snapshot (archive_export.snapshot_members).
MEMBERS_OF = """
SELECT id::text, handle, role, removed_at IS NOT NULL FROM member
WHERE workspace_id = %s
ORDER BY created_at, id
"""
