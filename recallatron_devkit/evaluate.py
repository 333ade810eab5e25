"""`recallatron eval`: retrieval quality of recall on BEIR-format datasets.

Each dataset (``corpus.jsonl``, ``queries.jsonl``, ``qrels/test.tsv``) is loaded
into a fresh workspace through the public tools (``remember``, audience the
workspace), then, once every memory is embedded, every query with relevance
judgements is run through the gateway's ``recall`` once per mode. The figures
are Recall@5, Recall@10, nDCG@10 and MRR@10, micro-averaged over all queries of
all datasets given, with per-dataset and per-category break-downs.

Hybrid and the single arms come from the same workspace and the same candidate
lists: every hybrid result carries the lexical and dense rank it was fused
from, and the command checks them against the single-arm runs of the same
query (``same_runs`` in the output: ranks that disagree, fused scores that are
not the sum of 1 / (60 + rank)).

Without ``--gateway`` a temporary local stack (embedded Postgres and every
service) is started in a temporary directory and removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from recallatron.client import Client
from recallatron.progress import Progress
from recallatron.refusal import Refused
from recallatron.settings import default_state_dir, state_dir
from recallatron.vocabulary import EPISODE_NEIGHBOUR_WEIGHT, MAX_QUERY_CHARS, MODES
from recallatron_devkit.beir import Dataset, Document, Query, load_dataset, memory_text

METRICS = ("recall@5", "recall@10", "ndcg@10", "mrr@10")
DEPTH = 10
RRF_K = 60
# Degraded answers (dense arm unavailable) are retried this many times: the
# figures measure retrieval, not a transiently slow embed service.
DEGRADED_RETRIES = 5
WORKERS = 2


# -- the metrics ----------------------------------------------------------------


def query_metrics(ranked: Sequence[str], relevant: dict[str, int]) -> dict[str, float]:
    """Recall@5, Recall@10 (share of the relevant documents found), nDCG@10
    (graded gains, log2 discount) and MRR@10 of one ranked list."""
    top = list(ranked[:DEPTH])
    found = [d for d in top if d in relevant]
    dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(top))
    ideal = sorted(relevant.values(), reverse=True)[:DEPTH]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    first = next((i for i, d in enumerate(top) if d in relevant), None)
    return {
        "recall@5": len([d for d in top[:5] if d in relevant]) / len(relevant),
        "recall@10": len(found) / len(relevant),
        "ndcg@10": dcg / idcg if idcg else 0.0,
        "mrr@10": 1.0 / (first + 1) if first is not None else 0.0,
    }


def mean(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    if not rows:
        return {m: 0.0 for m in METRICS}
    return {m: round(sum(r[m] for r in rows) / len(rows), 4) for m in METRICS}


# -- one run --------------------------------------------------------------------


@dataclass
class Hit:
    """One recall result as the eval keeps it."""

    doc: str
    lexical_rank: int
    dense_rank: int
    fused_score: float
    episode_rank: int = 0
    episode_lift: float = 0.0


@dataclass
class Run:
    hits: list[Hit]
    dense_available: bool
    reranked: bool


@dataclass
class ModeRuns:
    runs: dict[tuple[str, str], Run] = field(default_factory=dict)
    degraded: int = 0


def _retrying(call: Callable[[], Any], attempts: int = 5) -> Any:
    for attempt in range(attempts):
        try:
            return call()
        except grpc.RpcError as exc:
            code = exc.code()
            if code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise
            if attempt == attempts - 1:
                raise
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


class Workspace:
    """A fresh workspace holding one dataset, and a member's client of it."""

    def __init__(self, gateway: str, admin_token: str, dataset: Dataset) -> None:
        admin = Client(gateway, admin_token, timeout=60)
        slug = f"eval-{_slug(dataset.name)}-{uuid.uuid4().hex[:8]}"
        self.workspace = admin.create_workspace(slug).workspace
        member = admin.create_member(self.workspace.id, "eval", owner=True).member
        token = admin.create_token(member.id, label="recallatron eval").token
        admin.close()
        self.client = Client(gateway, token, timeout=30)
        self.dataset = dataset
        # memory id <-> corpus id
        self.doc_of: dict[str, str] = {}
        self.memory_of: dict[str, str] = {}

    def load(self) -> None:
        def remember(doc: Document) -> tuple[str, str]:
            title, body = memory_text(doc)
            # Dated documents are remembered with their time (each session an episode).
            when: dict[str, Any] = {"occurred_at": doc.occurred_at} if doc.occurred_at else {}
            resp = _retrying(
                lambda: self.client.remember(
                    title,
                    body,
                    audience_to="workspace",
                    request_id=f"eval-{self.workspace.id}-{doc.id}"[:128],
                    **when,
                )
            )
            return doc.id, resp.memory.id

        # One at a time, in corpus order: rows that score alike are ordered by
        # creation time, so this keeps the figures the same from run to run.
        documents = self.dataset.documents
        with Progress(f"{self.dataset.name}: loading", len(documents), "documents") as bar:
            for doc in documents:
                doc_id, memory_id = remember(doc)
                self.memory_of[doc_id] = memory_id
                self.doc_of[memory_id] = doc_id
                bar.advance()

    def wait_embedded(self, timeout: float = 900.0) -> None:
        """Waits until the embedding job has embedded every memory (the
        workspace status an owner may read)."""
        with Progress(f"{self.dataset.name}: embedding", unit="memories") as bar:
            self.client.wait_embedded(
                timeout=timeout, on_status=lambda s: bar.update(s.embedded, s.memories)
            )

    def run(self, query: Query, mode: str, rerank: bool) -> tuple[Run, int]:
        """One recall; an answer without the dense arm (in a mode that wants
        it) is retried. Returns the run and 1 if it stayed degraded, else 0."""
        degraded = 0
        while True:
            resp = _retrying(
                lambda: self.client.recall(
                    query.text[:MAX_QUERY_CHARS], mode=mode, limit=DEPTH, skip_rerank=not rerank
                )
            )
            outcome = resp.outcome
            wants_dense = mode != "lexical"
            if wants_dense and not outcome.dense_available and degraded < DEGRADED_RETRIES:
                degraded += 1
                time.sleep(0.5)
                continue
            hits = [
                Hit(
                    self.doc_of.get(r.memory.id, ""),
                    r.scores.lexical_rank,
                    r.scores.dense_rank,
                    r.scores.fused_score,
                    r.scores.episode_rank,
                    r.scores.episode_lift,
                )
                for r in outcome.results
            ]
            run = Run(hits, outcome.dense_available, outcome.reranked)
            return run, int(wants_dense and not outcome.dense_available)

    def close(self) -> None:
        self.client.close()


