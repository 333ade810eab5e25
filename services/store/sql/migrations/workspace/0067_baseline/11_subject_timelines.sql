-- What one entity or one episode costs to read follows what is read of it, not
-- its whole life (services/store/domain/timeline.py, graph_cards.py,
-- graph_traversal.py; docs/graph.md).
--
-- Copies that let one subject's rows be read in order: a mention holds its
-- memory's creation time, and a claim and a revision their memory's episode.
-- Each row takes its memory's when it is written, and follows a change of
-- the memory's. An entity's corrections and supersessions are kept per
-- entity (mention_change, 03_graph_tables.sql), written by the triggers
-- below whichever of the change and the mention comes last.
CREATE FUNCTION mention_memory_time() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    SELECT m.created_at INTO NEW.memory_created_at FROM memory m WHERE m.id = NEW.memory_id;
    RETURN NEW;
END $$;

CREATE TRIGGER mention_memory_time BEFORE INSERT ON mention
    FOR EACH ROW EXECUTE FUNCTION mention_memory_time();

CREATE FUNCTION memory_episode_copy() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    SELECT m.episode_id INTO NEW.episode_id FROM memory m WHERE m.id = NEW.memory_id;
    RETURN NEW;
END $$;

CREATE TRIGGER attribute_claim_episode BEFORE INSERT ON attribute_claim
    FOR EACH ROW EXECUTE FUNCTION memory_episode_copy();

CREATE TRIGGER relation_claim_episode BEFORE INSERT ON relation_claim
    FOR EACH ROW EXECUTE FUNCTION memory_episode_copy();

CREATE TRIGGER memory_revision_episode BEFORE INSERT ON memory_revision
    FOR EACH ROW EXECUTE FUNCTION memory_episode_copy();

CREATE FUNCTION memory_copies_follow() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    UPDATE mention SET memory_created_at = NEW.created_at WHERE memory_id = NEW.id;
    UPDATE attribute_claim SET episode_id = NEW.episode_id WHERE memory_id = NEW.id;
    UPDATE relation_claim SET episode_id = NEW.episode_id WHERE memory_id = NEW.id;
    UPDATE memory_revision SET episode_id = NEW.episode_id WHERE memory_id = NEW.id;
    RETURN NULL;
END $$;

CREATE TRIGGER memory_copies_follow AFTER UPDATE OF created_at, episode_id ON memory
    FOR EACH ROW WHEN (OLD.created_at IS DISTINCT FROM NEW.created_at
                       OR OLD.episode_id IS DISTINCT FROM NEW.episode_id)
    EXECUTE FUNCTION memory_copies_follow();

CREATE FUNCTION mention_change_of_revision() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    INSERT INTO mention_change (memory_id, entity_id, revision_id, action, changed_at, key)
    SELECT NEW.memory_id, mn.entity_id, NEW.id, NEW.action, NEW.changed_at,
           NEW.memory_id::text || ':' || NEW.revision::text || ':' || NEW.action
    FROM mention mn WHERE mn.memory_id = NEW.memory_id
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

CREATE TRIGGER memory_revision_mentions AFTER INSERT ON memory_revision
    FOR EACH ROW WHEN (NEW.action IN ('correct', 'supersede'))
    EXECUTE FUNCTION mention_change_of_revision();

CREATE FUNCTION mention_change_of_mention() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    INSERT INTO mention_change (memory_id, entity_id, revision_id, action, changed_at, key)
    SELECT NEW.memory_id, NEW.entity_id, rv.id, rv.action, rv.changed_at,
           rv.memory_id::text || ':' || rv.revision::text || ':' || rv.action
    FROM memory_revision rv
    WHERE rv.memory_id = NEW.memory_id AND rv.action IN ('correct', 'supersede')
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

CREATE TRIGGER mention_changes AFTER INSERT ON mention
    FOR EACH ROW EXECUTE FUNCTION mention_change_of_mention();

-- Each list of a card in its order, walked from the newest statement and
-- left after the card's cap; neighbors walks the relations' ones too.
CREATE INDEX attribute_claim_card_idx ON attribute_claim (entity_id, stated_at DESC, attribute, id);

CREATE INDEX relation_claim_subject_card_idx ON relation_claim
    (subject_id, stated_at DESC, predicate, id);

CREATE INDEX relation_claim_object_card_idx ON relation_claim
    (object_id, stated_at DESC, predicate, id);

CREATE INDEX entity_alias_card_idx ON entity_alias (entity_id, stated_at DESC, alias, id);

-- An entity's mentions by their memory's time: the card's newest first, the
-- timeline's oldest first.
CREATE INDEX mention_entity_time_idx ON mention (entity_id, memory_created_at, (memory_id::text));

