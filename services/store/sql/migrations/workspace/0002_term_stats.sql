-- Document frequencies for the lexical arm's 15% rule (design §5.2), kept
-- current by a trigger so that a query never scans the corpus for them.

CREATE TABLE term_stat (
    lexeme  text PRIMARY KEY,
    docs    bigint NOT NULL
);

-- The number of memories with searchable text (forgotten ones have none).
CREATE TABLE corpus_stat (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    docs        bigint NOT NULL
);
INSERT INTO corpus_stat (docs) SELECT count(*) FROM memory WHERE invalidated_at IS NULL;
INSERT INTO term_stat (lexeme, docs)
    SELECT l, count(*) FROM memory, unnest(tsvector_to_array(search)) AS l GROUP BY l;

CREATE FUNCTION term_stat_sync() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    old_terms text[] := CASE WHEN TG_OP = 'UPDATE' THEN tsvector_to_array(OLD.search) ELSE '{}' END;
    new_terms text[] := tsvector_to_array(NEW.search);
    delta_docs integer := 0;
BEGIN
    IF TG_OP = 'INSERT' THEN
        delta_docs := 1;
    ELSIF OLD.invalidated_at IS NULL AND NEW.invalidated_at IS NOT NULL THEN
        delta_docs := -1;
    END IF;
    IF old_terms = new_terms AND delta_docs = 0 THEN
        RETURN NEW;
    END IF;
    -- One statement in lexeme order: concurrent writers lock rows in the
    -- same order and cannot deadlock.
    INSERT INTO term_stat AS t (lexeme, docs)
        SELECT lexeme, sum(d) FROM (
            SELECT unnest(new_terms) AS lexeme, 1 AS d
            UNION ALL
            SELECT unnest(old_terms), -1
        ) changes
        GROUP BY lexeme HAVING sum(d) <> 0
        ORDER BY lexeme
    ON CONFLICT (lexeme) DO UPDATE SET docs = t.docs + EXCLUDED.docs;
    -- A lexeme no memory holds any more must not linger: after forget, no
    -- table may keep a trace of the text.
    DELETE FROM term_stat WHERE lexeme = ANY (old_terms) AND docs <= 0;
    IF delta_docs <> 0 THEN
        UPDATE corpus_stat SET docs = docs + delta_docs;
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER term_stat_sync_insert AFTER INSERT ON memory
    FOR EACH ROW EXECUTE FUNCTION term_stat_sync();
CREATE TRIGGER term_stat_sync_update AFTER UPDATE OF title, body, invalidated_at ON memory
    FOR EACH ROW EXECUTE FUNCTION term_stat_sync();

GRANT SELECT ON term_stat, corpus_stat TO recallatron_app;