def _slug(name: str) -> str:
    cleaned = "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")
    return (cleaned or "dataset")[:40]


def same_runs(
    hybrid: dict[tuple[str, str], Run],
    lexical: dict[tuple[str, str], Run],
    dense: dict[tuple[str, str], Run],
) -> dict[str, int]:
    """Checks that hybrid was fused from the very candidate lists the single
    arms returned: for every hybrid result also returned by an arm's run of the
    same query, the arm rank agrees; every fused score is the RRF sum of its
    ranks plus its episode neighbours' lift, a lift never more than a seed in
    full agreement gives at its rank; and a hybrid result an arm
    ranked within the depth is in that arm's run."""
    checked = rank_mismatches = score_mismatches = 0
    for key, run in hybrid.items():
        arm_ranks = {
            "lexical": {h.doc: h.lexical_rank for h in lexical[key].hits}
            if key in lexical
            else None,
            "dense": {h.doc: h.dense_rank for h in dense[key].hits} if key in dense else None,
        }
        for hit in run.hits:
            expected = sum(1.0 / (RRF_K + r) for r in (hit.lexical_rank, hit.dense_rank) if r)
            # A lift is at most a seed in full agreement's, and only with a rank.
            most = EPISODE_NEIGHBOUR_WEIGHT / (RRF_K + hit.episode_rank) if hit.episode_rank else 0
            expected += hit.episode_lift
            checked += 1
            if not math.isclose(hit.fused_score, expected, rel_tol=1e-9, abs_tol=1e-12) or not (
                0.0 <= hit.episode_lift <= most
            ):
                score_mismatches += 1
            for arm, rank in (("lexical", hit.lexical_rank), ("dense", hit.dense_rank)):
                ranks = arm_ranks[arm]
                if ranks is None:
                    continue
                if hit.doc in ranks:
                    checked += 1
                    rank_mismatches += int(ranks[hit.doc] != rank)
                elif 0 < rank <= len(ranks):
                    # Ranked within the arm run's depth, yet absent from it.
                    checked += 1
                    rank_mismatches += 1
    return {
        "checked": checked,
        "rank_mismatches": rank_mismatches,
        "fused_score_mismatches": score_mismatches,
    }


