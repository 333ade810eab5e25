-- What the app role (recallatron_app, which the store connects as for a
-- caller's work) may do: DML only where the tools need it, never DDL, never
-- a link's edit. Row security (13_policies.sql) decides which rows; these
-- decide which tables, columns and functions at all. A function a caller must
-- not reach directly (one that runs as its owner, or a helper of those) is
-- kept from PUBLIC; those the store calls are granted to the app role.

GRANT USAGE ON SCHEMA public TO recallatron_app;

GRANT SELECT, INSERT, UPDATE ON memory TO recallatron_app;
GRANT SELECT ON history_entry TO recallatron_app;
GRANT SELECT, INSERT ON attribute_claim TO recallatron_app;
GRANT UPDATE(retired_at) ON attribute_claim TO recallatron_app;
GRANT SELECT, INSERT ON audit_log TO recallatron_app;
GRANT SELECT ON corpus_stat TO recallatron_app;
GRANT SELECT, INSERT ON dismissed_pair TO recallatron_app;
GRANT SELECT, INSERT ON entity TO recallatron_app;
GRANT SELECT, INSERT ON entity_alias TO recallatron_app;
GRANT UPDATE(retired_at) ON entity_alias TO recallatron_app;
GRANT SELECT, INSERT ON entity_merge TO recallatron_app;
GRANT UPDATE(undone_by) ON entity_merge TO recallatron_app;
GRANT UPDATE(undone_at) ON entity_merge TO recallatron_app;
GRANT SELECT, INSERT ON entity_pair_apart TO recallatron_app;
GRANT SELECT, INSERT ON episode TO recallatron_app;
GRANT UPDATE(ended_at) ON episode TO recallatron_app;
GRANT SELECT, INSERT ON episode_participant TO recallatron_app;
GRANT SELECT ON history_corpus_stat TO recallatron_app;
GRANT SELECT ON history_term_stat TO recallatron_app;
GRANT SELECT ON memory_embedding TO recallatron_app;
GRANT SELECT, INSERT ON memory_link TO recallatron_app;
GRANT SELECT, INSERT ON memory_revision TO recallatron_app;
GRANT SELECT, INSERT ON mention TO recallatron_app;
GRANT SELECT, INSERT ON relation_claim TO recallatron_app;
GRANT UPDATE(retired_at) ON relation_claim TO recallatron_app;
GRANT SELECT ON removed_member TO recallatron_app;
GRANT SELECT, INSERT ON request_key TO recallatron_app;
GRANT SELECT ON term_stat TO recallatron_app;

REVOKE ALL ON FUNCTION caller_matches(query tsquery) FROM PUBLIC;
REVOKE ALL ON FUNCTION dense_candidates_exact(
    query vector, model text, version text, lim integer, kinds memory_kind[],
    expiry_days integer, entities uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dense_candidates_exact(
    query vector, model text, version text, lim integer, kinds memory_kind[],
    expiry_days integer, entities uuid[]) TO recallatron_app;
REVOKE ALL ON FUNCTION dense_candidates_exact(
    query vector, model text, version text, lim integer, kinds memory_kind[],
    expiry_days integer, entities uuid[], include_superseded boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dense_candidates_exact(
    query vector, model text, version text, lim integer, kinds memory_kind[],
    expiry_days integer, entities uuid[], include_superseded boolean) TO recallatron_app;
GRANT EXECUTE ON FUNCTION entity_group(ids uuid[]) TO recallatron_app;
REVOKE ALL ON FUNCTION entity_group_size(ids uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION entity_group_size(ids uuid[]) TO recallatron_app;
REVOKE ALL ON FUNCTION entity_key_matches(key text, prefix text, word_prefix text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION entity_key_matches(
    key text, prefix text, word_prefix text) TO recallatron_app;
REVOKE ALL ON FUNCTION entity_keys_held(keys text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION entity_keys_held(keys text[]) TO recallatron_app;
REVOKE ALL ON FUNCTION entity_member_timeline(
    e uuid, entities uuid[], head uuid, start_at timestamp with time zone,
    end_at timestamp with time zone, after_at timestamp with time zone, after_kind integer,
    after_key text, lim integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION entity_timeline(
    entities uuid[], head uuid, start_at timestamp with time zone,
    end_at timestamp with time zone, after_at timestamp with time zone, after_kind integer,
    after_key text, lim integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION entity_timeline(
    entities uuid[], head uuid, start_at timestamp with time zone,
    end_at timestamp with time zone, after_at timestamp with time zone, after_kind integer,
    after_key text, lim integer) TO recallatron_app;
REVOKE ALL ON FUNCTION episode_timeline(
    episode uuid, start_at timestamp with time zone, end_at timestamp with time zone,
    after_at timestamp with time zone, after_kind integer, after_key text, lim integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION episode_timeline(
    episode uuid, start_at timestamp with time zone, end_at timestamp with time zone,
    after_at timestamp with time zone, after_kind integer, after_key text, lim integer) TO recallatron_app;
REVOKE ALL ON FUNCTION forget_memory(memory uuid, reason text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION forget_memory(memory uuid, reason text) TO recallatron_app;
REVOKE ALL ON FUNCTION history_matches(query tsquery) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION history_matches(query tsquery) TO recallatron_app;
REVOKE ALL ON FUNCTION lexical_candidates_bm25(
    query tsquery, terms text[], idfs double precision[], lim integer,
    include_superseded boolean, kinds memory_kind[], expiry_days integer, entities uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lexical_candidates_bm25(
    query tsquery, terms text[], idfs double precision[], lim integer,
    include_superseded boolean, kinds memory_kind[], expiry_days integer, entities uuid[]) TO recallatron_app;
REVOKE ALL ON FUNCTION lexical_candidates_bm25_capped(
    query tsquery, rare tsquery, terms text[], idfs double precision[], lim integer,
    cap integer, prefilter integer, include_superseded boolean, kinds memory_kind[],
    expiry_days integer, entities uuid[], by_index boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lexical_candidates_bm25_capped(
    query tsquery, rare tsquery, terms text[], idfs double precision[], lim integer,
    cap integer, prefilter integer, include_superseded boolean, kinds memory_kind[],
    expiry_days integer, entities uuid[], by_index boolean) TO recallatron_app;
REVOKE ALL ON FUNCTION memories_not_embedded(cap integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memories_not_embedded(cap integer) TO recallatron_app;
REVOKE ALL ON FUNCTION memories_of_kind(
    the_kind memory_kind, the_episode uuid, start_at timestamp with time zone,
    end_at timestamp with time zone, with_superseded boolean,
    after_at timestamp with time zone, after_id uuid, lim integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memories_of_kind(
    the_kind memory_kind, the_episode uuid, start_at timestamp with time zone,
    end_at timestamp with time zone, with_superseded boolean,
    after_at timestamp with time zone, after_id uuid, lim integer) TO recallatron_app;
REVOKE ALL ON FUNCTION memory_claims_revive(subject uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION mentions_any(memory uuid, entities uuid[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION timeline_entity_name(entity uuid, stating uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION timeline_in(
    t timestamp with time zone, k text, place integer, lo timestamp with time zone,
    end_at timestamp with time zone, after_at timestamp with time zone, after_kind integer,
    after_key text) FROM PUBLIC;
REVOKE ALL ON FUNCTION timeline_memory_of(memory uuid, entities uuid[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION timeline_memory_seen(memory uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION timeline_relation(
    subject uuid, predicate text, object uuid, stating uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION vectors_inside_gate(
    model text, version text, expiry_days integer, cap integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION vectors_inside_gate(
    model text, version text, expiry_days integer, cap integer) TO recallatron_app;
REVOKE ALL ON FUNCTION visible_predecessors(successor uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION visible_predecessors(successor uuid) TO recallatron_app;
REVOKE ALL ON FUNCTION visible_successor(successor uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION visible_successor(successor uuid) TO recallatron_app;
REVOKE ALL ON FUNCTION workspace_timeline(
    start_at timestamp with time zone, end_at timestamp with time zone,
    after_at timestamp with time zone, after_kind integer, after_key text, lim integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION workspace_timeline(
    start_at timestamp with time zone, end_at timestamp with time zone,
    after_at timestamp with time zone, after_kind integer, after_key text, lim integer) TO recallatron_app;
