"""Named, parameterised SQL of the store. Nothing here is assembled from user
text; eligibility is not repeated here because row-level security applies it
to every query on the workspace tables."""

# -- control plane -----------------------------------------------------------

# The workspace holding a slug, and whether an import is making it.
WORKSPACE_ID_BY_SLUG = "SELECT id, importing_since IS NOT NULL FROM workspace WHERE slug = %s"
# importing: marked as being imported until the import's last step
# (migrations/control/0008_workspace_import.sql).
INSERT_WORKSPACE = """
INSERT INTO workspace (id, slug, server, database_name, settings, schema_version, importing_since)
VALUES (%s, %s, %s, %s, %s, %s, CASE WHEN %s THEN now() END)
"""
SET_SCHEMA_VERSION = "UPDATE workspace SET schema_version = %s WHERE id = %s"
# (server, database) of the workspaces at a migration level, and the others.
WORKSPACES_AT_VERSION = "SELECT server, database_name FROM workspace WHERE schema_version = %s"
WORKSPACES_BELOW_VERSION = """
SELECT id::text, slug, server, database_name, settings, created_at,
       importing_since IS NOT NULL
FROM workspace
WHERE schema_version IS DISTINCT FROM %s ORDER BY created_at
"""
WORKSPACE_BY_ID = """
SELECT id::text, slug, server, database_name, settings, created_at,
       importing_since IS NOT NULL
FROM workspace WHERE id = %s
"""
ALL_WORKSPACE_IDS = "SELECT id FROM workspace ORDER BY created_at"
ALL_WORKSPACES = """
SELECT id::text, slug, server, database_name, settings, created_at,
       importing_since IS NOT NULL
FROM workspace
ORDER BY created_at
"""
# -- named servers (docs/servers.md) --
WORKSPACES_PER_SERVER = "SELECT server, count(*) FROM workspace GROUP BY server"
DRAINING_SERVERS = "SELECT name FROM postgres_server WHERE draining"
SET_SERVER_DRAINING = """
INSERT INTO postgres_server (name, draining) VALUES (%s, %s)
ON CONFLICT (name) DO UPDATE SET draining = excluded.draining, updated_at = now()
"""
# A settings change reads the row it merges into under lock, so two changes
# at once are applied one after the other (ControlPlane.change_settings).
WORKSPACE_SETTINGS_FOR_UPDATE = "SELECT settings FROM workspace WHERE id = %s FOR UPDATE"
UPDATE_WORKSPACE_SETTINGS = """
UPDATE workspace SET settings = %s, updated_at = now() WHERE id = %s
"""
# An import's member whose handle another has in another case (an archive from
# before handles were one in any case) is kept as a twin, as migration 0015
# kept an older database's.
INSERT_MEMBER = """
INSERT INTO member (id, workspace_id, handle, role, handle_case_twin)
VALUES (%(id)s, %(workspace_id)s, %(handle)s, %(role)s,
        %(importing)s AND EXISTS (SELECT 1 FROM member WHERE workspace_id = %(workspace_id)s
                                  AND lower(handle) = lower(%(handle)s)))
"""
# Who holds a handle in a workspace, in any case (the same spelling first).
HANDLE_IN_ANY_CASE = """
SELECT handle FROM member
WHERE workspace_id = %(workspace_id)s AND lower(handle) = lower(%(handle)s)
ORDER BY handle <> %(handle)s, created_at, id LIMIT 1
"""
MEMBER_BY_ID = "SELECT id, workspace_id, handle, role, created_at FROM member WHERE id = %s"
MEMBER_IN_WORKSPACE = "SELECT 1 FROM member WHERE id = %s AND workspace_id = %s"
# The workspace and member a token belongs to.
TOKEN_HOLDER = """
SELECT m.workspace_id::text, t.member_id::text
FROM access_token t JOIN member m ON m.id = t.member_id
WHERE t.id = %s
"""
# The workspaces after a slug, by slug (the unique index), with their live
# members; on one server when one is named. One being imported is no
# workspace to use yet.
WORKSPACES_AFTER = """
SELECT w.id::text, w.slug, w.server, w.database_name, w.settings, w.created_at, false,
       (SELECT count(*) FROM member m WHERE m.workspace_id = w.id AND m.removed_at IS NULL)
FROM workspace w
WHERE w.slug > %(after)s AND (%(server)s = '' OR w.server = %(server)s)
  AND w.importing_since IS NULL
ORDER BY w.slug
LIMIT %(limit)s
"""
# A workspace's members, oldest first; removed ones only when asked for.
WORKSPACE_MEMBERS = """
SELECT id, workspace_id, handle, role, created_at, removed_at FROM member
WHERE workspace_id = %(workspace_id)s AND (%(include_removed)s OR removed_at IS NULL)
ORDER BY created_at, handle
"""
# A page of a workspace's members after (handle, id), by handle in byte order
# then id (migrations/control/0009_member_listing.sql); removed ones only
# when asked for. The first page starts after ('', the nil id): every handle
# is longer.
MEMBERS_AFTER = """
SELECT id, workspace_id, handle, role, created_at, removed_at FROM member
WHERE workspace_id = %(workspace_id)s AND (%(include_removed)s OR removed_at IS NULL)
  AND (handle COLLATE "C", id) > (%(after_handle)s, %(after_id)s::uuid)
ORDER BY handle COLLATE "C", id
LIMIT %(limit)s
"""
INSERT_TOKEN = """
INSERT INTO access_token
    (id, member_id, token_sha256, label, purposes, read_only, lifetime, expires_at,
     request_key, request_call, request_asked)
VALUES (%(id)s, %(member_id)s, %(sha256)s, %(label)s, %(purposes)s, %(read_only)s,
        %(lifetime)s::interval, now() + %(lifetime)s::interval,
        %(request_key)s, %(request_call)s, %(request_asked)s)
RETURNING expires_at
"""
# What a request id's earlier attempt made, whichever admin call it was: a
# token (CreateToken, RotateToken; migrations/control/0011) or a workspace or
# member (create_request, 0016): (its id, the call, the hash of what was asked).
REQUEST_MADE = """
SELECT id, request_call, request_asked FROM access_token WHERE request_key = %(key)s
UNION ALL
SELECT made_id, request_call, request_asked FROM create_request WHERE request_key = %(key)s
LIMIT 1
"""
INSERT_CREATE_REQUEST = """
INSERT INTO create_request (request_key, request_call, request_asked, workspace_id, made_id)
VALUES (%(key)s, %(call)s, %(asked)s, %(workspace_id)s, %(made_id)s)
"""
# A request's own turn: concurrent attempts of one request id wait for each
# other, so the second finds what the first one made rather than failing on a
# unique index after its checks.
REQUEST_TURN = "SELECT pg_advisory_xact_lock(7411, hashtext(%s::text))"
# -- expiry and rotation (migrations/control/0005_token_expiry.sql) --
# The token to rotate, locked: a live one of the workspace named (if any).
# Its expiry is checked against the clock, not now(): a rotation that began
# before another of the same token committed (and ended it with grace 0)
# reads that expiry once the lock is its, and must find it passed.
TOKEN_TO_ROTATE = """
SELECT t.member_id, t.label, t.purposes, t.read_only, t.lifetime,
       t.expires_at IS NOT NULL AND t.expires_at <= clock_timestamp() AS expired
FROM access_token t JOIN member m ON m.id = t.member_id
WHERE t.id = %(id)s AND t.revoked_at IS NULL
  AND (%(workspace_id)s::uuid IS NULL OR m.workspace_id = %(workspace_id)s::uuid)
FOR UPDATE OF t
"""
# The old token's expiry comes nearer, never later (a second rotation within
# the grace does not lengthen it).
SHORTEN_EXPIRY = """
UPDATE access_token
SET expires_at = least(coalesce(expires_at, 'infinity'), now() + %(grace)s::interval)
WHERE id = %(id)s
RETURNING expires_at
"""
# By member (handle in byte order, then id), each member's oldest first;
# past %(limit)s the oldest ended tokens (revoked or expired)
# are left out, never a live one (an MCP grant makes an hour's token at a
# time, so ended ones pile up).
LIST_TOKENS = """
SELECT id, label, member_id, handle, purposes, read_only, created_at, expires_at,
       last_used_at, revoked_at
FROM (
    SELECT t.id, t.label, m.id AS member_id, m.handle, t.purposes, t.read_only, t.created_at,
           t.expires_at, t.last_used_at, t.revoked_at
    FROM access_token t JOIN member m ON m.id = t.member_id
    WHERE (%(member_id)s::uuid IS NULL OR t.member_id = %(member_id)s::uuid)
      AND (%(workspace_id)s::uuid IS NULL OR m.workspace_id = %(workspace_id)s::uuid)
    ORDER BY t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now()) DESC,
             t.created_at DESC, t.id DESC
    LIMIT %(limit)s
) listed
ORDER BY handle COLLATE "C", member_id, created_at, id
"""
# A page of a listing's tokens after (handle, member, created_at, id), in the
# order of LIST_TOKENS, every token (ended ones too): first the rest of the
# last listed member's tokens, then those of the workspace's members after
# them (only when listing a workspace), each part read in index order
# (migrations/control/0009_member_listing.sql, 0010_token_listing.sql). A
# member's listing starts after (their id, -infinity), a workspace's after
# ('', the nil id): every handle is longer.
TOKENS_AFTER = """
SELECT id, label, member_id, handle, purposes, read_only, created_at, expires_at,
       last_used_at, revoked_at
FROM (
    (SELECT t.id, t.label, m.id AS member_id, m.handle, t.purposes, t.read_only, t.created_at,
            t.expires_at, t.last_used_at, t.revoked_at
     FROM access_token t JOIN member m ON m.id = t.member_id
     WHERE t.member_id = %(after_member)s::uuid
       AND (%(workspace_id)s::uuid IS NULL OR m.workspace_id = %(workspace_id)s::uuid)
       AND (t.created_at, t.id) > (%(after_at)s::timestamptz, %(after_id)s::uuid)
     ORDER BY t.created_at, t.id
     LIMIT %(limit)s)
    UNION ALL
    (SELECT t.id, t.label, m.id, m.handle, t.purposes, t.read_only, t.created_at,
            t.expires_at, t.last_used_at, t.revoked_at
     FROM member m JOIN access_token t ON t.member_id = m.id
     WHERE %(member_id)s::uuid IS NULL AND m.workspace_id = %(workspace_id)s::uuid
       AND (m.handle COLLATE "C", m.id) > (%(after_handle)s, %(after_member)s::uuid)
     ORDER BY m.handle COLLATE "C", m.id, t.created_at, t.id
     LIMIT %(limit)s)
) listed
ORDER BY handle COLLATE "C", member_id, created_at, id
LIMIT %(limit)s
"""
# A token's member, held against a removal (which takes the row FOR UPDATE,
# then revokes their tokens) until the token call commits: a token is made
# for a live member only, and one made first is there for the removal to
# revoke. Taken before the token's own row, in the removal's order.
TOKEN_MEMBER_HELD = """
SELECT m.removed_at IS NULL FROM member m JOIN access_token t ON t.member_id = m.id
WHERE t.id = %s
FOR SHARE OF m
"""
MEMBER_HELD = "SELECT removed_at IS NULL FROM member WHERE id = %s FOR SHARE"
# A member's live tokens (made, rotated) counted one at a time, held to the
# commit (namespace 7407): two made at once cannot both pass the cap.
TOKEN_TURN = "SELECT pg_advisory_xact_lock(7407, hashtext(%s::text))"
LIVE_TOKENS_OF_MEMBER = """
SELECT count(*) FROM access_token
WHERE member_id = %s AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
"""
# The live tokens a listing covers (a member's, or a workspace's).
LIVE_TOKENS_LISTED = """
SELECT count(*)
FROM access_token t JOIN member m ON m.id = t.member_id
WHERE (%(member_id)s::uuid IS NULL OR t.member_id = %(member_id)s::uuid)
  AND (%(workspace_id)s::uuid IS NULL OR m.workspace_id = %(workspace_id)s::uuid)
  AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())
"""
# Last use, written only when the recorded one is a minute old (the WHERE
# makes concurrent stores write once). Not waiting for the WAL flush: a
# last use lost in a crash is harmless.
TOUCH_TOKEN = """
WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true))
UPDATE access_token SET last_used_at = now()
FROM relaxed
WHERE id = %(id)s
  AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
"""
# The token (of the workspace named, if any), locked, and whether this call
# revoked it: one revoked before (a retry, or another owner at the same
# moment, whose revocation this one waits for and then reads) keeps its
# time and is neither published nor logged again.
REVOKE_TOKEN = """
WITH found AS (
    SELECT t.id, t.revoked_at IS NULL AS live
    FROM access_token t JOIN member m ON m.id = t.member_id
    WHERE t.id = %(id)s
      AND (%(workspace_id)s::uuid IS NULL OR m.workspace_id = %(workspace_id)s::uuid)
    FOR UPDATE OF t
), revoked AS (
    UPDATE access_token t SET revoked_at = now() FROM found WHERE t.id = found.id AND found.live
    RETURNING t.id
)
SELECT found.id, EXISTS (SELECT 1 FROM revoked) FROM found
"""
# An expired or revoked token (or a removed member's) is found, to tell the
# gateway it was once issued, but not admitted; `stale`: its last use is due
# to be recorded. A workspace being imported has no token to find.
AUTHENTICATE = """
SELECT w.id, w.slug, m.id, m.role, t.purposes, t.read_only, t.id, t.expires_at,
       t.expires_at IS NOT NULL AND t.expires_at <= now() AS expired,
       t.last_used_at IS NULL OR t.last_used_at < now() - interval '1 minute' AS stale,
       t.revoked_at IS NOT NULL OR m.removed_at IS NOT NULL AS revoked, m.handle
FROM access_token t JOIN member m ON m.id = t.member_id JOIN workspace w ON w.id = m.workspace_id
WHERE t.token_sha256 = %s AND w.importing_since IS NULL
"""
# Committed with the revocation: every store process listening passes it on
# to the gateways watching (services/store/domain/revocations.py).
NOTIFY_REVOKED = "SELECT pg_notify('recallatron_revocations', %s)"
# -- work marks (migrations/control/0004_work_marks.sql) --
# Marks a workspace as having background work and wakes the embedding job.
# Committed without waiting for the WAL flush (synchronous_commit off, local
# to it): writes to one workspace all update its one row, and waiting for
# each flush under that row's lock cost concurrent writers ~10% of their
# throughput. A mark lost in a Postgres crash is found again: the job looks
# at every workspace when its listener reconnects (services/store/infrastructure/work_marks.py).
MARK_WORK = """
WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true)),
marked AS (
    INSERT INTO workspace_work (workspace_id) VALUES (%s)
    ON CONFLICT (workspace_id) DO UPDATE SET seq = workspace_work.seq + 1, marked_at = now()
    RETURNING workspace_id
)
SELECT pg_notify('recallatron_work', marked.workspace_id::text) FROM marked, relaxed
"""
WORK_MARKS = "SELECT workspace_id::text, seq FROM workspace_work"
WORK_SEQ = "SELECT seq FROM workspace_work WHERE workspace_id = %s"
CLEAR_WORK = "DELETE FROM workspace_work WHERE workspace_id = %s AND seq = %s"

