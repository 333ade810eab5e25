-- Vectors and the embedding job's outbox: the copies each vector keeps of its
-- memory (02_memory_tables.sql) and the triggers that keep them, the dense
-- arm's exact plan, and what waits for a vector.

CREATE INDEX embedding_job_due_idx ON embedding_job (next_attempt_at);

-- Keeps embeddings and the job queue in step with the memory's text and
-- state. A supersede keeps the vector and its queue entry (the text is the
-- same); a forget deletes both, a change of text queues the memory again.
-- Queue entry first: a worker holding it is waited for, so the vector it
-- commits is seen, and removed, by the delete that follows. SECURITY
-- DEFINER: a forgotten memory is no longer visible to the caller, yet its
-- embedding must still be purged.
CREATE FUNCTION memory_embedding_sync() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO embedding_job (memory_id, text_revision) VALUES (NEW.id, NEW.revision);
        RETURN NEW;
    END IF;
    IF NEW.invalidated_at IS NOT NULL THEN
        DELETE FROM embedding_job WHERE memory_id = NEW.id;
        DELETE FROM memory_embedding WHERE memory_id = NEW.id;
    ELSIF NEW.title IS DISTINCT FROM OLD.title OR NEW.body IS DISTINCT FROM OLD.body THEN
        INSERT INTO embedding_job (memory_id, text_revision) VALUES (NEW.id, NEW.revision)
            ON CONFLICT (memory_id) DO UPDATE
            SET text_revision = EXCLUDED.text_revision, attempts = 0, next_attempt_at = now();
        DELETE FROM memory_embedding WHERE memory_id = NEW.id;
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER memory_embedding_sync_insert AFTER INSERT ON memory
    FOR EACH ROW EXECUTE FUNCTION memory_embedding_sync();

CREATE TRIGGER memory_embedding_sync_update AFTER UPDATE ON memory
    FOR EACH ROW EXECUTE FUNCTION memory_embedding_sync();

-- Fills a vector's copies from its memory; refuses a vector for a memory that
-- is forgotten (meanwhile): a superseded one keeps its vector.
CREATE FUNCTION memory_embedding_copy_trust() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    m memory%ROWTYPE;
BEGIN
    SELECT * INTO m FROM memory WHERE id = NEW.memory_id;
    IF NOT FOUND OR m.invalidated_at IS NOT NULL THEN
        RETURN NULL;
    END IF;
    NEW.audience_member_id := m.audience_member_id;
    NEW.purposes := m.purposes;
    NEW.kind := m.kind;
    NEW.memory_updated_at := m.updated_at;
    NEW.provenance_audience := m.provenance_audience;
    NEW.provenance_purposes := m.provenance_purposes;
    NEW.provenance_forgotten := m.provenance_forgotten;
    NEW.superseded_by_id := m.superseded_by_id;
    RETURN NEW;
END $$;

CREATE TRIGGER memory_embedding_copy_trust BEFORE INSERT OR UPDATE ON memory_embedding
    FOR EACH ROW EXECUTE FUNCTION memory_embedding_copy_trust();

-- The same eligibility rule as the memory policy, on the copies, through a
-- function the planner does not inline: the inlined rule reads the caller
-- from settings, which the planner cannot see, and it then guesses that
-- almost no row passes and sorts every vector rather than walk the HNSW
-- index. An opaque function gets the default selectivity, and the index walk
-- wins. In PL/pgSQL: the dense arm's HNSW walk applies the policy to every
-- vector it visits (about 180 a recall at 10,000 memories), and a SQL
-- function that is not inlined starts an executor for its one SELECT at each
-- call, half of the dense statement's time (docs/benchmarks.md, "The
-- vectors' eligibility, evaluated cheaply"); a PL/pgSQL body is evaluated as
-- a simple expression, and stays as opaque to the planner.
CREATE FUNCTION vector_is_eligible(audience_member_id uuid, purposes purpose[])
    RETURNS boolean
    LANGUAGE plpgsql STABLE PARALLEL SAFE SET search_path = public
    AS $$
BEGIN
    RETURN (audience_member_id IS NULL OR audience_member_id = caller_member())
           AND caller_purpose() = ANY (purposes);
END $$;

