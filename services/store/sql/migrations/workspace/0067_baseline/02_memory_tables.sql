-- The tables of memories and what hangs on them: links, entities and
-- mentions, request keys, the audit trail, removed members, vectors and the
-- embedding job's outbox, history evidence, the lexical statistics, the
-- duplicate review's decisions and revisions. Episodes first: a memory names
-- its episode. Each table's row security is enabled with it; the policies
-- are 13_policies.sql.

-- Episodes (design §3.3): a dated span of one conversation or event, with its
-- own audience and purposes under the same eligibility as a memory; memories
-- may belong to one. Captured turns of one speaker share an episode until a
-- gap of more than two hours (services/store/episodes.py).
CREATE TABLE episode (
    id                  uuid PRIMARY KEY,
    title               text NOT NULL,
    started_at          timestamptz NOT NULL,
    ended_at            timestamptz NOT NULL CHECK (ended_at >= started_at),
    audience_member_id  uuid,
    purposes            purpose[] NOT NULL CHECK (cardinality(purposes) > 0),
    -- Set for the episodes capture opens: whose turns they gather.
    speaker_member_id   uuid,
    created_by          uuid NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE episode ENABLE ROW LEVEL SECURITY;
ALTER TABLE episode FORCE ROW LEVEL SECURITY;

-- A memory: what a member told, derived or brought over, with its trust
-- (audience, purposes) and its place in a chain of successors.
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
    -- The audience as the statistics and the indexes key it (stat_audience).
    audience_key        uuid GENERATED ALWAYS AS (stat_audience(audience_member_id)) STORED,
    -- What the memory's provenance allows: kept by trigger from the memories
    -- it derives from (07_permission_walk.sql).
    provenance_audience uuid,
    provenance_purposes purpose[] NOT NULL,
    provenance_forgotten boolean NOT NULL DEFAULT false,
    episode_id          uuid REFERENCES episode (id),
    CHECK (superseded_by_id IS NULL OR superseded_by_id <> id),
    CHECK (invalidated_at IS NULL OR (title = '' AND body = ''))
);
ALTER TABLE memory ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory FORCE ROW LEVEL SECURITY;

CREATE TABLE memory_link (
    memory_id   uuid NOT NULL REFERENCES memory (id),
    kind        link_kind NOT NULL,
    target_id   uuid NOT NULL REFERENCES memory (id),
    PRIMARY KEY (memory_id, kind, target_id),
    CHECK (memory_id <> target_id)
);
-- Links and mentions are visible only through a memory the caller may see.
ALTER TABLE memory_link ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_link FORCE ROW LEVEL SECURITY;

-- The memory graph (design §3, §7): entities have a type and a normalised
-- name; aliases, attribute claims and relation claims (03_graph_tables.sql)
-- are each stated by one memory, visible exactly when that memory is, and
-- purged when it is forgotten.
CREATE TABLE entity (
    id          uuid PRIMARY KEY,
    name        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    type        text,
    -- Lookup's key: case, accents and spacing folded.
    -- services/store/graph_rules.py computes it for every new entity.
    name_key    text NOT NULL
);
-- An entity exists for a caller only through a mention it may see (every
-- entity a claim names is mentioned by the stating memory), or in the
-- transaction that wrote it. Its name is never readable otherwise.
ALTER TABLE entity ENABLE ROW LEVEL SECURITY;
ALTER TABLE entity FORCE ROW LEVEL SECURITY;

CREATE TABLE mention (
    memory_id   uuid NOT NULL REFERENCES memory (id),
    entity_id   uuid NOT NULL REFERENCES entity (id),
    -- A copy of the memory's creation time, which never changes, so that one
    -- entity's mentions are read in order (11_subject_timelines.sql).
    memory_created_at timestamptz NOT NULL,
    -- When a memory began to mention an entity, where that is later than the
    -- memory itself: a correction's claims may name an entity, new or not, in
    -- an older memory. `lookup` and `neighbors` as of a time before it do not
    -- count that mention (the entity was not known through it then). NULL:
    -- since the memory was written (also the mentions the old store's
    -- migration brings, and those of an archive that carries no time).
    mentioned_at timestamptz,
    PRIMARY KEY (memory_id, entity_id)
);
ALTER TABLE mention ENABLE ROW LEVEL SECURITY;
ALTER TABLE mention FORCE ROW LEVEL SECURITY;

