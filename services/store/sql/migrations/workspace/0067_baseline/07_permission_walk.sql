-- The permission walk, one row per candidate --------------------------------
--
-- A candidate is admitted when every memory reachable along its links is
-- visible to the caller and not forgotten (design §5.5). Links are written
-- once, with their memory, and point only to memories that existed then;
-- audience and purposes never change; forget is final. So what the walk
-- needs of a memory's whole provenance is fixed at its creation except for
-- forget, and is kept on the memory itself:
--   provenance_audience  the intersection of the audiences of the memory and
--                        everything it reaches: NULL the workspace, a member,
--                        or provenance_nobody() when two members meet
--   provenance_purposes  the intersection of their purposes
--   provenance_forgotten something it reaches is forgotten
-- The first two are computed from the direct targets when the links are
-- inserted (their own values already cover what they reach); forget marks
-- every memory that reaches the forgotten one, once. The walk then reads one
-- row per candidate, however deep or wide its provenance (services/store/
-- memory_queries.py, ADMIT), and admits exactly what a walk along the links
-- would: every reached memory is visible to (member, purpose) exactly when
-- the intersections are the workspace or that member and hold the purpose.

-- Stands for "no one": the audiences of two different members met.
CREATE FUNCTION provenance_nobody() RETURNS uuid
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT 'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid $$;

-- A memory's own trust is its provenance's until links say otherwise.
CREATE FUNCTION memory_provenance_init() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    NEW.provenance_audience := NEW.audience_member_id;
    NEW.provenance_purposes := NEW.purposes;
    NEW.provenance_forgotten := false;
    RETURN NEW;
END $$;

CREATE TRIGGER memory_provenance_init BEFORE INSERT ON memory
    FOR EACH ROW EXECUTE FUNCTION memory_provenance_init();

-- Folds a memory's direct targets into its provenance. The targets are
-- locked FOR SHARE: a forget of one of them either commits first (and is
-- seen here, the row re-read after the wait) or waits for this transaction
-- and then finds this memory's link when it marks what reaches it.
CREATE FUNCTION memory_provenance_fold(subject uuid) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    aud uuid;
    purp purpose[];
    gone boolean;
    t record;
BEGIN
    SELECT m.provenance_audience, m.provenance_purposes, m.provenance_forgotten
    INTO aud, purp, gone FROM memory m WHERE m.id = subject;
    FOR t IN
        SELECT x.provenance_audience AS audience, x.provenance_purposes AS purposes,
               x.provenance_forgotten OR x.invalidated_at IS NOT NULL AS forgotten
        FROM memory x
        WHERE x.id IN (SELECT l.target_id FROM memory_link l WHERE l.memory_id = subject)
        ORDER BY x.id
        FOR SHARE OF x
    LOOP
        IF t.audience IS NOT NULL AND aud IS NULL THEN
            aud := t.audience;
        ELSIF t.audience IS NOT NULL AND t.audience <> aud THEN
            aud := provenance_nobody();
        END IF;
        purp := ARRAY(SELECT unnest(purp) INTERSECT SELECT unnest(t.purposes) ORDER BY 1);
        gone := gone OR t.forgotten;
    END LOOP;
    UPDATE memory
    SET provenance_audience = aud, provenance_purposes = purp, provenance_forgotten = gone
    WHERE id = subject;
END $$;

CREATE FUNCTION memory_provenance_links() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    PERFORM memory_provenance_fold(n.memory_id)
    FROM (SELECT DISTINCT memory_id FROM new_links ORDER BY memory_id) n;
    RETURN NULL;
END $$;

CREATE TRIGGER memory_provenance_links AFTER INSERT ON memory_link
    REFERENCING NEW TABLE AS new_links
    FOR EACH STATEMENT EXECUTE FUNCTION memory_provenance_links();

-- Forget marks every memory that reaches the forgotten one, including one
-- derived beside it. A derive from a memory two links away, open while the
-- walk runs, holds its source FOR SHARE (memory_provenance_fold), so the
-- forget's mark of that source waits for the derive to commit, and a walk of
-- the links as they stood when it began would miss the derived memory, whose
-- link it never saw: forgotten content would stay reachable through it. So
-- the walk runs again, each time a new statement reading what has committed
-- since, through marked memories too, until it marks nothing: a mark that
-- waited for a derive is followed by a walk that sees that derive's link.
CREATE FUNCTION memory_provenance_forget() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    marked bigint;
BEGIN
    IF OLD.invalidated_at IS NULL AND NEW.invalidated_at IS NOT NULL THEN
        LOOP
            WITH RECURSIVE up(id) AS (
                SELECT l.memory_id FROM memory_link l WHERE l.target_id = NEW.id
              UNION
                SELECT l.memory_id FROM up JOIN memory_link l ON l.target_id = up.id
            )
            UPDATE memory m SET provenance_forgotten = true
            FROM up WHERE m.id = up.id AND NOT m.provenance_forgotten;
            GET DIAGNOSTICS marked = ROW_COUNT;
            EXIT WHEN marked = 0;
        END LOOP;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER memory_provenance_forget AFTER UPDATE OF invalidated_at ON memory
    FOR EACH ROW EXECUTE FUNCTION memory_provenance_forget();

-- Each arm keeps its first `arm_limit` rows (and the capped lexical path its
-- newest `cap` matches) before the walk runs: a row the walk is certain to
-- refuse (a memory visible itself but about, or derived from, one the caller
-- may not see, or a forgotten one) must not take a place, or the answer
-- would change with rows the caller may not see (design §4, §5 steps 1 and
-- 5). So the arms apply the walk's own condition on the provenance kept on
-- each memory (provenance_audience, _purposes, _forgotten, current after
-- every link, forget and member removal), and return only rows the walk
-- would admit. The walk itself stays: it is the answer's snapshot, and
-- guards a row changed between the arms and the walk.

-- The walk's condition (memory_queries.ADMIT) on one memory's provenance,
-- for a caller; inlined where it is used.
CREATE FUNCTION provenance_admits(
    audience uuid, purposes purpose[], forgotten boolean, member uuid, the_purpose purpose
) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT NOT forgotten AND (audience IS NULL OR audience = member)
                 AND the_purpose = ANY (purposes) $$;

-- The walk's condition on a vector's copy, for the HNSW statement
-- (recall.DENSE): PL/pgSQL, evaluated as a simple expression and opaque to
-- the planner, as vector_is_eligible is (08_embedding.sql), so the planner
-- still walks the index rather than sorting every vector.
CREATE FUNCTION vector_provenance_admits(audience uuid, purposes purpose[], forgotten boolean)
    RETURNS boolean
    LANGUAGE plpgsql STABLE PARALLEL SAFE SET search_path = public
    AS $$
BEGIN
    RETURN NOT forgotten AND (audience IS NULL OR audience = caller_member())
           AND caller_purpose() = ANY (purposes);
END $$;
