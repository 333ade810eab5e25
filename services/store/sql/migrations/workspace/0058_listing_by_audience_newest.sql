-- An owner's list of every author's memories, or of one episode's
-- (ListMemories without kinds or an author; with an episode), walked the
-- created_at index (0001), or the episode's (0023), over every audience and
-- checked the caller's eligibility row by row: a page of Ada's five memories
-- read the 20,000 newer ones private to Bob (20,008 rows a page).
--
-- As 0057 does for the lists by kind and by author: an index per audience
-- class of the memories not forgotten, the workspace's and the private ones
-- (keyed first by their member), in the listing's order; the listing walks the
-- workspace's and the caller's own and merges the two
-- (owner_queries._list_memories). The older indexes stay for other readers
-- (recall's episode neighbours, the timelines).
CREATE INDEX memory_newest_shared_idx ON memory (created_at DESC, id DESC)
    WHERE audience_member_id IS NULL AND invalidated_at IS NULL;
CREATE INDEX memory_newest_private_idx ON memory (audience_member_id, created_at DESC, id DESC)
    WHERE audience_member_id IS NOT NULL AND invalidated_at IS NULL;
CREATE INDEX memory_episode_shared_idx ON memory (episode_id, created_at DESC, id DESC)
    WHERE episode_id IS NOT NULL AND audience_member_id IS NULL AND invalidated_at IS NULL;
CREATE INDEX memory_episode_private_idx
    ON memory (audience_member_id, episode_id, created_at DESC, id DESC)
    WHERE episode_id IS NOT NULL AND audience_member_id IS NOT NULL AND invalidated_at IS NULL;
