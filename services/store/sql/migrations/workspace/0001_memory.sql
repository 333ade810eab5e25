-- One workspace's memories, their links and mentions, embeddings, the
-- embedding job queue, idempotency keys and the audit trail.
-- Eligibility (design §4) lives here once, as row-level security policies.

CREATE EXTENSION IF NOT EXISTS vector;

CREATE TYPE memory_kind AS ENUM ('note', 'fact', 'decision', 'summary');
CREATE TYPE memory_origin AS ENUM ('told', 'derived', 'migrated');
CREATE TYPE purpose AS ENUM ('assist', 'automate', 'personalize', 'audit');
CREATE TYPE link_kind AS ENUM ('derived_from', 'about');

-- The caller of the current transaction, set with SET LOCAL semantics
-- (set_config(..., true)) by the store before any query.
CREATE FUNCTION caller_member() RETURNS uuid
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT nullif(current_setting('recallatron.member_id', true), '')::uuid $$;

CREATE FUNCTION caller_purpose() RETURNS purpose
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT nullif(current_setting('recallatron.purpose', true), '')::purpose $$;

CREATE TABLE memory (
    id                  uuid PRIMARY KEY,
    kind                memory_kind NOT NULL,
    -- Emptied by forget; the row stays as a tombstone.
    title               text NOT NULL,
    body                text NOT NULL,
    search              tsvector GENERATED ALWAYS AS (
                            setweight(to_tsvector('english', title), 'A')
                            || setweight(to_tsvector('english', body), 'B')
                        ) STORED,
    confidence          double precision NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    origin              memory_origin NOT NULL,
    revision            bigint NOT NULL DEFAULT 1 CHECK (revision >= 1),
    superseded_by_id    uuid REFERENCES memory (id),
    invalidated_at      timestamptz,
    invalidation_reason text,
    invalidated_by      uuid,
    -- NULL: the whole workspace; otherwise exactly one member.
    audience_member_id  uuid,
    purposes            purpose[] NOT NULL CHECK (cardinality(purposes) > 0),
    created_by          uuid NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    CHECK (superseded_by_id IS NULL OR superseded_by_id <> id),
    CHECK (invalidated_at IS NULL OR (title = '' AND body = ''))
);

CREATE INDEX memory_search_idx ON memory USING gin (search);
CREATE INDEX memory_created_idx ON memory (created_at DESC);
CREATE INDEX memory_superseded_by_idx ON memory (superseded_by_id) WHERE superseded_by_id IS NOT NULL;
CREATE INDEX memory_audience_idx ON memory (audience_member_id);

CREATE TABLE memory_link (
    memory_id   uuid NOT NULL REFERENCES memory (id),
    kind        link_kind NOT NULL,
    target_id   uuid NOT NULL REFERENCES memory (id),
    PRIMARY KEY (memory_id, kind, target_id),
    CHECK (memory_id <> target_id)
);
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

CREATE TABLE entity (
    id          uuid PRIMARY KEY,
    name        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE mention (
    memory_id   uuid NOT NULL REFERENCES memory (id),
    entity_id   uuid NOT NULL REFERENCES entity (id),
    PRIMARY KEY (memory_id, entity_id)
);
CREATE INDEX mention_entity_idx ON mention (entity_id);

-- A derived index: losing it costs recall, never correctness.
CREATE TABLE memory_embedding (
    memory_id       uuid NOT NULL REFERENCES memory (id),
    model_id        text NOT NULL,
    input_version   text NOT NULL,
    embedding       vector(384) NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (memory_id, model_id, input_version)
);
CREATE INDEX memory_embedding_hnsw_idx ON memory_embedding
    USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);

