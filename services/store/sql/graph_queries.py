"""Named SQL of the graph (design §3, §7). Every statement runs inside
`caller_transaction`, so the row-level security of 0008_graph.sql decides what
each one sees: a claim is visible exactly when its stating memory is, an
entity only through a visible mention."""

from __future__ import annotations

ENTITY_VISIBLE = "SELECT 1 FROM entity WHERE id = %s"
ENTITIES = "SELECT id, name, type FROM entity WHERE id = ANY(%s::uuid[]) ORDER BY created_at, id"
INSERT_ENTITY = "INSERT INTO entity (id, name, type, name_key) VALUES (%s, %s, %s, %s)"
# A mention written after its memory (a correction's claims naming an entity)
# records when (migration 0046); with a new memory it is as old as the memory.
INSERT_MENTION = """
INSERT INTO mention (memory_id, entity_id, mentioned_at)
SELECT %s, %s, (SELECT now() FROM memory m WHERE m.id = %s AND m.created_at < now())
ON CONFLICT DO NOTHING
"""

# The entities the old memory's current claims name, which its successor
# mentions when it carries them (read before: the successor may be written for
# someone else, whose rows the writer cannot read back).
# A memory's statements current for the caller: those not retired, and with
# %(kept)s (a caller who reads the memory as current, though a successor
# hidden from them superseded it) those its supersede retired (_KEPT below).
_STATING = "(retired_at IS NULL OR %(kept)s AND retired_by_supersede)"
CARRIED_ENTITIES = f"""
SELECT entity_id FROM attribute_claim WHERE memory_id = %(old)s AND {_STATING}
UNION SELECT subject_id FROM relation_claim WHERE memory_id = %(old)s AND {_STATING}
UNION SELECT object_id FROM relation_claim WHERE memory_id = %(old)s AND {_STATING}
UNION SELECT entity_id FROM entity_alias WHERE memory_id = %(old)s AND {_STATING}
"""
INSERT_ATTRIBUTE = """
INSERT INTO attribute_claim
    (id, memory_id, entity_id, attribute, value, valid_from, valid_until, confidence)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
"""
INSERT_RELATION = """
INSERT INTO relation_claim
    (id, memory_id, subject_id, predicate, object_id, valid_from, valid_until, confidence)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
"""
INSERT_ALIAS = """
INSERT INTO entity_alias (id, memory_id, entity_id, alias, alias_key) VALUES (%s, %s, %s, %s, %s)
"""

# Correct and supersede: a memory's current claims stop being current now;
# they stay, retired, in its history. What retired them (%(superseded)s:
# the memory's supersede) decides for whom (migration 0068, _CURRENT below).
RETIRE = tuple(
    f"UPDATE {table} SET retired_at = now(), retired_by_supersede = %(superseded)s"
    f" WHERE memory_id = %(memory)s AND {_STATING}"
    for table in ("attribute_claim", "relation_claim", "entity_alias")
)
# Supersede: the successor states the old memory's current claims again.
CARRY = (
    f"""
    INSERT INTO attribute_claim
        (id, memory_id, entity_id, attribute, value, valid_from, valid_until, confidence)
    SELECT gen_random_uuid(), %(new)s, entity_id, attribute, value, valid_from, valid_until,
           confidence
    FROM attribute_claim WHERE memory_id = %(old)s AND {_STATING}
    """,
    f"""
    INSERT INTO relation_claim
        (id, memory_id, subject_id, predicate, object_id, valid_from, valid_until, confidence)
    SELECT gen_random_uuid(), %(new)s, subject_id, predicate, object_id, valid_from,
           valid_until, confidence
    FROM relation_claim WHERE memory_id = %(old)s AND {_STATING}
    """,
    f"""
    INSERT INTO entity_alias (id, memory_id, entity_id, alias, alias_key)
    SELECT gen_random_uuid(), %(new)s, entity_id, alias, alias_key
    FROM entity_alias WHERE memory_id = %(old)s AND {_STATING}
    """,
)

