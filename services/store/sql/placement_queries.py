"""Named SQL of placing new workspaces on servers
(services/store/domain/placement.py; migrations/control/0013_workspace_placement.sql)."""

from services.store.sql.move_queries import MOVE_LOCK_NAMESPACE

# Held by a placement (reading the servers and reserving one), by recording
# the workspace placed (checking its server is still open), by a move's
# switch (checking its target is) and by a drain mark's change: so no
# creation or move lands on a server once its drain is committed, and two
# placements never read the same counts.
PLACEMENT_LOCK = "SELECT pg_advisory_xact_lock(7416, 0)"
# Placements older than the hold (seconds) are a killed creation's: gone.
FORGET_OLD_PLACEMENTS = """
DELETE FROM workspace_placement WHERE placed_at < now() - make_interval(secs => %s)
"""
# Per server: its recorded workspaces, the creations placed on it not yet
# recorded, and the workspaces being moved onto it (each counted on its
# source too, where it is recorded and served until the switch). A move
# short of its seal counts while its mover runs (holding the move lock, a
# session's, gone with a killed mover): a rerun rolls back a killed one. One
# past its seal counts until it ends: a rerun finishes it there.
PLACED_PER_SERVER = f"""
SELECT server, count(*) FROM (
    SELECT server FROM workspace
    UNION ALL
    SELECT server FROM workspace_placement
    UNION ALL
    SELECT m.target FROM workspace_move m
    WHERE m.state = 'sealed' OR (m.state = 'copying' AND EXISTS (
        SELECT 1 FROM pg_locks l
        WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
          AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND l.classid = {MOVE_LOCK_NAMESPACE}
          AND l.objid = hashtext(m.workspace_id::text)::oid))
) placed
GROUP BY server
"""
RESERVE_PLACEMENT = "INSERT INTO workspace_placement (database_name, server) VALUES (%s, %s)"
RELEASE_PLACEMENT = "DELETE FROM workspace_placement WHERE database_name = %s"
SERVER_DRAINING = "SELECT draining FROM postgres_server WHERE name = %s"
