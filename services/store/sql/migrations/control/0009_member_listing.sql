-- ListMembers pages a workspace's members by handle in byte order, then id,
-- continued by a keyset token (docs/api.md): this index answers each page
-- from where the last one ended, without sorting all of the workspace's
-- members, and its order is the same whatever the server's locale.
CREATE INDEX member_listing ON member (workspace_id, handle COLLATE "C", id);
