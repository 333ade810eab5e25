"""Named SQL a process asks each Postgres server it reaches
(services/store/infrastructure/reach.py)."""

# What the server allows: the start-up check (docs/servers.md, Connection budget).
CONNECTION_ROOM = """
SELECT current_setting('max_connections')::int,
       current_setting('superuser_reserved_connections')::int
       + coalesce(current_setting('reserved_connections', true), '0')::int
"""
# What the server says it is, whatever host string reached it: its cluster,
# its port and when its postmaster started (a copy of the cluster, a restored
# backup, shares the first two, never the third).
IDENTITY = """
SELECT system_identifier::text, current_setting('port'), pg_postmaster_start_time()::text
FROM pg_control_system()
"""
