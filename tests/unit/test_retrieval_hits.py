"""The retrievers' hits from one recall (recallatron/retrieval.py), without a
stack: the score each carries."""

from __future__ import annotations

from recallatron.retrieval import hits
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb


def _result(memory_id: str, **scores: object) -> cpb.RecallResult:
    return cpb.RecallResult(
        memory=cpb.Memory(id=memory_id, title=memory_id, kind=cpb.KIND_NOTE),
        scores=cpb.RecallScores(**scores),  # type: ignore[arg-type]
    )


def test_a_row_past_the_rerank_depth_has_no_score_rather_than_zero() -> None:
    """A re-ranked recall's rows below the depth had rerank_score 0.0, which
    the retrievers gave as their score: above real (negative) cross-encoder
    scores, and a score the cross-encoder never gave."""
    reranked = pb.RecallResponse(
        outcome=cpb.RecallOutcome(
            reranked=True,
            results=[
                _result("a", rerank_score=-1.5, reranked=True, agreement_score=1.0),
                _result("b", rerank_score=-2.5, reranked=True, agreement_score=0.9),
                _result("c", agreement_score=0.8),
            ],
        )
    )
    assert [h.score for h in hits(reranked)] == [-1.5, -2.5, None]
    fused = pb.RecallResponse(
        outcome=cpb.RecallOutcome(results=[_result("a", agreement_score=1.25), _result("b")])
    )
    assert [h.score for h in hits(fused)] == [1.25, 0.0]


def test_a_hit_says_why_the_dense_arm_or_the_reranker_did_not_serve() -> None:
    """The hits carried dense_available and reranked but not the reasons the
    recall gave beside them, nor how many of the caller's memories still wait
    for their vector: a retriever's user saw a degraded recall without its
    explanation, which the gateway's answer says (degrade and say so)."""
    degraded = pb.RecallResponse(
        outcome=cpb.RecallOutcome(
            dense_available=True,
            dense_behind_reason="3 memories wait for their vector",
            not_embedded=3,
            reranked=False,
            rerank_unavailable_reason="no cross-encoder configured",
            results=[_result("a", agreement_score=1.0)],
        )
    )
    [hit] = hits(degraded, "query")
    assert hit.metadata["not_embedded"] == 3
    assert hit.metadata["dense_behind_reason"] == "3 memories wait for their vector"
    assert hit.metadata["rerank_unavailable_reason"] == "no cross-encoder configured"
    down = pb.RecallResponse(
        outcome=cpb.RecallOutcome(
            dense_available=False,
            dense_unavailable_reason="embed service unavailable",
            results=[_result("a")],
        )
    )
    [hit] = hits(down)
    assert hit.metadata["dense_available"] is False
    assert hit.metadata["dense_unavailable_reason"] == "embed service unavailable"
