"""Ways to fuse recall's arms, tried offline on the dev data (design §5; issue
"recall that finds more"): each variant is measured on its own against the
fusion the product ships, overall and per question category.

    python -m benchmarks.fusion_variants dump --out /tmp/arms.json
    python -m benchmarks.fusion_variants score /tmp/arms.json

``dump`` starts a temporary local stack, loads each conversation of
../shared/eval/locomo-dev into a workspace as `recallatron eval` does, and
keeps, per judged question, the product's lexical arm (its first 50 rows
with their scores, ranked as the arm ranks them), every memory's vector and
the query's vector (the bi-encoder's exact graph in-process, the embed input
composed as the embedding job composes it). ``score`` recomputes the dense
arm exactly (cosine, floor 0.30, 100 rows) and fuses: its first row, what
recall ships (RRF, k = 60, then the page ordered by the arms' agreement),
gives the product's hybrid figures within what the query graph moves (the
service embeds queries on it); the second is RRF alone; the others are the
variants. No variant here is tuned on the data beyond the handful of
settings it names.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

DATASETS = ("conv-26", "conv-30", "conv-41")
ARM_ROWS = 100
FLOOR = 0.30
RRF_K = 60

Ranked = list[str]


def dump(root: Path, out: Path) -> None:
    from recallatron.embed_input import compose
    from recallatron.settings import default_state_dir
    from recallatron_devkit.beir import load_dataset, memory_text
    from recallatron_devkit.evaluate import Workspace
    from recallatron_devkit.stack import Stack, own_config, running
    from services.embed.models import BiEncoder

    models = default_state_dir() / "models"
    encoder = BiEncoder(models / "all-MiniLM-L6-v2", threads=1)
    data: dict[str, Any] = {}
    state = Path(tempfile.mkdtemp(prefix="fusion-"))
    with running(Stack(own_config(state, models)), remove_state=True) as stack:
        for name in DATASETS:
            ds = load_dataset(root / name)
            ws = Workspace(stack.gateway, stack.admin_token, ds)
            ws.load()
            queries = {}
            for q in ds.queries:
                if not ds.qrels.get(q.id):
                    continue
                outcome = ws.client.recall(q.text, mode="lexical", limit=50, skip_rerank=True)
                queries[q.id] = {
                    "text": q.text,
                    "category": q.category,
                    "relevant": ds.qrels[q.id],
                    "lexical": [ws.doc_of[r.memory.id] for r in outcome.outcome.results],
                    "lexical_scores": [r.scores.lexical_score for r in outcome.outcome.results],
                    "vector": encoder.embed([q.text])[0].tolist(),
                }
            ws.close()
            docs = [d.id for d in ds.documents]
            vectors = encoder.embed([compose(*memory_text(d)) for d in ds.documents])
            data[name] = {"docs": docs, "vectors": vectors.tolist(), "queries": queries}
            print(f"{name}: {len(queries)} questions", file=sys.stderr, flush=True)
    out.write_text(json.dumps(data))


def rrf(lists: list[Ranked], weights: list[float] | None = None) -> Ranked:
    score: dict[str, float] = defaultdict(float)
    for j, ranked in enumerate(lists):
        w = 1.0 if weights is None else weights[j]
        for rank, doc in enumerate(ranked, start=1):
            score[doc] += w / (RRF_K + rank)
    # Equal scores keep the order first seen (the lexical arm's first): the
    # product breaks them by memory id, a random UUID, which no corpus id
    # reproduces; the order first seen gives the product's figures here.
    return [d for d, _ in sorted(score.items(), key=lambda x: -x[1])]


class Conversation:
    def __init__(self, raw: dict[str, Any]) -> None:
        self.docs: list[str] = raw["docs"]
        self.vectors = np.asarray(raw["vectors"], dtype=np.float32)
        self.queries: dict[str, Any] = raw["queries"]

    def dense(self, vector: np.ndarray) -> Ranked:
        cosine = self.vectors @ vector
        order = np.argsort(-cosine, kind="stable")[:ARM_ROWS]
        return [self.docs[i] for i in order if cosine[i] >= FLOOR]

    def centroid(self, docs: Ranked) -> np.ndarray:
        at = {d: i for i, d in enumerate(self.docs)}
        return np.mean([self.vectors[at[d]] for d in docs], axis=0)


Variant = Callable[[Conversation, dict[str, Any]], Ranked]


def plain(c: Conversation, q: dict[str, Any]) -> Ranked:
    return rrf([q["lexical"], c.dense(np.asarray(q["vector"], dtype=np.float32))])


def weighted(dense_weight: float) -> Variant:
    def fuse(c: Conversation, q: dict[str, Any]) -> Ranked:
        dense = c.dense(np.asarray(q["vector"], dtype=np.float32))
        return rrf([q["lexical"], dense], [1.0, dense_weight])

    return fuse


def feedback(beta: float, depth: int) -> Variant:
    """Rocchio on the query vector: the first fused rows' centroid added."""

    def fuse(c: Conversation, q: dict[str, Any]) -> Ranked:
        vector = np.asarray(q["vector"], dtype=np.float32)
        top = plain(c, q)[:depth]
        if top:
            vector = vector + beta * c.centroid(top)
            vector = vector / np.linalg.norm(vector)
        return rrf([q["lexical"], c.dense(vector)])

    return fuse


