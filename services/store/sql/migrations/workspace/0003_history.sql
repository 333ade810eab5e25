-- History evidence (design §3.2): old conversation turns brought over by migration
-- from the old store. Owner-only, keyword-searchable, explicitly not memories:
-- no kind, no trust fields, never a recall candidate, never embedded.

CREATE TABLE history_entry (
    id              uuid PRIMARY KEY,
    -- The one member who may see the row: the workspace owner it was imported for.
    owner_member_id uuid NOT NULL,
    chat_id         text NOT NULL,
    role            text NOT NULL,
    text            text NOT NULL,
    search          tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED,
    occurred_at     timestamptz NOT NULL
);
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

-- Document frequencies for the 15% rule over one owner's history, kept per
-- owner so that no one's counts reflect rows they may not see.
CREATE TABLE history_term_stat (
    owner_member_id uuid NOT NULL,
    lexeme          text NOT NULL,
    docs            bigint NOT NULL,
    PRIMARY KEY (owner_member_id, lexeme)
);
CREATE TABLE history_corpus_stat (
    owner_member_id uuid PRIMARY KEY,
    docs            bigint NOT NULL
);

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

-- Only the owner recorded on a row sees it; the caller is set per
-- transaction exactly as for memories. The store additionally answers
-- history searches only for callers whose control-plane role is owner.
ALTER TABLE history_entry ENABLE ROW LEVEL SECURITY;
ALTER TABLE history_entry FORCE ROW LEVEL SECURITY;
CREATE POLICY history_entry_owner ON history_entry FOR SELECT
    USING (owner_member_id = caller_member());
CREATE POLICY history_entry_insert ON history_entry FOR INSERT
    WITH CHECK (owner_member_id = caller_member());

ALTER TABLE history_term_stat ENABLE ROW LEVEL SECURITY;
CREATE POLICY history_term_stat_owner ON history_term_stat FOR SELECT
    USING (owner_member_id = caller_member());
ALTER TABLE history_corpus_stat ENABLE ROW LEVEL SECURITY;
CREATE POLICY history_corpus_stat_owner ON history_corpus_stat FOR SELECT
    USING (owner_member_id = caller_member());

-- What an import from the old store brought over: old id -> new row, per
-- owner. With the deterministic ids it makes a rerun a no-op and tells
-- "already imported" from "new" in the report. Holds no text.
CREATE TABLE legacy_import (
    owner_member_id uuid NOT NULL,
    -- 'turn', 'memory_item' or 'entity'
    source          text NOT NULL,
    source_id       text NOT NULL,
    target_id       uuid NOT NULL,
    PRIMARY KEY (owner_member_id, source, source_id)
);

-- The app role reads history (searches); only the migration (the database
-- owner) writes it. The ledger is not the app role's business at all.
GRANT SELECT ON history_entry, history_term_stat, history_corpus_stat TO recallatron_app;
