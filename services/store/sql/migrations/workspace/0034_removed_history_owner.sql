-- Conversation history (migration 0003) is written for one member, as a
-- private memory is, and a removal erases or hands it over with their
-- memories (design §10). An import of the old store is checked against the
-- control plane once, when it starts, and its batches may come while the
-- removal runs: so every history row holds its owner's write lock (shared, to
-- the end of its transaction) and then reads removed_member, as memories and
-- episodes do (migration 0025). A batch either commits before the removal's
-- transaction (and is erased or handed over with the rest) or is refused
-- after it. The refusal names the column: the importer reports it as the
-- owner's removal (services/store/legacy/importer.py).
CREATE FUNCTION refuse_removed_history_owner() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(7404, hashtext(NEW.owner_member_id::text));
    IF EXISTS (SELECT 1 FROM removed_member WHERE member_id = NEW.owner_member_id) THEN
        RAISE EXCEPTION 'the member was removed'
            USING ERRCODE = 'invalid_parameter_value', COLUMN = 'owner_member_id';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER history_owner_not_removed BEFORE INSERT ON history_entry
    FOR EACH ROW EXECUTE FUNCTION refuse_removed_history_owner();
