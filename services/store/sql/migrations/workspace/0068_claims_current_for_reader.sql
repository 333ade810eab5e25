-- A memory superseded by one the caller may not see reads to them as current
-- (no memory along its chain of successors is one they may see:
-- visible_successor, 0067_baseline/12_chains.sql),
-- yet the supersede retired its claims, relations and aliases for everyone
-- (its successor states them again, for the successor's readers only): Bob
-- read and recalled Ada's memory as current while lookup, neighbors, the
-- timelines and recall's cards told him nothing of what it states, and so
-- that a successor hidden from him exists. A statement its memory's supersede
-- retired is now current for a caller who reads that memory as current,
-- exactly as read and recall decide it; one a correct replaced stays retired
-- for everyone. Whoever sees the successor sees the successor's copy instead:
-- one current statement either way.

-- 1. What retired a statement: its memory's supersede (set by the supersede's
-- own statements, services/store/sql/graph_queries.py RETIRE), else a correct.
ALTER TABLE attribute_claim ADD COLUMN retired_by_supersede boolean NOT NULL DEFAULT false;
ALTER TABLE relation_claim ADD COLUMN retired_by_supersede boolean NOT NULL DEFAULT false;
ALTER TABLE entity_alias ADD COLUMN retired_by_supersede boolean NOT NULL DEFAULT false;
GRANT UPDATE (retired_by_supersede) ON entity_alias, attribute_claim, relation_claim
    TO recallatron_app;

-- Statements written before the column, or copied in by an import (whose
-- archive holds retired_at and the revisions, not the column): those of a
-- superseded memory retired at its latest supersede's time, which the
-- supersede's transaction gave both (now()). A correct retires only current
-- statements and a superseded memory takes no correct, so no correct retired
-- one at that time (memory_claims_revive took back the same ones by it).
CREATE FUNCTION mark_supersede_retirements() RETURNS void
    LANGUAGE sql SECURITY DEFINER SET search_path = public AS $$
    WITH superseded AS (
        SELECT r.memory_id, max(r.changed_at) AS at
        FROM memory_revision r JOIN memory m ON m.id = r.memory_id
        WHERE r.action = 'supersede' AND m.superseded_by_id IS NOT NULL
        GROUP BY r.memory_id
    ), attributes AS (
        UPDATE attribute_claim c SET retired_by_supersede = true FROM superseded s
        WHERE c.memory_id = s.memory_id AND c.retired_at = s.at AND NOT c.retired_by_supersede
    ), relations AS (
        UPDATE relation_claim c SET retired_by_supersede = true FROM superseded s
        WHERE c.memory_id = s.memory_id AND c.retired_at = s.at AND NOT c.retired_by_supersede
    )
    UPDATE entity_alias c SET retired_by_supersede = true FROM superseded s
    WHERE c.memory_id = s.memory_id AND c.retired_at = s.at AND NOT c.retired_by_supersede;
$$;
-- The import calls it as the database's owner; no caller may.
REVOKE ALL ON FUNCTION mark_supersede_retirements() FROM PUBLIC;
SELECT mark_supersede_retirements();

-- A forgotten successor revives what its memory's supersede retired
-- (successor_forget, 0067_baseline/12_chains.sql), which it told by the
-- time; now by the column.
CREATE OR REPLACE FUNCTION memory_claims_revive(subject uuid) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    UPDATE attribute_claim SET retired_at = NULL, retired_by_supersede = false
    WHERE memory_id = subject AND retired_by_supersede;
    UPDATE relation_claim SET retired_at = NULL, retired_by_supersede = false
    WHERE memory_id = subject AND retired_by_supersede;
    UPDATE entity_alias SET retired_at = NULL, retired_by_supersede = false
    WHERE memory_id = subject AND retired_by_supersede;
END $$;

