"""Query embedding cost by ONNX thread count, back to back and with idle gaps.

Not a test: prints p50 wall time and CPU time per query embedding (batch 1) of the
prepared bi-encoder, in this process, for each thread count.

    python -m benchmarks.onnx_threads [--queries 300] [--gap-ms 20]

The CPU column is process CPU (every thread) per call: what a busy machine pays.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from recallatron.settings import default_state_dir
from recallatron_devkit import synthetic
from services.embed.models import BiEncoder


def measure(model: BiEncoder, queries: list[str], gap: float) -> tuple[float, float]:
    for q in queries[:20]:  # warm up
        model.embed([q])
    wall: list[float] = []
    cpu_start = time.process_time()
    for q in queries[20:]:
        start = time.perf_counter()
        model.embed([q])
        wall.append(time.perf_counter() - start)
        if gap:
            time.sleep(gap)
    cpu = (time.process_time() - cpu_start) / len(wall)
    return statistics.median(wall) * 1000, cpu * 1000


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--gap-ms", type=float, default=20.0)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = p.parse_args()
    models = Path(os.environ.get("RECALLATRON_MODELS_DIR", default_state_dir() / "models"))
    queries = synthetic.queries(args.queries + 20, seed=3)
    print(f"{os.cpu_count()} cores; {args.queries} synthetic queries, batch 1")
    print("| threads | calls | p50 wall ms | CPU ms per call |")
    print("| --- | --- | --- | --- |")
    for threads in args.threads:
        model = BiEncoder(models / "all-MiniLM-L6-v2", threads=threads)
        for label, gap in (
            ("back to back", 0.0),
            (f"{args.gap_ms:g} ms apart", args.gap_ms / 1000),
        ):
            wall, cpu = measure(model, queries, gap)
            print(f"| {threads} | {label} | {wall:.2f} | {cpu:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
