-- Recall's two indexes, one per purpose: a caller acts for exactly one
-- purpose and sees only memories that carry it, so neither arm need walk an
-- index of memories the caller's purpose rules out (docs/recall.md, "The
-- dense arm: one graph per purpose", "The lexical arm on its index").
--
-- 1. The dense arm walks one HNSW graph per purpose. pgvector's filtered HNSW
-- scan visits about 1/selectivity as many vectors as it returns, and a
-- caller's selectivity within their purpose's graph is the share of that purpose's vectors whose audience they are in
-- (the workspace's and their own), however small the purpose is in the
-- workspace. One partial index per purpose of the closed set, on the copy of
-- the memory's purposes each vector carries (migration 0005, filled by its
-- trigger); a vector sits in the graph of each of its purposes. The store's
-- query names the caller's purpose as a value the planner sees (a custom
-- plan), so it proves the index's predicate; row security still filters
-- every row the scan returns. The graph of all vectors then serves no query
-- and is dropped.

-- 2. The lexical arm's GIN index, likewise one per purpose. The index of all
-- memories (migration 0006) held each memory's purposes beside its lexemes,
-- but a scan still walks the posting lists of the query's terms over every
-- memory of the workspace: for the owner recalling for `audit` (5.6% of
-- 100,000 memories) that index scan was most of the arm (1.3 of 1.4 ms for a
-- query with 405 matches; 0.11 ms on the audit index). caller_matches reads
-- the index of the caller's purpose: one branch per purpose and audience,
-- each with its purpose as a constant that proves its index's predicate,
-- and all but the caller's purpose's two skipped before they run (a one-time
-- filter on the caller's settings). Generated from the purpose type, so a
-- branch exists for every purpose there is.
--
-- Both indexes of each purpose are built here; then the two indexes of all
-- purposes, which no query uses any more, are dropped.
SET LOCAL maintenance_work_mem = '256MB';

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
    EXECUTE 'CREATE OR REPLACE FUNCTION caller_matches(query tsquery) RETURNS SETOF memory'
            ' LANGUAGE sql STABLE AS $body$ ' || branches || ' $body$';
END $$;

DROP INDEX memory_embedding_hnsw_idx;
DROP INDEX memory_search_idx;
