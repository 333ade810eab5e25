-- The whole workspace's timeline (services/store/domain/timeline.py,
-- docs/graph.md), a page at a time without reading every event of the
-- workspace and sorting them all for each page: each kind of event has an
-- index in the timeline's order (its time, then its key), and a page walks
-- each of them from the page token's position, stopping after a page's worth
-- of events the caller may see; the page is the first of those in (time,
-- kind, key) order.
--
-- Why a function: beneath the row-level-security policies the walks do not
-- hold. A claim's or a revision's policy (EXISTS its memory) is planned as a
-- hashed subplan, which reads every memory the caller may see before the
-- first row; an entity's (EXISTS a visible mention) as one over every memory
-- when the entity is often mentioned; and coalesce() is not LEAKPROOF, so a
-- claim's time cannot be an index condition there at all. As the lexical
-- arm's functions do (06_recall.sql), this one runs as its owner and applies the
-- policies' own rules explicitly, row by row: a claim, a relation or a
-- revision is seen exactly when its memory passes is_eligible(), and an
-- entity's name exactly when a mention of it is seen (the stating memory's
-- own, which every claim has, else any other). It returns only what the
-- caller may see and takes only typed values, never SQL text. The helpers'
-- plans are the same whatever their values: generic, planned once.
--
-- The kinds' places (1..7) are the order of timeline.py's KINDS, and a key is
-- compared as text, as the timeline has always ordered it.
CREATE INDEX memory_timeline_idx ON memory (created_at, (id::text));

CREATE INDEX attribute_claim_start_idx ON attribute_claim
    ((coalesce(valid_from, stated_at)), (id::text)) WHERE retired_at IS NULL;

CREATE INDEX attribute_claim_end_idx ON attribute_claim (valid_until, (id::text))
    WHERE valid_until IS NOT NULL AND retired_at IS NULL;

CREATE INDEX relation_claim_start_idx ON relation_claim
    ((coalesce(valid_from, stated_at)), (id::text)) WHERE retired_at IS NULL;

CREATE INDEX relation_claim_end_idx ON relation_claim (valid_until, (id::text))
    WHERE valid_until IS NOT NULL AND retired_at IS NULL;

CREATE INDEX memory_revision_change_idx ON memory_revision
    (action, changed_at, (memory_id::text || ':' || revision::text || ':' || action))
    WHERE action IN ('correct', 'supersede');

-- Whether the caller may see a memory (the memory policy's rule), by id.
CREATE FUNCTION timeline_memory_seen(memory uuid) RETURNS boolean
    LANGUAGE sql STABLE
    SET plan_cache_mode = force_generic_plan
    AS $$ SELECT is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
          FROM memory m WHERE m.id = memory $$;

-- An entity's name when the caller may see it (the entity policy's rule: a
-- mention of it the caller may see); `stating` is a memory the caller may see.
CREATE FUNCTION timeline_entity_name(entity uuid, stating uuid) RETURNS text
    LANGUAGE sql STABLE
    SET plan_cache_mode = force_generic_plan
    AS $$ SELECT e.name FROM entity e
          WHERE e.id = entity
            AND (EXISTS (SELECT 1 FROM mention mn
                         WHERE mn.memory_id = stating AND mn.entity_id = entity)
                 OR EXISTS (SELECT 1 FROM mention mn JOIN memory m ON m.id = mn.memory_id
                            WHERE mn.entity_id = entity
                              AND is_eligible(m.invalidated_at, m.audience_member_id,
                                              m.purposes))) $$;

-- At most `lim` events from `start_at` (inclusive) to `end_at` (exclusive)
-- after the position (after_at, after_kind, after_key), NULLs for none. With
-- the place of each walk a constant of the custom plan, its position is an
-- index condition: ties at one instant are not read again. The settings keep
-- each walk a walk (no scan, bitmap or hash of a whole table), whatever the
-- planner guesses of how many rows it must read to fill a page.
CREATE FUNCTION workspace_timeline(
    start_at timestamptz, end_at timestamptz, after_at timestamptz, after_kind integer,
    after_key text, lim integer
) RETURNS TABLE (at timestamptz, kind text, memory_id uuid, entity_id uuid, summary text,
                 key text)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = public
    SET plan_cache_mode = force_custom_plan
    SET enable_seqscan = off
    SET enable_bitmapscan = off
    SET enable_hashjoin = off
    SET enable_mergejoin = off
    SET max_parallel_workers_per_gather = 0
    AS $$
