-- Forget clears the request fingerprints of a memory's writes (0028); two
-- gaps in that.
--
-- A supersede's request key is kept under the successor it made, and its
-- fingerprint hashes its reason, which often quotes the memory it replaced
-- ("replaced ..."). Forgetting that memory drops the reason from its history
-- and audit (0037) while the successor lives on, but left the hash: holding
-- the database, one could confirm a guess of the reason against it. Now the
-- replaced memory's forget clears it too (a retry of that supersede still
-- replays, checked by tool alone, as 0028 says).
--
-- The keys were found by memory with no index: each forget, and each memory
-- of a removed member's erase, read the whole table, one row for every write
-- the workspace ever made.
CREATE INDEX request_key_memory_idx ON request_key (memory_id);

CREATE OR REPLACE FUNCTION request_fingerprint_forget() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    IF OLD.invalidated_at IS NULL AND NEW.invalidated_at IS NOT NULL THEN
        UPDATE request_key SET fingerprint = NULL
        WHERE fingerprint IS NOT NULL
          AND (memory_id = NEW.id
               OR (memory_id = NEW.superseded_by_id AND tool = 'supersede'));
    END IF;
    RETURN NULL;
END $$;

-- Memories forgotten before this migration, replaced by a supersede.
UPDATE request_key k SET fingerprint = NULL
FROM memory m
WHERE m.superseded_by_id = k.memory_id AND m.invalidated_at IS NOT NULL
  AND k.tool = 'supersede' AND k.fingerprint IS NOT NULL;