# -- the embedding job's progress (services/store/domain/embedding_status.py) --

# Counted among the memories the caller may see by audience and by the
# token's purposes (empty: all), current for them as read and the lists take
# it: for one of those purposes no memory along its chain of successors is one
# they may see (a successor hidden from them leaves it current, and counted:
# a count that fell would reveal it); embedded, per memory, by the model of the
# newest vector (the one a rebuild for a new model is writing), among the
# memories counted (a superseded memory keeps its vector,
# 0067_baseline/08_embedding.sql; pending counts its queue entry). A chain's
# successors are live: a forget hands its place in the chain on.
EMBEDDING_STATUS = """
WITH RECURSIVE seen AS (
    SELECT id FROM memory
    WHERE (%(member)s::uuid IS NULL OR audience_member_id IS NULL
           OR audience_member_id = %(member)s::uuid)
      AND (cardinality(%(purposes)s::purpose[]) = 0 OR purposes && %(purposes)s::purpose[])
), later(origin, id, hops) AS (
    SELECT m.id, m.superseded_by_id, 1 FROM memory m JOIN seen USING (id)
    WHERE m.invalidated_at IS NULL AND m.superseded_by_id IS NOT NULL
  UNION ALL
    SELECT l.origin, s.superseded_by_id, l.hops + 1
    FROM later l JOIN memory s ON s.id = l.id
    WHERE s.superseded_by_id IS NOT NULL AND s.superseded_by_id <> l.origin AND l.hops < 100000
), counted AS (
    SELECT m.id FROM memory m JOIN seen USING (id)
    WHERE m.invalidated_at IS NULL
      AND EXISTS (
          SELECT 1 FROM unnest(m.purposes) AS p(purpose)
          WHERE (cardinality(%(purposes)s::purpose[]) = 0
                 OR p.purpose = ANY (%(purposes)s::purpose[]))
            AND NOT EXISTS (
                SELECT 1 FROM later l JOIN memory s ON s.id = l.id
                WHERE l.origin = m.id AND s.invalidated_at IS NULL
                  AND (%(member)s::uuid IS NULL OR s.audience_member_id IS NULL
                       OR s.audience_member_id = %(member)s::uuid)
                  AND p.purpose = ANY (s.purposes)))
), newest AS (
    SELECT model_id FROM memory_embedding WHERE input_version = %(version)s
    ORDER BY created_at DESC LIMIT 1
)
SELECT
  (SELECT count(*) FROM counted),
  (SELECT count(DISTINCT e.memory_id)
   FROM memory_embedding e JOIN counted ON counted.id = e.memory_id
   WHERE e.input_version = %(version)s AND e.model_id = (SELECT model_id FROM newest)),
  (SELECT count(*) FROM embedding_job j JOIN seen ON seen.id = j.memory_id
   WHERE j.next_attempt_at <> 'infinity'),
  (SELECT count(*) FROM embedding_job j JOIN seen ON seen.id = j.memory_id
   WHERE j.next_attempt_at = 'infinity'),
  (SELECT model_id FROM newest)
"""

