-- A deleted workspace's tombstone keeps its slug too (docs/api.md,
-- DeleteWorkspace): a repeated delete naming the workspace by slug is told
-- when it was deleted, as one naming it by id is. The slug stays free: a new
-- workspace may take it, and a delete by a slug a live workspace holds deletes
-- that one. Tombstones written before this have none (NULL).
ALTER TABLE workspace_tombstone ADD COLUMN slug text;

CREATE INDEX workspace_tombstone_slug ON workspace_tombstone (slug, deleted_at)
    WHERE slug IS NOT NULL;
