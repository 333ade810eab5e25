-- A memory's text in one Unicode form (NFC: "é" as one code point), so a word
-- typed in either form finds it: Postgres keeps "café" composed and decomposed
-- ("e" and a combining accent) as two lexemes. Normalised on the way in, on
-- every path that writes text (the tools, capture, imports, the migration
-- from the old store); the store normalises the query the same way. The text
-- reads back canonically equivalent to what was written. History evidence is
-- kept as it was said (0003), and not normalised.

CREATE FUNCTION memory_text_nfc() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    NEW.title := normalize(NEW.title, NFC);
    NEW.body := normalize(NEW.body, NFC);
    RETURN NEW;
END $$;
-- Only a row not in NFC already calls the function: the usual write pays the
-- check alone.
CREATE TRIGGER memory_text_nfc BEFORE INSERT OR UPDATE OF title, body ON memory
    FOR EACH ROW
    WHEN (NOT (NEW.title IS NFC NORMALIZED AND NEW.body IS NFC NORMALIZED))
    EXECUTE FUNCTION memory_text_nfc();

-- Memories written before: the trigger normalises them (their search column,
-- term statistics and vectors follow as after any change of text).
UPDATE memory SET title = title, body = body
WHERE NOT (title IS NFC NORMALIZED AND body IS NFC NORMALIZED);
