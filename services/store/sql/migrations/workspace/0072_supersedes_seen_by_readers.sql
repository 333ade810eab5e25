-- A memory superseded by one the caller may not see reads to them as current
-- (visible_successor, memory_reads_current: 0067_baseline/12_chains.sql,
-- 0068), and no answer may say that a successor exists. Yet its revision
-- history (read) and the timelines (the workspace's, an entity's, an
-- episode's) showed every reader of the memory its 'supersede' revision:
-- who superseded it, when and why. A supersede now shows only to a caller who
-- sees the memory superseded through it: the successor it made, or one after
-- that along the chain, is one they may see. A successor forgotten since
-- leaves the supersede in the history (the memory is current again) for
-- whoever might have seen it, by its audience and purposes, and for no one
-- else.

-- 1. Which memory each supersede made. The tools name it (memory_queries.py
-- INSERT_REVISION). A revision written without it (before this column, by
-- the old store's migration, or copied by an archive's import, which holds
-- the chains but not the column) is given the memory along its chain of
-- successors that its member created at its time (a supersede writes its
-- successor and its revision in one transaction, at one now()), else the
-- memory's successor as it stands (the old store's migration dates a
-- supersede by the old store's clock; a successor forgotten since has left
-- the chain).
ALTER TABLE memory_revision ADD COLUMN successor_id uuid;

CREATE FUNCTION supersede_successor(superseded uuid, member uuid, at timestamptz)
    RETURNS uuid
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
    WITH RECURSIVE chain(id, hops) AS (
        SELECT m.superseded_by_id, 1 FROM memory m
        WHERE m.id = superseded AND m.superseded_by_id IS NOT NULL
      UNION ALL
        SELECT s.superseded_by_id, c.hops + 1
        FROM chain c JOIN memory s ON s.id = c.id
        WHERE s.superseded_by_id IS NOT NULL AND s.superseded_by_id <> superseded
          AND c.hops < 100000
    )
    SELECT coalesce(
        (SELECT c.id FROM chain c JOIN memory s ON s.id = c.id
         WHERE s.created_by = member AND s.created_at = at
         ORDER BY c.hops LIMIT 1),
        (SELECT m.superseded_by_id FROM memory m WHERE m.id = superseded)) $$;
REVOKE ALL ON FUNCTION supersede_successor(uuid, uuid, timestamptz) FROM PUBLIC;

-- Every path that writes a supersede without naming its successor gets it here.
CREATE FUNCTION memory_revision_successor() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    NEW.successor_id := supersede_successor(NEW.memory_id, NEW.changed_by, NEW.changed_at);
    RETURN NEW;
END $$;

CREATE TRIGGER memory_revision_successor BEFORE INSERT ON memory_revision
    FOR EACH ROW WHEN (NEW.action = 'supersede' AND NEW.successor_id IS NULL)
    EXECUTE FUNCTION memory_revision_successor();

UPDATE memory_revision
SET successor_id = supersede_successor(memory_id, changed_by, changed_at)
WHERE action = 'supersede' AND successor_id IS NULL;

-- 2. Whether the caller sees a memory superseded through the supersede that
-- made `successor`: it, or a memory after it along the chain, is one they may
-- see (visible_successor); or it was forgotten since and would be, but for
-- that. NULL (none known) shows, as before. Run as the owner: the answer is
-- one boolean, never a row.
CREATE FUNCTION supersession_seen(successor uuid) RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = public
    SET plan_cache_mode = force_generic_plan
    AS $$ SELECT successor IS NULL
                 OR EXISTS (SELECT 1 FROM memory s
                            WHERE s.id = successor
                              AND (is_eligible(NULL, s.audience_member_id, s.purposes)
                                   OR visible_successor(s.id) IS NOT NULL)) $$;
REVOKE ALL ON FUNCTION supersession_seen(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION supersession_seen(uuid) TO recallatron_app;

-- 3. The timelines' supersession events (workspace_timeline,
-- entity_member_timeline, episode_timeline), patched as Postgres holds them
-- (as 0068 did): the one place each reads a 'supersede' revision takes it
-- only when the caller sees it. A definition that no longer reads so stops
-- the migration.
DO $$
DECLARE
    fn record;
    def text;
    places integer;
    done integer := 0;
BEGIN
    FOR fn IN
        SELECT p.oid::regprocedure AS oid, f.alias, f.revision
        FROM (VALUES ('workspace_timeline', 'rv', 'rv'),
                     ('entity_member_timeline', 'mc', 'rv'),
                     ('episode_timeline', 'rv', 'rv')) AS f(name, alias, revision)
        JOIN pg_proc p ON p.proname = f.name AND p.pronamespace = 'public'::regnamespace
    LOOP
        def := pg_get_functiondef(fn.oid);
        places := (SELECT count(*) FROM regexp_matches(
            def, '\m' || fn.alias || '\.action = ''supersede''', 'g'));
        IF places <> 1 THEN
            RAISE EXCEPTION '% reads %.action = ''supersede'' in % places, not 1',
                fn.oid, fn.alias, places;
        END IF;
        EXECUTE regexp_replace(
            def, '\m' || fn.alias || '\.action = ''supersede''',
            fn.alias || '.action = ''supersede'' AND supersession_seen('
                || fn.revision || '.successor_id)');
        done := done + 1;
    END LOOP;
    IF done <> 3 THEN
        RAISE EXCEPTION '% timeline functions patched, not 3', done;
    END IF;
END $$;
