-- A workspace being imported (docs/export.md, "An import that was killed").
-- `recallatron import` creates the workspace with importing_since set and
-- clears it in its last step, once every row is in: until then the
-- workspace is served to nobody (its tokens are refused, none can be made,
-- it is not listed). The importing process holds an advisory lock on the
-- slug (namespace 7406) on a control-plane session of its own for the whole
-- import, so a killed importer's lock goes with its connection: a later
-- import of the slug, `delete-workspace` or a store starting then removes
-- what it left. NULL: a whole workspace (every existing one).
ALTER TABLE workspace ADD COLUMN importing_since timestamptz;
CREATE INDEX workspace_importing ON workspace (importing_since)
    WHERE importing_since IS NOT NULL;
