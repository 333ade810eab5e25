"""Write throughput: `remember` from concurrent writers (not part of `make test`):

    python -m benchmarks.write_bench --writers 8 --duration 20 [--same-member] [--private] [--json]

Starts its own stack (embedded Postgres in a fresh state directory, every
service a process on loopback, the embedding job running as the stack starts
it, so it embeds the new memories during the run), creates a workspace and
--members members with a token each, then runs --writers closed-loop writers,
writer k as member k % members (--same-member: all as one member), each with
its own gRPC channel, calling remember with synthetic text (workspace
audience, or with --private the writer alone; purpose assist). A warm-up, not
recorded, precedes --duration seconds of measurement; latency per call goes to `recallatron load`'s
HdrHistogram recorder. Compare --writers 8 with --writers 1: writers that
queue on one lock add no throughput."""

from __future__ import annotations

import argparse
import itertools
import json
import math
import shlex
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import services
from benchmarks.recall_bench import cpu_roots, tree_cpu
from recallatron.client import Client
from recallatron_devkit import synthetic
from recallatron_devkit.load import models_dir
from recallatron_devkit.loadgen import Recorder, run_closed_loop
from recallatron_devkit.stack import FAST_JOB, Stack, own_config, running

Text = tuple[str, str, str]  # kind, title, body


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def texts(writers: int, per_writer: int, seed: int) -> list[list[Text]]:
    """Each writer's own synthetic memories (its own seed), reused in turn."""
    return [
        [(m.kind, m.title, m.body) for m in synthetic.memories(per_writer, seed=seed + 1000 * w)]
        for w in range(writers)
    ]


def make_call(
    clients: list[Client], pool: list[list[Text]], position: list[int], private: bool = False
) -> Any:
    """A closed-loop call: each worker thread takes the next writer slot on
    its first call and keeps it (its client and its texts)."""
    local = threading.local()
    slots = itertools.count()

    def call(_: int) -> Any:
        if not hasattr(local, "writer"):
            local.writer = next(slots)
        w = local.writer
        kind, title, body = pool[w][position[w] % len(pool[w])]
        position[w] += 1
        # --private: the tool's default audience, the writer alone.
        audience = None if private else "workspace"
        return clients[w].remember(title, body, kind, audience_to=audience, purpose="assist")

    return call


def run(args: argparse.Namespace) -> dict[str, Any]:
    own_dir = not args.state_dir
    state_dir = Path(args.state_dir or tempfile.mkdtemp(prefix="recallatron-write-"))
    stack = Stack(
        own_config(state_dir, models_dir(), env=FAST_JOB, embedding_job=not args.no_embedding_job)
    )
    log(f"code: {Path(services.__file__).parent.parent}; state: {state_dir}")
    with running(stack, remove_state=own_dir):
        admin = Client(stack.gateway, stack.admin_token, timeout=60)
        ws = admin.create_workspace(f"write-{int(time.time() * 1000)}").workspace
        tokens: list[str] = []
        for k in range(1 if args.same_member else args.members):
            member = admin.create_member(ws.id, f"writer{k}", owner=k == 0).member
            tokens.append(admin.create_token(member.id, "write-bench").token)
        clients = [Client(stack.gateway, tokens[w % len(tokens)]) for w in range(args.writers)]
        pool = texts(args.writers, args.texts, args.seed)
        position = [0] * args.writers
        run_closed_loop(
            make_call(clients, pool, position, args.private), args.writers, args.warmup, Recorder()
        )
        before = clients[0].status()
        roots = cpu_roots(stack)
        cpu_before = tree_cpu(roots)
        recorder = Recorder()
        elapsed = run_closed_loop(
            make_call(clients, pool, position, args.private), args.writers, args.duration, recorder
        )
        cpu_after = tree_cpu(roots)
        after = clients[0].status()
    s = recorder.summary(elapsed)
    # CPU of each process (with its children: Postgres's backends) over the
    # measured seconds, per acknowledged remember.
    done = max(1, int(s["requests"]))
    cpu_ms = {k: round(1000 * (cpu_after[k] - cpu_before[k]) / done, 3) for k in roots}
    return {
        "command": shlex.join([sys.executable, "-m", "benchmarks.write_bench", *sys.argv[1:]]),
        "code": str(Path(services.__file__).parent.parent),
        "writers": args.writers,
        "members": min(len(tokens), args.writers),
        "embedding_job": not args.no_embedding_job,
        "duration_s": round(elapsed, 2),
        "remember_per_s": s["throughput_rps"],
        "p50_ms": s["p50_ms"],
        "p95_ms": s["p95_ms"],
        "p99_ms": s["p99_ms"],
        "max_ms": s["max_ms"],
        "requests": s["requests"],
        "errors": s["errors"],
        "embedded_during_run": after.embedded - before.embedded,
        "memories_at_end": after.memories,
        "cpu_ms_per_remember": {**cpu_ms, "all": round(sum(cpu_ms.values()), 3)},
    }


def size_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the run's sizes, naming the option (as `recallatron
    load` does): a run of no writers, members, texts or seconds would start a
    stack to measure nothing."""
    if not (math.isfinite(args.duration) and args.duration > 0):
        return f"--duration {args.duration}: must be a number of seconds more than 0"
    if not (math.isfinite(args.warmup) and args.warmup >= 0):
        return f"--warmup {args.warmup}: must be a number of seconds, 0 or more"
    for option in ("writers", "members", "texts"):
        value = getattr(args, option)
        if value < 1:
            return f"--{option} {value}: must be at least 1"
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--writers", type=int, default=8)
    p.add_argument("--members", type=int, default=8, help="members the writers write as")
    p.add_argument("--same-member", action="store_true", help="every writer as one member")
    p.add_argument("--private", action="store_true", help="each memory for its writer alone")
    p.add_argument("--duration", type=float, default=20.0, help="seconds measured")
    p.add_argument("--warmup", type=float, default=3.0, help="seconds, not recorded")
    p.add_argument("--texts", type=int, default=5000, help="synthetic memories per writer")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--no-embedding-job", action="store_true", help="stack without the job")
    p.add_argument("--state-dir", default="", help="default: a fresh temporary one, removed")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    problem = size_problem(args)
    if problem:
        # Refused before the stack starts, as every CLI refusal: exit 2.
        print(f"error: {problem}", file=sys.stderr)
        return 2
    r = run(args)
    if args.json:
        print(json.dumps(r))
        return 0
    errors = ", ".join(f"{k}: {v}" for k, v in sorted(r["errors"].items())) or "none"
    print(
        f"$ {r['command']}\n"
        f"code {r['code']}; {r['writers']} writers as {r['members']} member(s); "
        f"embedding job {'on' if r['embedding_job'] else 'off'}\n"
        f"remember {r['remember_per_s']}/s ({r['requests']} in {r['duration_s']} s)  "
        f"p50 {r['p50_ms']} ms  p99 {r['p99_ms']} ms  max {r['max_ms']} ms  errors: {errors}\n"
        f"embedded during the run: {r['embedded_during_run']}; "
        f"memories at the end: {r['memories_at_end']}\n"
        "CPU ms per remember: " + ", ".join(f"{k} {v}" for k, v in r["cpu_ms_per_remember"].items())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
