"""The LangChain and LlamaIndex retrievers (recallatron/langchain.py,
recallatron/llamaindex.py) against the real stack: LangChain's own standard
retriever tests (langchain_tests' RetrieversIntegrationTests), LlamaIndex's
retriever evaluator (hit rate and MRR over expected memory ids), and what both
return: the memories' provenance and the recall's own flags, exactly as the
gateway answered, and nothing a purpose or an audience keeps from the caller."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from langchain_core.retrievers import BaseRetriever as LangChainRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests
from llama_index.core.evaluation import RetrieverEvaluator
from llama_index.core.schema import MetadataMode

from recallatron import langchain, llamaindex
from recallatron.client import Client
from recallatron_devkit.stack import Stack
from tests.conftest import Team, make_team

pytestmark = pytest.mark.integration

WORD = f"rota{uuid.uuid4().hex[:8]}"
QUERY = f"{WORD} on-call"


class Seeded:
    def __init__(self, team: Team) -> None:
        self.team = team
        ada = team.clients["ada"]
        bob = team.clients["bob"]
        self.shared = [
            ada.remember(
                f"The {WORD} on-call rota, week {week}",
                f"Week {week} of the {WORD} rota: {who} is on call.",
                "fact",
                audience_to="workspace",
                purposes=["assist", "automate"],
            ).memory
            for week, who in [(1, "Ada"), (2, "Bob"), (3, "Cy"), (4, "Ada")]
        ]
        self.derived = ada.derive(
            [m.id for m in self.shared[:2]],
            f"The {WORD} on-call rota alternates Ada and Bob",
            kind="summary",
            audience_to=team.members["ada"],
        ).memory
        # Not for the assist purpose, and another member's private memory.
        self.audit_only = ada.remember(
            f"The {WORD} on-call rota was audited", audience_to="workspace", purposes=["audit"]
        ).memory
        self.bobs = bob.remember(f"My {WORD} on-call rota swap with Cy").memory


@pytest.fixture(scope="module")
def seeded(stack: Stack, operator: Client) -> Iterator[Seeded]:
    team = make_team(stack, operator, ("ada", "bob"))
    yield Seeded(team)
    for client in team.clients.values():
        client.close()


# pytest-asyncio (which langchain-tests brings) runs in its strict mode here:
# the standard tests' one async test is taken by the class's mark (which
# pytest-asyncio warns about on the sync ones: nothing to act on).
@pytest.mark.asyncio
@pytest.mark.filterwarnings("ignore:The test <Function:pytest.PytestWarning")
class TestLangChainStandard(RetrieversIntegrationTests):
    """LangChain's standard retriever tests: k as a constructor parameter and
    as an invoke argument, Documents back, sync and async."""

    @pytest.fixture(autouse=True)
    def _seeded(self, seeded: Seeded) -> None:
        self.client = seeded.team.clients["ada"]

    @property
    def retriever_constructor(self) -> type[LangChainRetriever]:
        return langchain.RecallatronRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"client": self.client, "mode": "lexical"}

    @property
    def retriever_query_example(self) -> str:
        return QUERY


def test_langchain_documents_carry_the_provenance_and_the_recall_flags(seeded: Seeded) -> None:
    ada = seeded.team.clients["ada"]
    retriever = langchain.RecallatronRetriever(client=ada, mode="lexical", k=10)
    docs = retriever.invoke(QUERY)
    answer = ada.recall(QUERY, mode="lexical", limit=10)
    assert [d.id for d in docs] == [r.memory.id for r in answer.outcome.results]
    by_id = {d.id: d for d in docs}
    assert set(by_id) == {m.id for m in seeded.shared} | {seeded.derived.id}
    # Neither the audit-only memory nor Bob's private one.
    assert seeded.audit_only.id not in by_id and seeded.bobs.id not in by_id
    first = by_id[seeded.shared[0].id]
    assert first.page_content.startswith(f"The {WORD} on-call rota, week 1\n\nWeek 1")
    meta = first.metadata
    assert meta["id"] == seeded.shared[0].id
    assert meta["origin"] == "told"
    assert meta["audience"] == "workspace"
    assert meta["purposes"] == ["assist", "automate"]
    assert meta["created_by"] == seeded.team.members["ada"]
    assert meta["created_at"] and meta["revision"] == 1
    assert meta["scores"]["lexical_rank"] >= 1
    assert meta["nothing_relevant"] is answer.outcome.nothing_relevant
    assert meta["mode"] == "lexical" and meta["query"] == QUERY
    assert meta["reranked"] is answer.outcome.reranked
    derived = by_id[seeded.derived.id].metadata
    assert derived["origin"] == "derived"
    assert derived["audience"] == seeded.team.members["ada"]
    assert {
        link["target"]["id"] for link in derived["links"] if link["kind"] == "derived_from"
    } == {m.id for m in seeded.shared[:2]}
    # Another purpose sees another set; another member, their own memory.
    audit = langchain.RecallatronRetriever(client=ada, purpose="audit", mode="lexical")
    assert [d.id for d in audit.invoke(QUERY)] == [seeded.audit_only.id]
    bob = langchain.RecallatronRetriever(client=seeded.team.clients["bob"], mode="lexical")
    assert seeded.bobs.id in {d.id for d in bob.invoke(QUERY)}
    assert seeded.derived.id not in {d.id for d in bob.invoke(QUERY)}


def test_langchain_retriever_from_gateway_and_token(stack: Stack, seeded: Seeded) -> None:
    ada = seeded.team.clients["ada"]
    retriever = langchain.RecallatronRetriever(
        gateway=stack.gateway, token=ada.token, mode="lexical", k=2
    )
    assert ada.token not in repr(retriever)
    assert len(retriever.invoke(QUERY)) == 2


def test_llamaindex_retriever_shows_no_token(stack: Stack, seeded: Seeded) -> None:
    """The LlamaIndex retriever's settings printed the member's token in
    their repr (a dataclass's), as a log line or a traceback shows them."""
    ada = seeded.team.clients["ada"]
    retriever = llamaindex.RecallatronRetriever(gateway=stack.gateway, token=ada.token, k=2)
    assert ada.token not in repr(retriever.settings) and ada.token not in repr(retriever)
    assert len(retriever.retrieve(QUERY)) == 2


def test_langchain_fields_assigned_after_a_call_count(seeded: Seeded) -> None:
    """The retriever kept what it asked with from its first call: a purpose,
    k or mode assigned later was accepted and ignored."""
    retriever = langchain.RecallatronRetriever(client=seeded.team.clients["ada"], mode="lexical")
    assert seeded.audit_only.id not in {d.id for d in retriever.invoke(QUERY)}
    retriever.purpose = "audit"
    assert [d.id for d in retriever.invoke(QUERY)] == [seeded.audit_only.id]
    retriever.purpose, retriever.k = "assist", 2
    assert len(retriever.invoke(QUERY)) == 2
    retriever.mode = "dense"
    assert {d.metadata["mode"] for d in retriever.invoke(QUERY)} <= {"dense"}


def test_langchain_client_or_token_assigned_after_a_call_counts(
    stack: Stack, seeded: Seeded
) -> None:
    """The retriever made its connection at its first call and kept it: a
    client or token assigned later (a retriever reused for another member)
    was accepted and ignored, so the second member was answered the first
    one's private memories."""
    ada, bob = seeded.team.clients["ada"], seeded.team.clients["bob"]
    retriever = langchain.RecallatronRetriever(client=ada, mode="lexical")
    assert seeded.derived.id in {d.id for d in retriever.invoke(QUERY)}
    retriever.client = bob
    found = {d.id for d in retriever.invoke(QUERY)}
    assert seeded.derived.id not in found and seeded.bobs.id in found
    by_token = langchain.RecallatronRetriever(
        gateway=stack.gateway, token=ada.token, mode="lexical"
    )
    assert seeded.derived.id in {d.id for d in by_token.invoke(QUERY)}
    by_token.token = bob.token
    found = {d.id for d in by_token.invoke(QUERY)}
    assert seeded.derived.id not in found and seeded.bobs.id in found


def test_a_k_out_of_range_or_another_recall_argument_is_refused(seeded: Seeded) -> None:
    """A k of 0 was answered with the default ten results (invoke's k=0 read
    as "not given", the constructor's sent as the gateway's "default"), and
    invoke's other keywords were dropped: ``purpose="audit"`` answered the
    assist memories."""
    ada = seeded.team.clients["ada"]
    retriever = langchain.RecallatronRetriever(client=ada, mode="lexical")
    for k in (0, -1, 51):
        with pytest.raises(ValueError, match=r"^k: must lie in \[1, 50\]"):
            retriever.invoke(QUERY, k=k)
    with pytest.raises(ValueError, match=r"^k: must lie in \[1, 50\]"):
        langchain.RecallatronRetriever(client=ada, mode="lexical", k=0).invoke(QUERY)
    with pytest.raises(ValueError, match=r"^k: must lie in \[1, 50\]"):
        llamaindex.RecallatronRetriever(ada, mode="lexical", k=0).retrieve(QUERY)
    with pytest.raises(TypeError, match="purpose"):
        retriever.invoke(QUERY, purpose="audit")
    # LangChain's own keyword still passes.
    assert len(retriever.invoke(QUERY, k=1, verbose=True)) == 1


def test_llamaindex_nodes_carry_the_provenance_and_score(seeded: Seeded) -> None:
    ada = seeded.team.clients["ada"]
    retriever = llamaindex.RecallatronRetriever(ada, mode="lexical", k=10)
    nodes = retriever.retrieve(QUERY)
    answer = ada.recall(QUERY, mode="lexical", limit=10)
    assert [n.node.node_id for n in nodes] == [r.memory.id for r in answer.outcome.results]
    assert seeded.audit_only.id not in {n.node.node_id for n in nodes}
    for node, result in zip(nodes, answer.outcome.results, strict=True):
        expected = result.scores.rerank_score if answer.outcome.reranked else None
        if expected is None:
            assert node.score == pytest.approx(result.scores.agreement_score, abs=1e-4)
        else:
            assert node.score == pytest.approx(expected, abs=1e-4)
        meta = node.node.metadata
        assert meta["nothing_relevant"] is answer.outcome.nothing_relevant
        assert meta["origin"] in {"told", "derived"}
        assert meta["purposes"]
    # A language model reads the provenance beside the text, not the scores.
    shown = nodes[0].node.get_content(metadata_mode=MetadataMode.LLM)
    assert "created_at" in shown and "origin" in shown
    assert "scores" not in shown and "nothing_relevant" not in shown
    assert nodes[0].node.get_content(metadata_mode=MetadataMode.EMBED) == nodes[0].node.text


def test_llamaindex_fields_assigned_after_a_call_count(seeded: Seeded) -> None:
    """The retriever kept its purpose, k, mode, kinds and client where no
    assignment reached them: ``retriever.purpose = "audit"`` was accepted and
    the next call still recalled for assist (and a client assigned, as the
    first member)."""
    ada, bob = seeded.team.clients["ada"], seeded.team.clients["bob"]
    retriever = llamaindex.RecallatronRetriever(ada, mode="lexical")
    assert seeded.audit_only.id not in {n.node.node_id for n in retriever.retrieve(QUERY)}
    retriever.purpose = "audit"
    assert [n.node.node_id for n in retriever.retrieve(QUERY)] == [seeded.audit_only.id]
    retriever.purpose, retriever.k = "assist", 2
    assert len(retriever.retrieve(QUERY)) == 2
    retriever.k, retriever.kinds = 10, ["summary"]
    assert [n.node.node_id for n in retriever.retrieve(QUERY)] == [seeded.derived.id]
    retriever.kinds, retriever.client = (), bob
    found = {n.node.node_id for n in retriever.retrieve(QUERY)}
    assert seeded.derived.id not in found and seeded.bobs.id in found
    assert (retriever.purpose, retriever.k, retriever.mode) == ("assist", 10, "lexical")


def test_llamaindex_retriever_evaluator_finds_the_expected_memories(seeded: Seeded) -> None:
    ada = seeded.team.clients["ada"]
    retriever = llamaindex.RecallatronRetriever(ada, mode="lexical", k=10)
    evaluator = RetrieverEvaluator.from_metric_names(["hit_rate", "mrr"], retriever=retriever)
    week3 = seeded.shared[2]
    result = evaluator.evaluate(query=f"{WORD} week 3 Cy", expected_ids=[week3.id])
    assert result.metric_vals_dict["hit_rate"] == 1.0
    assert result.metric_vals_dict["mrr"] > 0
    missed = evaluator.evaluate(query=QUERY, expected_ids=[seeded.audit_only.id])
    assert missed.metric_vals_dict["hit_rate"] == 0.0


def test_llamaindex_async_retrieve(seeded: Seeded) -> None:
    retriever = llamaindex.RecallatronRetriever(seeded.team.clients["ada"], mode="lexical", k=3)

    async def run() -> list[str]:
        return [n.node.node_id for n in await retriever.aretrieve(QUERY)]

    assert len(anyio.run(run)) == 3
