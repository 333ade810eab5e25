-- A client's request id for CreateWorkspace and CreateMember (docs/api.md,
-- Request ids): kept with what the request made, so that a retry whose first
-- answer was lost is answered with the same workspace or member and makes
-- none other. request_key and request_asked as access_token's (0011): sha256
-- of "<who asked>:<request id>", and the hash of what was asked. One caller's
-- ids are one set across these calls and the token calls (the store looks a key
-- up in both tables). A request's row goes with its workspace when that is
-- deleted, as every other control-plane row of it does.
CREATE TABLE create_request (
    request_key   text PRIMARY KEY,
    request_call  text NOT NULL CHECK (request_call IN ('create_workspace', 'create_member')),
    request_asked bytea NOT NULL,
    workspace_id  uuid NOT NULL REFERENCES workspace (id) ON DELETE CASCADE,
    -- The workspace made, or the member.
    made_id       uuid NOT NULL,
    made_at       timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX create_request_workspace ON create_request (workspace_id);