# -- the stack ------------------------------------------------------------------


@contextmanager
def temporary_stack(log: Callable[[str], None]) -> Iterator[tuple[str, str]]:
    """A whole local stack in a temporary directory; yields (gateway, admin token)."""
    from recallatron_devkit.stack import Stack, own_config, running

    state = Path(tempfile.mkdtemp(prefix="recallatron-eval-"))
    models = Path(os.environ.get("RECALLATRON_MODELS_DIR") or default_state_dir() / "models")
    config = own_config(
        state, models, cross_encoder_dir=os.environ.get("RECALLATRON_CROSS_ENCODER_DIR", "")
    )
    log(f"starting a temporary stack in {state} ...")
    with running(Stack(config), remove_state=True) as stack:
        yield stack.gateway, stack.admin_token


# -- the command ----------------------------------------------------------------


def evaluate(
    gateway: str,
    admin_token: str,
    datasets: Sequence[Dataset],
    modes: Sequence[str] = MODES,
    rerank: bool = False,
) -> dict[str, Any]:
    """Runs the evaluation (its progress on stderr); returns one object keyed by mode."""
    per_query: dict[str, list[tuple[Dataset, Query, dict[str, float]]]] = defaultdict(list)
    runs: dict[str, ModeRuns] = {m: ModeRuns() for m in modes}
    for dataset in datasets:
        ws = Workspace(gateway, admin_token, dataset)
        try:
            ws.load()
            if any(m != "lexical" for m in modes):
                ws.wait_embedded()
            for mode in modes:

                def one(
                    query: Query, mode: str = mode, ws: Workspace = ws
                ) -> tuple[Query, Run, int]:
                    run, degraded = ws.run(query, mode, rerank)
                    return query, run, degraded

                with (
                    Progress(f"{dataset.name}: {mode}", len(dataset.queries), "queries") as bar,
                    ThreadPoolExecutor(WORKERS) as pool,
                ):
                    for query, run, degraded in pool.map(one, dataset.queries):
                        bar.advance()
                        runs[mode].runs[(dataset.name, query.id)] = run
                        runs[mode].degraded += degraded
                        scores = query_metrics([h.doc for h in run.hits], dataset.qrels[query.id])
                        per_query[mode].append((dataset, query, scores))
        finally:
            ws.close()

    report: dict[str, Any] = {}
    for mode in modes:
        rows = per_query[mode]
        by_dataset: dict[str, list[dict[str, float]]] = defaultdict(list)
        by_category: dict[str, list[dict[str, float]]] = defaultdict(list)
        for dataset, query, scores in rows:
            by_dataset[dataset.name].append(scores)
            if query.category:
                by_category[query.category].append(scores)
        report[mode] = {
            **mean([s for _, _, s in rows]),
            "queries": len(rows),
            "degraded": runs[mode].degraded,
            "per_dataset": {name: {**mean(v), "queries": len(v)} for name, v in by_dataset.items()},
            "per_category": {
                c: {**mean(v), "queries": len(v)} for c, v in sorted(by_category.items())
            },
        }
    if "hybrid" in modes and not rerank:
        report["hybrid"]["same_runs"] = same_runs(
            runs["hybrid"].runs,
            runs["lexical"].runs if "lexical" in modes else {},
            runs["dense"].runs if "dense" in modes else {},
        )
    return report


