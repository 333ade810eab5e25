"""Recall latency of two revisions, query by query, both stacks up at once.

Not a test. :mod:`benchmarks.ab_compare` runs the revisions in turns, a run
each; on a shared machine one run's p50 moves by 1-2 ms from the next, as
much as most changes are worth. Here both revisions' stacks run side by side
(each on its own copy of the seeded data directory), and every query of the
mix goes to both, in the order A B B A, so that drift, order and warm caches
fall on both alike:

    python -m benchmarks.ab_interleaved --before <rev> [--after HEAD]
        [--memories 10000] [--state-prefix /tmp/rl] [--queries 2000]

The "after" stack uses ``{state-prefix}{memories}`` (seeded when missing, as
`recallatron load` seeds it); the "before" stack a copy of it made for the
run beside it (``{state-prefix}ab-before-{memories}``, removed after). Both
revisions must share the schema. Hybrid, no rerank, concurrency 1, the load
mix of `recallatron load`. Prints p50, p90 and p99 of each and the
p50 ratio, with a bootstrap interval of that ratio.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks import recall_bench as rb
from benchmarks.ab_compare import REPO, remove_worktree, revision_arguments, worktree
from recallatron.client import Client
from recallatron_devkit import synthetic
from recallatron_devkit.load import models_dir as load_models_dir
from recallatron_devkit.stack import Stack, own_config, running


def _stack(state_dir: Path, tree: Path, models: Path) -> Stack:
    # The services run from the revision's tree (PYTHONPATH of the children).
    return Stack(own_config(state_dir, models, env={"PYTHONPATH": str(tree)}))


def _ratio_interval(
    before: list[float], after: list[float], rounds: int = 1000
) -> tuple[float, float]:
    """A 95% bootstrap interval of p50(after) / p50(before), pairs resampled."""
    rng = random.Random(7)
    n = len(before)
    ratios = []
    for _ in range(rounds):
        idx = [rng.randrange(n) for _ in range(n)]
        ratios.append(
            statistics.median(after[i] for i in idx) / statistics.median(before[i] for i in idx)
        )
    ratios.sort()
    return ratios[int(0.025 * rounds)], ratios[int(0.975 * rounds)]


def main() -> int:
    p = argparse.ArgumentParser()
    revision_arguments(p)
    p.add_argument("--queries", type=int, default=2000)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--members", type=int, default=8)
    args = p.parse_args()
    n = args.memories
    models = load_models_dir()
    with tempfile.TemporaryDirectory(prefix="ab-interleaved-") as tmp:
        # The services start with this working directory first on their path:
        # a neutral one, so each imports its own revision's tree.
        os.chdir(tmp)
        trees = {
            "before": worktree(args.before, Path(tmp) / "before"),
            "after": REPO if args.after == "HEAD" else worktree(args.after, Path(tmp) / "after"),
        }
        after_state = Path(f"{args.state_prefix}{n}")
        # Seeded (when missing) by the after revision's own stack.
        with running(_stack(after_state, trees["after"], models)) as stack:
            rb.seeded(stack, n, args)
        before_prefix = f"{args.state_prefix}ab-before-"
        copy = Path(f"{before_prefix}{n}")
        rb.copy_state(after_state, copy)
        try:
            with (
                running(_stack(copy, trees["before"], models)) as sb,
                running(_stack(after_state, trees["after"], models)) as sa,
            ):
                clients: dict[str, Client] = {
                    "before": rb.seeded(
                        sb, n, argparse.Namespace(**{**vars(args), "state_prefix": before_prefix})
                    )[0],
                    "after": rb.seeded(sa, n, args)[0],
                }
                for name, stack in (("before", sb), ("after", sa)):
                    rb.prewarm(stack, rb._identity(stack, clients[name])[0])
                pools = synthetic.query_mix(rb.POOL, n, args.seed, args.seed + 1, rb.CLASSES)
                queries = rb.mix_sequence(pools)
                times: dict[str, list[float]] = {"before": [], "after": []}
                for i in range(args.warmup + args.queries):
                    q = queries[i % len(queries)]
                    order = ("before", "after") if i % 2 == 0 else ("after", "before")
                    for name in order:
                        t = time.perf_counter()
                        clients[name].recall(q, mode="hybrid", skip_rerank=True)
                        if i >= args.warmup:
                            times[name].append((time.perf_counter() - t) * 1000)
        finally:
            shutil.rmtree(copy, ignore_errors=True)
            for tree in trees.values():
                if tree != REPO:
                    remove_worktree(tree)
    b, a = times["before"], times["after"]
    low, high = _ratio_interval(b, a)
    print(
        f"hybrid recall, no rerank, {n:,} memories, {args.queries} queries each, one client, "
        f"interleaved query by query; before = {args.before}, after = {args.after}"
    )
    print("| revision | p50 ms | p90 ms | p99 ms | mean ms |")
    print("| --- | --- | --- | --- | --- |")
    for name, ts in (("before", b), ("after", a)):
        cuts = statistics.quantiles(ts, n=100)
        print(
            f"| {name} | {statistics.median(ts):.2f} | {cuts[89]:.2f} | "
            f"{cuts[98]:.2f} | {statistics.mean(ts):.2f} |"
        )
    print(
        f"p50 after / before: {statistics.median(a) / statistics.median(b):.3f} "
        f"(95% bootstrap interval {low:.3f}-{high:.3f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
