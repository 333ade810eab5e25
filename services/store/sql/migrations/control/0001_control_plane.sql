-- The control plane: workspaces, their members and hashed access tokens.

CREATE TABLE workspace (
    id              uuid PRIMARY KEY,
    slug            text NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    -- Where the workspace's database lives: a server URL ('' = the default
    -- server from settings) and the database name on it.
    server          text NOT NULL DEFAULT '',
    database_name   text NOT NULL UNIQUE,
    settings        jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE member (
    id              uuid PRIMARY KEY,
    workspace_id    uuid NOT NULL REFERENCES workspace (id),
    handle          text NOT NULL CHECK (handle ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'),
    role            text NOT NULL CHECK (role IN ('owner', 'member')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (workspace_id, handle)
);

CREATE TABLE access_token (
    id              uuid PRIMARY KEY,
    member_id       uuid NOT NULL REFERENCES member (id),
    -- sha256 of the token; the token itself is shown once and never stored.
    token_sha256    bytea NOT NULL UNIQUE,
    label           text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    revoked_at      timestamptz
);
