-- Memories, links and mentions, request keys and the audit trail: the rules
-- every write and read of them keeps, whoever calls.

-- The caller of the current transaction, set with SET LOCAL semantics
-- (set_config(..., true)) by the store before any query.
CREATE FUNCTION caller_member() RETURNS uuid
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT nullif(current_setting('recallatron.member_id', true), '')::uuid $$;

CREATE FUNCTION caller_purpose() RETURNS purpose
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT nullif(current_setting('recallatron.purpose', true), '')::purpose $$;

CREATE INDEX memory_created_idx ON memory (created_at DESC);

CREATE INDEX memory_superseded_by_idx ON memory (superseded_by_id) WHERE superseded_by_id IS NOT NULL;

CREATE INDEX memory_audience_idx ON memory (audience_member_id);

CREATE INDEX memory_link_target_idx ON memory_link (target_id);

-- Links are written once, with their memory, and never edited.
CREATE FUNCTION refuse_link_change() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'memory_link rows are write-once' USING ERRCODE = 'integrity_constraint_violation';
END $$;

CREATE TRIGGER memory_link_write_once
    BEFORE UPDATE OR DELETE OR TRUNCATE ON memory_link
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_link_change();

-- Eligibility, once (design §4): audience is the workspace or the caller, the
-- caller's purpose is one of the memory's, and it is not forgotten. The
-- policies and the tombstone function below all use this one function.
CREATE FUNCTION is_eligible(invalidated_at timestamptz, audience_member_id uuid,
                            purposes purpose[]) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT invalidated_at IS NULL
                 AND (audience_member_id IS NULL OR audience_member_id = caller_member())
                 AND caller_purpose() = ANY (purposes) $$;

-- Forget turns an eligible memory into a tombstone, which is by definition no
-- longer eligible, so no policy-checked UPDATE can write it: this function
-- does, for eligible rows only. The text goes; the row stays so links keep
-- their target. Returns the time, or NULL when the caller may not see it.
CREATE FUNCTION forget_memory(memory uuid, reason text) RETURNS timestamptz
    LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public
    AS $$ UPDATE memory m
          SET title = '', body = '', invalidated_at = now(), invalidation_reason = reason,
              invalidated_by = caller_member(), updated_at = now()
          WHERE m.id = memory AND is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
          RETURNING m.invalidated_at $$;

-- True only inside the transaction that created the memory: links and
-- mentions are written with their memory and never added later.
CREATE FUNCTION created_in_this_transaction(memory uuid) RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public
    AS $$ SELECT EXISTS (SELECT 1 FROM memory m
                         WHERE m.id = memory AND m.xmin = pg_current_xact_id()::xid) $$;

-- A write's request fingerprint hashes what it asked, text included: once the
-- memory is forgotten (by forget, or a removed member's erase), a hash of its
-- text must not outlive it, or a guess of the forgotten text could be
-- confirmed against the database or a backup. Cleared with the tombstone, on
-- every path that makes one; a retry of such a write still replays (a key
-- without a fingerprint is checked by tool alone). A supersede's request key
-- is kept under the successor it made, and its fingerprint hashes its reason,
-- which often quotes the memory it replaced ("replaced ..."): the replaced
-- memory's forget clears it too.
CREATE FUNCTION request_fingerprint_forget() RETURNS trigger
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

CREATE TRIGGER request_fingerprint_forget AFTER UPDATE OF invalidated_at ON memory
    FOR EACH ROW EXECUTE FUNCTION request_fingerprint_forget();

-- An owner's list of one author's memories (ListMemories with created_by,
-- services/store/domain/owner_view.py): without it the created_at index is
-- walked over the whole workspace for that author's rows, so one author's few
-- memories among thousands of another's cost the thousands. This one gives
-- an author's memories newest first (the listing's order and its keyset), for
-- the statement that names the author as a plain equality.
CREATE INDEX memory_author_idx ON memory (created_by, created_at DESC, id DESC);

-- Conversation history (05_history.sql) is written for one member, as a
-- private memory is, and a removal erases or hands it over with their
-- memories (design §10). An import of the old store is checked against the
-- control plane once, when it starts, and its batches may come while the
-- removal runs: so every history row holds its owner's write lock (shared, to
-- the end of its transaction) and then reads removed_member, as memories and
-- episodes do (refuse_removed_member below). A batch either commits before
-- the removal's transaction (and is erased or handed over with the rest) or is refused
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

-- A removed member is the audience of nothing new and authors nothing new
-- (design §10), a row for the whole workspace included (an old-store
-- migration run under an owner removed meanwhile must not write its workspace
-- memories under them): a new row takes the write lock (shared, to the end of
-- its transaction) of its audience and of its author and then reads
-- removed_member for both, so the removal (which holds the member's lock
-- alone) comes wholly before or after it. The audience is named first; an
-- author refused names created_by (the store maps both; the old-store
-- migration stops and says so). Memories of a removed member already written
-- (kept, or handed over) are updated, never inserted, so they read, correct
-- and forget as any other.
CREATE FUNCTION refuse_removed_member() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    member uuid;
    field text;