def format_report(report: dict[str, Any]) -> str:
    names = sorted({n for r in report.values() for n in r["per_dataset"]})
    header = f"{'mode':<8} {'dataset':<16} {'queries':>7} " + " ".join(f"{m:>9}" for m in METRICS)
    lines = [header, "-" * len(header)]
    for mode, r in report.items():
        scopes = [(n, r["per_dataset"][n]) for n in names if n in r["per_dataset"]]
        if len(scopes) > 1:
            scopes.append(("all (micro)", r))
        for name, s in scopes:
            lines.append(
                f"{mode:<8} {name:<16} {s['queries']:>7} "
                + " ".join(f"{s[m]:>9.3f}" for m in METRICS)
            )
    for mode, r in report.items():
        if r["degraded"]:
            lines.append(f"{mode}: {r['degraded']} answers without the dense arm")
    if "same_runs" in report.get("hybrid", {}):
        s = report["hybrid"]["same_runs"]
        lines.append(
            f"hybrid vs the arms' runs: {s['checked']} checks, {s['rank_mismatches']} rank "
            f"and {s['fused_score_mismatches']} fused-score mismatches"
        )
    return "\n".join(lines)


def cmd_eval(args: argparse.Namespace) -> int:
    modes = list(dict.fromkeys(args.mode or MODES))
    if not args.rerank and "hybrid" in modes:
        # The arms run first so that hybrid can be checked against them.
        modes = [m for m in MODES if m in modes]
    datasets = [load_dataset(Path(d)) for d in args.datasets]
    if args.plot:
        from recallatron_devkit.plots import pyplot

        pyplot()  # before the long run: a missing matplotlib says so now

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    if args.gateway:
        token = args.token or os.environ.get("RECALLATRON_ADMIN_TOKEN", "")
        if not token:
            path = state_dir() / "admin-token"
            token = path.read_text().strip() if path.is_file() else ""
        if not token:
            raise Refused("no operator token: pass --token or set RECALLATRON_ADMIN_TOKEN")
        report = evaluate(args.gateway, token, datasets, modes, args.rerank)
    else:
        with temporary_stack(log) as (gateway, token):
            report = evaluate(gateway, token, datasets, modes, args.rerank)
    if args.plot:
        from recallatron_devkit.plots import eval_plot

        log(f"drew {eval_plot(report, Path(args.plot))}")
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_report(report))
    return 0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "eval",
        help="retrieval quality of recall on BEIR-format datasets",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("datasets", nargs="+", metavar="DATASET_DIR")
    p.add_argument(
        "--mode", action="append", choices=MODES, help="repeat for several; default all three"
    )
    p.add_argument("--json", action="store_true", help="one JSON object keyed by mode")
    p.add_argument("--gateway", help="a running gateway; default: a temporary local stack")
    p.add_argument("--token", default="", help="operator token of that gateway")
    p.add_argument("--rerank", action="store_true", help="let the cross-encoder re-rank")
    p.add_argument(
        "--plot",
        metavar="FILE",
        help="also draw recall@k per mode and per query category (.svg or .png)",
    )
    p.set_defaults(func=cmd_eval)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="recallatron")
    add_parser(parser.add_subparsers(dest="cmd", required=True))
    args = parser.parse_args(["eval", *(argv if argv is not None else sys.argv[1:])])
    try:
        return int(args.func(args))
    except Refused as exc:
        # As the CLI's main() ends a refusal: one line, no traceback.
        print(f"error: {exc.message}", file=sys.stderr)
        return exc.code


if __name__ == "__main__":
    sys.exit(main())
