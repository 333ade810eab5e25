"""The pictures of docs/benchmarks.md, drawn from recall_bench's results: the
latency percentile distribution (nines view) per mode at one and eight
clients and per query class, each size side by side, and CPU per recall by
process. `make bench` draws them; to draw them again from a saved run:

    python -m benchmarks.plots RESULTS.json --out docs/benchmarks
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recallatron_devkit.plots import grouped_bars, latency_nines


def _size(r: dict[str, Any]) -> str:
    return f"{r['memories']:,} memories"


def bench_pictures(
    results: Sequence[dict[str, Any]], directory: Path, suffix: str = ".svg"
) -> list[tuple[str, Path]]:
    """(caption, file) of each picture drawn into ``directory`` (SVG, or PNG
    with suffix ".png")."""
    drawn: list[tuple[str, Path]] = []
    for c in (1, 8):
        panels = [
            (
                _size(r),
                {
                    key.split("@c")[0]: s.get("distribution", [])
                    for key, s in r["closed"].items()
                    if key.endswith(f"@c{c}")
                },
            )
            for r in results
        ]
        what = "one client" if c == 1 else f"{c} clients"
        drawn.append(
            (
                f"Recall latency by percentile, {what}, one line per mode",
                latency_nines(
                    panels,
                    directory / f"latency-c{c}{suffix}",
                    f"recall latency by mode, {what} (closed loop)",
                ),
            )
        )
    key = "hybrid@c1"
    if all(key in r["closed"] for r in results):
        panels = [
            (
                _size(r),
                {
                    name: cls.get("distribution", [])
                    for name, cls in r["closed"][key].get("classes", {}).items()
                },
            )
            for r in results
        ]
        drawn.append(
            (
                "Hybrid recall latency by percentile, one client, one line per query class",
                latency_nines(
                    panels,
                    directory / f"latency-classes{suffix}",
                    "hybrid recall latency by query class, one client",
                ),
            )
        )
    cpu = {_size(r): r.get("stages", {}).get("cpu_ms", {}) for r in results}
    if any(cpu.values()):
        last = next(v for v in reversed(cpu.values()) if v)
        order = sorted(last, key=lambda name: -last[name])
        groups = {size: {p: values.get(p, 0.0) for p in order} for size, values in cpu.items()}
        drawn.append(
            (
                "CPU per hybrid recall (no rerank) by process",
                grouped_bars(
                    groups,
                    directory / f"cpu-per-recall{suffix}",
                    "CPU per hybrid recall by process",
                    "CPU ms per recall",
                ),
            )
        )
    return drawn


def markdown(drawn: Sequence[tuple[str, Path]], page: Path) -> list[str]:
    """Image lines for the page, paths relative to it."""
    lines = []
    for caption, path in drawn:
        rel = os.path.relpath(path.resolve(), page.resolve().parent)
        lines += [f"![{caption}]({Path(rel).as_posix()})", ""]
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", type=Path, help="recall_bench --json output")
    p.add_argument("--out", type=Path, default=Path("docs/benchmarks"))
    p.add_argument("--format", choices=("svg", "png"), default="svg")
    args = p.parse_args(argv)
    results = json.loads(args.results.read_text())
    for caption, path in bench_pictures(results, args.out, "." + args.format):
        print(f"{path}: {caption}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
