from __future__ import annotations

from pydantic import Field

from recallatron.settings import RANK_ADDRESS, EmbedPeer, StorePeer
from recallatron.vocabulary import MAX_EPISODE_SEEDS


class RankSettings(StorePeer, EmbedPeer):
    rank_listen: str = RANK_ADDRESS
    # Deadlines of the calls one recall makes, in seconds.
    embed_timeout_seconds: float = 0.5
    store_timeout_seconds: float = 2.0
    rerank_timeout_seconds: float = 2.0
    # Candidates each arm returns; at most half of walk_limit, so the whole
    # fused list is always walked.
    arm_limit: int = 100
    # RRF constant (design §5.4).
    rrf_k: int = 60
    # Most candidates the permission walk considers.
    walk_limit: int = 500
    # How long workspace settings (default mode, rerank depth) are reused.
    settings_cache_seconds: float = 5.0
    # Hybrid recall lifts the episode neighbours of this many first fused
    # rows (docs/recall.md, "Episode neighbours"); 0 turns it off.
    episode_neighbours_of: int = Field(default=2, ge=0, le=MAX_EPISODE_SEEDS)
