-- A supersede renews nothing: the memory's updated_at stays
-- (memory_queries.SUPERSEDE), since whoever may not see the successor reads
-- the memory as current, and a renewal would date it, for them, to a change
-- they may not see and bring it back inside the workspace's expiry gate
-- (expiry_days). A release before set updated_at to the supersede's time
-- (the transaction's now(), which its revision's changed_at holds too).
--
-- Those rows are restored to the time of the memory's last change that is
-- not a supersede: its create (created_at, its revision's time too) or its
-- latest correct. Only a memory whose updated_at is the time of one of its
-- supersede revisions, so one corrected since (updated_at the correct's
-- time), a tombstone (the forget's) or one already right is left alone; run
-- again it changes nothing. The vectors' copies follow by trigger
-- (memory_embedding_follow_renewal). An archive exported by such a release
-- holds the same rows, so its import calls it too
-- (archive_queries.RESTORE_SUPERSEDED_UPDATED_AT).
CREATE FUNCTION restore_superseded_updated_at() RETURNS void
    LANGUAGE sql SECURITY DEFINER SET search_path = public AS $$
    UPDATE memory m SET updated_at = greatest(m.created_at, last.at)
    FROM (SELECT r.memory_id,
                 max(r.changed_at) FILTER (WHERE r.action IN ('create', 'correct')) AS at
          FROM memory_revision r
          WHERE r.memory_id IN (SELECT memory_id FROM memory_revision WHERE action = 'supersede')
          GROUP BY r.memory_id) last
    WHERE m.id = last.memory_id
      AND m.invalidated_at IS NULL
      AND m.updated_at <> greatest(m.created_at, last.at)
      AND EXISTS (SELECT 1 FROM memory_revision s
                  WHERE s.memory_id = m.id AND s.action = 'supersede'
                    AND s.changed_at = m.updated_at);
$$;
-- The migration and an archive's import call it as the database's owner; no
-- caller may.
REVOKE ALL ON FUNCTION restore_superseded_updated_at() FROM PUBLIC;
SELECT restore_superseded_updated_at();
