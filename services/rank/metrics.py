"""Prometheus metrics of the recall pipeline, served on the process's metrics
endpoint (RECALLATRON_METRICS_PORT)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

STAGE_SECONDS = Histogram(
    "recallatron_rank_stage_seconds",
    "Latency of each recall stage: embed, lexical, dense, walk (the permission walk and "
    "reading the top admitted rows), rerank, recall.",
    ["stage"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
ARM_CANDIDATES = Histogram(
    "recallatron_rank_candidates",
    "Candidates per recall: each arm's rows, the fused list, the rows admitted by the walk.",
    ["list"],
    buckets=(0, 1, 5, 10, 20, 50, 100, 200, 500),
)
DEGRADED = Counter(
    "recallatron_rank_degraded_total",
    "Recalls answered without a part (dense arm, cross-encoder, entity cards), and why.",
    ["part", "reason"],
)
RECALLS = Counter("recallatron_rank_recalls_total", "Recalls, by resolved mode.", ["mode"])
