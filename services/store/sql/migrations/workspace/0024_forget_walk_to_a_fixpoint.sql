-- Forget marks every memory that reaches the forgotten one, including one
-- derived beside it. The walk of migration 0006 read the links as they stood
-- when it began and stopped at memories already marked; a derive from a
-- memory two links away, open at that moment, holds its source FOR SHARE
-- (memory_provenance_fold), so the forget's mark of that source waited for the
-- derive to commit and then missed the derived memory, whose link the walk
-- never saw: forgotten content stayed reachable through it. Now the walk runs
-- again, each time a new statement reading what has committed since, through
-- marked memories too, until it marks nothing: a mark that waited for a
-- derive is followed by a walk that sees that derive's link.
CREATE OR REPLACE FUNCTION memory_provenance_forget() RETURNS trigger
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