PARKED_REASONS = """
SELECT j.last_error, count(*) FROM embedding_job j JOIN memory m ON m.id = j.memory_id
WHERE j.next_attempt_at = 'infinity'
  AND (%(member)s::uuid IS NULL OR m.audience_member_id IS NULL
       OR m.audience_member_id = %(member)s::uuid)
  AND (cardinality(%(purposes)s::purpose[]) = 0 OR m.purposes && %(purposes)s::purpose[])
GROUP BY j.last_error ORDER BY count(*) DESC, j.last_error LIMIT %(limit)s
"""

# -- a workspace's and a member's end (migrations/control/0006_workspace_deletion.sql) --
WORKSPACE_BY_ID_OR_SLUG = """
SELECT id::text, slug, server, database_name, settings, created_at,
       importing_since IS NOT NULL
FROM workspace
WHERE slug = %(given)s OR id::text = %(given)s
"""
# The workspace locked against a concurrent create-member or create-token
# while it is deleted.
LOCK_WORKSPACE = "SELECT id FROM workspace WHERE id = %s FOR UPDATE"
# Live tokens of a workspace (or of one member), revoked, their ids returned
# for the revocation feed.
REVOKE_WORKSPACE_TOKENS = """
UPDATE access_token t SET revoked_at = now()
FROM member m
WHERE m.id = t.member_id AND m.workspace_id = %s AND t.revoked_at IS NULL
RETURNING t.id::text
"""
REVOKE_MEMBER_TOKENS = """
UPDATE access_token SET revoked_at = now()
WHERE member_id = %s AND revoked_at IS NULL
RETURNING id::text
"""
# The hashes kept as retired (migrations/control/0007_retired_tokens.sql),
# the oldest ones dropped, as the tokens go.
RETIRE_WORKSPACE_TOKENS = """
WITH expired AS (DELETE FROM retired_token WHERE retired_at < now() - interval '90 days')
INSERT INTO retired_token (token_sha256)
SELECT t.token_sha256 FROM access_token t JOIN member m ON m.id = t.member_id
WHERE m.workspace_id = %s
ON CONFLICT (token_sha256) DO NOTHING
"""
DELETE_WORKSPACE_TOKENS = """
DELETE FROM access_token t USING member m WHERE m.id = t.member_id AND m.workspace_id = %s
"""
RETIRED_TOKEN = "SELECT 1 FROM retired_token WHERE token_sha256 = %s"
DELETE_WORKSPACE_MEMBERS = "DELETE FROM member WHERE workspace_id = %s"
DELETE_WORKSPACE_MOVE = "DELETE FROM workspace_move WHERE workspace_id = %s"
DELETE_WORKSPACE = "DELETE FROM workspace WHERE id = %s"
INSERT_TOMBSTONE = """
INSERT INTO workspace_tombstone (id, slug) VALUES (%s, %s)
ON CONFLICT (id) DO UPDATE SET deleted_at = workspace_tombstone.deleted_at
RETURNING deleted_at
"""
# The advisory lock namespace of a workspace's deletion (moves use 7401,
# move_queries.TRY_MOVE_LOCK), keyed by the workspace id's hash; the
# embedding job waits on the same key (services/embedding_job/queries.py).
DELETION_LOCK_NAMESPACE = 7402
# Held by the deleting session for the whole deletion: a second deletion of
# the workspace (a client's retry) waits for the first and then finds it done.
DELETION_LOCK = f"SELECT pg_advisory_lock({DELETION_LOCK_NAMESPACE}, hashtext(%s::text))"
# A token is made only while no deletion of its member's workspace is under
# way (the deletion holds DELETION_LOCK for its whole course, the token's
# transaction this share of it to its commit): a token made in the middle of
# one would live, unannounced, until its last step. False: one is under way.
NO_DELETION_UNDER_WAY = f"""
SELECT pg_try_advisory_xact_lock_shared({DELETION_LOCK_NAMESPACE}, hashtext(m.workspace_id::text))
FROM member m WHERE m.id = %s
"""
# The same for a member made in the workspace %s: one made in the middle of
# a deletion was answered, then deleted with the rest at its last step.
NO_DELETION_OF_WORKSPACE = f"""
SELECT pg_try_advisory_xact_lock_shared({DELETION_LOCK_NAMESPACE}, hashtext(%s::text))
"""
# Committed with the deletion: every store process (and embedding job)
# closes its pools of the database (services/store/infrastructure/follow.py).
# Payload: "<workspace id> <server> <database>".
NOTIFY_DELETED = "SELECT pg_notify('recallatron_workspace_deleted', %s)"
# A member, locked, with whether they were removed.
MEMBER_TO_REMOVE = """
SELECT workspace_id::text, role, removed_at FROM member WHERE id = %s FOR UPDATE
"""
# Removals of one workspace take turns in the control plane (held to the
# commit), before any member row is locked: two owners removed at once each
# counted the other as the owner left, and two members handing over to each
# other each locked their own row and then waited for the other's, as its
# receiver. Keyed by the member's workspace (no row: no such member).
REMOVAL_TURN = """
SELECT pg_advisory_xact_lock(7403, hashtext(workspace_id::text)) FROM member WHERE id = %s
"""
OTHER_OWNERS = """
SELECT count(*) FROM member
WHERE workspace_id = %s AND role = 'owner' AND id <> %s AND removed_at IS NULL
"""
LIVE_MEMBER = """
SELECT 1 FROM member WHERE id = %s AND workspace_id = %s AND removed_at IS NULL
"""
# The receiver of a removed member's private memories, held (FOR SHARE) against
# their own removal (MEMBER_TO_REMOVE) until this transaction ends; waiting for
# one under way, it reads the row that removal committed.
LIVE_RECEIVER = """
SELECT 1 FROM member WHERE id = %s AND workspace_id = %s AND removed_at IS NULL FOR SHARE
"""
MARK_MEMBER_REMOVED = "UPDATE member SET removed_at = now() WHERE id = %s RETURNING removed_at"
# By id, or by slug (the latest deletion of it: a slug may be used again).
TOMBSTONE_BY_TEXT = """
SELECT deleted_at FROM workspace_tombstone WHERE id::text = %(given)s OR slug = %(given)s
ORDER BY deleted_at DESC LIMIT 1
"""
MOVE_PENDING = "SELECT 1 FROM workspace_move WHERE workspace_id = %s"
# -- a workspace being imported (migrations/control/0008_workspace_import.sql) --
# Held by the importing process's own session for the whole import
# (namespace 7406): free while a workspace is marked importing, its importer
# is gone. Keyed by slug, so that a second import of it is refused at once.
TRY_IMPORT_LOCK = "SELECT pg_try_advisory_lock(7406, hashtext(%s::text))"
# The import's last step; no row: the workspace was removed meanwhile.
FINISH_IMPORT = """
UPDATE workspace SET importing_since = NULL, updated_at = now()
WHERE id = %s AND importing_since IS NOT NULL
"""
UNFINISHED_IMPORTS = """
SELECT slug FROM workspace WHERE importing_since IS NOT NULL ORDER BY importing_since
"""
# Whether a member's workspace is being imported (no token is made for it).
MEMBER_WORKSPACE_IMPORTING = """
SELECT w.importing_since IS NOT NULL
FROM member m JOIN workspace w ON w.id = m.workspace_id WHERE m.id = %s
"""
