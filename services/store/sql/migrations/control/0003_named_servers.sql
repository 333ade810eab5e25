-- Named servers (design §3): a workspace records the NAME of the Postgres
-- server its database lives on, never a URL (which may carry a password).
-- Names map to URLs in the store's settings only (docs/servers.md).
--
-- Existing rows: '' meant the default server, whose name is `default`
-- unless RECALLATRON_DEFAULT_SERVER says otherwise. A row that stored a URL
-- gets an opaque name derived from it, so that the URL (and any password in
-- it) leaves the control plane; the store refuses to start until the
-- settings map that name (its error names it; docs/servers.md, Upgrading).
UPDATE workspace SET server = 'default' WHERE server = '';
UPDATE workspace SET server = 'url-' || left(md5(server), 12)
WHERE server !~ '^[a-z][a-z0-9-]{0,62}$';

ALTER TABLE workspace
    ALTER COLUMN server DROP DEFAULT,
    ADD CONSTRAINT workspace_server_is_a_name CHECK (server ~ '^[a-z][a-z0-9-]{0,62}$');

-- Per-server operator state. A server named in settings but absent here is
-- open for new workspaces; draining: the placement policy skips it.
CREATE TABLE postgres_server (
    name        text PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9-]{0,62}$'),
    draining    boolean NOT NULL DEFAULT false,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- A workspace being moved to another server (docs/servers.md, Moving): at
-- most one move per workspace; a rerun of an interrupted move reads its
-- state here and finishes it (sealed, switched) or rolls it back (copying).
CREATE TABLE workspace_move (
    workspace_id    uuid PRIMARY KEY REFERENCES workspace (id),
    source          text NOT NULL,
    target          text NOT NULL CHECK (target ~ '^[a-z][a-z0-9-]{0,62}$'),
    state           text NOT NULL CHECK (state IN ('copying', 'sealed', 'switched')),
    started_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
