-- An entity's timeline shows a memory's event from when the memory began to
-- mention the entity (migration 0046: a correction's claims may name it in an
-- older memory; NULL, since the memory itself), so the memory's event lies
-- not before the memory mentioned it. A memory mentioning several members of
-- a group is the group's event once, from the first of its mentions of them.
-- Walked on an index in that order, as 0033's walk on the memory's time.
CREATE INDEX mention_entity_since_idx ON mention
    (entity_id, (coalesce(mentioned_at, memory_created_at)), (memory_id::text));

-- As 0033's, with the memory's event (its first arm) at the mention's time,
-- and its corrections and supersessions only from then: a correction made
-- before a later one named the entity in the memory is not the entity's
-- event (for a merged group: made since the memory mentioned any member).
CREATE OR REPLACE FUNCTION entity_member_timeline(
    e uuid, entities uuid[], head uuid, start_at timestamptz, end_at timestamptz,
    after_at timestamptz, after_kind integer, after_key text, lim integer
) RETURNS TABLE (at timestamptz, place integer, kind text, memory_id uuid, entity_id uuid,
                 summary text, key text)
    LANGUAGE plpgsql STABLE
    SET search_path = public
    SET plan_cache_mode = force_custom_plan
    SET enable_seqscan = off
    SET enable_bitmapscan = off
    SET enable_hashjoin = off
    SET enable_mergejoin = off
    SET max_parallel_workers_per_gather = 0
    SET random_page_cost = 1
    AS $$
#variable_conflict use_column
DECLARE
    lo timestamptz := greatest(start_at, after_at);
    -- The member's name, when the caller may see it (as the entity policy).
    e_name text := timeline_entity_name(e, NULL);