def neighbours(depth: int, weight: float) -> Variant:
    """A third list: the observations next to the first fused rows in their
    session (ids O<session>:<n>), as episode neighbours would be."""

    def fuse(c: Conversation, q: dict[str, Any]) -> Ranked:
        known = set(c.docs)
        near: Ranked = []
        for doc in plain(c, q)[:depth]:
            session, n = doc[1:].split(":")
            for m in (int(n) - 1, int(n) + 1):
                other = f"O{session}:{m}"
                if other in known and other not in near:
                    near.append(other)
        dense = c.dense(np.asarray(q["vector"], dtype=np.float32))
        return rrf([q["lexical"], dense, near], [1.0, 1.0, weight])

    return fuse


def reordered(depth: int, minmax: bool = False, dense_zero: float = 0.0) -> Variant:
    """RRF's first ``depth`` rows ordered again by the arms' own scores, each
    measured from its zero (lexical 0, dense ``dense_zero``) against its
    arm's best for the query (or min-max), summed (a row one arm did not
    return adds 0 there); the rows below keep RRF's order. With ``depth`` 10
    the first ten are RRF's own, so Recall@10 cannot move: only their order
    does. ``reordered(10, dense_zero=FLOOR)`` is what recall did before the
    episode neighbours (services/rank/fusion.py, order_page)."""

    def fuse(c: Conversation, q: dict[str, Any]) -> Ranked:
        dense = c.dense(np.asarray(q["vector"], dtype=np.float32))
        return by_agreement(c, q, rrf([q["lexical"], dense]), depth, minmax, dense_zero)

    return fuse


def agreement_of(
    c: Conversation, q: dict[str, Any], minmax: bool = False, dense_zero: float = FLOOR
) -> dict[str, float]:
    """Each row's agreement: its lexical score and its cosine, each measured
    from its zero (or min-max) against its arm's best for the query, summed
    (services/rank/fusion.py, agreement)."""
    vector = np.asarray(q["vector"], dtype=np.float32)
    at = {d: i for i, d in enumerate(c.docs)}
    cosines = {d: float(c.vectors[at[d]] @ vector) for d in c.dense(vector)}
    lexical = dict(zip(q["lexical"], q["lexical_scores"], strict=True))

    def scaled(values: dict[str, float], zero: float) -> dict[str, float]:
        if not values:
            return {}
        top = max(values.values())
        low = min(values.values()) if minmax else zero
        return {d: (v - low) / (top - low) if top > low else 1.0 for d, v in values.items()}

    lex, den = scaled(lexical, 0.0), scaled(cosines, dense_zero)
    return {d: lex.get(d, 0.0) + den.get(d, 0.0) for d in lex.keys() | den.keys()}


def by_agreement(
    c: Conversation,
    q: dict[str, Any],
    fused: Ranked,
    depth: int = 10,
    minmax: bool = False,
    dense_zero: float = FLOOR,
) -> Ranked:
    """``fused`` with its first ``depth`` rows ordered by the arms' agreement."""
    agree = agreement_of(c, q, minmax, dense_zero)
    head = sorted(fused[:depth], key=lambda d: -agree.get(d, 0.0))
    return head + fused[depth:]


def episode_neighbours(c: Conversation, seeds: Ranked) -> Ranked:
    """The observations just before and after each seed in its session (ids
    O<session>:<n>, in corpus order, as `recallatron eval` remembers them: each
    dated session one episode), seed by seed; never a seed."""
    known = set(c.docs)
    near: Ranked = []
    for doc in seeds:
        session, n = doc[1:].split(":")
        for other in (f"O{session}:{int(n) - 1}", f"O{session}:{int(n) + 1}"):
            if other in known and other not in seeds and other not in near:
                near.append(other)
    return near


