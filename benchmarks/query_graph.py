"""A recall's query embedding on the bi-encoder's exact graph against its query
graph (8-bit products; services/embed/export.py, quantize_for_queries), one
text a call on one ONNX thread, as the embed service runs a query. Not a test:
prints how many of the queries take the query graph, the lowest cosine between
the two graphs' vectors over them, and per round the p50 wall time and the CPU
time per query of each graph, calls interleaved, with the ratios.

    python -m benchmarks.query_graph [--queries 400] [--rounds 3]

Queries are `recallatron load`'s mix and the judged questions of
../shared/eval/locomo-dev when present.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from recallatron.settings import default_state_dir
from recallatron_devkit import synthetic
from recallatron_devkit.beir import load_dataset
from services.embed.manifest import BI_ENCODER_DIRNAME, QUERY_GRAPH_MIN_WORDS
from services.embed.models import BiEncoder, word_pieces

EVAL = Path(__file__).resolve().parent.parent.parent / "shared" / "eval" / "locomo-dev"


def questions(limit: int) -> list[str]:
    texts = synthetic.queries(limit)
    if EVAL.is_dir():
        for directory in sorted(p for p in EVAL.iterdir() if p.is_dir()):
            texts += [q.text for q in load_dataset(directory).queries]
    return texts


def timed(model: BiEncoder, text: str, queries: bool) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    if queries:
        model.embed_queries([text])
    else:
        model.embed([text])
    return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models-dir", type=Path, default=default_state_dir() / "models")
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    model = BiEncoder(args.models_dir / BI_ENCODER_DIRNAME, threads=1)
    if model.query_session is None:
        raise SystemExit("no query graph: run `recallatron prepare-models`")
    texts = questions(args.queries)
    routed = [t for t in texts if word_pieces(model.tokenize([t])[0]) >= QUERY_GRAPH_MIN_WORDS]
    exact = model.embed(routed)
    fast = np.concatenate([model.embed_queries([t]) for t in routed])
    lowest = float(np.min(np.sum(exact * fast, axis=1)))
    print(f"{len(routed)} of {len(texts)} queries take the query graph; lowest cosine {lowest:.6f}")
    for round_ in range(1, args.rounds + 1):
        runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        for i, text in enumerate(routed):
            for queries in (False, True) if i % 2 else (True, False):
                runs[queries].append(timed(model, text, queries))
        (we, ce), (wq, cq) = (
            (statistics.median(w for w, _ in runs[k]), statistics.mean(c for _, c in runs[k]))
            for k in (False, True)
        )
        print(
            f"round {round_}: exact p50 {we:.3f} ms (CPU {ce:.3f} ms), query graph p50 "
            f"{wq:.3f} ms (CPU {cq:.3f} ms); ratio p50 {wq / we:.3f}, CPU {cq / ce:.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
