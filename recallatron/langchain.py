"""A LangChain retriever over recall (``pip install 'recallatron[langchain]'``):

    from recallatron.langchain import RecallatronRetriever
    retriever = RecallatronRetriever(token=..., purpose="assist", k=5)
    docs = retriever.invoke("who runs the on-call rota?")

Each Document is one recalled memory: its title and body as page_content, its
provenance and scores as metadata, with what the recall said as a whole
(nothing_relevant, dense_available, reranked, mode); see recallatron/retrieval.py.
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
    _settings: RecallSettings | None = PrivateAttr(default=None)
    # The client, gateway and token the settings' connection was made for.
    _made_for: tuple[Client | None, str, str] | None = PrivateAttr(default=None)

    def _recall(self) -> RecallSettings:
        """The connection is made once for a client, gateway and token, and
        again when one of them is assigned (a retriever reused for another
        member must never answer as the first); what a recall asks is read
        from the fields at each call (one assigned after the first call counts)."""
        who = (self.client, self.gateway, self.token)
        if self._settings is None or self._made_for != who:
            self._settings = RecallSettings(
                client=self.client, gateway=self.gateway, token=self.token
            )
            self._made_for = who
        settings = self._settings
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