BEGIN
    FOR member, field IN
        SELECT m, f FROM (VALUES (1, NEW.audience_member_id, 'audience.member_id'),
                                 (2, NEW.created_by, 'created_by')) AS v(o, m, f)
        WHERE m IS NOT NULL ORDER BY o
    LOOP
        PERFORM pg_advisory_xact_lock_shared(7404, hashtext(member::text));
        IF EXISTS (SELECT 1 FROM removed_member WHERE member_id = member) THEN
            RAISE EXCEPTION 'the member was removed'
                USING ERRCODE = 'invalid_parameter_value', COLUMN = field;
        END IF;
    END LOOP;
    RETURN NEW;
END $$;

CREATE TRIGGER memory_member_not_removed BEFORE INSERT ON memory
    FOR EACH ROW EXECUTE FUNCTION refuse_removed_member();

CREATE TRIGGER episode_member_not_removed BEFORE INSERT ON episode
    FOR EACH ROW EXECUTE FUNCTION refuse_removed_member();

-- The audit rows of a memory's changes, found without reading the whole log.
CREATE INDEX audit_log_change_memory_idx ON audit_log (memory_id)
    WHERE action IN ('correct', 'supersede');

CREATE INDEX audit_log_superseded_idx ON audit_log ((detail ->> 'superseded_id'))
    WHERE action = 'supersede';

-- A correct's and a supersede's reason are the caller's words about the
-- change, and they often quote the old text ("was: ..."): once the memory is
-- forgotten (forget, or a removed member's erase), its revisions and audit
-- trail keep who changed it and when, not why. Forget's own reason stays,
-- as the tombstone's does (docs/reliability.md). A trigger, as the request
-- fingerprints' is, so every path that forgets does it.
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

-- A memory's text in one Unicode form (NFC: "é" as one code point), so a word
-- typed in either form finds it: Postgres keeps "café" composed and decomposed
-- ("e" and a combining accent) as two lexemes. Normalised on the way in, on
-- every path that writes text (the tools, capture, imports, the migration
-- from the old store); the store normalises the query the same way. The text
-- reads back canonically equivalent to what was written. History evidence is
-- kept as it was said (05_history.sql), and not normalised.
CREATE FUNCTION memory_text_nfc() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    NEW.title := normalize(NEW.title, NFC);
    NEW.body := normalize(NEW.body, NFC);
    RETURN NEW;
END $$;

-- Only a row not in NFC already calls the function: the usual write pays the
-- check alone.
CREATE TRIGGER memory_text_nfc BEFORE INSERT OR UPDATE OF title, body ON memory
    FOR EACH ROW
    WHEN (NOT (NEW.title IS NFC NORMALIZED AND NEW.body IS NFC NORMALIZED))
    EXECUTE FUNCTION memory_text_nfc();

-- The keys of a memory's writes, found by memory: each forget, and each
-- memory of a removed member's erase, would read the whole table otherwise,
-- one row for every write the workspace ever made.
CREATE INDEX request_key_memory_idx ON request_key (memory_id);

-- An owner's audit log filtered by member or by actions (ListAuditEvents,
-- services/store/domain/owner_view.py): without an index each page walks the
-- log from its newest event for the rows that match, so a member's few old
-- events among 20,000 of another's would cost the 20,000 on every page. These
-- give a member's events, an action's, and a member's of one
-- action newest first (ascending -id: the log's order and its keyset), for
-- the statements that name them as plain equalities
-- (owner_queries.AUDIT_EVENTS_*); a list of actions is walked action by
-- action and merged. Keyed by -id rather than id so that only they give that
-- order: the primary key, which gives "id DESC", is no candidate for it
-- (owner_queries.BY_NEGATED_ID). The log has no row security: an owner reads
-- all of it.
CREATE INDEX audit_log_member_idx ON audit_log (member_id, (-id));

CREATE INDEX audit_log_action_idx ON audit_log (action, (-id));

CREATE INDEX audit_log_member_action_idx ON audit_log (member_id, action, (-id));

-- An owner's audit log filtered by time (ListAuditEvents with from/to,
-- services/store/domain/owner_view.py): walking the log from its newest event
-- for the rows in the window, a window before all but the oldest of 20,005
-- events would cost the 20,004 on every page, with a member filter too.
--
-- The log's order and keyset is the id; the window is on `at`, which is set
-- at insert to now(), the start of the writing transaction. Ids mostly grow
-- with `at`, but not always: a long transaction's events take later ids with
-- an earlier time, and a clock may go back. So a window is not turned into id
-- bounds; these GiST indexes (btree_gist) hold each event as a point of its
-- id and time, after the member (and action) or the action it is asked by,
-- and are walked nearest first to the page token's id (owner_queries'
-- BY_DISTANCE), skipping index pages whose times all lie outside the window:
-- a page reads the events in the window and no others, whatever the times'
-- order.
--
-- Each index holds the id in its own spelling (id, -id, id::float8), and each
-- statement names one, so that only its index serves it: the planner, which
-- cannot tell them apart by cost, would walk the action index for the whole
-- log's window, every action's and member's part of it (some 20 times the
-- index pages of its own).
CREATE INDEX audit_log_time_idx ON audit_log USING gist (id, at);

CREATE INDEX audit_log_member_time_idx ON audit_log USING gist (member_id, action, (-id), at);

CREATE INDEX audit_log_action_time_idx ON audit_log USING gist (action, (id::float8), at);
