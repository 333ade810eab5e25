-- A server chosen for a workspace being created, until the workspace is
-- recorded (docs/servers.md, "Placing new workspaces"). Making its database
-- takes a while; placement counts these beside the recorded workspaces, so
-- creations at once spread as if made one after another. A creation killed
-- meanwhile leaves its row: rows older than the placement's hold are not
-- counted, and are deleted by the next placement.
CREATE TABLE workspace_placement (
    database_name   text PRIMARY KEY,
    server          text NOT NULL CHECK (server ~ '^[a-z][a-z0-9-]{0,62}$'),
    placed_at       timestamptz NOT NULL DEFAULT now()
);
