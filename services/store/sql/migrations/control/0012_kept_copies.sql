-- Copies of a workspace's database that a move kept (move-workspace
-- --keep-source renames the source database and leaves it on its server;
-- docs/servers.md, Moving). Recorded so that deleting the workspace drops
-- them too (docs/reliability.md, "Deleting a workspace"). No reference to
-- workspace: a copy whose server did not answer at the deletion stays
-- recorded past it, under the deleted workspace's id, until
-- `recallatron servers drop-kept` drops it.
CREATE TABLE kept_copy (
    server          text NOT NULL CHECK (server ~ '^[a-z][a-z0-9-]{0,62}$'),
    database_name   text NOT NULL,
    workspace_id    uuid NOT NULL,
    kept_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (server, database_name)
);

CREATE INDEX kept_copy_workspace ON kept_copy (workspace_id);
