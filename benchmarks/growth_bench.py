"""Recall's growth from one corpus size to another, measured interleaved (not
part of `make test`):

    python -m benchmarks.growth_bench --memories 10000 100000 --rounds 3 --duration 10

`recall_bench` measures one size after the other, so a machine whose speed
drifts within the hour (this one's does, by tens of percent) shows up in the
100k/10k ratio. This starts both sizes' stacks at once, on the workspaces
`recallatron load` / `recall_bench` seeded under --state-prefix, and runs them
in turns, round after round: for every mode and caller (the owner recalling for
assist, and the narrow caller, the owner recalling for audit), one closed-loop
run per size per round, each round on queries of its own (the mix's pools
split by round, so no query repeats). It prints the p50 of each size per class,
the median over the rounds, and their ratio."""

from __future__ import annotations

import argparse
import statistics
import sys

from benchmarks.recall_bench import (
    CLASSES,
    NARROW_MEMBER,
    NARROW_PURPOSE,
    POOL,
    _identity,
    closed,
    log,
    new_stack,
    prewarm,
    seeded,
)
from recallatron.client import Client
from recallatron_devkit import synthetic
from recallatron_devkit.load import models_dir

MODES = ("lexical", "dense", "hybrid")
CALLERS = (("owner, assist", 0, "assist"), ("narrow: owner, audit", NARROW_MEMBER, NARROW_PURPOSE))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--memories", type=int, nargs=2, default=[10_000, 100_000])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--members", type=int, default=8)
    p.add_argument("--state-prefix", default="/tmp/rl")
    args = p.parse_args(argv)
    models = models_dir()
    sizes = list(args.memories)
    stacks = {n: new_stack(n, args, models) for n in sizes}
    clients: dict[int, list[Client]] = {}
    pools: dict[int, dict[str, list[str]]] = {}
    try:
        for n, stack in stacks.items():
            stack.start()
            clients[n] = seeded(stack, n, args)
            pools[n] = synthetic.query_mix(POOL, n, args.seed, args.seed + 1, CLASSES)
            prewarm(stack, _identity(stack, clients[n][0])[0])
            for mode in MODES:  # warm, not recorded
                closed(clients[n][0], pools[n], mode, False, 1, 3.0)
        # (caller, mode, size) -> class -> p50 of each round
        p50s: dict[tuple[str, str, int], dict[str, list[float]]] = {}
        for r in range(args.rounds):
            for label, member, purpose in CALLERS:
                for mode in MODES:
                    for n in sizes:
                        own = {c: q[r :: args.rounds] for c, q in pools[n].items()}
                        run = closed(
                            clients[n][member], own, mode, False, 1, args.duration, purpose
                        )
                        cell = p50s.setdefault((label, mode, n), {})
                        cell.setdefault("all", []).append(run["p50_ms"])
                        for c, v in run["classes"].items():
                            cell.setdefault(c, []).append(v["p50_ms"])
                        log(f"round {r} {label} {mode} {n}: p50 {run['p50_ms']}")
    finally:
        for stack in stacks.values():
            stack.stop()
    small, large = sizes
    columns = ["all", *CLASSES]
    print(f"Command: `python -m benchmarks.growth_bench {' '.join(sys.argv[1:])}`\n")
    print(
        f"p50 ms at {small:,} / {large:,} memories (median of {args.rounds} interleaved "
        "rounds), and the ratio:\n"
    )
    print("| caller | mode | " + " | ".join(columns) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in columns) + " |")
    for label, _, _ in CALLERS:
        for mode in MODES:
            cells = []
            for c in columns:
                a = statistics.median(p50s[(label, mode, small)][c])
                b = statistics.median(p50s[(label, mode, large)][c])
                cells.append(f"{a:.1f} / {b:.1f}: {b / a:.2f}")
            print(f"| {label} | {mode} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