-- Client request ids: a retried write returns its first result. CreateEpisode's
-- request id (docs/api.md) too: a retry after a lost answer answers the first
-- attempt's episode and makes no second one. Its key is kept beside the
-- writes' keys, one set of ids per member, under the same hash and with the
-- same fingerprint of what it asked: a key names either the memory its write
-- made or the episode.
CREATE TABLE request_key (
    member_id   uuid NOT NULL,
    request_id  text NOT NULL,
    tool        text NOT NULL,
    memory_id   uuid REFERENCES memory (id),
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- What a write asked for, as a hash (never its text), beside its request
    -- id: a retry must repeat its request exactly, and the same request id
    -- sent with another request is refused instead of answered with the first
    -- one's memory (docs/api.md, "Request ids"). NULL for keys written by
    -- stores that kept none, and once the memory is forgotten.
    fingerprint bytea,
    episode_id  uuid REFERENCES episode (id),
    PRIMARY KEY (member_id, request_id),
    CONSTRAINT request_key_made_one CHECK (num_nonnulls(memory_id, episode_id) = 1)
);
ALTER TABLE request_key ENABLE ROW LEVEL SECURITY;
ALTER TABLE request_key FORCE ROW LEVEL SECURITY;

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

COMMENT ON COLUMN request_key.request_id IS
    'sha256 hex of "<member id>:<client request id>" (services/store/erasure.py)';

COMMENT ON COLUMN audit_log.request_id IS
    'sha256 hex of "<member id>:<client request id>" (services/store/erasure.py)';

-- The members removed from this workspace, as its own database knows them
-- (design §10). A write for one member is checked against the control plane
-- first, and the removal may come between that check and the write's commit.
-- So every memory or episode inserted for one member holds that member's
-- write lock (shared, to the end of its transaction) and then reads this
-- table; the removal takes the same lock alone and adds the member here in
-- the transaction that erases or hands over their memories. A write either
-- commits before that transaction (and is erased or handed over with the
-- rest) or is refused after it (docs/api.md, "RemoveMember").
CREATE TABLE removed_member (
    member_id uuid PRIMARY KEY,
    removed_at timestamptz NOT NULL DEFAULT now()
);

-- A derived index: losing it costs recall, never correctness.
--
-- The dense arm filters on memory_embedding alone, so that the HNSW index
-- scan drives the query (with iterative scan) instead of a join the planner
-- misjudges: each vector carries a copy of its memory's trust (audience,
-- purposes), of what recall filters on (kind, updated_at), of its provenance
-- and of its successor. The copies are taken from the memory when the vector
-- is stored (the job holds the memory FOR SHARE until then, so a change of
-- the memory either comes first and is copied, or waits and is followed) and
-- follow every later change of the memory by trigger (08_embedding.sql).
CREATE TABLE memory_embedding (
    memory_id       uuid NOT NULL REFERENCES memory (id),
    model_id        text NOT NULL,
    input_version   text NOT NULL,
    embedding       vector(384) NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    audience_member_id uuid,
    purposes        purpose[] NOT NULL,
    kind            memory_kind NOT NULL,
    memory_updated_at timestamptz NOT NULL,
    -- The vectors' copies of their memory's trust are indexed like the
    -- lexemes: one scan per audience, the caller's purpose (08_embedding.sql).
    audience_key    uuid GENERATED ALWAYS AS (stat_audience(audience_member_id)) STORED,
    -- The provenance, so that the filtered HNSW scan applies the walk's
    -- condition to every vector it visits and its iterative scan goes on past
    -- refused ones, instead of a join per vector. It follows a forget marking
    -- what reaches the forgotten memory and a removed member's hand-over.
    provenance_audience uuid,
    provenance_purposes purpose[] NOT NULL,
    provenance_forgotten boolean NOT NULL DEFAULT false,
    -- A memory superseded by one the caller may not see (another member's,
    -- for a purpose the caller lacks) reads to that caller with no successor
    -- and is recalled as current, so a superseded memory keeps its vector:
    -- the dense arm admits a superseded vector exactly when the lexical arm
    -- and the walk admit its memory: the recall asks for superseded memories,
    -- or the caller may see no memory along its chain of successors
    -- (successor_seen). Only a forget deletes a vector.
    superseded_by_id uuid,
    PRIMARY KEY (memory_id, model_id, input_version)
);
ALTER TABLE memory_embedding ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_embedding FORCE ROW LEVEL SECURITY;

