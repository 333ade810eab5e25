"""The store's recall statements on custom plans against generic ones.

Not a test: prints a table. The store's own query code runs in this process
against the seeded workspace of ``recallatron load`` (the stack is started
for its Postgres), for the load mix's queries: the lexical arm, the dense arm
and the entity cards, each with Postgres's default plan choice (``auto``:
custom plans whenever it costs the generic one higher) and with
``plan_cache_mode = force_generic_plan``, in turns of queries of their own,
alternating which goes first. Prints p50 / mean ms per call and how many
answers differ (the same rows in the same order, the same card contents).

    python -m benchmarks.plan_cache [--memories 10000] [--state-prefix /tmp/rl]
        [--queries 400] [--member 0]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import services.store.domain.graph as graph_module
import services.store.domain.recall as recall_module
import services.store.infrastructure.db as db
from benchmarks import recall_bench as rb
from recallatron_devkit import synthetic
from recallatron_devkit.load import models_dir as load_models_dir
from recallatron_devkit.stack import running

MODES = ("auto", "force_generic_plan")


@contextmanager
def _plans(mode: str) -> Iterator[None]:
    """Every caller transaction of the store's recall and graph code with
    ``mode`` as its plan_cache_mode (the dense arm's too)."""
    original = db.caller_transaction

    def patched(pool: Any, caller: Any, settings: Mapping[str, str] | None = None) -> Any:
        return original(pool, caller, {**(settings or {}), "plan_cache_mode": mode})

    # The name each module imported from db: the one its code calls.
    patch = {"caller_transaction": patched}
    restore = {"caller_transaction": original}
    for module in (recall_module, graph_module):
        vars(module).update(patch)
    try:
        yield
    finally:
        for module in (recall_module, graph_module):
            vars(module).update(restore)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--state-prefix", default="/tmp/rl")
    parser.add_argument("--queries", type=int, default=400, help="calls per arm and mode")
    parser.add_argument("--member", type=int, default=0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--warmup", type=float, default=0)
    parser.add_argument(
        "--query-class", choices=rb.CLASSES, default=None, help="only this class of the mix"
    )
    args = parser.parse_args(argv)
    models = load_models_dir()
    from services.store.domain.recall import Filters
    from services.store.infrastructure.db import Caller

    with running(rb.new_stack(args.memories, args, models)) as stack:
        clients = rb.seeded(stack, args.memories, args)
        workspace_id, member_id = rb._identity(stack, clients[args.member])
        rb.prewarm(stack, workspace_id)
        local = rb.InProcess(stack, models, "")
        try:
            caller = Caller(workspace_id, member_id, "assist")
            # The model and input version the embedding job wrote the vectors with.
            model_id, version = local.bi.model_id, local.bi.embed_input_version
            pools = synthetic.query_mix(
                rb.POOL, args.memories, args.seed, args.seed + 1, rb.CLASSES
            )
            if args.query_class:
                pools = {args.query_class: pools[args.query_class]}
            queries = rb.mix_sequence(pools)[: 2 * args.queries + 40]
            vectors = local.bi.embed(queries)
            arms: dict[str, Callable[[int], Any]] = {
                "lexical arm": lambda i: [
                    (c.id, c.score)
                    for c in local.recall_queries.lexical(
                        caller, queries[i], 50, Filters()
                    ).candidates
                ],
                "dense arm": lambda i: [
                    (c.id, round(c.score, 6))
                    for c in local.recall_queries.dense(
                        caller, vectors[i], model_id, version, 50, Filters()
                    ).candidates
                ],
                "entity cards": lambda i: [
                    (c.entity.id, len(c.attributes), len(c.relations), len(c.mentioned_by))
                    for c in local.graph.named_in(caller, queries[i])
                ],
            }
            print(
                f"{args.memories:,} memories, member {args.member} for assist, "
                f"{args.queries} calls per arm and mode, "
                f"queries: {args.query_class or 'the whole mix'}"
            )
            print("| statement | plan_cache_mode | p50 ms | mean ms | answers differing |")
            print("| --- | --- | --- | --- | --- |")
            for name, arm in arms.items():
                for i in range(20):  # past the driver's prepare threshold
                    arm(i)
                times: dict[str, list[float]] = {m: [] for m in MODES}
                differing = 0
                turn = 40
                for start in range(40, 40 + 2 * args.queries, 2 * turn):
                    answers: dict[str, list[Any]] = {}
                    # Each mode answers the same queries, in turns, first in turn.
                    order = MODES if (start // (2 * turn)) % 2 == 0 else MODES[::-1]
                    for mode in order:
                        with _plans(mode):
                            answers[mode] = []
                            for i in range(start, start + turn):
                                t = time.perf_counter()
                                answers[mode].append(arm(i))
                                times[mode].append(time.perf_counter() - t)
                    differing += sum(a != b for a, b in zip(*answers.values(), strict=True))
                for mode in MODES:
                    print(
                        f"| {name} | {mode} | {statistics.median(times[mode]) * 1e3:.3f} "
                        f"| {statistics.mean(times[mode]) * 1e3:.3f} "
                        f"| {differing if mode == MODES[1] else ''} |"
                    )
        finally:
            local.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
