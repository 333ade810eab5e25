-- Recall's episode neighbours (docs/recall.md, "Episode neighbours"): the
-- memories recorded just before and just after one of the first rows, in its
-- episode, among those the caller may see. Read in the caller's transaction
-- under the memory policy, walking this index from the row outwards until a
-- visible one; without it each lookup would read the whole episode.
CREATE INDEX memory_episode_order_idx ON memory (episode_id, created_at, id)
    WHERE episode_id IS NOT NULL;
