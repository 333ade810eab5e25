-- Dedup review (design §8.1): pairs a person chose to keep both of ("keep both").
-- A dismissed pair is never proposed again, to anyone in the workspace: the
-- decision is about the two memories, not about who looked at them. The ids
-- are stored in a canonical order (first_id < second_id).

CREATE TABLE dismissed_pair (
    first_id        uuid NOT NULL REFERENCES memory (id),
    second_id       uuid NOT NULL REFERENCES memory (id),
    dismissed_by    uuid NOT NULL,
    dismissed_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (first_id, second_id),
    CHECK (first_id < second_id)
);
CREATE INDEX dismissed_pair_second_idx ON dismissed_pair (second_id);

-- A dismissal is visible, and may be written, only when the caller may see
-- both memories (the subqueries on `memory` run under its own policy), so
-- the table never reveals that a memory the caller may not see exists.
ALTER TABLE dismissed_pair ENABLE ROW LEVEL SECURITY;
ALTER TABLE dismissed_pair FORCE ROW LEVEL SECURITY;
CREATE POLICY dismissed_pair_visible ON dismissed_pair FOR SELECT
    USING (EXISTS (SELECT 1 FROM memory m WHERE m.id = dismissed_pair.first_id)
           AND EXISTS (SELECT 1 FROM memory m WHERE m.id = dismissed_pair.second_id));
CREATE POLICY dismissed_pair_insert ON dismissed_pair FOR INSERT
    WITH CHECK (dismissed_by = caller_member()
                AND EXISTS (SELECT 1 FROM memory m WHERE m.id = dismissed_pair.first_id)
                AND EXISTS (SELECT 1 FROM memory m WHERE m.id = dismissed_pair.second_id));

-- Insert only: a decision stands (a memory's later changes do not revive it).
GRANT SELECT, INSERT ON dismissed_pair TO recallatron_app;