-- Outbox for the embedding job: a row per memory whose text needs embedding.
-- Written in the same transaction as the memory, processed after it commits.
CREATE TABLE embedding_job (
    memory_id       uuid PRIMARY KEY REFERENCES memory (id),
    -- Bumped on every text change so a worker never stores a stale vector.
    text_revision   bigint NOT NULL,
    enqueued_at     timestamptz NOT NULL DEFAULT now(),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    -- Per-row failure isolation of the embedding job (design §6): a row the
    -- embed service refuses is retried alone with backoff and, after the last
    -- attempt, parked (next_attempt_at = 'infinity') with the reason kept
    -- here. A text change (the sync trigger sets next_attempt_at = now()) or
    -- a rebuild unparks it. The reason is the embed service's status, never
    -- memory text.
    last_error      text
);

-- Each queued memory's audience and purposes, copied beside the outbox as a
-- vector carries them, so that the count of what waits
-- (memories_not_embedded) reads the workspace's and the caller's own waiting
-- rows, never another member's private ones.
--
-- A table of its own, not columns of the outbox: a hand-over of audience
-- (member removal) updates the copy under its lock while the job may
-- release the same memory's queue row, which must never wait (the job skips
-- a memory a change holds, services/embedding_job/queries.py HOLD_MEMORIES).
-- A row for each queue row, gone with it.
CREATE TABLE embedding_job_audience (
    memory_id    uuid PRIMARY KEY REFERENCES embedding_job (memory_id) ON DELETE CASCADE,
    audience_key uuid NOT NULL,
    purposes     purpose[] NOT NULL
);

-- History evidence (design §3.2): old conversation turns brought over by migration
-- from the old store. Owner-only, keyword-searchable, explicitly not memories:
-- no kind, no trust fields, never a recall candidate, never embedded.
CREATE TABLE history_entry (
    id              uuid PRIMARY KEY,
    -- The one member who may see the row: the workspace owner it was imported for.
    owner_member_id uuid NOT NULL,
    chat_id         text NOT NULL,
    role            text NOT NULL,
    text            text NOT NULL,
    -- History is searched in the form memories are kept in (NFC, "é" one
    -- code point): a turn is evidence kept as it was said, so its text stays
    -- as written, and only its search vector reads the text normalised (a
    -- turn written with a combining accent, as some keyboards and systems
    -- write it, is found by a query in the usual form, which the store
    -- normalises).
    search          tsvector
                    GENERATED ALWAYS AS (to_tsvector('english', normalize(text, NFC))) STORED,
    occurred_at     timestamptz NOT NULL
);
-- Only the owner recorded on a row sees it; the caller is set per
-- transaction exactly as for memories. The store additionally answers
-- history searches only for callers whose control-plane role is owner.
ALTER TABLE history_entry ENABLE ROW LEVEL SECURITY;
ALTER TABLE history_entry FORCE ROW LEVEL SECURITY;

-- Document frequencies for the 15% rule over one owner's history, kept per
-- owner so that no one's counts reflect rows they may not see.
CREATE TABLE history_term_stat (
    owner_member_id uuid NOT NULL,
    lexeme          text NOT NULL,
    docs            bigint NOT NULL,
    PRIMARY KEY (owner_member_id, lexeme)
);
ALTER TABLE history_term_stat ENABLE ROW LEVEL SECURITY;

