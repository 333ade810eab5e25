"""A retriever made with a member's token (recallatron/langchain.py,
recallatron/llamaindex.py) keeps it to itself: its dump, JSON, repr and str,
which a trace, a log line or a saved configuration shows, never carry it,
while the token still reaches the connection. No stack: nothing is called."""

from __future__ import annotations

from recallatron import langchain, llamaindex

TOKEN = "rk_member_token_that_must_not_show"


def test_langchain_retriever_dumps_no_token() -> None:
    retriever = langchain.RecallatronRetriever(gateway="127.0.0.1:1", token=TOKEN, k=2)
    shown = [
        str(retriever.model_dump()),
        retriever.model_dump_json(),
        repr(retriever),
        str(retriever),
        str(retriever.to_json()),
    ]
    assert not [text for text in shown if TOKEN in text]
    # The token stays usable: the connection is made with it.
    assert retriever.token == TOKEN
    assert retriever._recall().token == TOKEN
    retriever.token = "another"
    assert retriever._recall().token == "another"
    assert "another" not in retriever.model_dump_json()


def test_llamaindex_retriever_shows_no_token() -> None:
    retriever = llamaindex.RecallatronRetriever(gateway="127.0.0.1:1", token=TOKEN, k=2)
    shown = [repr(retriever), str(retriever), repr(retriever.settings), str(vars(retriever))]
    assert not [text for text in shown if TOKEN in text]
    # LlamaIndex's BaseRetriever is no pydantic model: it has no dump.
    assert not hasattr(retriever, "model_dump") and not hasattr(retriever, "dict")
    assert retriever.settings.token == TOKEN


def test_llamaindex_gateway_or_token_assigned_after_a_call_counts() -> None:
    """The LlamaIndex retriever took gateway and token only in its
    constructor: one assigned later (a retriever reused for another member)
    was accepted and ignored, and the calls went on as the first member."""
    retriever = llamaindex.RecallatronRetriever(gateway="127.0.0.1:1", token=TOKEN)
    first = retriever.settings.connect()
    assert first.token == TOKEN
    retriever.token = "another"
    again = retriever.settings.connect()
    assert again.token == "another" and again is not first
    assert retriever.settings.connect() is again
    assert retriever.token == "another"
    retriever.gateway = "127.0.0.1:2"
    assert retriever.settings.connect() is not again
    assert TOKEN not in repr(retriever.settings)
