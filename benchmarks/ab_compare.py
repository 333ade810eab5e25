"""Recall latency of two revisions of this repository, interleaved on one machine.

Not a test. A shared machine drifts by tens of percent within an hour, so a
number measured today is not comparable with one from yesterday; this runs
each revision's own `recallatron load` (its own stack, on the same seeded data
directory) in turns, round after round, and prints the runs side by side.

    python -m benchmarks.ab_compare --before <rev> [--after HEAD] [--memories 10000]
        [--state-prefix /tmp/rl] [--rounds 2] [--duration 20] [--concurrency 1 8]

The data directory is seeded by the first run when it is not already (see
`recallatron load`); both revisions must share its schema.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def worktree(rev: str, where: Path) -> Path:
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(where), rev],
        check=True,
        capture_output=True,
    )
    return where


def remove_worktree(tree: Path) -> None:
    """Removes a tree :func:`worktree` added (what is left of it, if anything)."""
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)],
        check=False,
        capture_output=True,
    )


def load(tree: Path, args: argparse.Namespace, concurrency: int, models: Path) -> dict[str, Any]:
    """One run of the tree's own load tool, in its own stack."""
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "RECALLATRON_MODELS_DIR": str(models),
    }
    command = [
        sys.executable,
        "-m",
        "recallatron_cli.main",
        "load",
        "--state-dir",
        f"{args.state_prefix}{args.memories}",
        "--memories",
        str(args.memories),
        "--concurrency",
        str(concurrency),
        "--duration",
        str(args.duration),
        "--mode",
        "hybrid",
        "--no-rerank",
        "--json",
    ]
    out = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout))


def revision_arguments(p: argparse.ArgumentParser) -> None:
    """The two revisions and the seeded data they run on (this and ab_interleaved)."""
    p.add_argument("--before", required=True)
    p.add_argument("--after", default="HEAD")
    p.add_argument("--memories", type=int, default=10_000)
    p.add_argument("--state-prefix", default="/tmp/rl")


def main() -> int:
    p = argparse.ArgumentParser()
    revision_arguments(p)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--duration", type=float, default=20.0)
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    args = p.parse_args()
    from recallatron.settings import default_state_dir

    models = Path(os.environ.get("RECALLATRON_MODELS_DIR", default_state_dir() / "models"))
    models = models.resolve()
    with tempfile.TemporaryDirectory(prefix="recallatron-ab-") as tmp:
        trees = {
            "before": worktree(args.before, Path(tmp) / "before"),
            "after": worktree(args.after, Path(tmp) / "after"),
        }
        runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
        try:
            for round_no in range(args.rounds):
                for label, tree in trees.items():
                    for c in args.concurrency:
                        r = load(tree, args, c, models)
                        runs.setdefault((label, c), []).append(r)
                        print(
                            f"round {round_no + 1} {label} c{c}: p50 {r['p50_ms']} "
                            f"p99 {r['p99_ms']} req/s {r['throughput_rps']}",
                            file=sys.stderr,
                            flush=True,
                        )
        finally:
            for tree in trees.values():
                remove_worktree(tree)
    print(
        f"hybrid recall, no rerank, {args.memories:,} memories, {args.duration:g} s per run, "
        f"{args.rounds} rounds interleaved; before = {args.before}, after = {args.after}"
    )
    print("| revision | concurrency | p50 ms (each round) | p99 ms (each round) | req/s (median) |")
    print("| --- | --- | --- | --- | --- |")
    for (label, c), rs in runs.items():
        p50s = " / ".join(str(r["p50_ms"]) for r in rs)
        p99s = " / ".join(str(r["p99_ms"]) for r in rs)
        rps = round(statistics.median(r["throughput_rps"] for r in rs), 1)
        print(f"| {label} | {c} | {p50s} | {p99s} | {rps} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
