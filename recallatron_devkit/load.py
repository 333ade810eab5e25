"""`recallatron load`: seeds a workspace with synthetic memories and drives
recall through the gateway, closed loop (--concurrency) or open loop (--rate),
recording latency in an HdrHistogram, overall and per query class.

The queries are a mix of classes (rare terms, common terms, entity names,
questions; or a file's own), sent round robin across the classes. No query is
sent twice in a run unless --allow-repeats is given: the run stops when a
class runs out of distinct queries, so a result or embedding cache cannot
make a figure look better than recall is. The number of distinct queries
sent is reported.

Open loop measures each request from its intended send time, so a stall
delays every later request's clock as well and cannot hide (no coordinated
omission). The loops, recorders and mix are in `loadgen`, the seeded workspace
in `seeding`; this module is the command around them.

A failed request is counted by its status (by its exception's type when it
failed with no gRPC error), not timed: the latencies are those of the
requests that succeeded, and a class (or run) none of whose requests
succeeded reports no latency ("all failed"; null in --json) rather than 0 ms.
When more than --max-failed-share (default 1%) of any class's requests
failed, the figures describe a failing stack, not its speed: the run still
prints them, then names each such class on stderr and exits 1."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from recallatron.client import Client
from recallatron.refusal import Refused
from recallatron.vocabulary import DEFAULT_MODE, DEFAULT_PURPOSE, MODES, PURPOSES
from recallatron_devkit import synthetic
from recallatron_devkit.loadgen import QueryMix, measure, open_loop_length
from recallatron_devkit.seeding import seed_workspace, wait_embedded


def read_queries(path: Path, allow_repeats: bool = False) -> list[str]:
    """One query a line, blank lines skipped; duplicates dropped unless
    repeats are allowed (then the file is sent as written)."""
    lines = [line.strip() for line in path.read_text().splitlines()]
    queries = [q for q in lines if q]
    if allow_repeats:
        return queries
    seen: set[str] = set()
    out = []
    for q in queries:
        key = synthetic.normal_query(q)
        if key not in seen:
            seen.add(key)
            out.append(q)
    return out


def parse_classes(value: str | None, has_file: bool) -> list[str]:
    """--classes: built-in class names and `file`; default all built-in, or
    only `file` with --queries. A given file is always in the mix."""
    if not value:
        return ["file"] if has_file else list(synthetic.QUERY_CLASSES)
    names = list(dict.fromkeys(n.strip() for n in value.split(",") if n.strip()))
    known = {*synthetic.QUERY_CLASSES, "file"}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown query class(es) {', '.join(unknown)}; known: {sorted(known)}")
    if "file" in names and not has_file:
        raise ValueError("class `file` needs --queries FILE")
    if has_file and "file" not in names:
        names.append("file")
    if not names:
        raise ValueError("--classes names no class")
    return names


# -- the command ------------------------------------------------------------------


@contextmanager
def _gateway(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """(gateway address, operator token): the given gateway, or a stack of
    our own whose data persists in --state-dir so seeding is reused."""
    if args.gateway:
        yield args.gateway, operator_token()
        return
    from recallatron_devkit.stack import FAST_JOB, Stack, own_config, running

    config = own_config(
        Path(args.state_dir),
        models_dir(),
        env=FAST_JOB,
        cross_encoder_dir=args.cross_encoder or "",
    )
    with running(Stack(config)) as stack:
        yield stack.gateway, stack.admin_token


def operator_token() -> str:
    """The operator token for --gateway: RECALLATRON_ADMIN_TOKEN, else the
    local stack's (as `recallatron eval` finds it); '' when neither is."""
    from recallatron.settings import state_dir

    token = os.environ.get("RECALLATRON_ADMIN_TOKEN", "")
    if not token:
        path = state_dir() / "admin-token"
        token = path.read_text().strip() if path.is_file() else ""
    return token


def models_dir() -> Path:
    """The prepared models: RECALLATRON_MODELS_DIR, else the local state's."""
    from recallatron.settings import default_state_dir

    return Path(os.environ.get("RECALLATRON_MODELS_DIR", "") or default_state_dir() / "models")


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def build_mix(args: argparse.Namespace) -> QueryMix:
    """The run's query mix from --classes, --queries, --pool-size and the
    seed; the rare words are those of the corpus seeded for this run."""
    has_file = bool(args.queries)
    classes = parse_classes(args.classes, has_file)
    builtin = [c for c in classes if c != "file"]
    per_class = args.pool_size
    if args.rate:
        # Open loop knows its length: enough per class for the whole run, up
        # to a bound (a rate no stack meets would build pools for hours).
        needed = int(args.rate * args.duration) // len(classes) + WARMUP + 1
        per_class = max(per_class, min(needed, OPEN_LOOP_POOL_BOUND))
    pools = synthetic.query_mix(per_class, args.memories, args.seed, args.seed + 1, builtin)
    if has_file:
        pools["file"] = read_queries(Path(args.queries), args.allow_repeats)
    # In the order asked for (query_mix keeps it; the file goes where named).
    return QueryMix({name: pools[name] for name in classes})


