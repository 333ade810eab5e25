-- History is searched in the form memories are kept in (0038: NFC, "é" one
-- code point): a turn is evidence kept as it was said, so its text stays as
-- written, and only its search vector reads the text normalised. Before, a
-- turn written with a combining accent (as some keyboards and systems write
-- it) was found by no query in the usual form, which the store normalises.

ALTER TABLE history_entry ALTER COLUMN search
    SET EXPRESSION AS (to_tsvector('english', normalize(text, NFC)));

-- The per-owner term statistics follow the new vectors: rebuilt from them
-- (the corpus counts, one per turn, are unchanged).
DELETE FROM history_term_stat;
INSERT INTO history_term_stat (owner_member_id, lexeme, docs)
    SELECT h.owner_member_id, l, count(*)
    FROM history_entry h, unnest(tsvector_to_array(h.search)) AS l
    GROUP BY 1, 2;