CREATE TABLE history_corpus_stat (
    owner_member_id uuid PRIMARY KEY,
    docs            bigint NOT NULL
);
ALTER TABLE history_corpus_stat ENABLE ROW LEVEL SECURITY;

-- What an import from the old store brought over: old id -> new row, per
-- owner. With the deterministic ids it makes a rerun a no-op and tells
-- "already imported" from "new" in the report. Holds no text.
CREATE TABLE legacy_import (
    owner_member_id uuid NOT NULL,
    -- 'turn', 'memory_item' or 'entity'
    source          text NOT NULL,
    source_id       text NOT NULL,
    target_id       uuid NOT NULL,
    PRIMARY KEY (owner_member_id, source, source_id)
);

-- Document frequencies for the lexical arm's 15% rule (design §5.2), per
-- lexeme, purpose, audience and shard (06_recall.sql).
CREATE TABLE term_stat (
    lexeme      text NOT NULL,
    purpose     purpose NOT NULL,
    audience    uuid NOT NULL,
    shard       smallint NOT NULL,
    docs        bigint NOT NULL,
    PRIMARY KEY (lexeme, purpose, audience, shard)
);
-- A caller reads only the statistics of what they may see (the store's
-- queries say so too; the policies make it hold for any query).
ALTER TABLE term_stat ENABLE ROW LEVEL SECURITY;
ALTER TABLE term_stat FORCE ROW LEVEL SECURITY;

-- Memories with searchable text (forgotten ones have none).
CREATE TABLE corpus_stat (
    purpose     purpose NOT NULL,
    audience    uuid NOT NULL,
    shard       smallint NOT NULL,
    docs        bigint NOT NULL,
    PRIMARY KEY (purpose, audience, shard)
);
ALTER TABLE corpus_stat ENABLE ROW LEVEL SECURITY;
ALTER TABLE corpus_stat FORCE ROW LEVEL SECURITY;

-- Dedup review (design §8.1): pairs a person chose to keep both of ("keep both").
-- A dismissed pair is never proposed again, to anyone in the workspace: the
-- decision is about the two memories, not about who looked at them. The ids
-- are stored in a canonical order (first_id < second_id).
CREATE TABLE dismissed_pair (
    first_id        uuid NOT NULL REFERENCES memory (id),
    second_id       uuid NOT NULL REFERENCES memory (id),
    dismissed_by    uuid NOT NULL,
    dismissed_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (first_id, second_id),
    CHECK (first_id < second_id)
);
-- A dismissal is visible, and may be written, only when the caller may see
-- both memories (the subqueries on `memory` run under its own policy), so
-- the table never reveals that a memory the caller may not see exists.
ALTER TABLE dismissed_pair ENABLE ROW LEVEL SECURITY;
ALTER TABLE dismissed_pair FORCE ROW LEVEL SECURITY;

-- Who changed a memory, when and why (design §4, "Who may change a memory"):
-- one row per change: its creation, each correct, the supersede that
-- replaced it and its forget. Never holds memory text (forget purges text
-- from every table; a reason is the caller's own words, as the tombstone's
-- invalidation_reason is). Visible exactly when its memory is.
CREATE TABLE memory_revision (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    memory_id   uuid NOT NULL REFERENCES memory (id),
    -- The revision the change produced (forget leaves the revision as it was).
    revision    bigint NOT NULL CHECK (revision >= 1),
    action      text NOT NULL CHECK (action IN ('create', 'correct', 'supersede', 'forget')),
    changed_by  uuid NOT NULL,
    reason      text NOT NULL DEFAULT '',
    changed_at  timestamptz NOT NULL DEFAULT now(),
    -- A copy of the memory's episode, which never changes, so that one
    -- episode's changes are read in order (11_subject_timelines.sql).
    episode_id  uuid
);
ALTER TABLE memory_revision ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_revision FORCE ROW LEVEL SECURITY;
