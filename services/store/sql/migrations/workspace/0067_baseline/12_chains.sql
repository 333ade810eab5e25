-- Revisions, the duplicate review's decisions, chains of successors and the
-- owner's listings of memories.

CREATE INDEX dismissed_pair_second_idx ON dismissed_pair (second_id);

CREATE INDEX memory_revision_memory_idx ON memory_revision (memory_id, id);

-- Every insert path (the tools, migration from the old store) records the
-- creation; the tools record their changes themselves, with the reason.
CREATE FUNCTION memory_revision_created() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    INSERT INTO memory_revision (memory_id, revision, action, changed_by, changed_at)
    VALUES (NEW.id, NEW.revision, 'create', NEW.created_by, NEW.created_at);
    RETURN NULL;
END $$;

CREATE TRIGGER memory_revision_created AFTER INSERT ON memory
    FOR EACH ROW EXECUTE FUNCTION memory_revision_created();

-- An owner's list of some kinds of memories (ListMemories with kinds,
-- services/store/domain/owner_view.py): walking the created_at index over
-- the whole workspace for rows of those kinds, a kind whose memories are few
-- and old (five decisions among 3,000 newer notes) would cost the 3,000 on
-- every page. This index gives each kind's memories newest first (the listing's order and
-- its keyset), and memories_of_kind walks it for one kind from the page
-- token's position, stopping after a page's worth the caller may see; the
-- listing merges the kinds asked for (owner_queries.LIST_MEMORIES_OF_KINDS).
--
-- Why a function: beneath the row-level-security policies a kind cannot be an
-- index condition (an enum's equality is not LEAKPROOF). As the workspace
-- timeline's and the lexical arm's functions do, it runs as its owner
-- and applies the policies' own rules explicitly, row by row: a memory is
-- returned exactly when is_eligible() passes, and an episode filter matches
-- only an episode the caller may see. It returns only ids and takes only
-- typed values, never SQL text.
CREATE INDEX memory_kind_order_idx ON memory (kind, created_at DESC, id DESC);

-- One kind's page: the workspace's memories of the kind and the caller's
-- own, each walked in its index from the page token's position for a page's
-- worth, then merged. Each row is checked (its purpose; the rules written
-- out, as the policies' are). A memory is superseded for the caller when any
-- memory along its chain of successors is one they may see
-- (visible_successor, below), walked by primary key only for a superseded
-- memory, as read and recall take it: a memory whose successors the caller
-- may not see reads to them as current. The list of every author's, one
-- author's or one episode's memories does so in its statement
-- (services/store/sql/owner_queries.py).
CREATE FUNCTION memories_of_kind(
    the_kind memory_kind, the_episode uuid, start_at timestamptz, end_at timestamptz,
    with_superseded boolean, after_at timestamptz, after_id uuid, lim integer
) RETURNS SETOF uuid
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    ROWS 50
    SET search_path = public
    SET plan_cache_mode = force_custom_plan
    SET enable_seqscan = off
    SET enable_bitmapscan = off
    SET enable_sort = off
    SET max_parallel_workers_per_gather = 0
    AS $$
BEGIN
    RETURN QUERY
    SELECT w.id FROM (
        (SELECT m.id, m.created_at FROM memory m
         WHERE m.kind = the_kind AND m.audience_member_id IS NULL AND m.invalidated_at IS NULL
           AND (after_at IS NULL OR (m.created_at, m.id) < (after_at, after_id))
           AND (start_at IS NULL OR m.created_at >= start_at)
           AND (end_at IS NULL OR m.created_at < end_at)
           AND (with_superseded OR m.superseded_by_id IS NULL
                OR visible_successor(m.superseded_by_id) IS NULL)
           AND (the_episode IS NULL
                OR (m.episode_id = the_episode
                    AND EXISTS (SELECT 1 FROM episode ep
                                WHERE ep.id = the_episode
                                  AND is_eligible(NULL, ep.audience_member_id, ep.purposes))))
           AND is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
         ORDER BY m.kind, m.created_at DESC, m.id DESC
         LIMIT lim)
        UNION ALL
        (SELECT m.id, m.created_at FROM memory m
         WHERE m.audience_member_id = caller_member() AND m.kind = the_kind
           AND m.invalidated_at IS NULL
           AND (after_at IS NULL OR (m.created_at, m.id) < (after_at, after_id))
           AND (start_at IS NULL OR m.created_at >= start_at)
           AND (end_at IS NULL OR m.created_at < end_at)
           AND (with_superseded OR m.superseded_by_id IS NULL
                OR visible_successor(m.superseded_by_id) IS NULL)
           AND (the_episode IS NULL
                OR (m.episode_id = the_episode
                    AND EXISTS (SELECT 1 FROM episode ep
                                WHERE ep.id = the_episode
                                  AND is_eligible(NULL, ep.audience_member_id, ep.purposes))))
           AND is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
         ORDER BY m.audience_member_id, m.kind, m.created_at DESC, m.id DESC
         LIMIT lim)
    ) AS w
    ORDER BY w.created_at DESC, w.id DESC
    LIMIT lim;
END $$;

-- A memory whose successor is forgotten is current again: it reads as
-- current to every caller (nobody may see a tombstone) and recall answers it
-- as current, so correct and supersede must find it current too. A forgotten
-- memory leaves its chain: what it replaced is replaced by its own successor
-- (which is live: a forgotten successor unlinks itself), and is current
-- again, re-embedded (queued for the embedding job) and stating its claims,
-- only when it had none (Lyon superseded by Paris, Paris by Nice: forgetting
-- Paris leaves Lyon superseded by Nice). Its revision history keeps the
-- supersede. A trigger, as the request fingerprints' is, so every path that
-- forgets does it.
CREATE FUNCTION successor_forget() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    replaced record;
BEGIN
    IF OLD.invalidated_at IS NULL AND NEW.invalidated_at IS NOT NULL THEN
        FOR replaced IN
            UPDATE memory SET superseded_by_id = NEW.superseded_by_id
            WHERE superseded_by_id = NEW.id AND invalidated_at IS NULL
            RETURNING id, revision
        LOOP
            IF NEW.superseded_by_id IS NULL THEN
                INSERT INTO embedding_job (memory_id, text_revision)
                VALUES (replaced.id, replaced.revision)
                ON CONFLICT (memory_id) DO UPDATE
                SET text_revision = EXCLUDED.text_revision, attempts = 0,
                    next_attempt_at = now();
                PERFORM memory_claims_revive(replaced.id);
            END IF;
        END LOOP;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER successor_forget AFTER UPDATE OF invalidated_at ON memory
    FOR EACH ROW EXECUTE FUNCTION successor_forget();

-- A memory whose successor is forgotten is current again (successor_forget),
-- and states again in the graph what the supersede retired: its claims,
-- relations and aliases (its successor stated them again, and the forget
-- deleted the successor's), or, current for every reader, it would state
-- nothing in lookup, neighbors, timelines or recall's cards. Reviving it
-- takes back exactly that supersede's retirement: the statements retired in the
-- supersede's own transaction, at the time of the memory's latest 'supersede'
-- revision (both now() of that transaction). One a correct replaced before
-- stays retired, in the history.
CREATE FUNCTION memory_claims_revive(subject uuid) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    superseded_at timestamptz;
BEGIN
    SELECT max(r.changed_at) INTO superseded_at
    FROM memory_revision r WHERE r.memory_id = subject AND r.action = 'supersede';
    IF superseded_at IS NULL THEN
        RETURN;
    END IF;
    UPDATE attribute_claim SET retired_at = NULL
    WHERE memory_id = subject AND retired_at = superseded_at;
    UPDATE relation_claim SET retired_at = NULL
    WHERE memory_id = subject AND retired_at = superseded_at;
    UPDATE entity_alias SET retired_at = NULL
    WHERE memory_id = subject AND retired_at = superseded_at;
END $$;

-- An owner's list of some kinds' or one author's memories (ListMemories with
-- kinds or created_by, services/store/domain/owner_view.py), walking one index
-- of the kind or the author over every audience and checking the caller's
-- eligibility row by row, would read for a page of Ada's five notes Bob's
-- 20,000 private notes newer than them (about 20,008 rows a page).
--
-- A caller sees the workspace's memories and their own private ones (design
-- §4, is_eligible), never another member's private ones, never a forgotten
-- one. So each of the two listings has one index per audience class, of the
-- memories not forgotten: the workspace's (audience NULL) and the private
-- ones, keyed first by their member; each listing walks the workspace's and
-- the caller's own in its order and merges the two, a page reading what the
-- caller may see near it (and what their purpose rules out), not what others
-- hold privately. The indexes by kind and by author over every audience
-- (memory_kind_order_idx, memory_author_idx) serve other readers.
CREATE INDEX memory_kind_shared_idx ON memory (kind, created_at DESC, id DESC)
    WHERE audience_member_id IS NULL AND invalidated_at IS NULL;

CREATE INDEX memory_kind_private_idx
    ON memory (audience_member_id, kind, created_at DESC, id DESC)
    WHERE audience_member_id IS NOT NULL AND invalidated_at IS NULL;

CREATE INDEX memory_author_shared_idx ON memory (created_by, created_at DESC, id DESC)
    WHERE audience_member_id IS NULL AND invalidated_at IS NULL;

CREATE INDEX memory_author_private_idx
    ON memory (audience_member_id, created_by, created_at DESC, id DESC)
    WHERE audience_member_id IS NOT NULL AND invalidated_at IS NULL;

-- An owner's list of every author's memories, or of one episode's
-- (ListMemories without kinds or an author; with an episode), likewise: on
-- the created_at index, or the episode's, over every audience, a page of
-- Ada's five memories would read the 20,000 newer ones private to Bob (20,008
-- rows a page).
--
-- As for the lists by kind and by author: an index per audience
-- class of the memories not forgotten, the workspace's and the private ones
-- (keyed first by their member), in the listing's order; the listing walks the
-- workspace's and the caller's own and merges the two
-- (owner_queries._list_memories). The indexes over every audience serve
-- other readers (recall's episode neighbours, the timelines).
CREATE INDEX memory_newest_shared_idx ON memory (created_at DESC, id DESC)
    WHERE audience_member_id IS NULL AND invalidated_at IS NULL;

CREATE INDEX memory_newest_private_idx ON memory (audience_member_id, created_at DESC, id DESC)
    WHERE audience_member_id IS NOT NULL AND invalidated_at IS NULL;

CREATE INDEX memory_episode_shared_idx ON memory (episode_id, created_at DESC, id DESC)
    WHERE episode_id IS NOT NULL AND audience_member_id IS NULL AND invalidated_at IS NULL;

CREATE INDEX memory_episode_private_idx
    ON memory (audience_member_id, episode_id, created_at DESC, id DESC)
    WHERE episode_id IS NOT NULL AND audience_member_id IS NOT NULL AND invalidated_at IS NULL;

-- A memory is superseded for the caller when any memory along its chain of
-- successors is eligible for them, and the one it reads as superseded by is
-- the nearest of those; a chain hidden from them all the way reads as
-- current (successor_seen, 06_recall.sql). Asking the direct successor alone
-- would not do: Lyon (the workspace's) superseded by Paris (Ada's own
-- draft), Paris by Nice (the workspace's), and Bob would read Lyon with no
-- successor and recall Lyon and Nice both as current, two offices at once.

-- The nearest memory from `successor` on along the chain (itself first) that
-- the caller may see, or NULL. Runs as the owner, beneath no policy, so it may
-- step over hidden ones; it names only one the caller may see. A chain never
-- loops (each supersede makes a new memory; forget only shortens it): the
-- bound guards the walk regardless.
CREATE FUNCTION visible_successor(successor uuid) RETURNS uuid
    LANGUAGE plpgsql STABLE STRICT SECURITY DEFINER SET search_path = public AS $$
DECLARE
    step uuid := successor;
    seen boolean;
    next_id uuid;
BEGIN
    FOR hop IN 1..100000 LOOP
        SELECT is_eligible(s.invalidated_at, s.audience_member_id, s.purposes), s.superseded_by_id
        INTO seen, next_id FROM memory s WHERE s.id = step;
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
        IF seen THEN
            RETURN step;
        END IF;
        IF next_id IS NULL THEN
            RETURN NULL;
        END IF;
        step := next_id;
    END LOOP;
    RETURN NULL;
END $$;

-- The other direction: a read's chain of the memories a memory supersedes
-- goes on past the ones the caller may not see, so Bob, who reads Lyon as
-- superseded by Nice past Ada's hidden draft, reads Nice as superseding Lyon.
-- The nearest memories the caller may see before `successor` along its
-- chain, hidden ones stepped over (a forgotten one is no link of a chain:
-- successor_forget relinked what it replaced). Runs as
-- the owner, beneath no policy; it names only memories the caller may see.
CREATE FUNCTION visible_predecessors(successor uuid) RETURNS SETOF uuid
    LANGUAGE sql STABLE STRICT SECURITY DEFINER SET search_path = public AS $$
    WITH RECURSIVE back(id, seen, hops) AS (
        SELECT m.id, is_eligible(m.invalidated_at, m.audience_member_id, m.purposes), 1
        FROM memory m WHERE m.superseded_by_id = successor AND m.invalidated_at IS NULL
      UNION ALL
        SELECT m.id, is_eligible(m.invalidated_at, m.audience_member_id, m.purposes), b.hops + 1
        FROM back b JOIN memory m ON m.superseded_by_id = b.id
        WHERE NOT b.seen AND m.invalidated_at IS NULL AND b.hops < 100000
    )
    SELECT id FROM back WHERE seen
$$;
