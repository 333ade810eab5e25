-- The memory graph (design §3, §7): lookup, merges, and the episodes'
-- indexes and checks.

CREATE INDEX entity_name_key_idx ON entity (name_key);

CREATE INDEX entity_alias_key_idx ON entity_alias (alias_key);

CREATE INDEX entity_alias_memory_idx ON entity_alias (memory_id);

CREATE INDEX attribute_claim_memory_idx ON attribute_claim (memory_id);

-- Both directions of a traversal, each narrowed by predicate when asked.
CREATE INDEX relation_claim_subject_idx ON relation_claim (subject_id, predicate);

CREATE INDEX relation_claim_object_idx ON relation_claim (object_id, predicate);

CREATE INDEX relation_claim_memory_idx ON relation_claim (memory_id);

-- Forget purges the graph with the text (design §8, erasure): the memory's
-- claims, aliases and mentions go, and so does every entity nothing mentions
-- any more (its name is text of the forgotten memory too).
CREATE FUNCTION graph_forget() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    named uuid[];
BEGIN
    IF OLD.invalidated_at IS NULL AND NEW.invalidated_at IS NOT NULL THEN
        DELETE FROM attribute_claim WHERE memory_id = NEW.id;
        DELETE FROM relation_claim WHERE memory_id = NEW.id;
        DELETE FROM entity_alias WHERE memory_id = NEW.id;
        SELECT array_agg(entity_id) INTO named FROM mention WHERE memory_id = NEW.id;
        DELETE FROM mention WHERE memory_id = NEW.id;
        DELETE FROM entity e
        WHERE e.id = ANY (coalesce(named, '{}'))
          AND NOT EXISTS (SELECT 1 FROM mention mn WHERE mn.entity_id = e.id)
          AND NOT EXISTS (SELECT 1 FROM attribute_claim c WHERE c.entity_id = e.id)
          AND NOT EXISTS (SELECT 1 FROM relation_claim r
                          WHERE r.subject_id = e.id OR r.object_id = e.id)
          AND NOT EXISTS (SELECT 1 FROM entity_alias a WHERE a.entity_id = e.id);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER graph_forget AFTER UPDATE OF invalidated_at ON memory
    FOR EACH ROW EXECUTE FUNCTION graph_forget();

-- One merge in force per pair, whichever way it points: a decision taken
-- twice at once is written once.
CREATE UNIQUE INDEX entity_merge_pair_idx
    ON entity_merge (least(kept_id, merged_id), greatest(kept_id, merged_id))
    WHERE undone_at IS NULL;

CREATE INDEX entity_merge_kept_idx ON entity_merge (kept_id) WHERE undone_at IS NULL;

CREATE INDEX entity_merge_merged_idx ON entity_merge (merged_id) WHERE undone_at IS NULL;

-- The group of each id: every entity the caller's visible, active merges
-- connect it to (itself included), whichever way each merge points. Runs
-- as the caller (SECURITY INVOKER), so row security above decides the edges.
CREATE FUNCTION entity_group(ids uuid[])
RETURNS TABLE (start_id uuid, member_id uuid)
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE grp(start_id, member_id) AS (
        SELECT id, id FROM unnest(ids) AS id
        UNION
        SELECT g.start_id,
               CASE WHEN m.kept_id = g.member_id THEN m.merged_id ELSE m.kept_id END
        FROM grp g
        JOIN entity_merge m
          ON (m.kept_id = g.member_id OR m.merged_id = g.member_id) AND m.undone_at IS NULL
    )
    SELECT start_id, member_id FROM grp
$$;

-- Lookup by part of a name (design §7): entity names and aliases are found by
-- their exact key, by a prefix of the key or of one of its words, and despite
-- a typo (trigram similarity). The trigram indexes serve both the LIKE
-- patterns of the prefixes and the similarity operators.
CREATE INDEX entity_name_key_trgm_idx ON entity USING gin (name_key gin_trgm_ops);

CREATE INDEX entity_alias_key_trgm_idx ON entity_alias USING gin (alias_key gin_trgm_ops);

-- Lookup by part of a name on its indexes (docs/graph.md, "Looking up and
-- walking"). LIKE and pg_trgm's similarity operators are not LEAKPROOF, so
-- beneath the policies of entity and entity_alias Postgres would not use the
-- trigram indexes above and would check every row the caller may see: a
-- partial lookup would cost the workspace's names (110-185 ms at 10,000
-- entities), not its matches. This function runs the index searches as its
-- owner (the migration role, which bypasses row security) and returns only
-- the matching rows' ids, their route (1: a prefix of the key or of one of its
-- words, 2: alike despite a typo) and closeness, never a name. The lookup
-- joins them back to entity and entity_alias under the policies, so row-level
-- security still decides what any route finds, as for an exact name.
CREATE FUNCTION entity_key_matches(key text, prefix text, word_prefix text)
    RETURNS TABLE (entity_id uuid, alias_id uuid, tier integer, closeness real)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = public
    AS $$
    SELECT e.id, NULL::uuid, 1, similarity(e.name_key, key) FROM entity e
    WHERE e.name_key LIKE prefix OR e.name_key LIKE word_prefix
    UNION ALL
    SELECT a.entity_id, a.id, 1, similarity(a.alias_key, key) FROM entity_alias a
    WHERE a.alias_key LIKE prefix OR a.alias_key LIKE word_prefix
    UNION ALL
    SELECT e.id, NULL::uuid, 2,
           greatest(similarity(e.name_key, key), word_similarity(key, e.name_key))
    FROM entity e WHERE e.name_key % key OR key <% e.name_key
    UNION ALL
    SELECT a.entity_id, a.id, 2,
           greatest(similarity(a.alias_key, key), word_similarity(key, a.alias_key))
    FROM entity_alias a WHERE a.alias_key % key OR key <% a.alias_key
