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
omission)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import grpc
from hdrh.histogram import HdrHistogram

from recallatron.client import Client
from recallatron.progress import Progress
from recallatron.vocabulary import DEFAULT_MODE, DEFAULT_PURPOSE, MODES, PURPOSES
from recallatron_devkit import synthetic

# Microseconds, up to a minute, 3 significant digits.
_LOWEST_US, _HIGHEST_US, _DIGITS = 1, 60_000_000, 3


@dataclass
class Recorder:
    """Latencies and outcomes of many concurrent calls."""

    histogram: HdrHistogram = field(
        default_factory=lambda: HdrHistogram(_LOWEST_US, _HIGHEST_US, _DIGITS)
    )
    errors: Counter[str] = field(default_factory=Counter)
    requests: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, latency_s: float, error: str | None = None) -> None:
        micros = min(max(int(latency_s * 1e6), _LOWEST_US), _HIGHEST_US)
        with self._lock:
            self.requests += 1
            if error is None:
                self.histogram.record_value(micros)
            else:
                self.errors[error] += 1

    def summary(self, elapsed_s: float) -> dict[str, Any]:
        h = self.histogram

        def ms(percentile: float) -> float:
            return round(int(h.get_value_at_percentile(percentile)) / 1000.0, 3)

        return {
            "p50_ms": ms(50),
            "p95_ms": ms(95),
            "p99_ms": ms(99),
            "p999_ms": ms(99.9),
            "max_ms": round(h.get_max_value() / 1000.0, 3),
            "mean_ms": round(h.get_mean_value() / 1000.0, 3),
            "throughput_rps": round(self.requests / elapsed_s, 2) if elapsed_s > 0 else 0.0,
            "requests": self.requests,
            "errors": dict(self.errors),
            "distribution": self.distribution(),
        }

    def distribution(self) -> list[list[float]]:
        """[percentile, ms] pairs spaced evenly on the nines scale (0, 90, 99,
        99.9, ... in tenths of a decade) up to the last percentile the sample
        count resolves, then the maximum: the data of an HdrHistogram
        percentile plot. Empty without samples."""
        h = self.histogram
        count = h.get_total_count()
        if not count:
            return []
        points = []
        for step in range(NINES_STEPS + 1):
            percentile = 100.0 * (1.0 - 10.0 ** (-step / 10.0))
            # Beyond 1 - 1/count every percentile is the maximum.
            if step and (1.0 - percentile / 100.0) * count < 1.0 - 1e-9:
                break
            points.append(
                [round(percentile, 5), round(h.get_value_at_percentile(percentile) / 1000.0, 3)]
            )
        points.append([100.0, round(h.get_max_value() / 1000.0, 3)])
        return points


# Five nines (99.999%) in tenths of a decade.
NINES_STEPS = 50


