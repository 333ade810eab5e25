-- A word inside an email address, a host name, a path, a word in camel case
-- or a number after a hyphen is searchable by itself. Postgres's parser keeps
-- an address, a host or a path whole ("ops@example.com", "wiki.example.com",
-- "/etc/nginx/nginx.conf" are one lexeme each), keeps "getUserName" one word,
-- and reads "ISO-8601" as "iso" and the integer "-8601", so "ops",
-- "example.com", "nginx", "user" or "8601" found nothing though the memory
-- holds them. The search vectors now hold, beside the whole token, its parts
-- (search_parts). A query is parsed as before: a whole address or path still
-- matches its own lexeme; the parts only add lexemes a query of one of them
-- meets.
--
-- Applying it rewrites the memory and history tables once (their search
-- vectors and indexes) and computes the lexical arm's statistics again from
-- the new vectors, as an archive's import does (archive_queries.FILL_TERM_STATS).

-- The parts, as words to be parsed again, from the default parser's tokens
-- (parser 3722): of an email, host, url_path or file token (a URL's host and
-- path come as tokens of their own) or a signed integer, the pieces between
-- "@", "/", "\" and ":", a dotted piece's endings of two labels or more
-- ("example.com" of "wiki.example.com"; not of a number, "v2.3.1"), and the
-- words between any marks; of a word in camel case, its words. Pieces of one
-- character and pieces equal to a token (a host is already whole) are left
-- out. A text with none of "@", "/", "\", ":", a dot between letters or
-- digits, a hyphen before a digit or a capital after a small letter costs
-- one regular expression. (PL/pgSQL: its statements' plans are kept for the
-- session, where a SQL function's are made again at each write; every name
-- it calls is pg_catalog's, which is searched first.)
CREATE FUNCTION search_parts(doc text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT
    AS $$
DECLARE
    found record;
    tokens text[] := '{}';
    pieces text[] := '{}';
    token text;
    piece text;
    segment text;
    labels text[];
BEGIN
    IF doc !~ '[@/\\:]|[[:alnum:]]\.[[:alnum:]]|-[[:digit:]]|[[:lower:][:digit:]][[:upper:]]' THEN
        RETURN '';
    END IF;
    -- array_append on a variable appends in place: the work grows with the
    -- text, not with its square.
    FOR found IN
        SELECT t.tokid, t.token FROM ts_parse(3722::oid, doc) AS t
        WHERE t.tokid IN (4, 6, 18, 19, 21)
           OR (t.tokid IN (1, 2, 3) AND t.token ~ '[[:lower:][:digit:]][[:upper:]]|[[:upper:]]{2}[[:lower:]]')
    LOOP
        IF found.tokid IN (1, 2, 3) THEN
            -- A word in camel case ("getUserName", "HTTPServer"): its words.
            FOREACH piece IN ARRAY regexp_split_to_array(regexp_replace(
                regexp_replace(found.token, '([[:lower:][:digit:]])([[:upper:]])', '\1 \2', 'g'),
                '([[:upper:]])([[:upper:]][[:lower:]])', '\1 \2', 'g'), ' ') LOOP
                IF char_length(piece) > 1 THEN
                    pieces := array_append(pieces, lower(piece));
                END IF;
            END LOOP;
            CONTINUE;
        END IF;
        -- An address, a host, a path, or a number after a hyphen (a signed
        -- integer to the parser: "ISO-8601" is "iso" and "-8601").
        token := lower(found.token);
        tokens := array_append(tokens, token);
        FOREACH piece IN ARRAY regexp_split_to_array(token, '[^[:alnum:]]+') LOOP
            IF char_length(piece) > 1 THEN
                pieces := array_append(pieces, piece);
            END IF;
        END LOOP;
        FOREACH segment IN ARRAY regexp_split_to_array(token, '[@/\\:]+') LOOP
            IF segment <> token AND char_length(segment) > 1 THEN
                pieces := array_append(pieces, segment);
            END IF;
            labels := string_to_array(segment, '.');
            IF labels[cardinality(labels)] ~ '[[:alpha:]]' THEN
                FOR i IN 2 .. cardinality(labels) - 1 LOOP
                    pieces := array_append(pieces, array_to_string(labels[i:], '.'));
                END LOOP;
            END IF;
        END LOOP;
    END LOOP;
    RETURN array_to_string(ARRAY(
        SELECT p FROM (SELECT unnest(pieces) EXCEPT SELECT unnest(tokens)) AS d(p) ORDER BY 1
    ), ' ');
END $$;

ALTER TABLE memory ALTER COLUMN search SET EXPRESSION AS (
    setweight(to_tsvector('english', title), 'A')
    || setweight(to_tsvector('english', body), 'B')
    || setweight(to_tsvector('english', search_parts(title)), 'A')
    || setweight(to_tsvector('english', search_parts(body)), 'B')
);

ALTER TABLE history_entry ALTER COLUMN search SET EXPRESSION AS (
    to_tsvector('english', normalize(text, NFC))
    || to_tsvector('english', search_parts(normalize(text, NFC)))
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
