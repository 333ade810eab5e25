"""Named SQL of placing new workspaces on servers
(services/store/domain/placement.py; migrations/control/0013_workspace_placement.sql)."""

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
# Per server: its recorded workspaces and the creations placed on it not yet recorded.
PLACED_PER_SERVER = """
SELECT server, count(*) FROM (
    SELECT server FROM workspace
    UNION ALL
    SELECT server FROM workspace_placement
) placed
GROUP BY server
"""
RESERVE_PLACEMENT = "INSERT INTO workspace_placement (database_name, server) VALUES (%s, %s)"
RELEASE_PLACEMENT = "DELETE FROM workspace_placement WHERE database_name = %s"
SERVER_DRAINING = "SELECT draining FROM postgres_server WHERE name = %s"
