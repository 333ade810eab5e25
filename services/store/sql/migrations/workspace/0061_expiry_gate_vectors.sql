-- The expiry gate's dense cost follows the rows inside the gate
-- (docs/recall.md, "The expiry gate's cost"). With few of a large workspace's
-- vectors inside it, the filtered HNSW scan visited vectors to its limit
-- (hnsw.max_scan_tuples) and gave up, and the exact plan that followed ranked
-- every vector the caller may see: 40,050 vectors read for a recall at 20,050
-- memories with 50 inside a 30-day gate.
--
-- 1. The vectors by their copy of the memory's update time (migration 0005):
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
REVOKE ALL ON FUNCTION vectors_inside_gate(text, text, integer, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION vectors_inside_gate(text, text, integer, integer) TO recallatron_app;