class QueryMix:
    """Queries by class, sent round robin across the classes: request i is
    class i % k's (i // k)-th query, wrapping round a class's pool only when
    it is used up. Counts the queries sent and how many were repeats."""

    def __init__(self, pools: dict[str, list[str]]) -> None:
        empty = [name for name, pool in pools.items() if not pool]
        if not pools or empty:
            raise ValueError(f"no queries for class(es) {', '.join(empty) or '(none given)'}")
        self.pools = pools
        self.classes = list(pools)
        self._lock = threading.Lock()
        self._sent: set[str] = set()
        self.requests: Counter[str] = Counter()
        self.repeats: Counter[str] = Counter()

    def class_of(self, i: int) -> str:
        return self.classes[i % len(self.classes)]

    def at(self, i: int) -> str:
        pool = self.pools[self.class_of(i)]
        return pool[(i // len(self.classes)) % len(pool)]

    def capacity(self) -> int:
        """Requests that can be sent before any query repeats: class j's
        first repeat is request len(pool_j) * k + j."""
        k = len(self.classes)
        return min(len(self.pools[c]) * k + j for j, c in enumerate(self.classes))

    def take(self, i: int) -> str:
        """Request i's query, counted (compared by normal_query, as a cache
        folding case and spaces would)."""
        query = self.at(i)
        key = synthetic.normal_query(query)
        with self._lock:
            name = self.class_of(i)
            self.requests[name] += 1
            if key in self._sent:
                self.repeats[name] += 1
            self._sent.add(key)
        return query

    def reset_counts(self) -> None:
        """Forgets the counts (not what was sent: a measured query equal to a
        warm-up one is still a repeat)."""
        with self._lock:
            self.requests.clear()
            self.repeats.clear()

    def distinct(self, name: str | None = None) -> int:
        """Distinct queries sent since the counts were reset (of one class)."""
        names = self.classes if name is None else [name]
        return sum(self.requests[n] - self.repeats[n] for n in names)


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


def open_loop_offsets(rate: float, duration_s: float) -> list[float]:
    """Intended send times (seconds from start) of a constant-rate schedule."""
    if rate <= 0 or duration_s <= 0:
        return []
    count = int(rate * duration_s)
    return [i / rate for i in range(count)]


def _outcome(call: Callable[[], Any]) -> str | None:
    try:
        call()
    except grpc.RpcError as exc:
        return str(exc.code().name)
    return None


def run_closed_loop(
    call: Callable[[int], Any],
    concurrency: int,
    duration_s: float,
    recorder: Recorder,
    by_class: Callable[[int], Recorder] | None = None,
    max_requests: int | None = None,
) -> float:
    """`concurrency` workers, each sending its next request when the last
    returns, until the duration is over or max_requests were sent. Each
    latency goes to `recorder` and to by_class(i), request i's class's
    recorder. Returns the elapsed time."""
    stop_at = time.perf_counter() + duration_s
    counter = iter(range(1 << 62 if max_requests is None else max_requests))
    lock = threading.Lock()

    def worker() -> None:
        while time.perf_counter() < stop_at:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            start = time.perf_counter()
            error = _outcome(partial(call, i))
            latency = time.perf_counter() - start
            recorder.record(latency, error)
            if by_class is not None:
                by_class(i).record(latency, error)

    start = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start


def run_open_loop(
    call: Callable[[int], Any],
    rate: float,
    duration_s: float,
    recorder: Recorder,
    max_workers: int = 64,
    clock: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], None] = time.sleep,
    by_class: Callable[[int], Recorder] | None = None,
    max_requests: int | None = None,
) -> float:
    """Sends on a fixed schedule regardless of responses (at most
    max_requests of it); each latency counts from the request's intended send
    time, including any wait for a worker, and goes to `recorder` and to
    by_class(i)."""
    offsets = open_loop_offsets(rate, duration_s)[:max_requests]
    start = clock()

    def send(i: int, intended: float) -> None:
        error = _outcome(lambda: call(i))
        latency = clock() - intended
        recorder.record(latency, error)
        if by_class is not None:
            by_class(i).record(latency, error)

    with ThreadPoolExecutor(max_workers=max_workers) as pool:
        for i, offset in enumerate(offsets):
            intended = start + offset
            delay = intended - clock()
            if delay > 0:
                sleep(delay)
            pool.submit(send, i, intended)
    return clock() - start


