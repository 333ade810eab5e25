-- Recall that holds for any corpus and any caller (docs/recall.md, "Recall at
-- scale"): statistics per audience and purpose, a lexical arm that reads its
-- GIN index beneath row-level security, and a bounded permission walk.

-- Document frequencies a caller may be told ------------------------------------
--
-- The 15% rule and the capped-path decision must count only memories the
-- caller may see (design §4: statistics never reveal rows the caller may not
-- see). Eligibility is (audience is the workspace or the caller) and (the
-- caller's purpose is one of the memory's) and (not forgotten); audience and
-- purposes never change, so counts kept per (audience, purpose) add up
-- exactly: a caller's figure is the workspace's row plus their own
-- (term_stat, corpus_stat; the audience key is stat_audience's).
--
-- Each memory counts in one of STAT_SHARDS shards picked from its id, so
-- concurrent writers rarely update the same row (one row per lexeme, or a
-- single corpus row, is a lock every writer queues on until it commits), and
-- a memory's removal always decrements the shard its insertion incremented.

-- 32 shards: with 8 writers, two of them meet on a shard about one time in 32.
CREATE FUNCTION stat_shard(memory uuid) RETURNS smallint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT (get_byte(uuid_send(memory), 15) % 32)::smallint $$;

CREATE FUNCTION term_stat_sync() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    old_terms text[] := CASE WHEN TG_OP = 'UPDATE' THEN tsvector_to_array(OLD.search) ELSE '{}' END;
    new_terms text[] := tsvector_to_array(NEW.search);
    delta_docs integer := 0;
    aud uuid := stat_audience(NEW.audience_member_id);
    sh smallint := stat_shard(NEW.id);
BEGIN
    IF TG_OP = 'INSERT' THEN
        delta_docs := 1;
    ELSIF OLD.invalidated_at IS NULL AND NEW.invalidated_at IS NOT NULL THEN
        delta_docs := -1;
    END IF;
    IF old_terms = new_terms AND delta_docs = 0 THEN
        RETURN NEW;
    END IF;
    -- One statement in key order: concurrent writers lock rows in the same
    -- order and cannot deadlock.
    INSERT INTO term_stat AS t (lexeme, purpose, audience, shard, docs)
        SELECT lexeme, p, aud, sh, sum(d) FROM (
            SELECT unnest(new_terms) AS lexeme, 1 AS d
            UNION ALL
            SELECT unnest(old_terms), -1
        ) changes, unnest(NEW.purposes) AS p
        GROUP BY lexeme, p HAVING sum(d) <> 0
        ORDER BY lexeme, p
    ON CONFLICT (lexeme, purpose, audience, shard) DO UPDATE SET docs = t.docs + EXCLUDED.docs;
    -- A lexeme no memory holds any more must not linger: after forget, no
    -- table may keep a trace of the text.
    DELETE FROM term_stat
    WHERE lexeme = ANY (old_terms) AND purpose = ANY (NEW.purposes) AND audience = aud
      AND shard = sh AND docs <= 0;
    IF delta_docs <> 0 THEN
        INSERT INTO corpus_stat AS c (purpose, audience, shard, docs)
            SELECT p, aud, sh, delta_docs FROM unnest(NEW.purposes) AS p ORDER BY p
        ON CONFLICT (purpose, audience, shard) DO UPDATE SET docs = c.docs + EXCLUDED.docs;
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER term_stat_sync_insert AFTER INSERT ON memory
    FOR EACH ROW EXECUTE FUNCTION term_stat_sync();

CREATE TRIGGER term_stat_sync_update AFTER UPDATE OF title, body, invalidated_at ON memory
    FOR EACH ROW EXECUTE FUNCTION term_stat_sync();

-- The lexical arm on its index ----------------------------------------------
--
-- `@@` (ts_match_vq) is not LEAKPROOF, so beneath a row-level-security policy
-- Postgres refuses to use it as an index condition and checks it on every row
-- the policy lets through: the arm cost O(visible memories). These functions
-- run the GIN search as their owner (the migration role, which bypasses row
-- security) and apply the very same is_eligible() explicitly to every match
-- before anything is ranked, so they return exactly the rows the policy would
-- (eligibility still in SQL, ahead of ranking), and cost what the matches
-- cost. They take only typed values (a tsquery, filters), never SQL text, and
-- return only ids and scores. plan_cache_mode: the plan must be made for the
-- actual query (a generic plan cannot tell one rare term from a common one).
--
-- The GIN index holds each memory's audience and purposes beside its lexemes
-- (btree_gin for the uuid), so a search reads the caller's matches only (the
-- caller's purpose; the workspace's audience or the caller's own), not every
-- match of the workspace: a caller who sees 5% of it pays for 5%.
--
-- Recall's two indexes, one per purpose: a caller acts for exactly one
-- purpose and sees only memories that carry it, so neither arm need walk an
-- index of memories the caller's purpose rules out (docs/recall.md, "The
-- dense arm: one graph per purpose", "The lexical arm on its index").
--
-- The dense arm walks one HNSW graph per purpose. pgvector's filtered HNSW
-- scan visits about 1/selectivity as many vectors as it returns, and a
-- caller's selectivity within their purpose's graph is the share of that
-- purpose's vectors whose audience they are in (the workspace's and their
-- own), however small the purpose is in the workspace. One partial index per
-- purpose of the closed set, on the copy of the memory's purposes each
-- vector carries; a vector sits in the graph of each of its purposes. The
-- store's query names the caller's purpose as a value the planner sees (a
-- custom plan), so it proves the index's predicate; row security still
-- filters every row the scan returns.
--
-- The lexical arm's GIN index, likewise one per purpose: an index of all
-- memories would still walk the posting lists of the query's terms over
-- every memory of the workspace (for the owner recalling for `audit`, 5.6% of
-- 100,000 memories, 1.3 of the arm's 1.4 ms for a query with 405 matches;
-- 0.11 ms on the audit index). caller_matches reads the index of the
-- caller's purpose: one branch per purpose and audience, each with its
-- purpose as a constant that proves its index's predicate, and all but the
-- caller's purpose's two skipped before they run (a one-time filter on the
-- caller's settings). Indexes and branches are generated from the purpose
-- type, so they exist for every purpose there is. (The lexical functions
-- below write the two branches of the caller's purpose out themselves;
-- caller_matches is called by none of them now.)
DO $$
DECLARE
    each purpose;
    branches text;
BEGIN
    FOREACH each IN ARRAY enum_range(NULL::purpose) LOOP
        EXECUTE format(
            'CREATE INDEX %I ON memory_embedding USING hnsw (embedding vector_cosine_ops)'
            ' WITH (m = 16, ef_construction = 64) WHERE purposes @> %L::purpose[]',
            'memory_embedding_' || each || '_hnsw_idx', ARRAY[each]);
        EXECUTE format(
            'CREATE INDEX %I ON memory USING gin (audience_key, search)'
            ' WHERE purposes @> %L::purpose[]',
            'memory_search_' || each || '_idx', ARRAY[each]);
    END LOOP;
    SELECT string_agg(format(
               '(SELECT * FROM memory x WHERE caller_purpose() = %L::purpose'
               ' AND x.purposes @> %L::purpose[] AND x.audience_key = %s'
               ' AND x.search @@ query OFFSET 0)',
               p, ARRAY[p], a), ' UNION ALL ' ORDER BY p, a)
    INTO branches
    FROM unnest(enum_range(NULL::purpose)) AS p,
         unnest(ARRAY['stat_audience(NULL)', 'caller_member()']) AS a;
    EXECUTE 'CREATE FUNCTION caller_matches(query tsquery) RETURNS SETOF memory'
            ' LANGUAGE sql STABLE AS $body$ ' || branches || ' $body$';
END $$;

-- Recall's filters (design §5) on one memory row, inlined where it is used
-- (its body holds no subquery, or the planner would call it per row); the
-- entity filter's lookup runs only when the recall asks for it.
CREATE FUNCTION mentions_any(memory uuid, entities uuid[]) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$ SELECT EXISTS (SELECT 1 FROM mention mn
                         WHERE mn.memory_id = memory AND mn.entity_id = ANY (entities)) $$;

-- The filters themselves. A superseded memory is left out unless the recall
-- asks for superseded memories, or the caller may see no memory along its
-- chain of successors (successor_seen): it then reads to them as current.
CREATE FUNCTION passes_recall_filters(
    memory_id uuid, superseded_by_id uuid, kind memory_kind, updated_at timestamptz,
    include_superseded boolean, kinds memory_kind[], expiry_days integer, entities uuid[]
) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
    SELECT (cardinality(kinds) = 0 OR kind = ANY (kinds))
       AND (expiry_days = 0 OR updated_at >= now() - make_interval(days => expiry_days))
       AND (cardinality(entities) = 0 OR mentions_any(memory_id, entities))
       AND (include_superseded OR superseded_by_id IS NULL OR NOT successor_seen(superseded_by_id))
$$;

-- The lexical arm ranks by BM25 (docs/recall.md, "Finding more"): each kept
-- term weighs its inverse document frequency over the memories the caller may
-- see (the statistics above, computed by the store and passed in as `idfs`,
-- in the order of `terms`), its count in the memory saturates (k1 = 1.2), and
-- a long memory is discounted against the mean length of the memories ranked
-- (b = 0.75): the textbook constants, not tuned here. `ts_rank_cd` counts
-- neither how rare a term is nor how long a memory is, and ties many rows.
--
-- A term's count is the number of its positions in the memory's tsvector
-- (title and body), read from the tsvector cut down to the kept terms
-- (setweight marks them, ts_filter keeps them): a few lexemes to unnest, not
-- the whole memory. A memory's length is its title's and body's characters:
-- proportional to its words, free to read, and only its ratio to the mean
-- counts. Everything is computed inline: a SQL function per row cost four
-- times ts_rank_cd (docs/recall.md).
--
-- The matches are planned for the caller's purpose alone: the caller's
-- purpose and audiences are read once into variables, which a custom plan
-- sees as values, so two branches prove the index of the caller's purpose by
-- themselves (docs/benchmarks.md, "The lexical arm's plan, for one purpose"),
-- where caller_matches' eight branches cost their planning at every call.
-- Each match passes the memory's own eligibility and then the walk's
-- condition on its provenance.
--
-- Every match ranked (few matches).
CREATE FUNCTION lexical_candidates_bm25(
    query tsquery, terms text[], idfs double precision[], lim integer,
    include_superseded boolean, kinds memory_kind[], expiry_days integer, entities uuid[]
) RETURNS TABLE (id uuid, score double precision)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = public
    SET plan_cache_mode = force_custom_plan
    SET enable_seqscan = off
    SET max_parallel_workers_per_gather = 0
    AS $$
#variable_conflict use_column
DECLARE
    the_purpose purpose := caller_purpose();
    the_workspace uuid := stat_audience(NULL);
    the_member uuid := caller_member();
BEGIN
    RETURN QUERY
    WITH kept AS MATERIALIZED (
        SELECT m.id, m.created_at,
               ts_filter(setweight(setweight(m.search, 'D'), 'A', terms), '{a}') AS hits,
               (char_length(m.title) + char_length(m.body))::double precision AS chars
        FROM ((
                SELECT * FROM memory x
                WHERE x.purposes @> ARRAY[the_purpose] AND x.audience_key = the_workspace
                  AND x.search @@ query OFFSET 0
            ) UNION ALL (
                SELECT * FROM memory x
                WHERE x.purposes @> ARRAY[the_purpose] AND x.audience_key = the_member
                  AND x.search @@ query OFFSET 0
            )) m
        WHERE is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
          AND provenance_admits(m.provenance_audience, m.provenance_purposes,
                                m.provenance_forgotten, the_member, the_purpose)
          AND passes_recall_filters(m.id, m.superseded_by_id, m.kind, m.updated_at,
                                      include_superseded, kinds, expiry_days, entities)
    ), mean AS (SELECT greatest(avg(k.chars), 1.0) AS chars FROM kept k)
    SELECT k.id, coalesce((
        SELECT sum(idfs[array_position(terms, u.lexeme)] * t.tf * 2.2
                   / (t.tf + 1.2 * (0.25 + 0.75 * k.chars / mean.chars)))
        FROM unnest(k.hits) AS u, LATERAL (SELECT greatest(cardinality(u.positions), 1) AS tf) t
    ), 0) AS score
    FROM kept k, mean
    ORDER BY score DESC, k.created_at DESC, k.id
    LIMIT lim;
END $$;

-- Many matches: the newest `cap` eligible matches, ranked beside the matches
-- of the query's rare terms (the rarest kept terms whose document
-- frequencies, over what the caller may see, add up to at most `cap`: the
-- store chooses them), which go to BM25 without ts_rank's prefilter (which
-- weighs every term alike). Without them a query of a rare word beside a
-- common one ("zephyrine deploy", deploy in 600 memories) would never rank the
-- one memory holding the rare word once 500 newer memories held the common
-- one. Their cost is bounded as the uncapped path's is: at most `cap` posting
-- entries, read from the GIN index of the caller's purpose. With no rare term
-- (NULL) only the newest matches are ranked.
CREATE FUNCTION lexical_candidates_bm25_capped(
    query tsquery, rare tsquery, terms text[], idfs double precision[], lim integer,
    cap integer, prefilter integer, include_superseded boolean, kinds memory_kind[],
    expiry_days integer, entities uuid[], by_index boolean
) RETURNS TABLE (id uuid, score double precision)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = public
    SET plan_cache_mode = force_custom_plan
    SET enable_seqscan = off
    SET enable_bitmapscan = on
    SET max_parallel_workers_per_gather = 0
    AS $$
