-- The tokens of a deleted workspace, by their hash alone (docs/reliability.md,
-- "Deleting a workspace"). A client still calling with one (an agent nobody
-- stopped) is a stale client, not someone guessing tokens: the store tells
-- the gateway so, as for a revoked token, and the gateway does not charge its
-- address's failed-authentication budget, which would otherwise lock out
-- every other agent on the same host. A row holds a SHA-256 of a random
-- secret and a time, nothing of the workspace, its members or its data; rows
-- older than 90 days are removed by the next deletion.
CREATE TABLE retired_token (
    token_sha256 bytea PRIMARY KEY,
    retired_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX retired_token_retired_at ON retired_token (retired_at);
