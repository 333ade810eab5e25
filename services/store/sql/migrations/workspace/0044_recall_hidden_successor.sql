-- A memory superseded by one the caller may not see (another member's, a
-- purpose the caller lacks, a forgotten one) reads to that caller with no
-- successor (the read's successor is looked up under row-level security), so
-- recall must treat it as the current memory it reads as: left out as
-- superseded, the caller's answer changed with a row they may not see
-- (design §4). A memory is superseded for the caller exactly when its
-- successor is eligible for them, the rule read shows.
--
-- The lexical functions run as their owner, beneath no policy: the
-- successor's eligibility is checked explicitly, as is_eligible checks the
-- memory's own. Its own function, as mentions_any, so that
-- passes_recall_filters stays inlined with no subquery in its body; it is
-- reached only for a superseded match, and last: a match another filter
-- refuses costs no lookup of its successor.
CREATE FUNCTION successor_seen(successor uuid) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$ SELECT EXISTS (SELECT 1 FROM memory s
                         WHERE s.id = successor
                           AND is_eligible(s.invalidated_at, s.audience_member_id, s.purposes)) $$;

CREATE OR REPLACE FUNCTION passes_recall_filters(
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