# A statement its memory's supersede retired stays current for a caller who
# reads that memory as current: none of its successors is one they may see,
# the rule of read and recall (migration 0068). A correct's retirement holds
# for everyone.
_KEPT = "({t}.retired_by_supersede AND memory_reads_current({t}.memory_id))"
# When a statement was retired, for the caller: never, while they read its
# memory as current (its supersede is not theirs to see through it).
_RETIRED = f"CASE WHEN {_KEPT} THEN NULL ELSE {{t}}.retired_at END"
# What a memory states, for read: current claims first, then by time.
# What memories state, current claims first, at most %(cap)s of each kind per
# memory; total is the memory's whole count of that kind (the answer says how
# many it left out: memory_queries' provenance lists do the same).
CLAIMS_OF = f"""
SELECT * FROM (
    SELECT c.memory_id, e.id, e.name, e.type, c.attribute, c.value, c.valid_from,
           c.valid_until, c.confidence, c.stated_at, {_RETIRED.format(t="c")} AS retired_at,
           count(*) OVER (PARTITION BY c.memory_id) AS total,
           row_number() OVER (PARTITION BY c.memory_id
                              ORDER BY ({_RETIRED.format(t="c")}) IS NOT NULL,
                                       c.stated_at DESC, e.name, c.attribute, c.id) AS nth
    FROM attribute_claim c JOIN entity e ON e.id = c.entity_id
    WHERE c.memory_id = ANY(%(ids)s::uuid[])
) c WHERE nth <= %(cap)s
ORDER BY memory_id, nth
"""
RELATIONS_OF = f"""
SELECT * FROM (
    SELECT r.memory_id, s.id, s.name, s.type, r.predicate, o.id, o.name, o.type, r.valid_from,
           r.valid_until, r.confidence, r.stated_at, {_RETIRED.format(t="r")} AS retired_at,
           count(*) OVER (PARTITION BY r.memory_id) AS total,
           row_number() OVER (PARTITION BY r.memory_id
                              ORDER BY ({_RETIRED.format(t="r")}) IS NOT NULL,
                                       r.stated_at DESC, s.name, r.predicate, r.id) AS nth
    FROM relation_claim r JOIN entity s ON s.id = r.subject_id
    JOIN entity o ON o.id = r.object_id
    WHERE r.memory_id = ANY(%(ids)s::uuid[])
) r WHERE nth <= %(cap)s
ORDER BY memory_id, nth
"""
ALIASES_OF = f"""
SELECT * FROM (
    SELECT a.memory_id, e.id, e.name, e.type, a.alias, a.stated_at,
           {_RETIRED.format(t="a")} AS retired_at,
           count(*) OVER (PARTITION BY a.memory_id) AS total,
           row_number() OVER (PARTITION BY a.memory_id
                              ORDER BY ({_RETIRED.format(t="a")}) IS NOT NULL,
                                       a.stated_at DESC, a.alias, a.id) AS nth
    FROM entity_alias a JOIN entity e ON e.id = a.entity_id
    WHERE a.memory_id = ANY(%(ids)s::uuid[])
) a WHERE nth <= %(cap)s
ORDER BY memory_id, nth
"""

# A claim is current at %(at)s when it was stated by then, not yet retired
# (for the caller), and valid then (either end open). %(history)s lifts the
# condition.
_CURRENT = f"""
(%(history)s OR ({{t}}.stated_at <= %(at)s
                 AND ({{t}}.retired_at IS NULL OR {{t}}.retired_at > %(at)s OR {_KEPT})
                 AND ({{t}}.valid_from IS NULL OR {{t}}.valid_from <= %(at)s)
                 AND ({{t}}.valid_until IS NULL OR {{t}}.valid_until > %(at)s)))
"""
_ALIAS_CURRENT = f"""
(%(history)s OR (a.stated_at <= %(at)s
                 AND (a.retired_at IS NULL OR a.retired_at > %(at)s OR {_KEPT.format(t="a")})))
"""
# An alias current now for the caller (entity merge's proposals).
ALIAS_CURRENT_NOW = f"(a.retired_at IS NULL OR {_KEPT.format(t='a')})"
# The newest statement a list may hold, as a bound its index walk starts
# from (an as_of in the past does not read what was stated after it).
_LATEST = "CASE WHEN %(history)s THEN 'infinity'::timestamptz ELSE %(at)s::timestamptz END"
_STATED_BY = "{t}.stated_at <= " + _LATEST