-- An entity's and an episode's timeline: each kind of event of the subject
-- on an index in the timeline's order (time, then key), as
-- 10_workspace_timeline.sql gives the whole workspace's.
CREATE INDEX attribute_claim_entity_start_idx ON attribute_claim
    (entity_id, (coalesce(valid_from, stated_at)), (id::text)) WHERE retired_at IS NULL;

CREATE INDEX attribute_claim_entity_end_idx ON attribute_claim
    (entity_id, valid_until, (id::text)) WHERE valid_until IS NOT NULL AND retired_at IS NULL;

CREATE INDEX relation_claim_subject_start_idx ON relation_claim
    (subject_id, (coalesce(valid_from, stated_at)), (id::text)) WHERE retired_at IS NULL;

CREATE INDEX relation_claim_object_start_idx ON relation_claim
    (object_id, (coalesce(valid_from, stated_at)), (id::text)) WHERE retired_at IS NULL;

CREATE INDEX relation_claim_subject_end_idx ON relation_claim
    (subject_id, valid_until, (id::text)) WHERE valid_until IS NOT NULL AND retired_at IS NULL;

CREATE INDEX relation_claim_object_end_idx ON relation_claim
    (object_id, valid_until, (id::text)) WHERE valid_until IS NOT NULL AND retired_at IS NULL;

CREATE INDEX mention_change_order_idx ON mention_change (entity_id, action, changed_at, key);

CREATE INDEX memory_episode_timeline_idx ON memory (episode_id, created_at, (id::text))
    WHERE episode_id IS NOT NULL;

CREATE INDEX attribute_claim_episode_start_idx ON attribute_claim
    (episode_id, (coalesce(valid_from, stated_at)), (id::text))
    WHERE episode_id IS NOT NULL AND retired_at IS NULL;

CREATE INDEX attribute_claim_episode_end_idx ON attribute_claim (episode_id, valid_until, (id::text))
    WHERE episode_id IS NOT NULL AND valid_until IS NOT NULL AND retired_at IS NULL;

CREATE INDEX relation_claim_episode_start_idx ON relation_claim
    (episode_id, (coalesce(valid_from, stated_at)), (id::text))
    WHERE episode_id IS NOT NULL AND retired_at IS NULL;

CREATE INDEX relation_claim_episode_end_idx ON relation_claim (episode_id, valid_until, (id::text))
    WHERE episode_id IS NOT NULL AND valid_until IS NOT NULL AND retired_at IS NULL;

CREATE INDEX memory_revision_episode_idx ON memory_revision
    (episode_id, action, changed_at, (memory_id::text || ':' || revision::text || ':' || action))
    WHERE episode_id IS NOT NULL AND action IN ('correct', 'supersede');

-- Whether an event at `t` with key `k` of the kind in `place` lies in the
-- window [lo, end_at) and after the page's position (a NULL: no bound).
-- Inlined where used: with the place and the bounds constants of a custom
-- plan, it is an index condition, and ties at the position are not read again.
CREATE FUNCTION timeline_in(t timestamptz, k text, place integer, lo timestamptz,
                            end_at timestamptz, after_at timestamptz, after_kind integer,
                            after_key text) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT (lo IS NULL OR t >= lo) AND (end_at IS NULL OR t < end_at)
                 AND (after_at IS NULL
                      OR CASE WHEN place > after_kind THEN t >= after_at
                              WHEN place < after_kind THEN t > after_at
                              ELSE (t, k) > (after_at, after_key) END) $$;

-- Whether the caller may see a memory that mentions one of `entities`.
CREATE FUNCTION timeline_memory_of(memory uuid, entities uuid[]) RETURNS boolean
    LANGUAGE sql STABLE
    SET plan_cache_mode = force_generic_plan
    AS $$ SELECT is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
                 AND EXISTS (SELECT 1 FROM mention mn
                             WHERE mn.memory_id = memory AND mn.entity_id = ANY (entities))
          FROM memory m WHERE m.id = memory $$;

