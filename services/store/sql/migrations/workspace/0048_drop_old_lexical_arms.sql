-- The lexical arm's older candidate functions go: migration 0006's ts_rank_cd
-- pair and 0017/0021's BM25 capped path before 0036. They stayed for a store
-- of a previous release, but no store since the one 0036 shipped in calls
-- them (the previous release's store calls lexical_candidates_bm25 and
-- lexical_candidates_bm25_capped, as this one does), and they lack the
-- walk's provenance condition migration 0045 gave the current ones: a row
-- the walk refuses could take one of an arm's places through them.
-- benchmarks/old_arms.py brings them back in a benchmark's own database.
DROP FUNCTION IF EXISTS lexical_candidates(
    tsquery, integer, boolean, memory_kind[], integer, uuid[]);
DROP FUNCTION IF EXISTS lexical_candidates_newest(
    tsquery, integer, integer, integer, boolean, memory_kind[], integer, uuid[], boolean);
DROP FUNCTION IF EXISTS lexical_candidates_bm25_newest(
    tsquery, text[], double precision[], integer, integer, integer, boolean, memory_kind[],
    integer, uuid[], boolean);
