-- A word is found however it was typed: with or without its accents, and a
-- hyphenated word written whole or the reverse.
--
-- Postgres's English configuration keeps "zoë" and "zoe", "café" and "cafe",
-- "résumé" and "resume" apart, so a query typed without them (as an agent
-- heard a name, or as a keyboard allows) found nothing in the lexical arm,
-- and one typed with them nothing written without. The search vectors now
-- hold each word with its combining marks taken away (search_fold), and the
-- store reads a query's terms the same way (recall's terms and its
-- every-term check, history search), so both sides meet whichever way either
-- was typed. Only the marks go: "ø", "ß" or "ł" are letters of their own,
-- and stay.
--
-- Its parser keeps "on-call" whole ("on-cal") beside its halves, so "oncall"
-- ("oncal") met nothing, nor did "e-mail" "email". The vectors now hold, beside
-- them, a hyphenated word's joined form (search_joined), and a query's
-- hyphenated words add theirs to its terms.
--
-- Applying it rewrites the memory and history tables once (their search
-- vectors and indexes) and computes the lexical arm's statistics again from
-- the new vectors, as 0075 did.

-- The text decomposed (NFD), its combining diacritical marks (U+0300 to
-- U+036F) removed, composed again (NFC, the form memories are kept in). A
-- text of ASCII only, almost every text, costs one regular expression and is
-- returned as it is. Plain SQL, inlined where it is called.
CREATE FUNCTION search_fold(doc text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    AS $$ SELECT CASE WHEN doc ~ '[^\x01-\x7f]'
                      THEN normalize(regexp_replace(normalize(doc, NFD), '[\u0300-\u036f]+', '', 'g'), NFC)
                      ELSE doc END $$;
GRANT EXECUTE ON FUNCTION search_fold(text) TO recallatron_app;

-- The joined forms of the text's hyphenated words ("oncall" of "on-call",
-- "gpt4o" of "gpt-4o"): the default parser's (3722) hyphenated-word tokens,
-- their hyphens removed, each once. A text with no hyphen between two
-- letters or digits costs one regular expression. (PL/pgSQL, as
-- search_parts: its statement's plan is kept for the session.)
CREATE FUNCTION search_joined(doc text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT
    AS $$
BEGIN
    IF doc !~ '[[:alnum:]]-[[:alnum:]]' THEN
        RETURN '';
    END IF;
    RETURN coalesce((SELECT string_agg(DISTINCT replace(t.token, '-', ''), ' ')
                     FROM ts_parse(3722::oid, doc) AS t WHERE t.tokid IN (15, 16, 17)), '');
END $$;
GRANT EXECUTE ON FUNCTION search_joined(text) TO recallatron_app;

-- A query's terms, as the store reads them for recall's lexical arm and for
-- history search: its words, accents folded, and its hyphenated words'
-- joined forms. (Recall's every-term check takes the words alone: a memory
-- holding "on-call" holds every term of the query "on-call", one holding
-- "oncall" does not.)
CREATE FUNCTION query_lexemes(query text) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    AS $$ SELECT tsvector_to_array(to_tsvector('english', search_fold(query))
                                   || to_tsvector('english', search_joined(search_fold(query)))) $$;
GRANT EXECUTE ON FUNCTION query_lexemes(text) TO recallatron_app;

ALTER TABLE memory ALTER COLUMN search SET EXPRESSION AS (
    setweight(to_tsvector('english', search_fold(title)), 'A')
    || setweight(to_tsvector('english', search_fold(body)), 'B')
    || setweight(to_tsvector('english', search_parts(search_fold(title))), 'A')
    || setweight(to_tsvector('english', search_parts(search_fold(body))), 'B')
    || setweight(to_tsvector('english', search_joined(search_fold(title))), 'A')
    || setweight(to_tsvector('english', search_joined(search_fold(body))), 'B')
);

ALTER TABLE history_entry ALTER COLUMN search SET EXPRESSION AS (
    to_tsvector('english', search_fold(normalize(text, NFC)))
    || to_tsvector('english', search_parts(search_fold(normalize(text, NFC))))
    || to_tsvector('english', search_joined(search_fold(normalize(text, NFC))))
);

-- The statistics from the new vectors. The rewrite fired no trigger, so the
-- rows' old counts are replaced whole.
DELETE FROM term_stat;
INSERT INTO term_stat (lexeme, purpose, audience, shard, docs)
    SELECT l, p, stat_audience(m.audience_member_id), stat_shard(m.id), count(*)
    FROM memory m, unnest(tsvector_to_array(m.search)) AS l, unnest(m.purposes) AS p
    GROUP BY 1, 2, 3, 4
    ORDER BY 1, 2, 3, 4;

DELETE FROM history_term_stat;
INSERT INTO history_term_stat (owner_member_id, lexeme, docs)
    SELECT h.owner_member_id, l, count(*)
    FROM history_entry h, unnest(tsvector_to_array(h.search)) AS l
    GROUP BY 1, 2
    ORDER BY 1, 2;
