-- A vector's copy of its memory's updated_at (migration 0005), which the
-- dense arm's expiry gate reads, follows the memory when it is renewed
-- without new text (a correct of its confidence or claims sets updated_at
-- and keeps the vector). A change of text deletes the vector anyway; the
-- copy trigger on memory_embedding takes the time from the memory again.
CREATE FUNCTION memory_embedding_follow_renewal() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    UPDATE memory_embedding SET memory_updated_at = NEW.updated_at
    WHERE memory_id = NEW.id AND memory_updated_at IS DISTINCT FROM NEW.updated_at;
    RETURN NULL;
END $$;
CREATE TRIGGER memory_embedding_follow_renewal AFTER UPDATE OF updated_at ON memory
    FOR EACH ROW
    WHEN (NEW.updated_at IS DISTINCT FROM OLD.updated_at
          AND NEW.invalidated_at IS NULL AND NEW.superseded_by_id IS NULL)
    EXECUTE FUNCTION memory_embedding_follow_renewal();