# Entities by name or current alias key (migration 0016): exact matches first
# (tier 0), then a prefix of the key or of one of its words (tier 1), then
# keys alike despite a typo (tier 2: trigram similarity of the whole key, or of
# a word run of it to the key); within a tier the closer, then the shorter
# name, then the oldest. The partial routes are searched on their indexes by
# entity_key_matches (migration 0018) and joined back to entity and
# entity_alias here, under their policies: row-level security sees to it
# that only entities the caller may see are found, by any route, and only
# through aliases it may see.
_LOOKUP = """
WITH hit (entity_id, tier, closeness) AS (
    SELECT id, 0, 1.0::real FROM entity WHERE name_key = %(key)s
    UNION ALL
    SELECT a.entity_id, 0, 1.0::real FROM entity_alias a
    WHERE a.alias_key = %(key)s AND {alias_current}{partial}
), best AS (
    SELECT DISTINCT ON (entity_id) entity_id, tier, closeness FROM hit
    ORDER BY entity_id, tier, closeness DESC
)
SELECT e.id, e.name, e.type FROM best b JOIN entity e ON e.id = b.entity_id
WHERE {known_by}
ORDER BY b.tier, b.closeness DESC, length(e.name), e.created_at, e.id
LIMIT %(limit)s
"""
_PARTIAL = """
    UNION ALL
    SELECT k.entity_id, k.tier, k.closeness
    FROM entity_key_matches(%(key)s, %(prefix)s, %(word_prefix)s) k
    LEFT JOIN entity_alias a ON a.id = k.alias_id
    WHERE k.alias_id IS NULL OR (a.id IS NOT NULL AND {alias_current})"""
# Asked as of a time (%(known_by)s, NULL for now), an entity exists only once
# a memory the caller may see mentioned it: one written by then, mentioning it
# since (migration 0046: a correction may name it in an older memory). One
# first named later was not known then, by any route.
_KNOWN_BY = """(%(known_by)s::timestamptz IS NULL
 OR EXISTS (SELECT 1 FROM mention mn
            WHERE mn.entity_id = {e}.id AND mn.memory_created_at <= %(known_by)s::timestamptz
              AND (mn.mentioned_at IS NULL OR mn.mentioned_at <= %(known_by)s::timestamptz)))"""
LOOKUP = _LOOKUP.format(alias_current=_ALIAS_CURRENT, partial="", known_by=_KNOWN_BY.format(e="e"))
LOOKUP_PARTIAL = _LOOKUP.format(
    alias_current=_ALIAS_CURRENT,
    partial=_PARTIAL.format(alias_current=_ALIAS_CURRENT),
    known_by=_KNOWN_BY.format(e="e"),
)
# Whether entity e was known at %(known_by)s, as above (entity groups ask it
# of each member).
KNOWN_BY_CONDITION = _KNOWN_BY.format(e="e")
# Whether one of %(ids)s (a group's members) was known at %(known_by)s, as above.
KNOWN_BY = f"""
SELECT 1 FROM entity e WHERE e.id = ANY(%(ids)s::uuid[]) AND {_KNOWN_BY.format(e="e")} LIMIT 1
"""
# Whether any entity or alias holds one of the keys, whoever may see it
# (migration 0022): when none does, NAMED would find nothing either.
KEYS_HELD = "SELECT entity_keys_held(%(keys)s::text[])"
# Entities whose name or current alias is one of the keys %(keys)s (the word
# runs of a recall query), longest name first.
NAMED = f"""
SELECT e.id, e.name, e.type FROM entity e
WHERE e.id IN (
    SELECT id FROM entity WHERE name_key = ANY(%(keys)s::text[])
    UNION
    SELECT a.entity_id FROM entity_alias a
    WHERE a.alias_key = ANY(%(keys)s::text[]) AND {_ALIAS_CURRENT}
)
ORDER BY length(e.name) DESC, e.created_at, e.id
LIMIT %(limit)s
"""
# A card's lists and a neighbors hop are walks of their indexes in their
# order, left at a cap (migration 0033). For a generic plan the planner takes
# each entity to hold an average entity's few rows and may rather fetch them
# all on a bitmap and sort them: for an entity stated thousands of times, its
# whole life for each card. HOLD_TO_WALKS turns bitmap scans off in the
# transaction and answers the setting it replaced, which LET_GO puts back.
HOLD_TO_WALKS = """
WITH was AS MATERIALIZED (SELECT current_setting('enable_bitmapscan') AS setting)
SELECT was.setting, set_config('enable_bitmapscan', 'off', true) FROM was
"""
LET_GO = "SELECT set_config('enable_bitmapscan', %s, true)"

