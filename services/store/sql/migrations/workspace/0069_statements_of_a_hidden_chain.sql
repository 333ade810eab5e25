-- A caller who reads a memory as current though a successor hidden from them
-- superseded it (memory_reads_current, 0068) may correct and supersede it as
-- any current memory (services/store/domain/memory_revisions.py): what the
-- memory then states, and what a new memory put before the hidden successor
-- in its chain states, is current for whoever reads it as current and retired
-- by its supersede for whoever sees that successor. Such a statement is
-- retired the moment it is stated (stated_at = retired_at, both now() of that
-- transaction), which nothing else does. And a memory superseded again by
-- such a caller has several supersedes, the earlier one's retirement still
-- standing for those who read it as current.
--
-- The import (which holds retired_at, stated_at and the revisions, not the
-- column) marks these too: a superseded memory's statements retired at the
-- time of any of its supersedes (a correct retires at its own time, never at
-- a supersede's), or at the time they were stated.
CREATE OR REPLACE FUNCTION mark_supersede_retirements() RETURNS void
    LANGUAGE sql SECURITY DEFINER SET search_path = public AS $$
    WITH superseded AS (
        SELECT m.id AS memory_id, coalesce(array_agg(r.changed_at) FILTER (
                   WHERE r.action = 'supersede'), '{}') AS at
        FROM memory m LEFT JOIN memory_revision r ON r.memory_id = m.id
        WHERE m.superseded_by_id IS NOT NULL
        GROUP BY m.id
    ), attributes AS (
        UPDATE attribute_claim c SET retired_by_supersede = true FROM superseded s
        WHERE c.memory_id = s.memory_id AND NOT c.retired_by_supersede
          AND (c.retired_at = ANY (s.at) OR c.retired_at = c.stated_at)
    ), relations AS (
        UPDATE relation_claim c SET retired_by_supersede = true FROM superseded s
        WHERE c.memory_id = s.memory_id AND NOT c.retired_by_supersede
          AND (c.retired_at = ANY (s.at) OR c.retired_at = c.stated_at)
    )
    UPDATE entity_alias c SET retired_by_supersede = true FROM superseded s
    WHERE c.memory_id = s.memory_id AND NOT c.retired_by_supersede
      AND (c.retired_at = ANY (s.at) OR c.retired_at = c.stated_at);
$$;
