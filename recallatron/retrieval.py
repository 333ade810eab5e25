"""Recall as the agent frameworks' retrievers return it: one hit per recalled
memory, its text (title, then body) and its provenance as metadata, shared by
the LangChain retriever (recallatron/langchain.py) and the LlamaIndex one
(recallatron/llamaindex.py). The metadata is the recall tool's answer for the
memory (recallatron/tools.py: the same JSON the MCP server gives agents), so a
framework user reads the same fields an agent does: id, created_at, created_by,
origin, confidence, revision, supersession, links, mentions, audience,
purposes, kind, scores. Beside them, what the recall as a whole said:
nothing_relevant, dense_available, reranked, mode, the reasons an arm or the
reranker did not serve, not_embedded and the query."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from recallatron.client import Client
from recallatron.client_connection import default_gateway
from recallatron.secretfiles import token_from
from recallatron.tools import BY_NAME
from recallatron.v1 import gateway_pb2 as pb
from recallatron.vocabulary import DEFAULT_PURPOSE, DEFAULT_RECALL_LIMIT, MAX_RECALL_LIMIT

# What the recall as a whole said, copied into every hit's metadata: with a
# degraded arm, why (degrade and say so), and how many of the caller's
# memories the dense arm could not yet search.
OUTCOME_KEYS = (
    "nothing_relevant",
    "dense_available",
    "dense_unavailable_reason",
    "dense_behind_reason",
    "not_embedded",
    "reranked",
    "rerank_unavailable_reason",
    "mode",
)
# The keys a language model should read beside the text: when, by whom, how
# sure, where it came from and whether something replaced it. The scores and
# the outcome flags are for the program, not the model.
PROVENANCE_KEYS = (
    "id",
    "created_at",
    "created_by",
    "origin",
    "confidence",
    "revision",
    "superseded_by_id",
    "links",
    "audience",
    "purposes",
    "kind",
)


@dataclass(frozen=True)
class Hit:
    """One recalled memory: ``text`` is its title and body, ``score`` the
    cross-encoder's when it ran (``reranked``), else the fused RRF score."""

    id: str
    text: str
    # None for a row of a re-ranked recall the cross-encoder did not score.
    score: float | None
    metadata: dict[str, Any]


def hits(response: pb.RecallResponse, query: str = "") -> list[Hit]:
    """The hits of one recall, in its order."""
    answer = BY_NAME["recall"].answer(response)
    outcome = {key: answer.get(key) for key in OUTCOME_KEYS}
    found = []
    for result in answer.get("results", []):
        memory = dict(result)
        title = str(memory.pop("title", ""))
        body = str(memory.pop("body", ""))
        scores = memory.get("scores") or {}
        # The score the hits are ordered by: the cross-encoder's, else the
        # arms' agreement (the page's order, design §5.4). A re-ranked
        # recall's rows past the rerank depth have no cross-encoder score:
        # None, not a 0.0 that would read as one.
        if outcome["reranked"]:
            score = scores.get("rerank_score") if scores.get("reranked") else None
        else:
            score = scores.get("agreement_score") or 0.0
        found.append(
            Hit(
                id=str(memory["id"]),
                text=f"{title}\n\n{body}" if body else title,
                score=None if score is None else float(score),
                metadata={**memory, "title": title, **outcome, "query": query},
            )
        )
    return found


@dataclass
class RecallSettings:
    """What a retriever asks with: the member's client (or the gateway and
    token to make one: RECALLATRON_GATEWAY and RECALLATRON_TOKEN or
    RECALLATRON_TOKEN_FILE by default), the purpose, how many, the mode and
    the kinds."""

    client: Client | None = None
    gateway: str = ""
    # Out of the repr: a retriever's settings printed, logged or shown in a
    # traceback must not carry the member's token.
    token: str = field(default="", repr=False)
    purpose: str = DEFAULT_PURPOSE
    k: int = DEFAULT_RECALL_LIMIT
    mode: str | None = None
    kinds: Sequence[str] = ()
    # The client made for a gateway and token, kept while they stay: one
    # assigned later makes another (a retriever reused for another member
    # must never answer as the first).
    _made: tuple[str, str, Client] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def connect(self) -> Client:
        """The client given, else one for the gateway and token."""
        if self.client is not None:
            return self.client
        token = self.token or token_from()
        if not token:
            raise ValueError("no member token: pass client= or token=, or set RECALLATRON_TOKEN")
        gateway = self.gateway or default_gateway()
        if self._made is None or self._made[:2] != (gateway, token):
            self._made = (gateway, token, Client(gateway, token))
        return self._made[2]

    def recall(self, query: str, k: int | None = None) -> list[Hit]:
        """``k``: this call's number of results (None: the settings')."""
        limit = self.k if k is None else k
        # Checked here: the gateway reads a limit of 0 as its default, so a
        # k of 0 would otherwise come back as ten results.
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise ValueError(f"k: must be a whole number, not {limit!r}")
        if not 1 <= limit <= MAX_RECALL_LIMIT:
            raise ValueError(f"k: must lie in [1, {MAX_RECALL_LIMIT}], not {limit}")
        response = self.connect().recall(
            query,
            mode=self.mode,
            limit=limit,
            purpose=self.purpose,
            kinds=self.kinds,
        )
        return hits(response, query)
