"""Named SQL of moving a workspace between servers (services/store/domain/moving.py).
Identifiers (tables, the publication, subscription and slot) are composed
with psycopg.sql from names this code makes, never from request text."""

from services.store.sql.queries import DELETION_LOCK_NAMESPACE

# -- control plane --
# Held by the mover's own session for the whole move (namespace 7401), and
# by a deletion of the workspace for its whole course: the two exclude each
# other (services/store/domain/deletion.py).
MOVE_LOCK_NAMESPACE = 7401
TRY_MOVE_LOCK = f"SELECT pg_try_advisory_lock({MOVE_LOCK_NAMESPACE}, hashtext(%s::text))"
# Whether a deletion of the workspace holds its lock (queries.DELETION_LOCK):
# only to say why the move lock was not free. The share is the statement's
# (autocommit), so it is gone at once.
DELETION_UNDER_WAY = (
    f"SELECT NOT pg_try_advisory_xact_lock_shared({DELETION_LOCK_NAMESPACE}, hashtext(%s::text))"
)
MOVE_OF = "SELECT source, target, state FROM workspace_move WHERE workspace_id = %s"
INSERT_MOVE = """
INSERT INTO workspace_move (workspace_id, source, target, state) VALUES (%s, %s, %s, 'copying')
"""
SET_MOVE_STATE = """
UPDATE workspace_move SET state = %s, updated_at = now() WHERE workspace_id = %s
"""
DELETE_MOVE = "DELETE FROM workspace_move WHERE workspace_id = %s"
SWITCH_WORKSPACE = """
UPDATE workspace SET server = %s, updated_at = now() WHERE id = %s AND server = %s
"""
WORKSPACE_SERVER = "SELECT server FROM workspace WHERE id = %s"
# Copies a move kept (migrations/control/0012_kept_copies.sql;
# services/store/domain/kept_copies.py): recorded before the rename, so a
# copy is never on a server unrecorded (a record of a rename that did not
# happen drops nothing).
RECORD_KEPT_COPY = """
INSERT INTO kept_copy (server, database_name, workspace_id) VALUES (%s, %s, %s)
ON CONFLICT (server, database_name) DO NOTHING
"""
FORGET_KEPT_COPY = "DELETE FROM kept_copy WHERE server = %s AND database_name = %s"
# At the switch: a copy left on the target by an earlier rolled-back move was
# replaced by the workspace's own database there, no longer a copy.
FORGET_KEPT_COPY_SERVING = """
DELETE FROM kept_copy k USING workspace w
WHERE w.id = %s AND k.server = w.server AND k.database_name = w.database_name
"""
# Each copy with its workspace's slug ('' once the workspace was deleted).
KEPT_COPIES = """
SELECT k.server, k.database_name, k.workspace_id::text, k.kept_at, coalesce(w.slug, '')
FROM kept_copy k LEFT JOIN workspace w ON w.id = k.workspace_id
WHERE (%(workspace_id)s::uuid IS NULL OR k.workspace_id = %(workspace_id)s::uuid)
  AND (NOT %(deleted_only)s OR w.id IS NULL)
  -- Never a database a workspace is served from.
  AND NOT EXISTS (SELECT 1 FROM workspace s
                  WHERE s.server = k.server AND s.database_name = k.database_name)
ORDER BY k.kept_at, k.server, k.database_name
"""
# Delivered at the switch's commit: replicas drop their cached record
# (services/store/infrastructure/follow.py).
NOTIFY_MOVED = "SELECT pg_notify('recallatron_workspace_moved', %s)"

# -- either server --
DATABASE_EXISTS = "SELECT 1 FROM pg_database WHERE datname = %s"
# The workspace's tables as the publication carries them: every table of
# the schema but the migration ledger (each side keeps its own).
PUBLISHED_TABLES = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND c.relname <> 'schema_migration'
  AND NOT c.relispartition
ORDER BY c.relname
"""
# Tables without a primary key need the whole row as replica identity, or
# the source would refuse their updates once published.
NO_REPLICA_IDENTITY = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relreplident = 'd'
  AND NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary)
"""
CREATE_MARKER = """
CREATE TABLE IF NOT EXISTS recallatron_move_marker (id int PRIMARY KEY, token uuid NOT NULL)
"""
DROP_MARKER = "DROP TABLE IF EXISTS recallatron_move_marker"
WRITE_MARKER = """
INSERT INTO recallatron_move_marker (id, token) VALUES (1, %s)
ON CONFLICT (id) DO UPDATE SET token = excluded.token
"""
READ_MARKER = "SELECT token::text FROM recallatron_move_marker WHERE id = 1"
SEQUENCES = """
SELECT quote_ident(schemaname) || '.' || quote_ident(sequencename), last_value FROM pg_sequences
WHERE schemaname = 'public' AND last_value IS NOT NULL
"""
SET_SEQUENCE = "SELECT setval(%s::regclass, %s, true)"

# -- source --
PUBLICATION_EXISTS = "SELECT 1 FROM pg_publication WHERE pubname = %s"
SLOT_PID = "SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s"
DROP_SLOT = "SELECT pg_drop_replication_slot(%s)"
TERMINATE = "SELECT pg_terminate_backend(%s)"
# Every session on the database but the caller's own (the fence's).
TERMINATE_OTHERS = """
SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE datname = %s AND pid <> ALL(%s::int[])
"""
OTHERS_CONNECTED = """
SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> ALL(%s::int[])
"""
BACKEND_PID = "SELECT pg_backend_pid()"
CURRENT_LSN = "SELECT pg_current_wal_lsn()::text"

# -- target --
AS_REPLICA = "SET session_replication_role = replica"
SUBSCRIPTION_EXISTS = "SELECT 1 FROM pg_subscription WHERE subname = %s"
# The subscriptions of the connected database (a copy a rolled-back move left).
SUBSCRIPTIONS_HERE = """
SELECT s.subname FROM pg_subscription s JOIN pg_database d ON d.oid = s.subdbid
WHERE d.datname = current_database()
"""
# A server's identity: equal for two names or URLs of one Postgres server.
SYSTEM_ID = "SELECT system_identifier FROM pg_control_system()"

# -- the initial copy, watched (services/store/domain/move_copy.py) --
# On the source: replication slots and WAL senders still free.
REPLICATION_ROOM = """
SELECT current_setting('max_replication_slots')::int - (SELECT count(*) FROM pg_replication_slots),
       current_setting('max_wal_senders')::int - (SELECT count(*) FROM pg_stat_replication)
"""
# On the target: how far the copy is (each table's sync state, and what the
# COPY of a table in progress has taken in), the tables not ready, and all.
COPY_PROGRESS = """
SELECT (SELECT coalesce(string_agg(srrelid::text || srsubstate::text
                                   || coalesce(srsublsn::text, ''), ',' ORDER BY srrelid), '')
        FROM pg_subscription_rel),
       (SELECT coalesce(sum(bytes_processed + tuples_processed), 0) FROM pg_stat_progress_copy
        WHERE datname = current_database()),
       (SELECT count(*) FILTER (WHERE srsubstate <> 'r') FROM pg_subscription_rel),
       (SELECT count(*) FROM pg_subscription_rel)
"""
# The subscription's failed table syncs and apply starts (PostgreSQL 15 on).
SYNC_ERRORS = """
SELECT sync_error_count + apply_error_count FROM pg_stat_subscription_stats WHERE subname = %s
"""
