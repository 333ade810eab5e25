-- The memory graph (design §3, §7): entities gain a type and a normalised
-- name; aliases, attribute claims and relation claims are each stated by one
-- memory, visible exactly when that memory is, and purged when it is
-- forgotten. Valid time is what the claim states (valid_from, valid_until);
-- record time is when it was stated and when it stopped being current
-- (retired_at: corrected away, or its memory superseded).

ALTER TABLE entity ADD COLUMN type text;
-- Lookup's key: case, accents and spacing folded. services/store/graph_rules.py
-- computes it for every new entity; rows older than this file get the same
-- fold here (lower() rather than Python's casefold: equal for all but a few
-- letters such as ß).
ALTER TABLE entity ADD COLUMN name_key text;
UPDATE entity SET name_key = btrim(regexp_replace(
    lower(regexp_replace(normalize(name, NFKD), '[\u0300-\u036f]', '', 'g')), '\s+', ' ', 'g'));
ALTER TABLE entity ALTER COLUMN name_key SET NOT NULL;
CREATE INDEX entity_name_key_idx ON entity (name_key);

CREATE TABLE entity_alias (
    id          uuid PRIMARY KEY,
    memory_id   uuid NOT NULL REFERENCES memory (id),
    entity_id   uuid NOT NULL REFERENCES entity (id),
    alias       text NOT NULL,
    alias_key   text NOT NULL,
    stated_at   timestamptz NOT NULL DEFAULT now(),
    retired_at  timestamptz
);
CREATE INDEX entity_alias_key_idx ON entity_alias (alias_key);
CREATE INDEX entity_alias_entity_idx ON entity_alias (entity_id);
CREATE INDEX entity_alias_memory_idx ON entity_alias (memory_id);

CREATE TABLE attribute_claim (
    id          uuid PRIMARY KEY,
    memory_id   uuid NOT NULL REFERENCES memory (id),
    entity_id   uuid NOT NULL REFERENCES entity (id),
    attribute   text NOT NULL,
    value       text NOT NULL,
    valid_from  timestamptz,
    valid_until timestamptz,
    confidence  double precision NOT NULL DEFAULT 1 CHECK (confidence BETWEEN 0 AND 1),
    stated_at   timestamptz NOT NULL DEFAULT now(),
    retired_at  timestamptz,
    CHECK (valid_from IS NULL OR valid_until IS NULL OR valid_until >= valid_from)
);
CREATE INDEX attribute_claim_entity_idx ON attribute_claim (entity_id);
CREATE INDEX attribute_claim_memory_idx ON attribute_claim (memory_id);

CREATE TABLE relation_claim (
    id          uuid PRIMARY KEY,
    memory_id   uuid NOT NULL REFERENCES memory (id),
    subject_id  uuid NOT NULL REFERENCES entity (id),
    predicate   text NOT NULL,
    object_id   uuid NOT NULL REFERENCES entity (id),
    valid_from  timestamptz,
    valid_until timestamptz,
    confidence  double precision NOT NULL DEFAULT 1 CHECK (confidence BETWEEN 0 AND 1),
    stated_at   timestamptz NOT NULL DEFAULT now(),
    retired_at  timestamptz,
    CHECK (valid_from IS NULL OR valid_until IS NULL OR valid_until >= valid_from)
);
-- Both directions of a traversal, each narrowed by predicate when asked.
CREATE INDEX relation_claim_subject_idx ON relation_claim (subject_id, predicate);
CREATE INDEX relation_claim_object_idx ON relation_claim (object_id, predicate);
CREATE INDEX relation_claim_memory_idx ON relation_claim (memory_id);

-- An entity exists for a caller only through a mention it may see (every
-- entity a claim names is mentioned by the stating memory), or in the
-- transaction that wrote it. Its name is never readable otherwise.
ALTER TABLE entity ENABLE ROW LEVEL SECURITY;
ALTER TABLE entity FORCE ROW LEVEL SECURITY;
CREATE POLICY entity_visible ON entity FOR SELECT
    USING (xmin = pg_current_xact_id_if_assigned()::xid
           OR EXISTS (SELECT 1 FROM mention mn WHERE mn.entity_id = entity.id));
