-- Aliases, attribute claims and relation claims: each stated by one memory,
-- visible exactly when that memory is, and purged when it is forgotten. Valid
-- time is what the claim states (valid_from, valid_until); record time is
-- when it was stated and when it stopped being current (retired_at:
-- corrected away, or its memory superseded).
CREATE TABLE entity_alias (
    id          uuid PRIMARY KEY,
    memory_id   uuid NOT NULL REFERENCES memory (id),
    entity_id   uuid NOT NULL REFERENCES entity (id),
    alias       text NOT NULL,
    alias_key   text NOT NULL,
    stated_at   timestamptz NOT NULL DEFAULT now(),
    retired_at  timestamptz
);
-- A claim is visible exactly when its stating memory is; it is written with
-- its memory (or by the correct or supersede that changes it), and only its
-- retirement may change afterwards.
ALTER TABLE entity_alias ENABLE ROW LEVEL SECURITY;
ALTER TABLE entity_alias FORCE ROW LEVEL SECURITY;

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
    -- A copy of the stating memory's episode (11_subject_timelines.sql).
    episode_id  uuid,
    CHECK (valid_from IS NULL OR valid_until IS NULL OR valid_until >= valid_from)
);
ALTER TABLE attribute_claim ENABLE ROW LEVEL SECURITY;
ALTER TABLE attribute_claim FORCE ROW LEVEL SECURITY;

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
    -- A copy of the stating memory's episode (11_subject_timelines.sql).
    episode_id  uuid,
    CHECK (valid_from IS NULL OR valid_until IS NULL OR valid_until >= valid_from)
);
ALTER TABLE relation_claim ENABLE ROW LEVEL SECURITY;
ALTER TABLE relation_claim FORCE ROW LEVEL SECURITY;

-- Entity merge, decided by a person (design §8.5). A merge is a recorded,
-- reversible decision that two entities are one; nothing about either entity
-- is rewritten. Readers answer through the group of entities that visible,
-- active merges connect (entity_group below). Keeping a pair apart stops it
-- being proposed again. Both kinds of row name two entities and go when
-- either does (forget deletes an entity nothing mentions any more).
CREATE TABLE entity_merge (
    id           uuid PRIMARY KEY,
    -- The entity whose name the group answers with; merged_id joins it.
    kept_id      uuid NOT NULL REFERENCES entity (id) ON DELETE CASCADE,
    merged_id    uuid NOT NULL REFERENCES entity (id) ON DELETE CASCADE,
    decided_by   uuid NOT NULL,
    decided_at   timestamptz NOT NULL DEFAULT now(),
    undone_by    uuid,
    undone_at    timestamptz,
    CHECK (kept_id <> merged_id),
    CHECK ((undone_by IS NULL) = (undone_at IS NULL))
);
-- A decision exists for a caller only when both its entities do (each
-- through a mention the caller may see): a merge never joins, and a
-- decision never reveals, an entity the caller cannot see evidence for.
ALTER TABLE entity_merge ENABLE ROW LEVEL SECURITY;
ALTER TABLE entity_merge FORCE ROW LEVEL SECURITY;

CREATE TABLE entity_pair_apart (
    first_id     uuid NOT NULL REFERENCES entity (id) ON DELETE CASCADE,
    second_id    uuid NOT NULL REFERENCES entity (id) ON DELETE CASCADE,
    decided_by   uuid NOT NULL,
    decided_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (first_id, second_id),
    CHECK (first_id < second_id)
);
ALTER TABLE entity_pair_apart ENABLE ROW LEVEL SECURITY;
ALTER TABLE entity_pair_apart FORCE ROW LEVEL SECURITY;

-- An entity's corrections and supersessions: each change of a memory once per
-- entity the memory mentions, so an entity's changes are one index away. A
-- row goes with its mention (forget) or its change; written by the triggers
-- below whichever of the two comes last. Ids and times only; the app role has
-- no access to it.
CREATE TABLE mention_change (
    memory_id   uuid NOT NULL,
    entity_id   uuid NOT NULL,
    revision_id bigint NOT NULL REFERENCES memory_revision (id) ON DELETE CASCADE,
    action      text NOT NULL,
    changed_at  timestamptz NOT NULL,
    -- The timeline's key of the change (memory:revision:action).
    key         text NOT NULL,
    PRIMARY KEY (memory_id, entity_id, revision_id),
    FOREIGN KEY (memory_id, entity_id) REFERENCES mention (memory_id, entity_id)
        ON DELETE CASCADE
);

-- Participants: members and entities.
CREATE TABLE episode_participant (
    episode_id  uuid NOT NULL REFERENCES episode (id),
    member_id   uuid,
    -- Forget removes an entity nothing mentions any more; its participation goes too.
    entity_id   uuid REFERENCES entity (id) ON DELETE CASCADE,
    CHECK ((member_id IS NULL) <> (entity_id IS NULL))
);
ALTER TABLE episode_participant ENABLE ROW LEVEL SECURITY;
ALTER TABLE episode_participant FORCE ROW LEVEL SECURITY;
