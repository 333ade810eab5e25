"""`recallatron eval` on the project's own small BEIR dataset, through the
session stack's gateway; plus the metric arithmetic on hand-made rankings."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from recallatron_devkit import beir, evaluate
from recallatron_devkit.plots import eval_plot as evaluate_plot
from tests.recall.conftest import RecallStack

MINI_BEIR = Path(__file__).resolve().parent.parent / "data" / "mini-beir"
# A gateway nothing answers on: a refusal comes before any call.
GATEWAY = ["--gateway", "127.0.0.1:1"]


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
    dataset = beir.load_dataset(MINI_BEIR)
    assert len(dataset.documents) == 60 and len(dataset.queries) == 34
    doc_ids = {d.id for d in dataset.documents}
    assert all(set(rels) <= doc_ids for rels in dataset.qrels.values())


@pytest.mark.integration
def test_eval_on_mini_beir(
    recall_stack: RecallStack, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    stack = recall_stack.stack
    plot = tmp_path / "eval.svg"
    argv = [str(MINI_BEIR), "--json", "--gateway", stack.gateway, "--token", stack.admin_token]
    assert evaluate.main([*argv, "--plot", str(plot)]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    # Progress of each phase on stderr, the answer alone on stdout.
    for phase in ("loading: 60/60 documents", "lexical: 34/34 queries", "hybrid: 34/34 queries"):
        assert f"mini-beir: {phase} (100%), done in" in captured.err, phase
    svg = plot.read_text()
    assert svg.startswith("<?xml") and "<svg" in svg
    assert all(mode in svg for mode in ("lexical", "dense", "hybrid"))
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


def test_the_plot_shows_every_mode_and_category(tmp_path: Path) -> None:
    def figures(r5: float, r10: float) -> dict[str, float]:
        return {"recall@5": r5, "recall@10": r10, "ndcg@10": 0.5, "mrr@10": 0.5, "queries": 9}

    report = {
        mode: {
            **figures(0.4 + k / 10, 0.5 + k / 10),
            "per_category": {"multi-hop": figures(0.3, 0.4), "temporal": figures(0.2, 0.35)},
        }
        for k, mode in enumerate(("lexical", "dense", "hybrid"))
    }
    svg = evaluate_plot(report, tmp_path / "quality.svg").read_text()
    for label in ("lexical", "dense", "hybrid", "multi-hop", "temporal", "recall@5", "recall@10"):
        assert label in svg, label
    # Each bar is labelled with its value: hybrid's recall@10 of 0.70.
    assert "0.70" in svg
    # Without categories, one panel: no category axis.
    flat = {m: {k: v for k, v in r.items() if k != "per_category"} for m, r in report.items()}
    assert "by query category" not in evaluate_plot(flat, tmp_path / "flat.svg").read_text()


def test_eval_without_an_operator_token_is_refused_as_every_command_refuses(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """It ended with the bare message (exit 1), where every other refusal of
    the command reads 'error: ...'."""
    from recallatron_cli.main import main

    monkeypatch.delenv("RECALLATRON_ADMIN_TOKEN", raising=False)
    monkeypatch.setenv("RECALLATRON_STATE_DIR", str(tmp_path))  # no admin-token there
    code = main(["eval", str(MINI_BEIR), "--gateway", "127.0.0.1:1"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: no operator token: "), err


def test_eval_plot_without_matplotlib_is_refused_as_every_command_refuses(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--plot` without matplotlib ended with the bare message (SystemExit)."""
    from recallatron_cli.main import main

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # its import fails
    code = main(["eval", str(MINI_BEIR), *GATEWAY, "--plot", "x.svg"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: drawing needs matplotlib"), err


def test_eval_run_as_its_own_module_refuses_without_a_traceback(tmp_path: Path) -> None:
    """`python -m recallatron_devkit.evaluate` without a token showed a
    traceback ending in the refusal, where the CLI prints one line."""
    env = {k: v for k, v in os.environ.items() if k != "RECALLATRON_ADMIN_TOKEN"}
    env["RECALLATRON_STATE_DIR"] = str(tmp_path)  # no admin-token there
    done = subprocess.run(
        [sys.executable, "-m", "recallatron_devkit.evaluate", str(MINI_BEIR), *GATEWAY],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: no operator token: "), done.stderr
    assert "Traceback" not in done.stderr