#variable_conflict use_column
DECLARE
    the_purpose purpose := caller_purpose();
    the_workspace uuid := stat_audience(NULL);
    the_member uuid := caller_member();
    rare_ids uuid[] := '{}';
BEGIN
    -- First, while bitmap scans are on: the GIN index answers only through them.
    IF rare IS NOT NULL THEN
        SELECT coalesce(array_agg(m.id), '{}') INTO rare_ids
        FROM ((
                SELECT * FROM memory x
                WHERE x.purposes @> ARRAY[the_purpose] AND x.audience_key = the_workspace
                  AND x.search @@ rare OFFSET 0
            ) UNION ALL (
                SELECT * FROM memory x
                WHERE x.purposes @> ARRAY[the_purpose] AND x.audience_key = the_member
                  AND x.search @@ rare OFFSET 0
            )) m
        WHERE is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
          AND provenance_admits(m.provenance_audience, m.provenance_purposes,
                                m.provenance_forgotten, the_member, the_purpose)
          AND passes_recall_filters(m.id, m.superseded_by_id, m.kind, m.updated_at,
                                    include_superseded, kinds, expiry_days, entities);
    END IF;
    IF by_index THEN
        -- Local to this call: the walk must not be traded for a bitmap scan.
        PERFORM set_config('enable_bitmapscan', 'off', true);
        RETURN QUERY
        WITH newest AS MATERIALIZED (
            SELECT n.id, n.created_at, n.search, n.chars FROM (
                SELECT m.id, m.search, m.created_at,
                       (char_length(m.title) + char_length(m.body))::double precision AS chars
                -- The fence keeps the walk on the created_at index.
                FROM (SELECT * FROM memory x WHERE x.search @@ query
                      ORDER BY x.created_at DESC, x.id DESC OFFSET 0) m
                WHERE is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
                  AND provenance_admits(m.provenance_audience, m.provenance_purposes,
                                        m.provenance_forgotten, the_member, the_purpose)
                  AND passes_recall_filters(m.id, m.superseded_by_id, m.kind, m.updated_at,
                                            include_superseded, kinds, expiry_days, entities)
                ORDER BY m.created_at DESC, m.id DESC
                LIMIT cap
            ) n
            ORDER BY ts_rank(n.search, query) DESC, n.created_at DESC, n.id
            LIMIT prefilter
        ), kept AS MATERIALIZED (
            -- The rare matches the newest left out, by primary key (each already
            -- found eligible in this snapshot): none read when there are none.
            SELECT k.id, k.created_at,
                   ts_filter(setweight(setweight(k.search, 'D'), 'A', terms), '{a}') AS hits,
                   k.chars
            FROM (
                SELECT w.id, w.created_at, w.search, w.chars FROM newest w
                UNION ALL
                SELECT m.id, m.created_at, m.search,
                       (char_length(m.title) + char_length(m.body))::double precision
                FROM memory m
                WHERE m.id = ANY (rare_ids) AND m.id NOT IN (SELECT w.id FROM newest w)
            ) k
        ), mean AS (SELECT greatest(avg(k.chars), 1.0) AS chars FROM kept k)
        SELECT k.id, coalesce((
            SELECT sum(idfs[array_position(terms, u.lexeme)] * t.tf * 2.2
                       / (t.tf + 1.2 * (0.25 + 0.75 * k.chars / mean.chars)))
            FROM unnest(k.hits) AS u, LATERAL (SELECT greatest(cardinality(u.positions), 1) AS tf) t
        ), 0) AS score
        FROM kept k, mean
        ORDER BY score DESC, k.created_at DESC, k.id
        LIMIT lim;
    ELSE
        RETURN QUERY
        WITH newest AS MATERIALIZED (
            SELECT n.id, n.created_at, n.search, n.chars FROM (
                SELECT m.id, m.search, m.created_at,
                       (char_length(m.title) + char_length(m.body))::double precision AS chars
                FROM ((
                    SELECT * FROM memory x
                    WHERE x.purposes @> ARRAY[the_purpose] AND x.audience_key = the_workspace
                      AND x.search @@ query OFFSET 0
                ) UNION ALL (
                    SELECT * FROM memory x
                    WHERE x.purposes @> ARRAY[the_purpose] AND x.audience_key = the_member
                      AND x.search @@ query OFFSET 0
                )) m
                WHERE is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
                  AND provenance_admits(m.provenance_audience, m.provenance_purposes,
                                        m.provenance_forgotten, the_member, the_purpose)
                  AND passes_recall_filters(m.id, m.superseded_by_id, m.kind, m.updated_at,
                                            include_superseded, kinds, expiry_days, entities)
                ORDER BY m.created_at DESC, m.id DESC
                LIMIT cap
            ) n
            ORDER BY ts_rank(n.search, query) DESC, n.created_at DESC, n.id
            LIMIT prefilter
        ), kept AS MATERIALIZED (
            -- The rare matches the newest left out, by primary key (each already
            -- found eligible in this snapshot): none read when there are none.
            SELECT k.id, k.created_at,
                   ts_filter(setweight(setweight(k.search, 'D'), 'A', terms), '{a}') AS hits,
                   k.chars
            FROM (
                SELECT w.id, w.created_at, w.search, w.chars FROM newest w
                UNION ALL
                SELECT m.id, m.created_at, m.search,
                       (char_length(m.title) + char_length(m.body))::double precision
                FROM memory m
                WHERE m.id = ANY (rare_ids) AND m.id NOT IN (SELECT w.id FROM newest w)
            ) k
        ), mean AS (SELECT greatest(avg(k.chars), 1.0) AS chars FROM kept k)
        SELECT k.id, coalesce((
            SELECT sum(idfs[array_position(terms, u.lexeme)] * t.tf * 2.2
                       / (t.tf + 1.2 * (0.25 + 0.75 * k.chars / mean.chars)))
            FROM unnest(k.hits) AS u, LATERAL (SELECT greatest(cardinality(u.positions), 1) AS tf) t
        ), 0) AS score
        FROM kept k, mean
        ORDER BY score DESC, k.created_at DESC, k.id
        LIMIT lim;
    END IF;
END $$;

-- A memory superseded by one the caller may not see (another member's, a
-- purpose the caller lacks, a forgotten one) reads to that caller with no
-- successor (the read's successor is looked up under row-level security), so
-- recall must treat it as the current memory it reads as: left out as
-- superseded, the caller's answer would change with a row they may not see
-- (design §4). A memory is superseded for the caller when any memory along
-- its chain of successors is eligible for them (visible_successor,
-- 12_chains.sql), the rule read shows; the lexical and dense arms' rule.
--
-- Its own function, as mentions_any, so that passes_recall_filters stays
-- inlined with no subquery in its body; it is reached only for a superseded
-- match, and last: a match another filter refuses costs no lookup of its
-- successor.
CREATE FUNCTION successor_seen(successor uuid) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$ SELECT visible_successor(successor) IS NOT NULL $$;
