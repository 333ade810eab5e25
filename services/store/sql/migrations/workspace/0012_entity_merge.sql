-- Entity merge, decided by a person (design §8.5). A merge is a recorded,
-- reversible decision that two entities are one; nothing about either entity
-- is rewritten. Readers answer through the group of entities that visible,
-- active merges connect (entity_group below). Keeping a pair apart stops it
-- being proposed again. Both kinds of row name two entities and go when
-- either does (forget deletes an entity nothing mentions any more).

CREATE TABLE entity_merge (
    id           uuid PRIMARY KEY,
    -- The entity whose name the group answers with; merged_id joins it.
    kept_id      uuid NOT NULL REFERENCES entity (id) ON DELETE CASCADE,
    merged_id    uuid NOT NULL REFERENCES entity (id) ON DELETE CASCADE,
    decided_by   uuid NOT NULL,
    decided_at   timestamptz NOT NULL DEFAULT now(),
    undone_by    uuid,
    undone_at    timestamptz,
    CHECK (kept_id <> merged_id),
    CHECK ((undone_by IS NULL) = (undone_at IS NULL))
);
-- One merge in force per pair, whichever way it points: a decision taken
-- twice at once is written once.
CREATE UNIQUE INDEX entity_merge_pair_idx
    ON entity_merge (least(kept_id, merged_id), greatest(kept_id, merged_id))
    WHERE undone_at IS NULL;
CREATE INDEX entity_merge_kept_idx ON entity_merge (kept_id) WHERE undone_at IS NULL;
CREATE INDEX entity_merge_merged_idx ON entity_merge (merged_id) WHERE undone_at IS NULL;

CREATE TABLE entity_pair_apart (
    first_id     uuid NOT NULL REFERENCES entity (id) ON DELETE CASCADE,
    second_id    uuid NOT NULL REFERENCES entity (id) ON DELETE CASCADE,
    decided_by   uuid NOT NULL,
    decided_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (first_id, second_id),
    CHECK (first_id < second_id)
);

-- A decision exists for a caller only when both its entities do (each
-- through a mention the caller may see): a merge never joins, and a
-- decision never reveals, an entity the caller cannot see evidence for.
ALTER TABLE entity_merge ENABLE ROW LEVEL SECURITY;
ALTER TABLE entity_merge FORCE ROW LEVEL SECURITY;
CREATE POLICY entity_merge_visible ON entity_merge FOR SELECT
    USING (EXISTS (SELECT 1 FROM entity e WHERE e.id = entity_merge.kept_id)
           AND EXISTS (SELECT 1 FROM entity e WHERE e.id = entity_merge.merged_id));
CREATE POLICY entity_merge_insert ON entity_merge FOR INSERT
    WITH CHECK (decided_by = caller_member()
                AND EXISTS (SELECT 1 FROM entity e WHERE e.id = entity_merge.kept_id)
                AND EXISTS (SELECT 1 FROM entity e WHERE e.id = entity_merge.merged_id));
CREATE POLICY entity_merge_undo ON entity_merge FOR UPDATE
    USING (EXISTS (SELECT 1 FROM entity e WHERE e.id = entity_merge.kept_id)
           AND EXISTS (SELECT 1 FROM entity e WHERE e.id = entity_merge.merged_id))
    WITH CHECK (undone_by = caller_member());

ALTER TABLE entity_pair_apart ENABLE ROW LEVEL SECURITY;
ALTER TABLE entity_pair_apart FORCE ROW LEVEL SECURITY;
CREATE POLICY entity_pair_apart_visible ON entity_pair_apart FOR SELECT
    USING (EXISTS (SELECT 1 FROM entity e WHERE e.id = entity_pair_apart.first_id)
           AND EXISTS (SELECT 1 FROM entity e WHERE e.id = entity_pair_apart.second_id));
CREATE POLICY entity_pair_apart_insert ON entity_pair_apart FOR INSERT
    WITH CHECK (decided_by = caller_member()
                AND EXISTS (SELECT 1 FROM entity e WHERE e.id = entity_pair_apart.first_id)
                AND EXISTS (SELECT 1 FROM entity e WHERE e.id = entity_pair_apart.second_id));

GRANT SELECT, INSERT ON entity_merge, entity_pair_apart TO recallatron_app;
GRANT UPDATE (undone_by, undone_at) ON entity_merge TO recallatron_app;

-- The group of each id: every entity the caller's visible, active merges
-- connect it to (itself included), whichever way each merge points. Runs
-- as the caller (SECURITY INVOKER), so row security above decides the edges.
CREATE FUNCTION entity_group(ids uuid[])
RETURNS TABLE (start_id uuid, member_id uuid)
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE grp(start_id, member_id) AS (
        SELECT id, id FROM unnest(ids) AS id
        UNION
        SELECT g.start_id,
               CASE WHEN m.kept_id = g.member_id THEN m.merged_id ELSE m.kept_id END
        FROM grp g
        JOIN entity_merge m
          ON (m.kept_id = g.member_id OR m.merged_id = g.member_id) AND m.undone_at IS NULL
    )
    SELECT start_id, member_id FROM grp
$$;
GRANT EXECUTE ON FUNCTION entity_group(uuid[]) TO recallatron_app;
