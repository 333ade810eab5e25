-- neighbors answers every relation between two nodes of its last hop (docs/
-- graph.md): each such pair is probed on this index, so a node of the last
-- hop with thousands of relations costs the walk its pairs among the answer,
-- not its whole list (the card indexes of 0033 lead by one end only).
CREATE INDEX relation_claim_pair_idx ON relation_claim (subject_id, object_id);
