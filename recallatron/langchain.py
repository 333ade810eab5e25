"""A LangChain retriever over recall (``pip install 'recallatron[langchain]'``):

    from recallatron.langchain import RecallatronRetriever
    retriever = RecallatronRetriever(token=..., purpose="assist", k=5)
    docs = retriever.invoke("who runs the on-call rota?")

Each Document is one recalled memory: its title and body as page_content, its
provenance and scores as metadata, with what the recall said as a whole
(nothing_relevant, dense_available, reranked, mode, why an arm or the
reranker did not serve, not_embedded); see recallatron/retrieval.py.
``invoke(query, k=3)`` asks for another number of results for one call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field, PrivateAttr

from recallatron.client import Client
from recallatron.retrieval import RecallSettings
from recallatron.vocabulary import DEFAULT_PURPOSE, DEFAULT_RECALL_LIMIT

# What LangChain's invoke passes to the retriever besides its own arguments.
_PASSED_ON = frozenset({"verbose"})


class RecallatronRetriever(BaseRetriever):
    """Recall as one member, for one purpose. Give ``client`` (a
    recallatron.client.Client), or ``gateway`` and ``token`` (default:
    RECALLATRON_GATEWAY and RECALLATRON_TOKEN or RECALLATRON_TOKEN_FILE)."""

    client: Client | None = None
    gateway: str = ""
    # Out of the repr and of model_dump and its JSON (a trace, a log line or a
    # saved configuration shows them); still a plain str to read and assign.
    token: str = Field(default="", repr=False, exclude=True)
    purpose: str = DEFAULT_PURPOSE
    k: int = DEFAULT_RECALL_LIMIT
    mode: str | None = None
    kinds: Sequence[str] = ()
    _settings: RecallSettings = PrivateAttr(default_factory=RecallSettings)

    def _recall(self) -> RecallSettings:
        """The settings as the fields stand at this call (one assigned after
        the first call counts; a client, gateway or token assigned connects
        anew, recallatron/retrieval.py)."""
        settings = self._settings
        settings.client, settings.gateway, settings.token = self.client, self.gateway, self.token
        settings.purpose, settings.k, settings.mode = self.purpose, self.k, self.mode
        settings.kinds = self.kinds
        return settings

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        # LangChain passes invoke's other keywords on (``verbose`` among
        # them); one this retriever does not take (``purpose="audit"``) is
        # refused rather than answered for the retriever's own purpose.
        unknown = sorted(set(kwargs) - _PASSED_ON)
        if unknown:
            raise TypeError(
                f"invoke takes k and no other recall argument, not {', '.join(unknown)}: "
                "set them on the retriever"
            )
        return [
            Document(
                id=hit.id, page_content=hit.text, metadata={**hit.metadata, "score": hit.score}
            )
            for hit in self._recall().recall(query, k)
        ]
