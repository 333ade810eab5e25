-- A supersede moves the memory's revision on (memory_queries.py SUPERSEDE),
-- and since 0072 shows only to a caller who sees the memory superseded
-- through it (supersession_seen). For every other reader the memory reads as
-- current, but its revision still counted the supersede: revision 2 beside a
-- history of one revision, a correct after it "revision 3", a refused
-- compare-and-set "is at revision 2, not 1" (design §4: counts never reveal a
-- row the caller may not see). A reader now reads each revision as the
-- changes they see number it: the stored revision less the supersedes up to
-- it that they do not see. The changes take that number back
-- (MemoryRevisions: correct, supersede, forget; the review page's dismissal),
-- and record the stored one.

-- Only supersedes are counted: an index of them alone, which a memory never
-- superseded (almost every memory) answers with no row.
CREATE INDEX memory_revision_supersede_idx ON memory_revision (memory_id, revision)
    WHERE action = 'supersede';

-- Plain SQL, so that it is inlined into the statement that reads the memory
-- (one index probe a memory). The caller's own view of memory_revision
-- (visible exactly when its memory is) is all it needs: it is asked of
-- memories the caller sees.
CREATE FUNCTION reader_revision(memory uuid, stored bigint) RETURNS bigint
    LANGUAGE sql STABLE
    AS $$ SELECT stored - (SELECT count(*) FROM memory_revision r
                           WHERE r.memory_id = memory AND r.action = 'supersede'
                             AND r.revision <= stored
                             AND NOT supersession_seen(r.successor_id)) $$;
REVOKE ALL ON FUNCTION reader_revision(uuid, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION reader_revision(uuid, bigint) TO recallatron_app;

-- The timelines' corrections say "corrected to revision N": N is now the
-- reader's. The three walks are restated whole (as 0073 restated them, each
-- as a database at 0075 holds it), that one expression changed in each; the
-- event's key, its page position, keeps the stored revision, which the
-- timeline's indexes order by.

-- The whole workspace's timeline (services/store/domain/timeline.py,
-- docs/graph.md), a page at a time without reading every event of the
-- workspace and sorting them all for each page: each kind of event has an
-- index in the timeline's order (its time, then its key), and a page walks
-- each of them from the page token's position, stopping after a page's worth
-- of events the caller may see; the page is the first of those in (time,
-- kind, key) order.
--
-- Why a function: beneath the row-level-security policies the walks do not
-- hold (a claim's or a revision's policy is planned as a hashed subplan over
-- every memory the caller may see; coalesce() is not LEAKPROOF, so a claim's
-- time cannot be an index condition there). It runs as its owner and applies
-- the policies' own rules explicitly, row by row: a claim, a relation or a
-- revision is seen exactly when its memory passes is_eligible(), and an
-- entity's name exactly when a mention of it is seen. It returns only what
-- the caller may see and takes only typed values, never SQL text.
--
-- At most `lim` events from `start_at` (inclusive) to `end_at` (exclusive)
-- after the position (after_at, after_kind, after_key), NULLs for none. With
-- the place of each walk a constant of the custom plan, its position is an
-- index condition: ties at one instant are not read again. The settings keep
-- each walk a walk (no scan, bitmap or hash of a whole table), whatever the
-- planner guesses of how many rows it must read to fill a page. The kinds'
-- places (1..7) are the order of timeline.py's KINDS, and a key is compared
-- as text, as the timeline has always ordered it.
--
-- A claim or a relation is current when not retired, or retired by its
-- memory's supersede while the caller still reads that memory as current
-- (memory_reads_current, 0068, whose walks' indexes hold both). A
-- supersession shows only when the caller sees its successor, or one after it
-- (supersession_seen, 0072).
CREATE OR REPLACE FUNCTION workspace_timeline(
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
         WHERE (c.retired_at IS NULL OR c.retired_by_supersede AND memory_reads_current(c.memory_id))
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
         WHERE (r.retired_at IS NULL OR r.retired_by_supersede AND memory_reads_current(r.memory_id))
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
                'corrected to revision ' || reader_revision(rv.memory_id, rv.revision)
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
         WHERE rv.action = 'supersede' AND supersession_seen(rv.successor_id)
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
         WHERE c.valid_until IS NOT NULL AND (c.retired_at IS NULL OR c.retired_by_supersede AND memory_reads_current(c.memory_id))
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
         WHERE r.valid_until IS NOT NULL AND (r.retired_at IS NULL OR r.retired_by_supersede AND memory_reads_current(r.memory_id))
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
-- The store calls it as the app role; no one else may.
REVOKE ALL ON FUNCTION workspace_timeline(
    timestamptz, timestamptz, timestamptz, integer, text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION workspace_timeline(
    timestamptz, timestamptz, timestamptz, integer, text, integer) TO recallatron_app;

-- An entity's timeline and an episode's, as workspace_timeline gives the
-- whole workspace's: at most `lim` events from `start_at` (inclusive) to
-- `end_at` (exclusive) after the position, each kind walked on the subject's
-- index from there and merged, so a page reads about its own rows; the
-- policies' rules applied row by row (a memory, claim, relation or change only
-- when its memory passes is_eligible() and, for an entity, mentions it; an
-- entity's name only through a mention the caller may see). A walk is costed
-- by the rows it reads (random_page_cost = 1): the workspace timeline's
-- indexes of every end of the workspace, laid out as their rows were
-- written, otherwise looked cheaper to filter than the subject's own (7 times
-- the rows for a page). Current claims and relations, and the supersessions
-- shown, as workspace_timeline's (0068, 0072).
--
-- One member `e` of an entity's group (`entities`, design §8.5, answering as
-- `head`), nothing when the caller may not see it. A relation with both ends
-- `e` is its subject's. The memory's event (its first arm) is at the
-- mention's time, and its corrections and supersessions count only from
-- then: a correction made before a later one named the entity in the memory
-- is not the entity's event (for a merged group: made since the memory
-- mentioned any member). Not a security definer and granted to no one: only
-- entity_timeline (which is, 0067_baseline/11_subject_timelines.sql) calls
-- it, as the owner.
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
                 FROM attribute_claim c WHERE c.entity_id = e AND (c.retired_at IS NULL OR c.retired_by_supersede AND memory_reads_current(c.memory_id))) c
           WHERE timeline_in(c.at, c.key, 2, lo, end_at, after_at, after_kind, after_key)
             AND timeline_memory_of(c.memory_id, entities)
           ORDER BY 1, 7 LIMIT lim)
      UNION ALL
          (SELECT r.at, 3, 'relation_start', r.memory_id, head,
                  e_name || ' ' || r.predicate || ' ' || n.name, r.key
           FROM (SELECT r.*, coalesce(r.valid_from, r.stated_at) AS at, r.id::text AS key
                 FROM relation_claim r WHERE r.subject_id = e AND (r.retired_at IS NULL OR r.retired_by_supersede AND memory_reads_current(r.memory_id))) r,
                LATERAL (SELECT timeline_entity_name(r.object_id, r.memory_id) AS name OFFSET 0) n
           WHERE timeline_in(r.at, r.key, 3, lo, end_at, after_at, after_kind, after_key)
             AND timeline_memory_of(r.memory_id, entities) AND n.name IS NOT NULL
           ORDER BY 1, 7 LIMIT lim)
      UNION ALL
          (SELECT r.at, 3, 'relation_start', r.memory_id, head,
                  n.name || ' ' || r.predicate || ' ' || e_name, r.key
           FROM (SELECT r.*, coalesce(r.valid_from, r.stated_at) AS at, r.id::text AS key
                 FROM relation_claim r
                 WHERE r.object_id = e AND r.subject_id <> e AND (r.retired_at IS NULL OR r.retired_by_supersede AND memory_reads_current(r.memory_id))) r,
                LATERAL (SELECT timeline_entity_name(r.subject_id, r.memory_id) AS name OFFSET 0) n
           WHERE timeline_in(r.at, r.key, 3, lo, end_at, after_at, after_kind, after_key)
             AND timeline_memory_of(r.memory_id, entities) AND n.name IS NOT NULL
           ORDER BY 1, 7 LIMIT lim)
      UNION ALL
          (SELECT mc.changed_at, 4, 'correction', mc.memory_id, NULL::uuid,
                  'corrected to revision ' || reader_revision(rv.memory_id, rv.revision)
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
           WHERE mc.entity_id = e AND mc.action = 'supersede' AND supersession_seen(rv.successor_id)
             AND mc.changed_at >= coalesce(mn.mentioned_at, mn.memory_created_at)
             AND timeline_in(mc.changed_at, mc.key, 5, lo, end_at, after_at, after_kind,
                             after_key)
             AND timeline_memory_seen(mc.memory_id)
           ORDER BY 1, 7 LIMIT lim)
      UNION ALL
          (SELECT c.valid_until, 6, 'claim_end', c.memory_id, e,
                  e_name || ': ' || c.attribute || ' = ' || c.value || ' ends', c.key
           FROM (SELECT c.*, c.id::text AS key FROM attribute_claim c
                 WHERE c.entity_id = e AND c.valid_until IS NOT NULL AND (c.retired_at IS NULL OR c.retired_by_supersede AND memory_reads_current(c.memory_id))) c
           WHERE timeline_in(c.valid_until, c.key, 6, lo, end_at, after_at, after_kind, after_key)
             AND timeline_memory_of(c.memory_id, entities)
           ORDER BY 1, 7 LIMIT lim)
      UNION ALL
          (SELECT r.valid_until, 7, 'relation_end', r.memory_id, head,
                  e_name || ' ' || r.predicate || ' ' || n.name || ' ends', r.key
           FROM (SELECT r.*, r.id::text AS key FROM relation_claim r
                 WHERE r.subject_id = e AND r.valid_until IS NOT NULL AND (r.retired_at IS NULL OR r.retired_by_supersede AND memory_reads_current(r.memory_id))) r,
                LATERAL (SELECT timeline_entity_name(r.object_id, r.memory_id) AS name OFFSET 0) n
           WHERE timeline_in(r.valid_until, r.key, 7, lo, end_at, after_at, after_kind, after_key)
             AND timeline_memory_of(r.memory_id, entities) AND n.name IS NOT NULL
           ORDER BY 1, 7 LIMIT lim)
      UNION ALL
          (SELECT r.valid_until, 7, 'relation_end', r.memory_id, head,
                  n.name || ' ' || r.predicate || ' ' || e_name || ' ends', r.key
           FROM (SELECT r.*, r.id::text AS key FROM relation_claim r
                 WHERE r.object_id = e AND r.subject_id <> e AND r.valid_until IS NOT NULL
                   AND (r.retired_at IS NULL OR r.retired_by_supersede AND memory_reads_current(r.memory_id))) r,
                LATERAL (SELECT timeline_entity_name(r.subject_id, r.memory_id) AS name OFFSET 0) n
           WHERE timeline_in(r.valid_until, r.key, 7, lo, end_at, after_at, after_kind, after_key)
             AND timeline_memory_of(r.memory_id, entities) AND n.name IS NOT NULL
           ORDER BY 1, 7 LIMIT lim)
    ) p (at, place, kind, memory_id, entity_id, summary, key)
    ORDER BY p.at, p.place, p.key
    LIMIT lim;
