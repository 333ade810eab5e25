-- A correct's and a supersede's reason are the caller's words about the
-- change, and they often quote the old text ("was: ..."): once the memory is
-- forgotten (forget, or a removed member's erase), its revisions and audit
-- trail keep who changed it and when, not why. Forget's own reason stays,
-- as the tombstone's does (docs/reliability.md). A trigger, as 0028's, so
-- every path that forgets does it.

-- The audit rows of a memory's changes, found without reading the whole log.
CREATE INDEX audit_log_change_memory_idx ON audit_log (memory_id)
    WHERE action IN ('correct', 'supersede');
CREATE INDEX audit_log_superseded_idx ON audit_log ((detail ->> 'superseded_id'))
    WHERE action = 'supersede';

CREATE FUNCTION change_reasons_forget() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    IF OLD.invalidated_at IS NULL AND NEW.invalidated_at IS NOT NULL THEN
        UPDATE memory_revision SET reason = ''
        WHERE memory_id = NEW.id AND action IN ('correct', 'supersede') AND reason <> '';
        UPDATE audit_log SET detail = detail - 'reason'
        WHERE memory_id = NEW.id AND action IN ('correct', 'supersede') AND detail ? 'reason';
        -- A supersede is logged under its successor, naming the memory it replaced.
        UPDATE audit_log SET detail = detail - 'reason'
        WHERE (detail ->> 'superseded_id') = NEW.id::text AND action = 'supersede'
          AND detail ? 'reason';
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER change_reasons_forget AFTER UPDATE OF invalidated_at ON memory
    FOR EACH ROW EXECUTE FUNCTION change_reasons_forget();

-- Memories forgotten before this migration.
UPDATE memory_revision rv SET reason = ''
FROM memory m
WHERE m.id = rv.memory_id AND m.invalidated_at IS NOT NULL
  AND rv.action IN ('correct', 'supersede') AND rv.reason <> '';
UPDATE audit_log a SET detail = a.detail - 'reason'
FROM memory m
WHERE m.invalidated_at IS NOT NULL AND a.action IN ('correct', 'supersede') AND a.detail ? 'reason'
  AND (a.memory_id = m.id OR (a.action = 'supersede' AND (a.detail ->> 'superseded_id') = m.id::text));
