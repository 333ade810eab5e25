-- A workspace's and a member's end (design §10; issue 34).
--
-- A deleted workspace leaves only its tombstone here: its id and when it
-- went (never its slug, members or settings). The slug is free again.
CREATE TABLE workspace_tombstone (
    id          uuid PRIMARY KEY,
    deleted_at  timestamptz NOT NULL DEFAULT now()
);

-- A removed member keeps their row, so that what they wrote and shared
-- still names them (handle, for the audit log); they can no longer hold a
-- token, and their handle is not taken by anyone else.
ALTER TABLE member ADD COLUMN removed_at timestamptz;
