-- History evidence (02_memory_tables.sql): its search index, its statistics
-- kept by statement triggers, and the owner-only search.

CREATE INDEX history_entry_search_idx ON history_entry USING gin (search);

CREATE INDEX history_entry_owner_idx ON history_entry (owner_member_id, occurred_at);

-- Evidence is kept as it was said: rows are inserted or deleted, never edited.
CREATE FUNCTION refuse_history_update() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'history_entry rows are never edited' USING ERRCODE = 'integrity_constraint_violation';
END $$;

CREATE TRIGGER history_entry_no_update
    BEFORE UPDATE ON history_entry
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_history_update();

-- Statement-level with transition tables: an import inserts a batch in one
-- statement and pays for one stats update, not one per turn. Rows are grouped
-- and ordered so that concurrent writers lock in the same order.
CREATE FUNCTION history_stat_insert() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    INSERT INTO history_term_stat AS t (owner_member_id, lexeme, docs)
        SELECT n.owner_member_id, l, count(*)
        FROM new_rows n, unnest(tsvector_to_array(n.search)) AS l
        GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (owner_member_id, lexeme) DO UPDATE SET docs = t.docs + EXCLUDED.docs;
    INSERT INTO history_corpus_stat AS c (owner_member_id, docs)
        SELECT owner_member_id, count(*) FROM new_rows GROUP BY 1 ORDER BY 1
    ON CONFLICT (owner_member_id) DO UPDATE SET docs = c.docs + EXCLUDED.docs;
    RETURN NULL;
END $$;

-- Deleted history leaves no lexeme behind (as with forgotten memories).
CREATE FUNCTION history_stat_delete() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    UPDATE history_term_stat t SET docs = t.docs - d.n
    FROM (SELECT o.owner_member_id, l AS lexeme, count(*) AS n
          FROM old_rows o, unnest(tsvector_to_array(o.search)) AS l
          GROUP BY 1, 2 ORDER BY 1, 2) d
    WHERE t.owner_member_id = d.owner_member_id AND t.lexeme = d.lexeme;
    DELETE FROM history_term_stat WHERE docs <= 0;
    UPDATE history_corpus_stat c SET docs = c.docs - d.n
    FROM (SELECT owner_member_id, count(*) AS n FROM old_rows GROUP BY 1) d
    WHERE c.owner_member_id = d.owner_member_id;
    DELETE FROM history_corpus_stat WHERE docs <= 0;
    RETURN NULL;
END $$;

CREATE TRIGGER history_stat_insert AFTER INSERT ON history_entry
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION history_stat_insert();

CREATE TRIGGER history_stat_delete AFTER DELETE ON history_entry
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION history_stat_delete();

-- History search on its index (docs/migration.md, "History in recall"). `@@`
-- is not LEAKPROOF, so beneath history_entry's policy Postgres would not
-- search the GIN index: it would read every history row of the owner and
-- match each one (a parallel scan of 100,000 turns, 29 ms a search, growing
-- with the history).
-- This function runs the index search as its owner (the migration role, which
-- bypasses row security) and applies the policy's own rule to every match:
-- the caller's rows alone, as the policy would return them. It takes a typed
-- tsquery, never SQL text.
CREATE FUNCTION history_matches(query tsquery) RETURNS SETOF history_entry
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = public
    AS $$
    SELECT * FROM history_entry h
    WHERE h.search @@ query AND h.owner_member_id = caller_member()
$$;