BEGIN
    IF e_name IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT p.at, p.place, p.kind, p.memory_id, p.entity_id, p.summary, p.key
    FROM ((SELECT mn.since, 1, 'memory'::text, mn.memory_id, NULL::uuid, m.title,
                  mn.memory_id::text
           FROM (SELECT mn.*, coalesce(mn.mentioned_at, mn.memory_created_at) AS since
                 FROM mention mn WHERE mn.entity_id = e) mn
                JOIN memory m ON m.id = mn.memory_id
           WHERE timeline_in(mn.since, mn.memory_id::text, 1, lo, end_at, after_at,
                             after_kind, after_key)
             AND is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
             -- Another member mentioned first: the event is that member's.
             AND (cardinality(entities) = 1
                  OR NOT EXISTS (SELECT 1 FROM mention o
                                 WHERE o.memory_id = mn.memory_id
                                   AND o.entity_id = ANY(entities) AND o.entity_id <> e
                                   AND coalesce(o.mentioned_at, o.memory_created_at) < mn.since))
           ORDER BY 1, 7 LIMIT lim)
      UNION ALL
          (SELECT c.at, 2, 'claim_start', c.memory_id, e,
                  e_name || ': ' || c.attribute || ' = ' || c.value, c.key
           FROM (SELECT c.*, coalesce(c.valid_from, c.stated_at) AS at, c.id::text AS key
                 FROM attribute_claim c WHERE c.entity_id = e AND c.retired_at IS NULL) c
           WHERE timeline_in(c.at, c.key, 2, lo, end_at, after_at, after_kind, after_key)
             AND timeline_memory_of(c.memory_id, entities)
           ORDER BY 1, 7 LIMIT lim)
      UNION ALL
          (SELECT r.at, 3, 'relation_start', r.memory_id, head,
                  e_name || ' ' || r.predicate || ' ' || n.name, r.key
           FROM (SELECT r.*, coalesce(r.valid_from, r.stated_at) AS at, r.id::text AS key
                 FROM relation_claim r WHERE r.subject_id = e AND r.retired_at IS NULL) r,
                LATERAL (SELECT timeline_entity_name(r.object_id, r.memory_id) AS name OFFSET 0) n
           WHERE timeline_in(r.at, r.key, 3, lo, end_at, after_at, after_kind, after_key)
             AND timeline_memory_of(r.memory_id, entities) AND n.name IS NOT NULL
           ORDER BY 1, 7 LIMIT lim)
      UNION ALL
          (SELECT r.at, 3, 'relation_start', r.memory_id, head,
                  n.name || ' ' || r.predicate || ' ' || e_name, r.key
           FROM (SELECT r.*, coalesce(r.valid_from, r.stated_at) AS at, r.id::text AS key
                 FROM relation_claim r
                 WHERE r.object_id = e AND r.subject_id <> e AND r.retired_at IS NULL) r,
                LATERAL (SELECT timeline_entity_name(r.subject_id, r.memory_id) AS name OFFSET 0) n
           WHERE timeline_in(r.at, r.key, 3, lo, end_at, after_at, after_kind, after_key)
             AND timeline_memory_of(r.memory_id, entities) AND n.name IS NOT NULL
           ORDER BY 1, 7 LIMIT lim)
      UNION ALL
          (SELECT mc.changed_at, 4, 'correction', mc.memory_id, NULL::uuid,
                  'corrected to revision ' || rv.revision
                  || CASE WHEN rv.reason <> '' THEN ': ' || rv.reason ELSE '' END, mc.key
           FROM mention_change mc JOIN memory_revision rv ON rv.id = mc.revision_id
                JOIN mention mn ON mn.memory_id = mc.memory_id AND mn.entity_id = mc.entity_id
           WHERE mc.entity_id = e AND mc.action = 'correct'
             AND mc.changed_at >= coalesce(mn.mentioned_at, mn.memory_created_at)
             AND timeline_in(mc.changed_at, mc.key, 4, lo, end_at, after_at, after_kind,
                             after_key)
             AND timeline_memory_seen(mc.memory_id)
           ORDER BY 1, 7 LIMIT lim)
      UNION ALL
          (SELECT mc.changed_at, 5, 'supersession', mc.memory_id, NULL::uuid,
                  'superseded' || CASE WHEN rv.reason <> '' THEN ': ' || rv.reason ELSE '' END,
                  mc.key
           FROM mention_change mc JOIN memory_revision rv ON rv.id = mc.revision_id
                JOIN mention mn ON mn.memory_id = mc.memory_id AND mn.entity_id = mc.entity_id
           WHERE mc.entity_id = e AND mc.action = 'supersede'
             AND mc.changed_at >= coalesce(mn.mentioned_at, mn.memory_created_at)
             AND timeline_in(mc.changed_at, mc.key, 5, lo, end_at, after_at, after_kind,
                             after_key)
             AND timeline_memory_seen(mc.memory_id)
           ORDER BY 1, 7 LIMIT lim)
      UNION ALL
          (SELECT c.valid_until, 6, 'claim_end', c.memory_id, e,
                  e_name || ': ' || c.attribute || ' = ' || c.value || ' ends', c.key
           FROM (SELECT c.*, c.id::text AS key FROM attribute_claim c
                 WHERE c.entity_id = e AND c.valid_until IS NOT NULL AND c.retired_at IS NULL) c
           WHERE timeline_in(c.valid_until, c.key, 6, lo, end_at, after_at, after_kind, after_key)
             AND timeline_memory_of(c.memory_id, entities)
           ORDER BY 1, 7 LIMIT lim)
      UNION ALL
          (SELECT r.valid_until, 7, 'relation_end', r.memory_id, head,
                  e_name || ' ' || r.predicate || ' ' || n.name || ' ends', r.key
           FROM (SELECT r.*, r.id::text AS key FROM relation_claim r
                 WHERE r.subject_id = e AND r.valid_until IS NOT NULL AND r.retired_at IS NULL) r,
                LATERAL (SELECT timeline_entity_name(r.object_id, r.memory_id) AS name OFFSET 0) n
           WHERE timeline_in(r.valid_until, r.key, 7, lo, end_at, after_at, after_kind, after_key)
             AND timeline_memory_of(r.memory_id, entities) AND n.name IS NOT NULL
           ORDER BY 1, 7 LIMIT lim)
      UNION ALL
          (SELECT r.valid_until, 7, 'relation_end', r.memory_id, head,
                  n.name || ' ' || r.predicate || ' ' || e_name || ' ends', r.key
           FROM (SELECT r.*, r.id::text AS key FROM relation_claim r
                 WHERE r.object_id = e AND r.subject_id <> e AND r.valid_until IS NOT NULL
                   AND r.retired_at IS NULL) r,
                LATERAL (SELECT timeline_entity_name(r.subject_id, r.memory_id) AS name OFFSET 0) n
           WHERE timeline_in(r.valid_until, r.key, 7, lo, end_at, after_at, after_kind, after_key)
             AND timeline_memory_of(r.memory_id, entities) AND n.name IS NOT NULL
           ORDER BY 1, 7 LIMIT lim)
    ) p (at, place, kind, memory_id, entity_id, summary, key)
    ORDER BY p.at, p.place, p.key
    LIMIT lim;
END $$;