def measure(
    recall: Callable[[str], Any],
    mix: QueryMix,
    duration_s: float,
    concurrency: int = 1,
    rate: float = 0.0,
    allow_repeats: bool = False,
    warmup: int = 0,
    max_workers: int = 64,
) -> dict[str, Any]:
    """One run over the mix, open loop at `rate` or else closed loop: up to
    `warmup` unrecorded requests first (warming connections; the measured
    queries are others), then the measured ones, overall and per class.
    Without allow_repeats the run ends early when a class's pool is used up."""
    capacity = mix.capacity()
    if not allow_repeats:
        # Warm-up must not use up the pools the measurement needs.
        warmup = min(warmup, capacity // 10)
    for i in range(warmup):
        _outcome(partial(recall, mix.take(i)))
    mix.reset_counts()
    limit = None if allow_repeats else capacity - warmup
    recorders = {name: Recorder() for name in mix.classes}
    recorder = Recorder()

    def call(i: int) -> Any:
        return recall(mix.take(warmup + i))

    def by_class(i: int) -> Recorder:
        return recorders[mix.class_of(warmup + i)]

    if rate:
        elapsed = run_open_loop(
            call,
            rate,
            duration_s,
            recorder,
            max_workers=max_workers,
            by_class=by_class,
            max_requests=limit,
        )
    else:
        elapsed = run_closed_loop(
            call, concurrency, duration_s, recorder, by_class=by_class, max_requests=limit
        )
    result = recorder.summary(elapsed)
    result["classes"] = {
        name: class_summary(r, mix.distinct(name)) for name, r in recorders.items()
    }
    result.update(
        distinct_queries=mix.distinct(),
        repeats=sum(mix.repeats.values()),
        allow_repeats=allow_repeats,
        # The pools ran out before the duration (open loop: the schedule) did.
        exhausted=limit is not None
        and recorder.requests >= limit
        and (not rate or len(open_loop_offsets(rate, duration_s)) > limit),
    )
    return result


def class_summary(recorder: Recorder, distinct: int) -> dict[str, Any]:
    s = recorder.summary(0.0)
    return {
        "p50_ms": s["p50_ms"],
        "p99_ms": s["p99_ms"],
        "requests": s["requests"],
        "errors": s["errors"],
        "distinct_queries": distinct,
        "distribution": s["distribution"],
    }


# -- seeding -------------------------------------------------------------------


def seed_workspace(
    admin: Client,
    gateway: str,
    memories: int,
    seed: int,
    creds_dir: Path,
    log: Callable[[str], None],
    members: int = 1,
) -> list[Client]:
    """A workspace holding `memories` synthetic memories written by `members`
    members (the first an owner); reused when already seeded (the members'
    tokens are kept in creds_dir). Returns one client per member."""
    slug = f"load-{memories}-{seed}" + (f"-m{members}" if members > 1 else "")
    creds_path = creds_dir / f"{slug}.json"
    if creds_path.exists():
        creds = json.loads(creds_path.read_text())
        clients = [Client(gateway, t, timeout=30) for t in creds["tokens"]]
        # The owner's status counts only what the owner may see (not the
        # other members' private memories): the seed records its own count.
        if creds.get("seeded", 0) >= memories or clients[0].status().memories >= memories:
            log(f"reusing seeded workspace {slug}")
            return clients
    else:
        ws = admin.create_workspace(slug).workspace
        tokens = []
        for k in range(members):
            member = admin.create_member(ws.id, f"loader{k}", owner=k == 0).member
            tokens.append(admin.create_token(member.id, "load").token)
        creds_dir.mkdir(parents=True, exist_ok=True)
        creds_path.write_text(json.dumps({"workspace_id": ws.id, "tokens": tokens}))
        clients = [Client(gateway, t, timeout=30) for t in tokens]
    _seed(clients, memories, seed)
    creds = json.loads(creds_path.read_text())
    creds_path.write_text(json.dumps({**creds, "seeded": memories}))
    return clients


def _seed(clients: list[Client], count: int, seed: int) -> None:
    items = list(synthetic.memories(count, seed, members=len(clients)))
    ids: list[str | None] = [None] * count
    # Set when a memory's write has ended (written or failed): a derivation
    # waits for its sources, which are earlier and so already submitted.
    ended = [threading.Event() for _ in range(count)]

    def write(i: int) -> None:
        try:
            _write(i)
        finally:
            ended[i].set()

    def _write(i: int) -> None:
        m = items[i]
        client = clients[m.author]
        # Deterministic request ids: a rerun after an interruption resumes,
        # and makes the same call for each id (a derivation is always one:
        # never a told memory because its sources were still being written).
        rid = f"load-{seed}-{i}"
        for j in m.derived_from:
            ended[j].wait()
        sources = [s for s in (ids[j] for j in m.derived_from) if s]
        if m.derived_from:
            if len(sources) != len(m.derived_from):
                raise RuntimeError(f"memory {i}: a source could not be written")
            ids[i] = client.derive(
                sources,
                m.title,
                m.body,
                m.kind,
                purposes=m.purposes,
                purpose=m.purposes[0],
                request_id=rid,
            ).memory.id
        else:
            ids[i] = client.remember(
                m.title,
                m.body,
                m.kind,
                audience_to=None if m.private else "workspace",
                purposes=m.purposes,
                purpose=m.purposes[0],
                mention_names=m.mentions,
                request_id=rid,
            ).memory.id

    # Chunks keep derivations' sources (the 10 before) written first.
    chunk = 200
    with (
        Progress("seeding", total=count, unit="memories") as bar,
        ThreadPoolExecutor(max_workers=8) as pool,
    ):
        for begin in range(0, count, chunk):
            for _ in pool.map(write, range(begin, min(begin + chunk, count))):
                bar.advance()


def wait_embedded(client: Client, timeout: float) -> Any:
    """Waits until the job has embedded every memory of the client's
    workspace, showing how far it is; returns the last status."""
    with Progress("embedding", unit="memories") as bar:
        return client.wait_embedded(
            timeout=timeout, on_status=lambda s: bar.update(s.embedded, s.memories)
        )


# -- the command ------------------------------------------------------------------


@contextmanager
def _gateway(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """(gateway address, operator token): the given gateway, or a stack of
    our own whose data persists in --state-dir so seeding is reused."""
    if args.gateway:
        token = os.environ.get("RECALLATRON_ADMIN_TOKEN", "")
        yield args.gateway, token
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
        # Open loop knows its length: enough per class for the whole run.
        per_class = max(per_class, int(args.rate * args.duration) // len(classes) + WARMUP + 1)
    pools = synthetic.query_mix(per_class, args.memories, args.seed, args.seed + 1, builtin)
    if has_file:
        pools["file"] = read_queries(Path(args.queries), args.allow_repeats)
    # In the order asked for (query_mix keeps it; the file goes where named).
    return QueryMix({name: pools[name] for name in classes})


# Unrecorded requests before measuring.
WARMUP = 20


def run(args: argparse.Namespace) -> dict[str, Any]:
    log = _log
    try:
        mix = build_mix(args)  # before the stack: a bad --classes fails fast
    except (ValueError, OSError) as exc:
        raise SystemExit(f"recallatron load: {exc}") from exc
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
        if not 0 <= args.member < len(clients):
            raise SystemExit(
                f"recallatron load: --member {args.member}: the workspace has "
                f"{len(clients)} members"
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
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_load)


def cmd_load(args: argparse.Namespace) -> int:
    result = run(args)
    if args.json:
        print(json.dumps(result))
    else:
        print(format_result(result))
    return 0


def format_result(r: dict[str, Any]) -> str:
    loop = f"rate {r['rate']}/s" if r.get("rate") else f"concurrency {r['concurrency']}"
    errors = ", ".join(f"{k}: {v}" for k, v in sorted(r["errors"].items())) or "none"
    lines = [
        f"recall {r['mode']} rerank={r['rerank']} at {r['memories']} memories, {loop}, "
        f"{r['duration_s']}s",
        f"p50 {r['p50_ms']} ms  p95 {r['p95_ms']} ms  p99 {r['p99_ms']} ms  "
        f"p99.9 {r['p999_ms']} ms  max {r['max_ms']} ms",
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
            lines.append(f"{name:<{width}}  {c['p50_ms']:>9}  {c['p99_ms']:>9}  {c['requests']:>8}")
    return "\n".join(lines)