#variable_conflict use_column
DECLARE
    lo timestamptz := greatest(start_at, after_at);
BEGIN
    RETURN QUERY
    SELECT p.at, p.kind, p.memory_id, p.entity_id, p.summary, p.key
    FROM (
        (SELECT m.created_at AS at, 1 AS place, 'memory'::text AS kind, m.id AS memory_id,
                NULL::uuid AS entity_id, m.title AS summary, m.id::text AS key
         FROM memory m
         WHERE (lo IS NULL OR m.created_at >= lo)
           AND (end_at IS NULL OR m.created_at < end_at)
           AND (after_at IS NULL
                OR CASE WHEN 1 > after_kind THEN m.created_at >= after_at
                        WHEN 1 < after_kind THEN m.created_at > after_at
                        ELSE (m.created_at, m.id::text) > (after_at, after_key) END)
           AND is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
         ORDER BY m.created_at, m.id::text
         LIMIT lim)
      UNION ALL
        (SELECT coalesce(c.valid_from, c.stated_at), 2, 'claim_start', c.memory_id, c.entity_id,
                n.name || ': ' || c.attribute || ' = ' || c.value, c.id::text
         FROM attribute_claim c,
              LATERAL (SELECT timeline_entity_name(c.entity_id, c.memory_id) AS name OFFSET 0) n
         WHERE c.retired_at IS NULL
           AND (lo IS NULL OR coalesce(c.valid_from, c.stated_at) >= lo)
           AND (end_at IS NULL OR coalesce(c.valid_from, c.stated_at) < end_at)
           AND (after_at IS NULL
                OR CASE WHEN 2 > after_kind THEN coalesce(c.valid_from, c.stated_at) >= after_at
                        WHEN 2 < after_kind THEN coalesce(c.valid_from, c.stated_at) > after_at
                        ELSE (coalesce(c.valid_from, c.stated_at), c.id::text)
                             > (after_at, after_key) END)
           AND timeline_memory_seen(c.memory_id)
           AND n.name IS NOT NULL
         ORDER BY coalesce(c.valid_from, c.stated_at), c.id::text
         LIMIT lim)
      UNION ALL
        (SELECT coalesce(r.valid_from, r.stated_at), 3, 'relation_start', r.memory_id,
                r.subject_id, n.subject || ' ' || r.predicate || ' ' || n.object, r.id::text
         FROM relation_claim r,
              LATERAL (SELECT timeline_entity_name(r.subject_id, r.memory_id) AS subject,
                              timeline_entity_name(r.object_id, r.memory_id) AS object
                       OFFSET 0) n
         WHERE r.retired_at IS NULL
           AND (lo IS NULL OR coalesce(r.valid_from, r.stated_at) >= lo)
           AND (end_at IS NULL OR coalesce(r.valid_from, r.stated_at) < end_at)
           AND (after_at IS NULL
                OR CASE WHEN 3 > after_kind THEN coalesce(r.valid_from, r.stated_at) >= after_at
                        WHEN 3 < after_kind THEN coalesce(r.valid_from, r.stated_at) > after_at
                        ELSE (coalesce(r.valid_from, r.stated_at), r.id::text)
                             > (after_at, after_key) END)
           AND timeline_memory_seen(r.memory_id)
           AND n.subject IS NOT NULL AND n.object IS NOT NULL
         ORDER BY coalesce(r.valid_from, r.stated_at), r.id::text
         LIMIT lim)
      UNION ALL
        (SELECT rv.changed_at, 4, 'correction', rv.memory_id, NULL::uuid,
                'corrected to revision ' || rv.revision
                || CASE WHEN rv.reason <> '' THEN ': ' || rv.reason ELSE '' END,
                rv.memory_id::text || ':' || rv.revision::text || ':' || rv.action
         FROM memory_revision rv
         WHERE rv.action = 'correct'
           AND (lo IS NULL OR rv.changed_at >= lo)
           AND (end_at IS NULL OR rv.changed_at < end_at)
           AND (after_at IS NULL
                OR CASE WHEN 4 > after_kind THEN rv.changed_at >= after_at
                        WHEN 4 < after_kind THEN rv.changed_at > after_at
                        ELSE (rv.changed_at,
                              rv.memory_id::text || ':' || rv.revision::text || ':' || rv.action)
                             > (after_at, after_key) END)
           AND timeline_memory_seen(rv.memory_id)
         ORDER BY rv.changed_at, rv.memory_id::text || ':' || rv.revision::text || ':' || rv.action
         LIMIT lim)
      UNION ALL
        (SELECT rv.changed_at, 5, 'supersession', rv.memory_id, NULL::uuid,
                'superseded' || CASE WHEN rv.reason <> '' THEN ': ' || rv.reason ELSE '' END,
                rv.memory_id::text || ':' || rv.revision::text || ':' || rv.action
         FROM memory_revision rv
         WHERE rv.action = 'supersede'
           AND (lo IS NULL OR rv.changed_at >= lo)
           AND (end_at IS NULL OR rv.changed_at < end_at)
           AND (after_at IS NULL
                OR CASE WHEN 5 > after_kind THEN rv.changed_at >= after_at
                        WHEN 5 < after_kind THEN rv.changed_at > after_at
                        ELSE (rv.changed_at,
                              rv.memory_id::text || ':' || rv.revision::text || ':' || rv.action)
                             > (after_at, after_key) END)
           AND timeline_memory_seen(rv.memory_id)
         ORDER BY rv.changed_at, rv.memory_id::text || ':' || rv.revision::text || ':' || rv.action
         LIMIT lim)
      UNION ALL
        (SELECT c.valid_until, 6, 'claim_end', c.memory_id, c.entity_id,
                n.name || ': ' || c.attribute || ' = ' || c.value || ' ends', c.id::text
         FROM attribute_claim c,
              LATERAL (SELECT timeline_entity_name(c.entity_id, c.memory_id) AS name OFFSET 0) n
         WHERE c.valid_until IS NOT NULL AND c.retired_at IS NULL
           AND (lo IS NULL OR c.valid_until >= lo)
           AND (end_at IS NULL OR c.valid_until < end_at)
           AND (after_at IS NULL
                OR CASE WHEN 6 > after_kind THEN c.valid_until >= after_at
                        WHEN 6 < after_kind THEN c.valid_until > after_at
                        ELSE (c.valid_until, c.id::text) > (after_at, after_key) END)
           AND timeline_memory_seen(c.memory_id)
           AND n.name IS NOT NULL
         ORDER BY c.valid_until, c.id::text
         LIMIT lim)
      UNION ALL
        (SELECT r.valid_until, 7, 'relation_end', r.memory_id, r.subject_id,
                n.subject || ' ' || r.predicate || ' ' || n.object || ' ends', r.id::text
         FROM relation_claim r,
              LATERAL (SELECT timeline_entity_name(r.subject_id, r.memory_id) AS subject,
                              timeline_entity_name(r.object_id, r.memory_id) AS object
                       OFFSET 0) n
         WHERE r.valid_until IS NOT NULL AND r.retired_at IS NULL
           AND (lo IS NULL OR r.valid_until >= lo)
           AND (end_at IS NULL OR r.valid_until < end_at)
           AND (after_at IS NULL
                OR CASE WHEN 7 > after_kind THEN r.valid_until >= after_at
                        WHEN 7 < after_kind THEN r.valid_until > after_at
                        ELSE (r.valid_until, r.id::text) > (after_at, after_key) END)
           AND timeline_memory_seen(r.memory_id)
           AND n.subject IS NOT NULL AND n.object IS NOT NULL
         ORDER BY r.valid_until, r.id::text
         LIMIT lim)
    ) p
    ORDER BY p.at, p.place, p.key
    LIMIT lim;
END $$;
