-- A write's request fingerprint (0027) hashes what it asked, text included:
-- once the memory is forgotten (by forget, or a removed member's erase), a
-- hash of its text must not outlive it, or a guess of the forgotten text could
-- be confirmed against the database or a backup. Cleared with the tombstone,
-- on every path that makes one; a retry of such a write still replays (a key
-- without a fingerprint is checked by tool alone, as before 0027).
CREATE FUNCTION request_fingerprint_forget() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    IF OLD.invalidated_at IS NULL AND NEW.invalidated_at IS NOT NULL THEN
        UPDATE request_key SET fingerprint = NULL
        WHERE memory_id = NEW.id AND fingerprint IS NOT NULL;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER request_fingerprint_forget AFTER UPDATE OF invalidated_at ON memory
    FOR EACH ROW EXECUTE FUNCTION request_fingerprint_forget();

-- Memories forgotten before this migration.
UPDATE request_key k SET fingerprint = NULL
FROM memory m
WHERE m.id = k.memory_id AND m.invalidated_at IS NOT NULL AND k.fingerprint IS NOT NULL;