CREATE POLICY entity_insert ON entity FOR INSERT WITH CHECK (true);

-- A claim is visible exactly when its stating memory is; it is written with
-- its memory (or by the correct or supersede that changes it), and only its
-- retirement may change afterwards.
ALTER TABLE entity_alias ENABLE ROW LEVEL SECURITY;
ALTER TABLE entity_alias FORCE ROW LEVEL SECURITY;
CREATE POLICY entity_alias_visible ON entity_alias FOR SELECT
    USING (EXISTS (SELECT 1 FROM memory m WHERE m.id = entity_alias.memory_id));
CREATE POLICY entity_alias_insert ON entity_alias FOR INSERT
    WITH CHECK (created_in_this_transaction(memory_id));
CREATE POLICY entity_alias_retire ON entity_alias FOR UPDATE
    USING (created_in_this_transaction(memory_id))
    WITH CHECK (created_in_this_transaction(memory_id));

ALTER TABLE attribute_claim ENABLE ROW LEVEL SECURITY;
ALTER TABLE attribute_claim FORCE ROW LEVEL SECURITY;
CREATE POLICY attribute_claim_visible ON attribute_claim FOR SELECT
    USING (EXISTS (SELECT 1 FROM memory m WHERE m.id = attribute_claim.memory_id));
CREATE POLICY attribute_claim_insert ON attribute_claim FOR INSERT
    WITH CHECK (created_in_this_transaction(memory_id));
CREATE POLICY attribute_claim_retire ON attribute_claim FOR UPDATE
    USING (created_in_this_transaction(memory_id))
    WITH CHECK (created_in_this_transaction(memory_id));

ALTER TABLE relation_claim ENABLE ROW LEVEL SECURITY;
ALTER TABLE relation_claim FORCE ROW LEVEL SECURITY;
CREATE POLICY relation_claim_visible ON relation_claim FOR SELECT
    USING (EXISTS (SELECT 1 FROM memory m WHERE m.id = relation_claim.memory_id));
CREATE POLICY relation_claim_insert ON relation_claim FOR INSERT
    WITH CHECK (created_in_this_transaction(memory_id));
CREATE POLICY relation_claim_retire ON relation_claim FOR UPDATE
    USING (created_in_this_transaction(memory_id))
    WITH CHECK (created_in_this_transaction(memory_id));

-- Mentions may be added by the write that changes a memory (a correct that
-- states claims about a new entity), as they may by the one that creates it:
-- created_in_this_transaction() is true for a row this transaction wrote.

GRANT SELECT, INSERT ON entity_alias, attribute_claim, relation_claim TO recallatron_app;
GRANT UPDATE (retired_at) ON entity_alias, attribute_claim, relation_claim TO recallatron_app;

-- Forget purges the graph with the text (design §8, erasure): the memory's
-- claims, aliases and mentions go, and so does every entity nothing mentions
-- any more (its name is text of the forgotten memory too).
CREATE FUNCTION graph_forget() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    named uuid[];
BEGIN
    IF OLD.invalidated_at IS NULL AND NEW.invalidated_at IS NOT NULL THEN
        DELETE FROM attribute_claim WHERE memory_id = NEW.id;
        DELETE FROM relation_claim WHERE memory_id = NEW.id;
        DELETE FROM entity_alias WHERE memory_id = NEW.id;
        SELECT array_agg(entity_id) INTO named FROM mention WHERE memory_id = NEW.id;
        DELETE FROM mention WHERE memory_id = NEW.id;
        DELETE FROM entity e
        WHERE e.id = ANY (coalesce(named, '{}'))
          AND NOT EXISTS (SELECT 1 FROM mention mn WHERE mn.entity_id = e.id)
          AND NOT EXISTS (SELECT 1 FROM attribute_claim c WHERE c.entity_id = e.id)
          AND NOT EXISTS (SELECT 1 FROM relation_claim r
                          WHERE r.subject_id = e.id OR r.object_id = e.id)
          AND NOT EXISTS (SELECT 1 FROM entity_alias a WHERE a.entity_id = e.id);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER graph_forget AFTER UPDATE OF invalidated_at ON memory
    FOR EACH ROW EXECUTE FUNCTION graph_forget();