-- The dense arm for a narrow caller: pgvector's filtered HNSW scan visits
-- about 1/selectivity as many vectors to find its rows, so for a caller who
-- may see 5% of the workspace it would be the slowest part of recall
-- (docs/benchmarks.md). Such a caller's vectors are few, and ranking them all
-- exactly is cheaper (5,563 vectors at 100,000 memories: 4.7 ms) and exact:
-- the vectors' copies of their memory's trust are indexed like the lexemes,
-- one scan per audience, the caller's purpose (dense_candidates_exact).
CREATE INDEX memory_embedding_trust_idx ON memory_embedding USING gin (audience_key, purposes);

CREATE INDEX embedding_job_parked_idx ON embedding_job (memory_id)
    WHERE next_attempt_at = 'infinity';

-- A vector's copy of its memory's updated_at, which the
-- dense arm's expiry gate reads, follows the memory when it is renewed
-- without new text (a correct of its confidence or claims sets updated_at
-- and keeps the vector). A change of text deletes the vector anyway; the
-- copy trigger on memory_embedding takes the time from the memory again.
CREATE FUNCTION memory_embedding_follow_renewal() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    UPDATE memory_embedding SET memory_updated_at = NEW.updated_at
    WHERE memory_id = NEW.id AND memory_updated_at IS DISTINCT FROM NEW.updated_at;
    RETURN NULL;
END $$;

-- The renewal the supersede itself makes moves updated_at too: the copy
-- follows a superseded memory as any other.
CREATE TRIGGER memory_embedding_follow_renewal AFTER UPDATE OF updated_at ON memory
    FOR EACH ROW
    WHEN (NEW.updated_at IS DISTINCT FROM OLD.updated_at AND NEW.invalidated_at IS NULL)
    EXECUTE FUNCTION memory_embedding_follow_renewal();

-- The provenance's copy follows every change of the memory's provenance: a
-- forget marking what reaches the forgotten memory, a removed member's
-- hand-over.
CREATE FUNCTION memory_embedding_follow_provenance() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    UPDATE memory_embedding
    SET provenance_audience = NEW.provenance_audience,
        provenance_purposes = NEW.provenance_purposes,
        provenance_forgotten = NEW.provenance_forgotten
    WHERE memory_id = NEW.id;
    RETURN NULL;
END $$;

CREATE TRIGGER memory_embedding_follow_provenance
    AFTER UPDATE OF provenance_audience, provenance_purposes, provenance_forgotten ON memory
    FOR EACH ROW
    WHEN ((NEW.provenance_audience, NEW.provenance_purposes, NEW.provenance_forgotten)
          IS DISTINCT FROM (OLD.provenance_audience, OLD.provenance_purposes,
                            OLD.provenance_forgotten))
    EXECUTE FUNCTION memory_embedding_follow_provenance();

