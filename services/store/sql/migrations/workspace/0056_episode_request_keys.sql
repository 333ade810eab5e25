-- CreateEpisode's request id (docs/api.md): a retry after a lost answer
-- answers the first attempt's episode and makes no second one. Its key is
-- kept beside the writes' keys, one set of ids per member, under the same
-- hash and with the same fingerprint of what it asked (0010, 0027): a key
-- names either the memory its write made or the episode.
ALTER TABLE request_key ALTER COLUMN memory_id DROP NOT NULL;
ALTER TABLE request_key ADD COLUMN episode_id uuid REFERENCES episode (id);
ALTER TABLE request_key ADD CONSTRAINT request_key_made_one
    CHECK (num_nonnulls(memory_id, episode_id) = 1);
CREATE INDEX request_key_episode_idx ON request_key (episode_id) WHERE episode_id IS NOT NULL;

-- The fingerprint hashes the episode's title: a removed member's erase,
-- which empties the titles of their private episodes, clears it too, as
-- forget clears a memory's (0028; a retry then replays by tool alone).
CREATE FUNCTION request_fingerprint_episode_erase() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    IF OLD.title <> '' AND NEW.title = '' THEN
        UPDATE request_key SET fingerprint = NULL
        WHERE episode_id = NEW.id AND fingerprint IS NOT NULL;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER request_fingerprint_episode_erase AFTER UPDATE OF title ON episode
    FOR EACH ROW EXECUTE FUNCTION request_fingerprint_episode_erase();
