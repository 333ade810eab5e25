from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from recallatron.settings import (
    MAX_SETTINGS_CACHE_SECONDS,
    RANK_ADDRESS,
    EmbedPeer,
    StorePeer,
)
from recallatron.vocabulary import MAX_EPISODE_SEEDS, MAX_WALK


class RankSettings(StorePeer, EmbedPeer):
    rank_listen: str = RANK_ADDRESS
    # Deadlines of the calls one recall makes, in seconds.
    embed_timeout_seconds: float = Field(default=0.5, gt=0)
    store_timeout_seconds: float = Field(default=2.0, gt=0)
    rerank_timeout_seconds: float = Field(default=2.0, gt=0)
    # Candidates each arm returns; at most half of walk_limit, so the whole
    # fused list is always walked.
    arm_limit: int = Field(default=100, ge=1, le=MAX_WALK // 2)
    # RRF constant (design §5.4).
    rrf_k: int = Field(default=60, ge=1)
    # Most candidates the permission walk considers.
    walk_limit: int = Field(default=500, ge=2, le=MAX_WALK)
    # How long workspace settings (default mode, rerank depth) are reused: a
    # change is seen within it, so at most an hour (docs/recall.md).
    settings_cache_seconds: float = Field(default=5.0, ge=0, le=MAX_SETTINGS_CACHE_SECONDS)
    # Hybrid recall lifts the episode neighbours of this many first fused
    # rows (docs/recall.md, "Episode neighbours"); 0 turns it off.
    episode_neighbours_of: int = Field(default=2, ge=0, le=MAX_EPISODE_SEEDS)
    # After the embed service did not answer, or has no cross-encoder, recalls
    # skip the cross-encoder for this long (docs/recall.md); 0 asks every time.
    cross_encoder_recheck_seconds: float = Field(default=10.0, ge=0, le=3600)

    @model_validator(mode="after")
    def _walked_whole(self) -> Self:
        if 2 * self.arm_limit > self.walk_limit:
            raise ValueError(
                "RECALLATRON_ARM_LIMIT must be at most half of RECALLATRON_WALK_LIMIT "
                f"({self.arm_limit} and {self.walk_limit}): the fused list is walked whole"
            )
        return self