-- A relation's summary when the caller may see both its entities (as
-- timeline_entity_name), else NULL; `stating` is a memory the caller may see.
CREATE FUNCTION timeline_relation(subject uuid, predicate text, object uuid, stating uuid)
    RETURNS text
    LANGUAGE sql STABLE
    AS $$ SELECT timeline_entity_name(subject, stating) || ' ' || predicate || ' '
                 || timeline_entity_name(object, stating) $$;

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
-- the rows for a page).
--
-- One member `e` of an entity's group (`entities`, design §8.5, answering as
-- `head`), nothing when the caller may not see it. A relation with both ends
-- `e` is its subject's. The memory's event (its first arm) is at the
-- mention's time, and its corrections and supersessions count only from
-- then: a correction made before a later one named the entity in the memory
-- is not the entity's event (for a merged group: made since the memory
-- mentioned any member).
CREATE FUNCTION entity_member_timeline(
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

-- The group's: each member's first `lim` events, merged; an event reached
-- through two members (a memory mentioning both, a relation between them) is
-- one. Every event of the group's first `lim` is among its member's first.
CREATE FUNCTION entity_timeline(
    entities uuid[], head uuid, start_at timestamptz, end_at timestamptz, after_at timestamptz,
    after_kind integer, after_key text, lim integer
) RETURNS TABLE (at timestamptz, kind text, memory_id uuid, entity_id uuid, summary text,
                 key text)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = public
    AS $$ SELECT t.at, t.kind, t.memory_id, t.entity_id, t.summary, t.key
          FROM (SELECT DISTINCT t.*
                FROM unnest(entities) AS s(id),
                     entity_member_timeline(s.id, entities, head, start_at, end_at, after_at,
                                            after_kind, after_key, lim) t) t
          ORDER BY t.at, t.place, t.key
          LIMIT lim $$;

-- An episode's: the events of its memories.
CREATE FUNCTION episode_timeline(
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
                 FROM attribute_claim c WHERE c.episode_id = episode AND c.retired_at IS NULL) c,
                LATERAL (SELECT timeline_entity_name(c.entity_id, c.memory_id) AS name OFFSET 0) n
           WHERE timeline_in(c.at, c.key, 2, lo, end_at, after_at, after_kind, after_key)
             AND timeline_memory_seen(c.memory_id) AND n.name IS NOT NULL
           ORDER BY 1, 7 LIMIT lim)
      UNION ALL
          (SELECT r.at, 3, 'relation_start', r.memory_id, r.subject_id, n.summary, r.key
           FROM (SELECT r.*, coalesce(r.valid_from, r.stated_at) AS at, r.id::text AS key
                 FROM relation_claim r WHERE r.episode_id = episode AND r.retired_at IS NULL) r,
                LATERAL (SELECT timeline_relation(r.subject_id, r.predicate, r.object_id,
                                                  r.memory_id) AS summary OFFSET 0) n
           WHERE timeline_in(r.at, r.key, 3, lo, end_at, after_at, after_kind, after_key)
             AND timeline_memory_seen(r.memory_id) AND n.summary IS NOT NULL
           ORDER BY 1, 7 LIMIT lim)
      UNION ALL
          (SELECT rv.changed_at, 4, 'correction', rv.memory_id, NULL::uuid,
                  'corrected to revision ' || rv.revision
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
                 WHERE rv.episode_id = episode AND rv.action = 'supersede') rv
           WHERE timeline_in(rv.changed_at, rv.key, 5, lo, end_at, after_at, after_kind, after_key)
             AND timeline_memory_seen(rv.memory_id)
           ORDER BY 1, 7 LIMIT lim)
      UNION ALL
          (SELECT c.valid_until, 6, 'claim_end', c.memory_id, c.entity_id,
                  n.name || ': ' || c.attribute || ' = ' || c.value || ' ends', c.key
           FROM (SELECT c.*, c.id::text AS key FROM attribute_claim c
                 WHERE c.episode_id = episode AND c.valid_until IS NOT NULL
                   AND c.retired_at IS NULL) c,
                LATERAL (SELECT timeline_entity_name(c.entity_id, c.memory_id) AS name OFFSET 0) n
           WHERE timeline_in(c.valid_until, c.key, 6, lo, end_at, after_at, after_kind, after_key)
             AND timeline_memory_seen(c.memory_id) AND n.name IS NOT NULL
           ORDER BY 1, 7 LIMIT lim)
      UNION ALL
          (SELECT r.valid_until, 7, 'relation_end', r.memory_id, r.subject_id,
                  n.summary || ' ends', r.key
           FROM (SELECT r.*, r.id::text AS key FROM relation_claim r
                 WHERE r.episode_id = episode AND r.valid_until IS NOT NULL
                   AND r.retired_at IS NULL) r,
                LATERAL (SELECT timeline_relation(r.subject_id, r.predicate, r.object_id,
                                                  r.memory_id) AS summary OFFSET 0) n
           WHERE timeline_in(r.valid_until, r.key, 7, lo, end_at, after_at, after_kind, after_key)
             AND timeline_memory_seen(r.memory_id) AND n.summary IS NOT NULL
           ORDER BY 1, 7 LIMIT lim)
    ) p (at, place, kind, memory_id, entity_id, summary, key)
    ORDER BY p.at, p.place, p.key
    LIMIT lim;
END $$;

-- An entity's timeline shows a memory's event from when the memory began to
-- mention the entity (mention.mentioned_at: a correction's claims may name it
-- in an older memory; NULL, since the memory itself), so the memory's event
-- lies not before the memory mentioned it. A memory mentioning several
-- members of a group is the group's event once, from the first of its
-- mentions of them. Walked on an index in that order.
CREATE INDEX mention_entity_since_idx ON mention
    (entity_id, (coalesce(mentioned_at, memory_created_at)), (memory_id::text));
