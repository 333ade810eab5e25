"""A LlamaIndex retriever over recall (``pip install 'recallatron[llamaindex]'``):

    from recallatron.llamaindex import RecallatronRetriever
    retriever = RecallatronRetriever(token=..., purpose="assist", k=5)
    nodes = retriever.retrieve("who runs the on-call rota?")

Each NodeWithScore is one recalled memory: a TextNode whose id is the
memory's, its title and body as text, its provenance and scores as metadata
with what the recall said as a whole (nothing_relevant, dense_available,
reranked, mode, why an arm or the reranker did not serve, not_embedded;
recallatron/retrieval.py); the score is the cross-encoder's
when it ran, else the fused one. A language model reading a node's content
sees the provenance (date, author, origin, confidence, links), not the scores
or flags."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from recallatron.client import Client
from recallatron.retrieval import PROVENANCE_KEYS, RecallSettings
from recallatron.vocabulary import DEFAULT_PURPOSE, DEFAULT_RECALL_LIMIT


class _Setting:
    """A retriever's field kept in its RecallSettings, so one assigned after
    the first call counts at the next (as the LangChain retriever's fields)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, retriever: RecallatronRetriever | None, owner: type | None = None) -> Any:
        if retriever is None:  # read on the class itself
            return self
        return getattr(retriever.settings, self.name)

    def __set__(self, retriever: RecallatronRetriever, value: Any) -> None:
        setattr(retriever.settings, self.name, value)


class RecallatronRetriever(BaseRetriever):
    """Recall as one member, for one purpose. Give ``client`` (a
    recallatron.client.Client), or ``gateway`` and ``token`` (default:
    RECALLATRON_GATEWAY and RECALLATRON_TOKEN or RECALLATRON_TOKEN_FILE)."""

    client = _Setting()
    gateway = _Setting()
    token = _Setting()
    purpose = _Setting()
    k = _Setting()
    mode = _Setting()
    kinds = _Setting()

    def __init__(
        self,
        client: Client | None = None,
        *,
        gateway: str = "",
        token: str = "",
        purpose: str = DEFAULT_PURPOSE,
        k: int = DEFAULT_RECALL_LIMIT,
        mode: str | None = None,
        kinds: Sequence[str] = (),
        **kwargs: Any,
    ) -> None:
        self.settings = RecallSettings(
            client=client,
            gateway=gateway,
            token=token,
            purpose=purpose,
            k=k,
            mode=mode,
            kinds=kinds,
        )
        super().__init__(**kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        found = []
        for hit in self.settings.recall(query_bundle.query_str):
            hidden = [key for key in hit.metadata if key not in PROVENANCE_KEYS]
            node = TextNode(
                id_=hit.id,
                text=hit.text,
                metadata=hit.metadata,
                excluded_llm_metadata_keys=hidden,
                excluded_embed_metadata_keys=list(hit.metadata),
            )
            found.append(NodeWithScore(node=node, score=hit.score))
        return found
