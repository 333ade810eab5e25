"""The prepared bi-encoder against the same graph with ONNX Runtime's transformer
fusions applied offline (one Attention operator per layer, SkipLayerNormalization,
BiasGelu, EmbedLayerNormalization: ``onnxruntime.transformers.optimizer``), both
run as the embed service runs them (``services.embed.models.make_session``, one
thread). Not a test: prints the fused operators, the lowest cosine between the
two graphs' vectors, and the p50 of each for a query (batch 1) and for a batch of
32 passages, calls interleaved, with the ratio fused / plain.

    python -m benchmarks.onnx_fusion [--queries 300] [--batches 20] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnxruntime.transformers import optimizer

from recallatron.settings import default_state_dir
from recallatron_devkit import synthetic
from services.embed.manifest import MODEL_FILE, TOKENIZER_FILE
from services.embed.models import load_tokenizer, make_session, pad_chunk

# all-MiniLM-L6-v2's shape, which the fusions must be told.
HEADS, HIDDEN, MAX_LENGTH = 12, 384, 256


def interleaved(
    plain: ort.InferenceSession, fused: ort.InferenceSession, feeds: list[dict[str, np.ndarray]]
) -> tuple[float, float]:
    """p50 ms of each session over the same feeds, taking turns at going first."""
    times: dict[int, list[float]] = {0: [], 1: []}
    for i, feed in enumerate(feeds):
        for which in (0, 1) if i % 2 else (1, 0):
            session = plain if which == 0 else fused
            started = time.perf_counter()
            session.run(None, feed)
            times[which].append((time.perf_counter() - started) * 1000)
    return statistics.median(times[0]), statistics.median(times[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models-dir", type=Path, default=default_state_dir() / "models")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    directory = args.models_dir / "all-MiniLM-L6-v2"
    fused_model = optimizer.optimize_model(
        str(directory / MODEL_FILE), model_type="bert", num_heads=HEADS, hidden_size=HIDDEN
    )
    used = {k: v for k, v in fused_model.get_fused_operator_statistics().items() if v}
    print(f"fused operators: {used}")
    with tempfile.TemporaryDirectory() as tmp:
        fused_path = Path(tmp) / MODEL_FILE
        fused_model.save_model_to_file(str(fused_path))
        plain = make_session(directory / MODEL_FILE, 1)
        fused = make_session(fused_path, 1)
    tokenizer = load_tokenizer(directory / TOKENIZER_FILE, MAX_LENGTH)
    names = [i.name for i in plain.get_inputs()]
    queries = synthetic.queries(args.queries)
    passages = [f"{m.title}\n{m.body}" for m in synthetic.memories(32 * args.batches)]
    lowest = 1.0
    for text in [*queries[:50], "", "hello", "会议改到下周三下午三点。🙂🚀"]:
        feed = pad_chunk([tokenizer.encode(text)], 0, names)
        a, b = plain.run(None, feed)[0][0], fused.run(None, feed)[0][0]
        lowest = min(lowest, float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))))
    print(f"lowest cosine, fused against plain: {lowest:.7f}")
    query_feeds = [pad_chunk([tokenizer.encode(q)], 0, names) for q in queries]
    batch_feeds = [
        pad_chunk([tokenizer.encode(p) for p in passages[i : i + 32]], 0, names)
        for i in range(0, len(passages), 32)
    ]
    for label, feeds in (("query", query_feeds), ("batch of 32", batch_feeds)):
        for round_ in range(1, args.rounds + 1):
            p50_plain, p50_fused = interleaved(plain, fused, feeds)
            print(
                f"{label}, round {round_}: plain p50 {p50_plain:.3f} ms, fused p50 "
                f"{p50_fused:.3f} ms, fused / plain {p50_fused / p50_plain:.3f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
