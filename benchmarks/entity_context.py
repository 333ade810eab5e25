"""How close two mention contexts must be to propose an entity pair: the
threshold of entity merge's close_context rule (CONTEXT_MIN_COSINE in
services/store/domain/entity_merge.py), measured on real text with the real model.

Not a test: prints the distribution of context cosines for pairs that are one
entity and pairs that are two, and for each candidate threshold the share of
each that would be proposed.

    python -m benchmarks.entity_context [--data DIR] [--max-false 0.01]

A mention context is what the store computes: the mean of the current-stamp
embeddings of the memories mentioning an entity (each memory embedded as
embed_input.compose makes it of the memory the eval writes for a document),
compared by cosine. The entities come from the LoCoMo dev data
(/work/shared/eval/locomo-dev, one workspace per conversation): each distinct
set of two or more documents that is one question's evidence stands for one
entity's mentions. Its documents, in corpus order, are dealt alternately into
two halves: the halves' contexts are a same-entity pair (one thing recorded as
two entities, each holding part of its mentions). Halves of two evidence sets of
one conversation that share no document are different-entity pairs (the rule
never proposes entities mentioned together); each pair of sets gives two, the
first half of each against the second of the other.

Two checks of how the contexts behave as they grow (an entity mentioned by
many memories): each speaker of a conversation (a document's title) as one
entity of many texts, split the same way; and unrelated contexts, two disjoint
random draws of k documents of one conversation each, whose cosine rises with k
as both means approach the workspace's mean.

The generated old store (recallatron_devkit/legacy_fixture.py) is not used: its
memory-to-entity edges are drawn at random, independently of the text, so its
same-entity and different-entity contexts are alike by construction.

Needs the prepared bi-encoder (RECALLATRON_MODELS_DIR, as the embed service).
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from recallatron.embed_input import EMBED_INPUT_VERSION, compose
from recallatron_devkit.beir import load_dataset, memory_text
from recallatron_devkit.load import models_dir as default_models_dir
from services.embed.manifest import BI_ENCODER_DIRNAME
from services.embed.models import BiEncoder
from services.store.domain.entity_merge import CONTEXT_MIN_COSINE

DATA = Path("/work/shared/eval/locomo-dev")


@dataclass(frozen=True)
class Entity:
    """One evidence set standing for one entity's mentions."""

    conversation: str
    docs: tuple[str, ...]

    @property
    def halves(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        return self.docs[0::2], self.docs[1::2]


@dataclass
class Pairs:
    same: list[float]
    different: list[float]
    entities: int
    conversations: int
    texts: int


def entities_of(data: Path) -> tuple[list[Entity], list[Entity], dict[str, str]]:
    """The evidence-set entities and the speaker entities of every
    conversation under ``data``, and the embed input of every document (keyed
    conversation/doc id)."""
    entities: list[Entity] = []
    speakers: list[Entity] = []
    inputs: dict[str, str] = {}
    for directory in sorted(p for p in data.iterdir() if (p / "corpus.jsonl").exists()):
        dataset = load_dataset(directory)
        order = {d.id: i for i, d in enumerate(dataset.documents)}
        for d in dataset.documents:
            inputs[f"{dataset.name}/{d.id}"] = compose(*memory_text(d))
        sets = {
            tuple(sorted((doc for doc in relevant if doc in order), key=order.__getitem__))
            for relevant in dataset.qrels.values()
        }
        entities += [Entity(dataset.name, s) for s in sorted(sets) if len(s) >= 2]
        by_speaker: dict[str, list[str]] = {}
        for d in dataset.documents:
            by_speaker.setdefault(d.title, []).append(d.id)
        speakers += [Entity(dataset.name, tuple(ids)) for _, ids in sorted(by_speaker.items())]
    return entities, speakers, inputs


def centroid(vectors: dict[str, np.ndarray], conversation: str, docs: Sequence[str]) -> np.ndarray:
    return np.mean([vectors[f"{conversation}/{d}"] for d in docs], axis=0)


def centered(vectors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each vector less its conversation's mean, as the store centres mention
    contexts on the mean of the memories it looks at (a mean of many memories
    otherwise drifts toward the workspace's mean, close to any other)."""
    means: dict[str, list[np.ndarray]] = {}
    for key, vector in vectors.items():
        means.setdefault(key.split("/", 1)[0], []).append(vector)
    mean = {c: np.mean(rows, axis=0) for c, rows in means.items()}
    return {k: v - mean[k.split("/", 1)[0]] for k, v in vectors.items()}


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def measure(entities: list[Entity], vectors: dict[str, np.ndarray]) -> Pairs:
    halves = [tuple(centroid(vectors, e.conversation, h) for h in e.halves) for e in entities]
    same = [cosine(a, b) for a, b in halves]
    different: list[float] = []
    for i, x in enumerate(entities):
        for j in range(i + 1, len(entities)):
            y = entities[j]
            if x.conversation != y.conversation or set(x.docs) & set(y.docs):
                continue
            different.append(cosine(halves[i][0], halves[j][1]))
            different.append(cosine(halves[j][0], halves[i][1]))
    return Pairs(
        same,
        different,
        len(entities),
        len({e.conversation for e in entities}),
        len({(e.conversation, d) for e in entities for d in e.docs}),
    )


def unrelated(vectors: dict[str, np.ndarray], k: int, draws: int, seed: int) -> list[float]:
    """Cosines of two disjoint random draws of ``k`` documents of one
    conversation, ``draws`` per conversation."""
    rng = np.random.default_rng(seed)
    by_conversation: dict[str, list[npt.NDArray[np.float32]]] = {}
    for key in sorted(vectors):
        by_conversation.setdefault(key.split("/", 1)[0], []).append(vectors[key])
    out: list[float] = []
    for rows in by_conversation.values():
        for _ in range(draws):
            pick = rng.choice(len(rows), 2 * k, replace=False)
            a = np.mean([rows[i] for i in pick[:k]], axis=0)
            b = np.mean([rows[i] for i in pick[k:]], axis=0)
            out.append(cosine(a, b))
    return out


def share(values: Sequence[float], threshold: float) -> float:
    return sum(v >= threshold for v in values) / len(values) if values else 0.0


def thresholds(low: float, high: float, step: float) -> list[float]:
    count = round((high - low) / step)
    return [round(low + k * step, 4) for k in range(count + 1)]


def recommend(pairs: Pairs, grid: Sequence[float], max_false: float) -> float | None:
    """The lowest threshold of the grid proposing at most ``max_false`` of the
    different-entity pairs."""
    return next((t for t in grid if share(pairs.different, t) <= max_false), None)


def quantiles(values: Sequence[float]) -> str:
    cuts = statistics.quantiles(values, n=20, method="inclusive")
    picked = {"p5": cuts[0], "p25": cuts[4], "p50": cuts[9], "p75": cuts[14], "p95": cuts[18]}
    return ", ".join(f"{k} {v:.3f}" for k, v in picked.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA, help="BEIR datasets, one per workspace")
    parser.add_argument("--models-dir", type=Path, default=None)
    parser.add_argument("--threads", type=int, default=2, help="ONNX threads")
    parser.add_argument("--low", type=float, default=0.70, help="lowest threshold shown")
    parser.add_argument("--high", type=float, default=0.98, help="highest threshold shown")
    parser.add_argument("--step", type=float, default=0.02)
    parser.add_argument("--draws", type=int, default=200, help="unrelated draws per conversation")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--raw", action="store_true", help="compare uncentred means (the rule before centring)"
    )
    parser.add_argument(
        "--max-false",
        type=float,
        default=0.01,
        help="most share of different-entity pairs the recommended threshold may propose",
    )
    args = parser.parse_args(argv)

    started = time.perf_counter()
    entities, speakers, inputs = entities_of(args.data)
    if not entities:
        print(f"no evidence set of two or more documents under {args.data}", file=sys.stderr)
        return 1
    models = args.models_dir or default_models_dir()
    model = BiEncoder(models / BI_ENCODER_DIRNAME, threads=args.threads)
    if model.embed_input_version != EMBED_INPUT_VERSION:
        print(
            f"the prepared model records embed input {model.embed_input_version!r}, "
            f"the store embeds {EMBED_INPUT_VERSION!r}",
            file=sys.stderr,
        )
        return 1
    keys = sorted(inputs)
    vectors = dict(zip(keys, model.embed([inputs[k] for k in keys]), strict=True))
    if not args.raw:
        vectors = centered(vectors)
    pairs = measure(entities, vectors)
    by_speaker = measure(speakers, vectors)
    grid = thresholds(args.low, args.high, args.step)
    best = recommend(pairs, grid, args.max_false)
    elapsed = time.perf_counter() - started

    command = shlex.join(["python", "-m", "benchmarks.entity_context", *sys.argv[1:]])
    print(f"command: {command}")
    print(
        f"{model.model_id}, embed input {EMBED_INPUT_VERSION}, "
        f"{'uncentred' if args.raw else 'centred on each conversation mean'}; {args.data.name}: "
        f"{pairs.conversations} conversations, {pairs.entities} evidence-set entities over "
        f"{pairs.texts} texts ({len(keys)} embedded); {len(pairs.same)} same-entity pairs, "
        f"{len(pairs.different)} different-entity pairs; {elapsed:.1f} s"
    )
    print(f"same-entity cosine: {quantiles(pairs.same)}")
    print(f"different-entity cosine: {quantiles(pairs.different)}")
    print()
    print("| threshold | same-entity pairs proposed (recall) | different-entity pairs proposed |")
    print("| --- | --- | --- |")
    for t in grid:
        same, different = share(pairs.same, t), share(pairs.different, t)
        mark = " (recommended)" if t == best else ""
        mark += " (current)" if abs(t - CONTEXT_MIN_COSINE) < 1e-9 else ""
        print(
            f"| {t:.2f}{mark} | {same:.1%} ({sum(v >= t for v in pairs.same)}) "
            f"| {different:.2%} ({sum(v >= t for v in pairs.different)}) |"
        )
    print()
    if best is None:
        print(f"no threshold up to {args.high:.2f} proposes at most {args.max_false:.0%} ", end="")
        print("of different-entity pairs")
        return 0
    print(
        f"recommended: {best:.2f}, the lowest threshold proposing at most "
        f"{args.max_false:.0%} of different-entity pairs "
        f"({share(pairs.different, best):.2%}); it keeps {share(pairs.same, best):.1%} "
        f"of same-entity pairs (current CONTEXT_MIN_COSINE {CONTEXT_MIN_COSINE:.2f})"
    )
    print()
    sizes = sorted(len(e.docs) for e in speakers)
    print(
        f"speakers as entities ({len(speakers)}, {sizes[0]}-{sizes[-1]} texts each): "
        f"same-entity cosine {min(by_speaker.same):.3f}-{max(by_speaker.same):.3f}, "
        f"different speakers of one conversation "
        f"{min(by_speaker.different):.3f}-{max(by_speaker.different):.3f}"
    )
    print()
    print(f"unrelated contexts ({args.draws} draws per conversation, seed {args.seed}):")
    print()
    print(f"| texts per side | median cosine | p95 | share >= {best:.2f} |")
    print("| --- | --- | --- | --- |")
    for k in (1, 2, 3, 5, 10):
        values = unrelated(vectors, k, args.draws, args.seed + k)
        p95 = statistics.quantiles(values, n=20, method="inclusive")[18]
        print(f"| {k} | {statistics.median(values):.3f} | {p95:.3f} | {share(values, best):.1%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