# The cards' lists, each newest statement first and cut at %(cap)s per entity
# (one more, to tell that it was cut): each walks its index in that order
# (migration 0033) and stops there, so an entity of thousands of claims costs
# its card what the card shows.
CARD_ATTRIBUTES = f"""
SELECT x.entity_id, x.attribute, x.value, x.valid_from, x.valid_until, x.confidence,
       x.memory_id, x.stated_at, {_RETIRED.format(t="x")} AS retired_at
FROM unnest(%(ids)s::uuid[]) AS q(id)
CROSS JOIN LATERAL (
    SELECT c.* FROM attribute_claim c
    WHERE c.entity_id = q.id AND {_STATED_BY.format(t="c")} AND {_CURRENT.format(t="c")}
    ORDER BY c.stated_at DESC, c.attribute, c.id
    LIMIT %(cap)s
) x
"""
# Both directions, each walked on its own index to the cap, then merged (in
# the card's order again after the join, which may take them in any). A
# relation from an entity to itself is listed once, as outgoing.
CARD_RELATIONS = f"""
SELECT x.me, x.direction, o.id, o.name, o.type, x.predicate, x.valid_from, x.valid_until,
       x.confidence, x.memory_id, x.stated_at, {_RETIRED.format(t="x")} AS retired_at
FROM unnest(%(ids)s::uuid[]) AS q(id)
CROSS JOIN LATERAL (
    SELECT * FROM (
        (SELECT q.id AS me, 'outgoing' AS direction, r.object_id AS other, r.*
         FROM relation_claim r
         WHERE r.subject_id = q.id AND {_STATED_BY.format(t="r")} AND {_CURRENT.format(t="r")}
         ORDER BY r.stated_at DESC, r.predicate, r.id
         LIMIT %(cap)s)
        UNION ALL
        (SELECT q.id, 'incoming', r.subject_id, r.*
         FROM relation_claim r
         WHERE r.object_id = q.id AND r.subject_id <> q.id
           AND {_STATED_BY.format(t="r")} AND {_CURRENT.format(t="r")}
         ORDER BY r.stated_at DESC, r.predicate, r.id
         LIMIT %(cap)s)
    ) both_ways
    ORDER BY stated_at DESC, predicate, id
    LIMIT %(cap)s
) x
JOIN entity o ON o.id = x.other
ORDER BY x.me, x.stated_at DESC, x.predicate, x.id
"""
CARD_ALIASES = f"""
SELECT x.entity_id, x.alias, x.memory_id, x.stated_at, {_RETIRED.format(t="x")} AS retired_at
FROM unnest(%(ids)s::uuid[]) AS q(id)
CROSS JOIN LATERAL (
    SELECT a.* FROM entity_alias a
    WHERE a.entity_id = q.id AND {_STATED_BY.format(t="a")} AND {_ALIAS_CURRENT}
    ORDER BY a.stated_at DESC, a.alias, a.id
    LIMIT %(cap)s
) x
ORDER BY x.entity_id, x.stated_at DESC, x.alias, x.id
"""
# Visible memories mentioning each entity, newest first: those current at
# %(at)s (written by then, mentioning it by then (migration 0046), and not
# superseded by then: superseded later, it
# was current at %(at)s, as its claims were; nor superseded for the caller,
# who may see none of its successors: migration 0068), all with the history. When it
# was superseded is its own revision's record, which whoever sees the memory
# sees (its successor may be hidden from them, or forgotten). Walked on the
# mentions' index by their memory's time, newest first, taking every memory
# of the same time as the last (the caller orders those by id), so the walk
# stops where the card is full.
CARD_MENTIONED_BY = f"""
SELECT q.id, x.id, x.created_at
FROM unnest(%(ids)s::uuid[]) AS q(id)
CROSS JOIN LATERAL (
    SELECT m.id, m.created_at FROM mention mn JOIN memory m ON m.id = mn.memory_id
    WHERE mn.entity_id = q.id AND mn.memory_created_at <= {_LATEST}
      AND (mn.mentioned_at IS NULL OR mn.mentioned_at <= {_LATEST})
      AND (%(history)s OR m.superseded_by_id IS NULL
           OR (SELECT max(r.changed_at) FROM memory_revision r
               WHERE r.memory_id = m.id AND r.action = 'supersede') > %(at)s
           OR visible_successor(m.superseded_by_id) IS NULL)
    ORDER BY mn.memory_created_at DESC
    FETCH FIRST %(cap)s ROWS WITH TIES
) x
"""

