"""Query embeddings through the embed service with and without the combiner.

Not a test: prints a table. Two embed processes run side by side, one with
``RECALLATRON_QUERY_BATCH_MAX=1`` (every call its own ONNX run), one with the
default; for each number of concurrent clients they take turns, each turn a
burst of single-text Embed calls (the recall's query embedding). Printed per
variant: queries/s, p50/p99 latency of one call, the server's CPU per query
(from /proc) and the mean texts per ONNX run (the server's histogram).

    python -m benchmarks.query_combining [--clients 1 2 4 8] [--calls 400] [--turns 4]

Needs prepared models (`recallatron prepare-models`).
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks import recall_bench as rb
from benchmarks.embed_bench import WORDS
from recallatron.v1 import embed_pb2
from recallatron_devkit.embed_fixture import EmbedProcess
from recallatron_devkit.stack import free_port
from services.embed.settings import EmbedSettings

VARIANTS = {"one run per call": "1", "combined": str(EmbedSettings().query_batch_max)}
BATCH_HISTOGRAM = "recallatron_embed_query_batch_texts"


def _cpu_seconds(pid: int) -> float:
    return rb.tree_cpu({"server": pid})["server"]


def _batch_texts(port: int) -> tuple[float, float]:
    """(sum, count) of the combiner's texts-per-run histogram."""
    scraped = rb.scrape(port, BATCH_HISTOGRAM, "")
    return scraped.get(("", "sum"), 0.0), scraped.get(("", "count"), 0.0)


def _turn(process: EmbedProcess, clients: int, calls: int, rng: random.Random) -> list[float]:
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))) for _ in range(calls)]

    def one(text: str) -> float:
        start = time.perf_counter()
        process.stub.Embed(embed_pb2.EmbedRequest(texts=[text]), timeout=30)
        return time.perf_counter() - start

    with ThreadPoolExecutor(clients) as pool:
        return list(pool.map(one, texts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--calls", type=int, default=400, help="calls per turn")
    parser.add_argument("--turns", type=int, default=4, help="turns per variant and clients")
    parser.add_argument("--models-dir", type=Path, default=EmbedSettings().models_dir)
    args = parser.parse_args(argv)
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="combining-") as tmp:
        ports = {name: free_port() for name in VARIANTS}
        processes = {
            name: EmbedProcess(
                Path(tmp) / name.replace(" ", "-"),
                {
                    "RECALLATRON_MODELS_DIR": str(args.models_dir),
                    "RECALLATRON_QUERY_BATCH_MAX": v,
                    "RECALLATRON_METRICS_PORT": str(ports[name]),
                },
            )
            for name, v in VARIANTS.items()
        }
        try:
            for process in processes.values():
                process.wait_serving()
                _turn(process, 2, 50, rng)  # warm-up
            print(
                "| clients | variant | queries/s | p50 ms | p99 ms | server CPU ms/query"
                " | texts per ONNX run |"
            )
            print("| --- | --- | --- | --- | --- | --- | --- |")
            for clients in args.clients:
                seen: dict[str, dict[str, float]] = {
                    n: {"wall": 0.0, "cpu": 0.0, "calls": 0.0} for n in processes
                }
                latencies: dict[str, list[float]] = {n: [] for n in processes}
                before = {n: _batch_texts(ports[n]) for n in processes}
                for turn in range(args.turns):
                    order = list(processes) if turn % 2 == 0 else list(reversed(processes))
                    for name in order:
                        process = processes[name]
                        cpu, start = _cpu_seconds(process.process.pid), time.perf_counter()
                        latencies[name] += _turn(process, clients, args.calls, rng)
                        seen[name]["wall"] += time.perf_counter() - start
                        seen[name]["cpu"] += _cpu_seconds(process.process.pid) - cpu
                        seen[name]["calls"] += args.calls
                for name in processes:
                    total, count = _batch_texts(ports[name])
                    runs = count - before[name][1]
                    per_run = (total - before[name][0]) / runs if runs else 1.0
                    s, lat = seen[name], latencies[name]
                    print(
                        f"| {clients} | {name} | {s['calls'] / s['wall']:.0f} "
                        f"| {statistics.median(lat) * 1e3:.2f} "
                        f"| {statistics.quantiles(lat, n=100)[98] * 1e3:.2f} "
                        f"| {s['cpu'] / s['calls'] * 1e3:.2f} | {per_run:.2f} |"
                    )
        finally:
            for process in processes.values():
                process.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
