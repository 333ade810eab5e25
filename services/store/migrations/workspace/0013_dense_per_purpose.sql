-- The dense arm walks one HNSW graph per purpose (docs/recall.md, "The dense
-- arm for a narrow caller").
--
-- A caller acts for exactly one purpose and sees only vectors that carry it
-- (design §4), so the graph the filtered scan walks need hold no other
-- vector: pgvector's filtered HNSW scan visits about 1/selectivity as many
-- vectors as it returns, and a caller's selectivity within their purpose's
-- graph is the share of that purpose's vectors whose audience they are in
-- (the workspace's and their own), however small the purpose is in the
-- workspace. One partial index per purpose of the closed set, on the copy of
-- the memory's purposes each vector carries (migration 0005, filled by its
-- trigger); a vector sits in the graph of each of its purposes. The store's
-- query names the caller's purpose as a value the planner sees (a custom
-- plan), so it proves the index's predicate; row security still filters
-- every row the scan returns. The graph of all vectors then serves no query
-- and is dropped.

SET LOCAL maintenance_work_mem = '256MB';

DO $$
DECLARE
    p purpose;
BEGIN
    FOREACH p IN ARRAY enum_range(NULL::purpose) LOOP
        EXECUTE format(
            'CREATE INDEX %I ON memory_embedding USING hnsw (embedding vector_cosine_ops)'
            ' WITH (m = 16, ef_construction = 64) WHERE purposes @> %L::purpose[]',
            'memory_embedding_' || p || '_hnsw_idx', ARRAY[p]);
    END LOOP;
END $$;

DROP INDEX memory_embedding_hnsw_idx;