# Unrecorded requests before measuring.
WARMUP = 20
# Queries per class open loop builds at most for its schedule (unless
# --pool-size asks for more); a run needing more stops early, as when a class
# runs out.
OPEN_LOOP_POOL_BOUND = 50_000


def size_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the run's sizes, naming the option: a run of no
    length, workers or memories (or a wait for embedding of no number of
    seconds) would
    seed a workspace to measure nothing."""
    if not (math.isfinite(args.duration) and args.duration > 0):
        return f"--duration {args.duration}: must be a number of seconds more than 0"
    # --rate 0 is the default: the closed loop.
    if not (math.isfinite(args.rate) and args.rate >= 0):
        return f"--rate {args.rate}: must be more than 0 requests a second"
    if args.rate and open_loop_length(args.rate, args.duration) < 1:
        # Its schedule sends one request each 1/rate seconds from 0.
        return (
            f"--rate {args.rate} --duration {args.duration}: schedules no request "
            "(rate x duration must be at least 1)"
        )
    # inf is no limit; nan would wait without end, a negative time fail.
    if not args.embed_timeout >= 0:
        return f"--embed-timeout {args.embed_timeout}: must be a number of seconds, 0 or more"
    share = args.max_failed_share
    if not (math.isfinite(share) and 0 <= share <= 1):
        return f"--max-failed-share {share}: must be a share from 0 to 1"
    for option in ("concurrency", "memories", "members", "pool_size"):
        value = getattr(args, option)
        if value < 1:
            return f"--{option.replace('_', '-')} {value}: must be at least 1"
    return None


def run(args: argparse.Namespace) -> dict[str, Any]:
    log = _log
    # Input is checked before the stack starts or the gateway is called: a
    # bad size, --classes, --queries or --member is refused at once (exit 2).
    problem = size_problem(args)
    if problem:
        raise Refused(problem)
    try:
        mix = build_mix(args)
    except UnicodeDecodeError as exc:
        # A ValueError too, but of the file, not of --classes.
        raise Refused(
            f"--queries {args.queries}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
    except ValueError as exc:
        raise Refused(str(exc)) from None
    except OSError as exc:
        raise Refused(f"--queries {args.queries}: {exc.strerror or exc}") from None
    if not 0 <= args.member < args.members:
        raise Refused(f"--member {args.member}: the workspace has {args.members} members")
    if args.gateway and not operator_token():
        raise Refused("no operator token: set RECALLATRON_ADMIN_TOKEN")
    with _gateway(args) as (gateway, admin_token):
        admin = Client(gateway, admin_token, timeout=60)
        clients = seed_workspace(
            admin,
            gateway,
            args.memories,
            args.seed,
            Path(args.state_dir) / "load-creds",
            log,
            members=args.members,
        )
        wait_embedded(clients[0], args.embed_timeout)
        client = clients[args.member]
        rerank = args.rerank
        share = synthetic.visible_share(
            args.memories, args.seed, len(clients), args.member, args.purpose
        )
        log(
            f"recalling as member {args.member} for {args.purpose}: "
            f"{share:.1%} of the workspace visible; query pools "
            + ", ".join(f"{c} {len(p)}" for c, p in mix.pools.items())
        )

        def recall(query: str) -> Any:
            return client.recall(
                query,
                mode=args.mode,
                limit=10,
                purpose=args.purpose,
                skip_rerank=not rerank,
                timeout=10,
            )

        result = measure(
            recall,
            mix,
            args.duration,
            concurrency=args.concurrency,
            rate=args.rate,
            allow_repeats=args.allow_repeats,
            warmup=WARMUP,
        )
        if result["exhausted"]:
            log(
                f"stopped after {result['requests']} requests: a query class ran out of "
                "distinct queries (raise --pool-size, or pass --allow-repeats)"
            )
        result.update(
            mode=args.mode,
            memories=args.memories,
            rerank=rerank,
            concurrency=None if args.rate else args.concurrency,
            rate=args.rate or None,
            duration_s=args.duration,
            member=args.member,
            purpose=args.purpose,
            visible_share=round(share, 4),
        )
        return result


def add_parser(sub: Any) -> None:
    p = sub.add_parser("load", help="seed a workspace and load-test recall")
    p.add_argument("--memories", type=int, default=10_000)
    p.add_argument(
        "--members",
        type=int,
        default=8,
        help="members writing the seed: private and workspace memories, several purposes",
    )
    loop = p.add_mutually_exclusive_group()
    loop.add_argument("--concurrency", type=int, default=1, help="closed loop workers")
    loop.add_argument("--rate", type=float, default=0.0, help="open loop, requests per second")
    p.add_argument("--duration", type=float, default=30.0, help="seconds")
    p.add_argument("--mode", choices=MODES, default=DEFAULT_MODE)
    p.add_argument("--rerank", action=argparse.BooleanOptionalAction, default=False)
    p.add_argument("--cross-encoder", help="cross-encoder dir for the own stack")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--queries", help="a file of queries, one a line (class `file`)")
    p.add_argument(
        "--classes",
        help=f"comma-separated query classes ({', '.join(synthetic.QUERY_CLASSES)}, file); "
        "default all built-in, or only file with --queries (a given file is always included)",
    )
    p.add_argument(
        "--pool-size",
        type=int,
        default=10_000,
        help="distinct queries per built-in class (fewer when a class has fewer)",
    )
    p.add_argument(
        "--allow-repeats",
        action="store_true",
        help="wrap round a used-up pool instead of stopping; a cache may then flatter the figures",
    )
    p.add_argument(
        "--purpose",
        choices=PURPOSES,
        default=DEFAULT_PURPOSE,
        help="the purpose recalls are made for",
    )
    p.add_argument(
        "--member",
        type=int,
        default=0,
        help="index of the seeded member to recall as (0: the owner)",
    )
    p.add_argument("--gateway", default="", help="an existing gateway; default: own stack")
    p.add_argument(
        "--state-dir",
        default=os.environ.get("RECALLATRON_LOAD_STATE_DIR")
        or str(Path(tempfile.gettempdir()) / "recallatron-load"),
        help="where the own stack keeps its data (reused across runs)",
    )
    p.add_argument("--embed-timeout", type=float, default=3600.0)
    p.add_argument(
        "--max-failed-share",
        type=float,
        default=MAX_FAILED_SHARE,
        help="exit 1 when more than this share of any class's requests failed "
        f"(default {MAX_FAILED_SHARE}; 1 never does)",
    )
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.set_defaults(func=cmd_load)


def cmd_load(args: argparse.Namespace) -> int:
    result = no_latency_without_successes(run(args))
    if args.json:
        print(json.dumps(result))
    else:
        print(format_result(result))
    failing = too_many_failed(result, args.max_failed_share)
    for line in failing:
        print(f"error: {line}", file=sys.stderr)
    return 1 if failing else 0


# The share of a class's requests that may fail before the run exits 1.
MAX_FAILED_SHARE = 0.01
# A summary's latency figures, of the requests that succeeded.
LATENCY_KEYS = ("p50_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms", "mean_ms")


def _failed(summary: dict[str, Any]) -> int:
    return sum(summary["errors"].values())


def no_latency_without_successes(result: dict[str, Any]) -> dict[str, Any]:
    """The result with no latency (None) for the run and each class none of
    whose requests succeeded: an empty histogram reads 0 ms, as if instant."""
    for summary in (result, *result.get("classes", {}).values()):
        if _failed(summary) >= summary["requests"]:
            for key in LATENCY_KEYS:
                if key in summary:
                    summary[key] = None
    return result


def too_many_failed(result: dict[str, Any], max_share: float) -> list[str]:
    """One line for each class (the run, without classes) more than
    max_share of whose requests failed."""
    classes = result.get("classes") or {"": result}
    lines = []
    for name, summary in classes.items():
        failed, requests = _failed(summary), summary["requests"]
        if requests and failed / requests > max_share:
            lines.append(
                (f"class {name}: " if name else "") + f"{failed} of {requests} requests failed "
                f"({failed / requests:.1%}; --max-failed-share allows {max_share:.1%})"
            )
    return lines


def _untimed(requests: int) -> str:
    """Why a summary has no latency."""
    return f"all {requests} failed" if requests else "none sent"


def format_result(r: dict[str, Any]) -> str:
    loop = f"rate {r['rate']}/s" if r.get("rate") else f"concurrency {r['concurrency']}"
    errors = ", ".join(f"{k}: {v}" for k, v in sorted(r["errors"].items())) or "none"
    latency = (
        f"p50 {r['p50_ms']} ms  p95 {r['p95_ms']} ms  p99 {r['p99_ms']} ms  "
        f"p99.9 {r['p999_ms']} ms  max {r['max_ms']} ms"
        if r["p50_ms"] is not None
        else f"no latency: {_untimed(r['requests'])}"
    )
    lines = [
        f"recall {r['mode']} rerank={r['rerank']} at {r['memories']} memories, {loop}, "
        f"{r['duration_s']}s",
        latency,
        f"{r['requests']} requests, {r['throughput_rps']} req/s, errors: {errors}",
    ]
    if "member" in r:
        lines.append(
            f"as member {r['member']} for {r['purpose']} "
            f"({r['visible_share']:.1%} of the workspace visible)"
        )
    if "distinct_queries" in r:
        lines.append(
            f"{r['distinct_queries']} distinct queries, {r['repeats']} repeats"
            + (" (stopped early: pools used up)" if r.get("exhausted") else "")
        )
    classes = r.get("classes", {})
    if classes:
        width = max(len("class"), *(len(c) for c in classes))
        lines.append(f"{'class':<{width}}  {'p50 ms':>9}  {'p99 ms':>9}  {'requests':>8}")
        for name, c in classes.items():
            timed = (
                f"{c['p50_ms']:>9}  {c['p99_ms']:>9}"
                if c["p50_ms"] is not None
                else f"{_untimed(c['requests']):>20}"
            )
            lines.append(f"{name:<{width}}  {timed}  {c['requests']:>8}")
    return "\n".join(lines)