$$;

-- Recall's entity cards ask first whether any entity or alias holds one of
-- the query's name keys at all (docs/graph.md, "Entity cards in recall").
-- Most queries name no entity, and the cards' statement, planned beneath the
-- policies of entity, entity_alias, mention and memory, would cost a workspace
-- just woken about 3 ms of planning to find nothing. This probe reads the
-- two name indexes as the function's owner and answers one boolean, nothing
-- of any name: when it says no, no entity the caller may see can match
-- either, and the cards' statement is skipped; when it says yes, that
-- statement decides under the policies.
CREATE FUNCTION entity_keys_held(keys text[]) RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = public
    AS $$
    SELECT EXISTS (SELECT 1 FROM entity WHERE name_key = ANY (keys))
        OR EXISTS (SELECT 1 FROM entity_alias WHERE alias_key = ANY (keys))
$$;

-- neighbors answers every relation between two nodes of its last hop (docs/
-- graph.md): each such pair is probed on this index, so a node of the last
-- hop with thousands of relations costs the walk its pairs among the answer,
-- not its whole list (the card indexes, 11_subject_timelines.sql, lead by
-- one end only).
CREATE INDEX relation_claim_pair_idx ON relation_claim (subject_id, object_id);

-- The bound on a merged entity (MAX_ENTITY_GROUP, design §8.5) is a bound on
-- the group as the workspace holds it. entity_group (above) runs as the
-- caller, so a merge decided for one purpose would not see the merges
-- decided for another (their entities mentioned only for that purpose), and
-- a group could grow past the bound, whole once a memory mentions its
-- entities for both.
--
-- How many entities the merges in force connect to ids, itself included,
-- whoever may see them. Only a number leaves; a merge asks it of the two
-- entities it is about to join, which its caller may see.
CREATE FUNCTION entity_group_size(ids uuid[]) RETURNS integer
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
    WITH RECURSIVE grp(member_id) AS (
        SELECT id FROM unnest(ids) AS id
        UNION
        SELECT CASE WHEN m.kept_id = g.member_id THEN m.merged_id ELSE m.kept_id END
        FROM grp g
        JOIN entity_merge m
          ON (m.kept_id = g.member_id OR m.merged_id = g.member_id) AND m.undone_at IS NULL
    )
    SELECT count(*)::integer FROM grp
$$;

-- Episodes (design §3.3) -------------------------------------------------------

CREATE INDEX episode_speaker_idx ON episode (speaker_member_id, ended_at DESC)
    WHERE speaker_member_id IS NOT NULL;

CREATE INDEX episode_participant_idx ON episode_participant (episode_id);

CREATE INDEX memory_episode_idx ON memory (episode_id) WHERE episode_id IS NOT NULL;

-- An episode's participants are written in the transaction that made it, by
-- its creator: checked as links and mentions are (created_in_this_transaction),
-- through a function that sees the new episode whoever may read it: a check
-- through the episode's own visibility would refuse the participants of an
-- episode made for another member or for purposes its creator is not acting
-- for.
CREATE FUNCTION episode_created_in_this_transaction(episode uuid) RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public
    AS $$ SELECT EXISTS (SELECT 1 FROM episode e
                         WHERE e.id = episode AND e.created_by = caller_member()
                           AND e.xmin = pg_current_xact_id()::xid) $$;

-- Recall's episode neighbours (docs/recall.md, "Episode neighbours"): the
-- memories recorded just before and just after one of the first rows, in its
-- episode, among those the caller may see. Read in the caller's transaction
-- under the memory policy, walking this index from the row outwards until a
-- visible one; without it each lookup would read the whole episode.
CREATE INDEX memory_episode_order_idx ON memory (episode_id, created_at, id)
    WHERE episode_id IS NOT NULL;

CREATE INDEX request_key_episode_idx ON request_key (episode_id) WHERE episode_id IS NOT NULL;

-- The fingerprint hashes the episode's title: a removed member's erase,
-- which empties the titles of their private episodes, clears it too, as
-- forget clears a memory's (request_fingerprint_forget; a retry then
-- replays by tool alone).
CREATE FUNCTION request_fingerprint_episode_erase() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    IF OLD.title <> '' AND NEW.title = '' THEN
        UPDATE request_key SET fingerprint = NULL
        WHERE episode_id = NEW.id AND fingerprint IS NOT NULL;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER request_fingerprint_episode_erase AFTER UPDATE OF title ON episode
    FOR EACH ROW EXECUTE FUNCTION request_fingerprint_episode_erase();