# One hop of neighbors: the visible current relations touching the frontier,
# newest statement first, at most %(limit)s, but those an earlier hop took
# (%(seen)s: the edges that led to this frontier, not to be counted twice).
# Each entity of the frontier walks its relations on the cards' indexes
# (newest first, with every one stated at the same time as the last), so a
# hub of thousands of relations costs the hop its limit; a relation between
# two of the frontier is one edge.
_EDGES_AT = f"""
    (SELECT r.id, r.subject_id, r.predicate, r.object_id, r.valid_from, r.valid_until,
            r.confidence, r.memory_id, r.stated_at, {_RETIRED.format(t="r")} AS retired_at
     FROM relation_claim r
     WHERE r.{{end}} = f.id
       AND (cardinality(%(predicates)s::text[]) = 0 OR r.predicate = ANY(%(predicates)s::text[]))
       AND {_CURRENT.format(t="r")}
       AND NOT (r.id = ANY(%(seen)s::uuid[]))
     ORDER BY r.stated_at DESC
     FETCH FIRST %(limit)s ROWS WITH TIES)"""
NEIGHBOR_EDGES = f"""
SELECT DISTINCT edges.*
FROM unnest(%(frontier)s::uuid[]) AS f(id)
CROSS JOIN LATERAL ({_EDGES_AT.format(end="subject_id")}
    UNION ALL{_EDGES_AT.format(end="object_id")}
) edges
ORDER BY edges.stated_at DESC, edges.id
LIMIT %(limit)s
"""

# After the last hop: the visible current relations between two of its nodes
# (%(frontier)s, their groups' members), newest first, at most %(limit)s. The
# walk goes no further from them, but a relation among an answer's nodes
# belongs to it as the ones that led there do. Probed pair by pair on
# migration 0049's index, so a busy node costs its pairs, not its relations.
NEIGHBOR_EDGES_AMONG = f"""
SELECT r.id, r.subject_id, r.predicate, r.object_id, r.valid_from, r.valid_until,
       r.confidence, r.memory_id, r.stated_at, {_RETIRED.format(t="r")} AS retired_at
FROM relation_claim r
WHERE r.subject_id = ANY(%(frontier)s::uuid[]) AND r.object_id = ANY(%(frontier)s::uuid[])
  AND (cardinality(%(predicates)s::text[]) = 0 OR r.predicate = ANY(%(predicates)s::text[]))
  AND {_CURRENT.format(t="r")}
  AND NOT (r.id = ANY(%(seen)s::uuid[]))
ORDER BY r.stated_at DESC, r.id
LIMIT %(limit)s
"""