-- Outbox for the embedding job: a row per memory whose text needs embedding.
-- Written in the same transaction as the memory, processed after it commits.
CREATE TABLE embedding_job (
    memory_id       uuid PRIMARY KEY REFERENCES memory (id),
    -- Bumped on every text change so a worker never stores a stale vector.
    text_revision   bigint NOT NULL,
    enqueued_at     timestamptz NOT NULL DEFAULT now(),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX embedding_job_due_idx ON embedding_job (next_attempt_at);

-- Keeps embeddings and the job queue in step with the memory's text and state.
-- SECURITY DEFINER: a forgotten memory is no longer visible to the caller,
-- yet its embedding must still be purged.
CREATE FUNCTION memory_embedding_sync() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO embedding_job (memory_id, text_revision) VALUES (NEW.id, NEW.revision);
        RETURN NEW;
    END IF;
    IF NEW.invalidated_at IS NOT NULL OR NEW.superseded_by_id IS NOT NULL THEN
        DELETE FROM memory_embedding WHERE memory_id = NEW.id;
        DELETE FROM embedding_job WHERE memory_id = NEW.id;
    ELSIF NEW.title IS DISTINCT FROM OLD.title OR NEW.body IS DISTINCT FROM OLD.body THEN
        DELETE FROM memory_embedding WHERE memory_id = NEW.id;
        INSERT INTO embedding_job (memory_id, text_revision) VALUES (NEW.id, NEW.revision)
            ON CONFLICT (memory_id) DO UPDATE
            SET text_revision = EXCLUDED.text_revision, attempts = 0, next_attempt_at = now();
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER memory_embedding_sync_insert AFTER INSERT ON memory
    FOR EACH ROW EXECUTE FUNCTION memory_embedding_sync();
CREATE TRIGGER memory_embedding_sync_update AFTER UPDATE ON memory
    FOR EACH ROW EXECUTE FUNCTION memory_embedding_sync();

-- Client request ids: a retried write returns its first result.
CREATE TABLE request_key (
    member_id   uuid NOT NULL,
    request_id  text NOT NULL,
    tool        text NOT NULL,
    memory_id   uuid NOT NULL REFERENCES memory (id),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (member_id, request_id)
);

-- Who wrote what, when. Never holds memory text.
CREATE TABLE audit_log (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    member_id   uuid NOT NULL,
    action      text NOT NULL,
    memory_id   uuid,
    request_id  text,
    detail      jsonb NOT NULL DEFAULT '{}'::jsonb
);

-- Eligibility, once (design §4): audience is the workspace or the caller, the
-- caller's purpose is one of the memory's, and it is not forgotten. The
-- policies and the tombstone function below all use this one function.
CREATE FUNCTION is_eligible(invalidated_at timestamptz, audience_member_id uuid,
                            purposes purpose[]) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT invalidated_at IS NULL
                 AND (audience_member_id IS NULL OR audience_member_id = caller_member())
                 AND caller_purpose() = ANY (purposes) $$;

ALTER TABLE memory ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory FORCE ROW LEVEL SECURITY;
CREATE POLICY memory_eligible ON memory FOR SELECT
    USING (is_eligible(invalidated_at, audience_member_id, purposes));
CREATE POLICY memory_insert ON memory FOR INSERT
    WITH CHECK (created_by = caller_member());
CREATE POLICY memory_update ON memory FOR UPDATE
    USING (is_eligible(invalidated_at, audience_member_id, purposes))
    WITH CHECK (is_eligible(invalidated_at, audience_member_id, purposes));

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

-- Links and mentions are visible only through a memory the caller may see.
ALTER TABLE memory_link ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_link FORCE ROW LEVEL SECURITY;
CREATE POLICY memory_link_visible ON memory_link FOR SELECT
    USING (EXISTS (SELECT 1 FROM memory m WHERE m.id = memory_link.memory_id));
CREATE POLICY memory_link_insert ON memory_link FOR INSERT
    WITH CHECK (created_in_this_transaction(memory_id));

ALTER TABLE mention ENABLE ROW LEVEL SECURITY;
ALTER TABLE mention FORCE ROW LEVEL SECURITY;
CREATE POLICY mention_visible ON mention FOR SELECT
    USING (EXISTS (SELECT 1 FROM memory m WHERE m.id = mention.memory_id));
CREATE POLICY mention_insert ON mention FOR INSERT
    WITH CHECK (created_in_this_transaction(memory_id));

ALTER TABLE memory_embedding ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_embedding FORCE ROW LEVEL SECURITY;
CREATE POLICY memory_embedding_visible ON memory_embedding FOR SELECT
    USING (EXISTS (SELECT 1 FROM memory m WHERE m.id = memory_embedding.memory_id));

ALTER TABLE request_key ENABLE ROW LEVEL SECURITY;
ALTER TABLE request_key FORCE ROW LEVEL SECURITY;
CREATE POLICY request_key_own ON request_key
    USING (member_id = caller_member()) WITH CHECK (member_id = caller_member());

-- The app role: DML only where the tools need it, never DDL, never link edits.
GRANT USAGE ON SCHEMA public TO recallatron_app;
GRANT SELECT, INSERT, UPDATE ON memory TO recallatron_app;
GRANT SELECT, INSERT ON memory_link, mention, entity, request_key TO recallatron_app;
GRANT SELECT, INSERT ON audit_log TO recallatron_app;
GRANT SELECT ON memory_embedding TO recallatron_app;
REVOKE ALL ON FUNCTION forget_memory(uuid, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION forget_memory(uuid, text) TO recallatron_app;
