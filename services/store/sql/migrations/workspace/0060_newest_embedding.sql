-- The model of the newest vector (dedup's and entity merge's current_model)
-- read from the newest end of an index, not by sorting every vector the
-- caller may see: each review page read all of them (20,040 at 20,040
-- memories) to find one (tests/integration/test_entity_pairs_costs.py).
CREATE INDEX memory_embedding_newest_idx ON memory_embedding (input_version, created_at);