-- 2. Whether the caller reads `memory` as current: no memory along its chain
-- of successors is one they may see (visible_successor, the rule of read,
-- recall and the lists). Asked only of a statement its supersede retired,
-- whose memory the caller may see (the statement's policy), under row-level
-- security or as the owner alike. A successor the caller may see is the
-- usual answer, read by key first (as dense_candidates_exact does): the
-- walk, a call of its own, only past a hidden one. Both keep one generic
-- plan (as timeline_memory_seen): the timelines call them row by row under
-- force_custom_plan, which would plan each of their statements on every call.
CREATE FUNCTION memory_reads_current(memory uuid) RETURNS boolean
    LANGUAGE sql STABLE
    SET plan_cache_mode = force_generic_plan
    AS $$ SELECT NOT EXISTS (SELECT 1 FROM memory s
                             WHERE s.id = m.superseded_by_id
                               AND is_eligible(s.invalidated_at, s.audience_member_id, s.purposes))
                 AND visible_successor(m.superseded_by_id) IS NULL
          FROM memory m WHERE m.id = memory $$;
ALTER FUNCTION visible_successor(uuid) SET plan_cache_mode = force_generic_plan;
REVOKE ALL ON FUNCTION memory_reads_current(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memory_reads_current(uuid) TO recallatron_app;

-- 3. The timelines' walks (workspace_timeline, entity_member_timeline,
-- episode_timeline: 0067_baseline/10_workspace_timeline.sql and
-- 11_subject_timelines.sql) read current statements only, on indexes holding
-- only those (WHERE retired_at IS NULL): each index now holds the statements a
-- supersede retired as well, and each walk takes one of them when its caller
-- reads its memory as current. Both are this one change to the definitions
-- the earlier migrations gave, made here to them as Postgres holds them (the
-- rest of each stays as it is); each is checked to have changed as many
-- places as it should, so a definition that no longer reads as expected
-- stops the migration rather than leaving a walk as it was.
DO $$
DECLARE
    ix record;
    patched text;
    done integer := 0;
BEGIN
    FOR ix IN
        SELECT i.indexrelid::regclass AS name, pg_get_indexdef(i.indexrelid) AS def
        FROM pg_index i
        WHERE i.indrelid IN ('attribute_claim'::regclass, 'relation_claim'::regclass,
                             'entity_alias'::regclass)
          AND pg_get_expr(i.indpred, i.indrelid) LIKE '%retired_at IS NULL%'
          AND pg_get_expr(i.indpred, i.indrelid) NOT LIKE '%retired_by_supersede%'
    LOOP
        patched := replace(ix.def, '(retired_at IS NULL)',
                           '((retired_at IS NULL) OR retired_by_supersede)');
        IF patched = ix.def THEN
            RAISE EXCEPTION 'index % reads no (retired_at IS NULL): %', ix.name, ix.def;
        END IF;
        EXECUTE format('DROP INDEX %s', ix.name);
        EXECUTE patched;
        done := done + 1;
    END LOOP;
    -- The workspace timeline's four and the subjects' ten.
    IF done <> 14 THEN
        RAISE EXCEPTION '% indexes of current statements, not 14', done;
    END IF;
END $$;

DO $$
DECLARE
    fn record;
    def text;
    patched text;
    places integer;
BEGIN
    FOR fn IN
        SELECT * FROM (VALUES
            ('workspace_timeline(timestamptz, timestamptz, timestamptz, integer, text, integer)'
                 ::regprocedure, 4),
            ('entity_member_timeline(uuid, uuid[], uuid, timestamptz, timestamptz, timestamptz,
                                     integer, text, integer)'::regprocedure, 6),
            ('episode_timeline(uuid, timestamptz, timestamptz, timestamptz, integer, text,
                               integer)'::regprocedure, 4)
        ) AS f(oid, places)
    LOOP
        def := pg_get_functiondef(fn.oid);
        places := (SELECT count(*) FROM regexp_matches(def, '\m[cr]\.retired_at IS NULL', 'g'));
        IF places <> fn.places THEN
            RAISE EXCEPTION '% reads retired_at IS NULL in % places, not %',
                fn.oid, places, fn.places;
        END IF;
        patched := regexp_replace(
            def, '\m([cr])\.retired_at IS NULL',
            '(\1.retired_at IS NULL OR \1.retired_by_supersede AND memory_reads_current(\1.memory_id))',
            'g');
        EXECUTE patched;
    END LOOP;
END $$;
