"""`recallatron eval` on the project's own small BEIR dataset, through the
session stack's gateway; plus the metric arithmetic on hand-made rankings."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from recallatron_cli import evaluate
from tests.recall.conftest import RecallStack

MINI_BEIR = Path(__file__).resolve().parent.parent / "data" / "mini-beir"


def test_metrics_of_one_ranking() -> None:
    relevant = {"a": 2, "b": 1}
    m = evaluate.query_metrics(["x", "a", "y", "z", "w", "b"], relevant)
    assert m["recall@5"] == 0.5 and m["recall@10"] == 1.0
    assert m["mrr@10"] == 0.5
    dcg = 2 / math.log2(3) + 1 / math.log2(7)
    idcg = 2 / math.log2(2) + 1 / math.log2(3)
    assert math.isclose(m["ndcg@10"], dcg / idcg)
    assert evaluate.query_metrics([], relevant) == {
        "recall@5": 0.0,
        "recall@10": 0.0,
        "ndcg@10": 0.0,
        "mrr@10": 0.0,
    }


def test_the_dataset_loads() -> None:
    dataset = evaluate.load_dataset(MINI_BEIR)
    assert len(dataset.documents) == 60 and len(dataset.queries) == 34
    doc_ids = {d.id for d in dataset.documents}
    assert all(set(rels) <= doc_ids for rels in dataset.qrels.values())


@pytest.mark.integration
def test_eval_on_mini_beir(recall_stack: RecallStack, capsys: pytest.CaptureFixture[str]) -> None:
    stack = recall_stack.stack
    argv = [str(MINI_BEIR), "--json", "--gateway", stack.gateway, "--token", stack.admin_token]
    assert evaluate.main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert list(report) == ["lexical", "dense", "hybrid"]
    for mode, figures in report.items():
        assert figures["queries"] == 34, mode
        for metric in evaluate.METRICS:
            assert 0.0 <= figures[metric] <= 1.0, (mode, metric)
        # A sanity floor: questions written for their answers are mostly found.
        assert figures["recall@10"] > 0.5, mode
    # Hybrid was fused from the very lists the arms' own runs returned.
    same = report["hybrid"]["same_runs"]
    assert same["checked"] > 34
    assert same["rank_mismatches"] == 0 and same["fused_score_mismatches"] == 0