def lifted(seeds: int, weight: float, power: float = 0.0) -> Variant:
    """The first ``seeds`` fused rows' episode neighbours that an arm found,
    each lifted by ``weight * c ** power / (k + rank in that list)``, ``c``
    its seed's agreement over 2 (``power`` 0: a fixed weight), then the page
    ordered by the arms' agreement. ``lifted(2, 2.0, 3.0)`` is what recall
    ships (services/rank/fusion.py, lift_neighbours)."""

    def fuse(c: Conversation, q: dict[str, Any]) -> Ranked:
        dense = c.dense(np.asarray(q["vector"], dtype=np.float32))
        base = rrf([q["lexical"], dense])
        agree = agreement_of(c, q)
        found = set(base)
        head = base[:seeds]
        lift: dict[str, float] = {}
        for seed in head:
            for near in episode_neighbours(c, [seed]):
                if near in found and near not in head and near not in lift:
                    share = agree.get(seed, 0.0) / 2
                    lift[near] = weight * share**power / (RRF_K + len(lift) + 1)
        score = defaultdict(float, {d: 0.0 for d in base})
        for ranked in (q["lexical"], dense):
            for rank, doc in enumerate(ranked, start=1):
                score[doc] += 1 / (RRF_K + rank)
        for doc, extra in lift.items():
            score[doc] += extra
        order = {d: i for i, d in enumerate(base)}
        fused = sorted(score, key=lambda d: (-score[d], order[d]))
        return by_agreement(c, q, fused)

    return fuse


def measure(ranked: Ranked, relevant: dict[str, int]) -> tuple[float, float]:
    top = ranked[:10]
    recall = sum(1 for d in top if d in relevant) / len(relevant)
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(top) if d in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(10, len(relevant))))
    return recall, dcg / ideal


def score(path: Path) -> list[dict[str, Any]]:
    conversations = {n: Conversation(raw) for n, raw in json.loads(path.read_text()).items()}
    variants: dict[str, Variant] = {
        "shipped: rrf, neighbours lifted by their seeds, page by agreement": lifted(2, 2.0, 3.0),
        "neighbours lifted w=0.3, seeds alike (before)": lifted(2, 0.3),
        "rrf, page by agreement": reordered(10, dense_zero=FLOOR),
        "rrf alone": plain,
    }
    variants |= {
        f"neighbours of top{k} lifted w={w}": lifted(k, w)
        for k in (1, 2, 3, 5, 10)
        for w in (0.2, 0.3, 0.4, 0.7, 1.0)
        if (k, w) != (2, 0.3)
    }
    variants |= {
        f"neighbours of top{k} lifted w={w} x seed^{p}": lifted(k, w, p)
        for k in (2, 3)
        for p in (1.0, 2.0, 3.0)
        for w in (0.7, 1.0, 1.5, 2.0)
        if (k, w, p) != (2, 2.0, 3.0)
    }
    variants |= {f"dense weight {w}": weighted(w) for w in (0.6, 0.8, 1.2)}
    variants |= {f"query feedback b={b} top{k}": feedback(b, k) for b in (0.3, 0.5) for k in (3, 5)}
    variants |= {f"neighbours of top{k} w={w}": neighbours(k, w) for k in (3, 5) for w in (0.3,)}
    variants |= {f"rrf top{k} by scores from 0": reordered(k) for k in (10, 20)}
    variants |= {"rrf top20 by scores from the floor": reordered(20, dense_zero=FLOOR)}
    variants |= {f"rrf top{k} by min-max scores": reordered(k, minmax=True) for k in (10, 20)}
    rows = []
    for name, fuse in variants.items():
        every: list[tuple[float, float]] = []
        by_category: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for c in conversations.values():
            for q in c.queries.values():
                m = measure(fuse(c, q), q["relevant"])
                every.append(m)
                by_category[str(q["category"])].append(m)
        mean = np.mean(every, axis=0)
        rows.append(
            {
                "variant": name,
                "recall@10": round(float(mean[0]), 3),
                "ndcg@10": round(float(mean[1]), 3),
                "categories": {
                    k: [round(float(x), 3) for x in np.mean(v, axis=0)]
                    for k, v in sorted(by_category.items())
                },
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump")
    d.add_argument("--out", type=Path, required=True)
    d.add_argument("--eval-dir", type=Path, default=Path("../shared/eval/locomo-dev"))
    s = sub.add_parser("score")
    s.add_argument("arms", type=Path)
    args = parser.parse_args(argv)
    if args.command == "dump":
        dump(args.eval_dir, args.out)
        return 0
    for row in score(args.arms):
        cats = " ".join(f"c{k} {r:.3f}/{n:.3f}" for k, (r, n) in row["categories"].items())
        figures = f"R@10 {row['recall@10']:.3f} nDCG@10 {row['ndcg@10']:.3f}"
        print(f"{row['variant']:32s} {figures}  {cats}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