END $$;
REVOKE ALL ON FUNCTION entity_member_timeline(
    uuid, uuid[], uuid, timestamptz, timestamptz, timestamptz, integer, text, integer)
    FROM PUBLIC;

-- An episode's: the events of its memories, walked as an entity's are (above);
-- a security definer called by the store as the app role, as
-- workspace_timeline. Current claims and relations, and the supersessions
-- shown, as workspace_timeline's (0068, 0072).
CREATE OR REPLACE FUNCTION episode_timeline(
    episode uuid, start_at timestamptz, end_at timestamptz, after_at timestamptz,
    after_kind integer, after_key text, lim integer
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
    SET random_page_cost = 1
    AS $$
#variable_conflict use_column
DECLARE
    lo timestamptz := greatest(start_at, after_at);
BEGIN
    RETURN QUERY
    SELECT p.at, p.kind, p.memory_id, p.entity_id, p.summary, p.key
    FROM ((SELECT m.created_at, 1, 'memory'::text, m.id, NULL::uuid, m.title, m.key
           FROM (SELECT m.*, m.id::text AS key FROM memory m WHERE m.episode_id = episode) m
           WHERE timeline_in(m.created_at, m.key, 1, lo, end_at, after_at, after_kind, after_key)
             AND is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
           ORDER BY 1, 7 LIMIT lim)
      UNION ALL
          (SELECT c.at, 2, 'claim_start', c.memory_id, c.entity_id,
                  n.name || ': ' || c.attribute || ' = ' || c.value, c.key
           FROM (SELECT c.*, coalesce(c.valid_from, c.stated_at) AS at, c.id::text AS key
                 FROM attribute_claim c WHERE c.episode_id = episode AND (c.retired_at IS NULL OR c.retired_by_supersede AND memory_reads_current(c.memory_id))) c,
                LATERAL (SELECT timeline_entity_name(c.entity_id, c.memory_id) AS name OFFSET 0) n
           WHERE timeline_in(c.at, c.key, 2, lo, end_at, after_at, after_kind, after_key)
             AND timeline_memory_seen(c.memory_id) AND n.name IS NOT NULL
           ORDER BY 1, 7 LIMIT lim)
      UNION ALL
          (SELECT r.at, 3, 'relation_start', r.memory_id, r.subject_id, n.summary, r.key
           FROM (SELECT r.*, coalesce(r.valid_from, r.stated_at) AS at, r.id::text AS key
                 FROM relation_claim r WHERE r.episode_id = episode AND (r.retired_at IS NULL OR r.retired_by_supersede AND memory_reads_current(r.memory_id))) r,
                LATERAL (SELECT timeline_relation(r.subject_id, r.predicate, r.object_id,
                                                  r.memory_id) AS summary OFFSET 0) n
           WHERE timeline_in(r.at, r.key, 3, lo, end_at, after_at, after_kind, after_key)
             AND timeline_memory_seen(r.memory_id) AND n.summary IS NOT NULL
           ORDER BY 1, 7 LIMIT lim)
      UNION ALL
          (SELECT rv.changed_at, 4, 'correction', rv.memory_id, NULL::uuid,
                  'corrected to revision ' || reader_revision(rv.memory_id, rv.revision)
                  || CASE WHEN rv.reason <> '' THEN ': ' || rv.reason ELSE '' END, rv.key
           FROM (SELECT rv.*, rv.memory_id::text || ':' || rv.revision::text || ':' || rv.action
                            AS key
                 FROM memory_revision rv WHERE rv.episode_id = episode AND rv.action = 'correct') rv
           WHERE timeline_in(rv.changed_at, rv.key, 4, lo, end_at, after_at, after_kind, after_key)
             AND timeline_memory_seen(rv.memory_id)
           ORDER BY 1, 7 LIMIT lim)
      UNION ALL
          (SELECT rv.changed_at, 5, 'supersession', rv.memory_id, NULL::uuid,
                  'superseded' || CASE WHEN rv.reason <> '' THEN ': ' || rv.reason ELSE '' END,
                  rv.key
           FROM (SELECT rv.*, rv.memory_id::text || ':' || rv.revision::text || ':' || rv.action
                            AS key
                 FROM memory_revision rv
                 WHERE rv.episode_id = episode AND rv.action = 'supersede' AND supersession_seen(rv.successor_id)) rv
           WHERE timeline_in(rv.changed_at, rv.key, 5, lo, end_at, after_at, after_kind, after_key)
             AND timeline_memory_seen(rv.memory_id)
           ORDER BY 1, 7 LIMIT lim)
      UNION ALL
          (SELECT c.valid_until, 6, 'claim_end', c.memory_id, c.entity_id,
                  n.name || ': ' || c.attribute || ' = ' || c.value || ' ends', c.key
           FROM (SELECT c.*, c.id::text AS key FROM attribute_claim c
                 WHERE c.episode_id = episode AND c.valid_until IS NOT NULL
                   AND (c.retired_at IS NULL OR c.retired_by_supersede AND memory_reads_current(c.memory_id))) c,
                LATERAL (SELECT timeline_entity_name(c.entity_id, c.memory_id) AS name OFFSET 0) n
           WHERE timeline_in(c.valid_until, c.key, 6, lo, end_at, after_at, after_kind, after_key)
             AND timeline_memory_seen(c.memory_id) AND n.name IS NOT NULL
           ORDER BY 1, 7 LIMIT lim)
      UNION ALL
          (SELECT r.valid_until, 7, 'relation_end', r.memory_id, r.subject_id,
                  n.summary || ' ends', r.key
           FROM (SELECT r.*, r.id::text AS key FROM relation_claim r
                 WHERE r.episode_id = episode AND r.valid_until IS NOT NULL
                   AND (r.retired_at IS NULL OR r.retired_by_supersede AND memory_reads_current(r.memory_id))) r,
                LATERAL (SELECT timeline_relation(r.subject_id, r.predicate, r.object_id,
                                                  r.memory_id) AS summary OFFSET 0) n
           WHERE timeline_in(r.valid_until, r.key, 7, lo, end_at, after_at, after_kind, after_key)
             AND timeline_memory_seen(r.memory_id) AND n.summary IS NOT NULL
           ORDER BY 1, 7 LIMIT lim)
    ) p (at, place, kind, memory_id, entity_id, summary, key)
    ORDER BY p.at, p.place, p.key
    LIMIT lim;
END $$;
REVOKE ALL ON FUNCTION episode_timeline(
    uuid, timestamptz, timestamptz, timestamptz, integer, text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION episode_timeline(
    uuid, timestamptz, timestamptz, timestamptz, integer, text, integer) TO recallatron_app;