-- How many memories the caller may see wait for their vector (a row in the
-- embedding job's outbox, pending or parked): the dense arm cannot find
-- them, and recall says so (RecallOutcome.not_embedded). SECURITY DEFINER:
-- the app role may not read the outbox, whose rows name memories of every
-- audience. It reads the copies of the workspace's and the caller's audience
-- for the caller's purpose (embedding_job_audience), through the index alone
-- (a scan of all, a queue's whose statistics lag its size, is never
-- planned); the rule itself is read from the memory, by key: eligible, and
-- current to the caller (no successor, or none along its chain they may see:
-- the lexical arm's and the walk's rule, as dense_candidates_exact takes its
-- steps). The count stops at ``cap``: with the job far behind it reads about
-- ``cap`` rows a recall, and with the job caught up none.
CREATE FUNCTION memories_not_embedded(cap integer) RETURNS integer
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = public
    SET enable_seqscan = off
    AS $$
SELECT count(*)::integer FROM (
    SELECT 1
    FROM (SELECT q.memory_id FROM embedding_job_audience q
          WHERE q.audience_key = stat_audience(NULL) AND q.purposes @> ARRAY[caller_purpose()]
          UNION ALL
          SELECT q.memory_id FROM embedding_job_audience q
          WHERE q.audience_key = caller_member() AND q.purposes @> ARRAY[caller_purpose()]) j
    JOIN memory m ON m.id = j.memory_id
    WHERE is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
      AND (m.superseded_by_id IS NULL
           OR coalesce((
                SELECT NOT is_eligible(s.invalidated_at, s.audience_member_id, s.purposes)
                       AND (s.superseded_by_id IS NULL OR NOT successor_seen(s.superseded_by_id))
                FROM memory s WHERE s.id = m.superseded_by_id), true))
    LIMIT cap
) waiting
$$;

-- The model of the newest vector (dedup's and entity merge's current_model)
-- read from the newest end of an index, not by sorting every vector the
-- caller may see: each review page read all of them (20,040 at 20,040
-- memories) to find one (tests/integration/test_entity_pairs_costs.py).
CREATE INDEX memory_embedding_newest_idx ON memory_embedding (input_version, created_at);

-- The expiry gate's dense cost follows the rows inside the gate
-- (docs/recall.md, "The expiry gate's cost"). With few of a large workspace's
-- vectors inside it, the filtered HNSW scan visits vectors to its limit
-- (hnsw.max_scan_tuples) and gives up, and an exact plan ranking every vector
-- the caller may see would read 40,050 vectors for a recall at 20,050
-- memories with 50 inside a 30-day gate.
--
-- 1. The vectors by their copy of the memory's update time:
-- the exact plan (dense_candidates_exact, a custom plan where the gate is a
-- value) reads the rows inside the gate from it instead of every vector.
CREATE INDEX memory_embedding_updated_idx ON memory_embedding (memory_updated_at);

-- 2. How many of the caller's vectors lie inside the gate, counted up to
-- `cap` from that index (run as the caller: row security counts only their
-- own): few, and the store ranks them exactly without walking the graph.
CREATE FUNCTION vectors_inside_gate(model text, version text, expiry_days integer, cap integer)
    RETURNS integer
    LANGUAGE sql STABLE
    SET enable_seqscan = off
    AS $$
    SELECT count(*)::integer FROM (
        SELECT 1 FROM memory_embedding e
        WHERE e.memory_updated_at >= now() - make_interval(days => expiry_days)
          AND e.model_id = model AND e.input_version = version
        LIMIT cap
    ) inside
$$;

-- The copy of the successor follows the memory's: a supersede sets it, a
-- forgotten successor's leaving the chain (successor_forget, 12_chains.sql)
-- moves or clears it.
CREATE FUNCTION memory_embedding_follow_successor() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    UPDATE memory_embedding SET superseded_by_id = NEW.superseded_by_id
    WHERE memory_id = NEW.id AND superseded_by_id IS DISTINCT FROM NEW.superseded_by_id;
    RETURN NULL;
END $$;

CREATE TRIGGER memory_embedding_follow_successor AFTER UPDATE OF superseded_by_id ON memory
    FOR EACH ROW
    WHEN (NEW.superseded_by_id IS DISTINCT FROM OLD.superseded_by_id
          AND NEW.invalidated_at IS NULL)
    EXECUTE FUNCTION memory_embedding_follow_successor();

-- The exact dense plan: every vector the caller may see ranked by its
-- distance, for a caller who sees few (memory_embedding_trust_idx) or a gate
-- few vectors lie inside (memory_embedding_updated_idx). The caller's member
-- and purpose are read once, as the lexical arm's functions read them (not
-- once per vector, as the policy's is_eligible would), one scan of
-- memory_embedding serves the workspace's and the caller's own vectors (the
-- planner picks a sequential scan or the trust index by the caller's share,
-- its values constants of the custom plan), and each distance is computed
-- once (docs/benchmarks.md, "The exact dense plan"). enable_indexscan is off
-- because with the purpose a constant, the planner could otherwise walk that
-- purpose's HNSW graph for this ORDER BY and answer approximately. The
-- walk's condition is applied on the vectors' copies of the provenance.
--
-- A superseded vector is ranked when the recall asks for superseded
-- memories, or when the caller may see no memory along its chain of
-- successors (successor_seen's rule). Evaluated for a superseded vector
-- alone, its direct successor first, by primary key (this function runs as
-- its owner, beneath no policy: the eligibility rule applied explicitly):
-- one the caller sees settles it without a function call. Most chains end at
-- a hidden successor: it is read once, by key, and the chain is walked on
-- from its own successor only when it has one (a SECURITY DEFINER walk per
-- row, about 45 µs, made a member to whom 1,000 of 12,000 vectors were
-- superseded by the owner's private memories wait 49 ms where the plan took
-- 6 ms; benchmarks.superseded_cost).
CREATE FUNCTION dense_candidates_exact(
    query vector, model text, version text, lim integer, kinds memory_kind[],
    expiry_days integer, entities uuid[], include_superseded boolean
) RETURNS TABLE (id uuid, cosine double precision)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = public
    SET plan_cache_mode = force_custom_plan
    SET enable_indexscan = off
    SET max_parallel_workers_per_gather = 0
    AS $$
#variable_conflict use_column
DECLARE
    the_member uuid := caller_member();
    the_purpose purpose := caller_purpose();
BEGIN
    RETURN QUERY
    SELECT nearest.memory_id, 1 - nearest.distance
    FROM (
        SELECT e.memory_id, e.embedding <=> query AS distance
        FROM memory_embedding e
        WHERE (e.audience_key = stat_audience(NULL) OR e.audience_key = the_member)
          AND e.purposes @> ARRAY[the_purpose]
          AND provenance_admits(e.provenance_audience, e.provenance_purposes,
                                e.provenance_forgotten, the_member, the_purpose)
          AND e.model_id = model AND e.input_version = version
          AND (cardinality(kinds) = 0 OR e.kind = ANY (kinds))
          AND (expiry_days = 0
               OR e.memory_updated_at >= now() - make_interval(days => expiry_days))
          AND (cardinality(entities) = 0 OR mentions_any(e.memory_id, entities))
          AND (include_superseded OR e.superseded_by_id IS NULL
               OR coalesce((
                    SELECT NOT is_eligible(s.invalidated_at, s.audience_member_id, s.purposes)
                           AND (s.superseded_by_id IS NULL
                                OR NOT successor_seen(s.superseded_by_id))
                    FROM memory s WHERE s.id = e.superseded_by_id), true))
        ORDER BY distance, e.memory_id
        LIMIT lim
    ) nearest
    ORDER BY nearest.distance, nearest.memory_id;
END $$;

CREATE INDEX embedding_job_audience_idx ON embedding_job_audience (audience_key);

-- Every row queued, by any path (the memory's own trigger, rebuild, import),
-- takes its memory's copy. A row queued by a memory's trigger is of a memory
-- its transaction wrote and holds; any other holds the memory against a
-- change of audience until it commits, so that the change (below) finds the
-- copy to follow.
CREATE FUNCTION embedding_job_copy_audience() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    m memory%ROWTYPE;
BEGIN
    IF pg_trigger_depth() > 1 THEN
        SELECT * INTO m FROM memory WHERE id = NEW.memory_id;
    ELSE
        SELECT * INTO m FROM memory WHERE id = NEW.memory_id FOR SHARE;
    END IF;
    IF FOUND THEN
        INSERT INTO embedding_job_audience (memory_id, audience_key, purposes)
        VALUES (NEW.memory_id, m.audience_key, m.purposes);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER embedding_job_copy_audience AFTER INSERT ON embedding_job
    FOR EACH ROW EXECUTE FUNCTION embedding_job_copy_audience();

-- A memory handed to another member (a member removed) or given other
-- purposes: its copy follows.
CREATE FUNCTION embedding_job_follow_audience() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    UPDATE embedding_job_audience SET audience_key = NEW.audience_key, purposes = NEW.purposes
    WHERE memory_id = NEW.id;
    RETURN NULL;
END $$;

CREATE TRIGGER embedding_job_follow_audience AFTER UPDATE OF audience_member_id, purposes ON memory
    FOR EACH ROW
    WHEN (NEW.audience_member_id IS DISTINCT FROM OLD.audience_member_id
          OR NEW.purposes IS DISTINCT FROM OLD.purposes)
    EXECUTE FUNCTION embedding_job_follow_audience();

-- The previous release's call, without include_superseded: as a recall that
-- does not ask for superseded memories. (Its HNSW statement has no condition
-- on the successor: a superseded vector may take one of its dense arm's
-- places, which the walk then refuses.)
CREATE FUNCTION dense_candidates_exact(
    query vector, model text, version text, lim integer, kinds memory_kind[],
    expiry_days integer, entities uuid[]
) RETURNS TABLE (id uuid, cosine double precision)
    LANGUAGE sql STABLE
    AS $$
    SELECT * FROM dense_candidates_exact(query, model, version, lim, kinds, expiry_days,
                                         entities, false)
$$;
