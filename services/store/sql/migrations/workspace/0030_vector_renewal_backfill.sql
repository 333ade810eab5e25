-- 0026 made a vector's copy of its memory's updated_at follow a renewal from
-- then on, but a memory renewed before it (a correct of its confidence or
-- claims: new updated_at, same text, vector kept) kept a stale copy, which
-- the dense arm's expiry gate reads: the lexical arm answered such a memory
-- and the dense arm left it out. Brought up to date once; 0026's trigger
-- keeps them so.
UPDATE memory_embedding e SET memory_updated_at = m.updated_at
FROM memory m
WHERE m.id = e.memory_id AND e.memory_updated_at IS DISTINCT FROM m.updated_at;
