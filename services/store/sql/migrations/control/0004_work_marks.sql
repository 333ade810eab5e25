-- Work discovery by change (design §10): a workspace with background work
-- (memories queued for the embedding job) is marked here by the write that
-- queued it, with a NOTIFY; the job visits marked workspaces only and clears
-- a mark once its queue is empty, so an idle workspace costs no query and no
-- connection. `seq` grows with each mark: a clear applies only to the mark
-- it saw, so a write that lands meanwhile keeps its workspace marked.
CREATE TABLE workspace_work (
    workspace_id    uuid PRIMARY KEY REFERENCES workspace (id) ON DELETE CASCADE,
    seq             bigint NOT NULL DEFAULT 1,
    marked_at       timestamptz NOT NULL DEFAULT now()
);

-- Existing workspaces may hold queued rows from before marks existed: each
-- is visited once, and cleared if it has none.
INSERT INTO workspace_work (workspace_id) SELECT id FROM workspace;

-- The migration level of each workspace database, as its last migration
-- recorded it: a store start visits only the databases below the current
-- level, and serves before it has (design §10).
ALTER TABLE workspace ADD COLUMN schema_version text;
