"""`recallatron load`: seeds a workspace with synthetic memories and drives
recall through the gateway, closed loop (--concurrency) or open loop (--rate),
recording latency in an HdrHistogram.

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
from pathlib import Path
from typing import Any

import grpc
from hdrh.histogram import HdrHistogram

from recallatron_cli import synthetic
from recallatron_cli.client import Client

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
            return round(h.get_value_at_percentile(percentile) / 1000.0, 3)

        return {
            "p50_ms": ms(50),
            "p95_ms": ms(95),
            "p99_ms": ms(99),
            "p999_ms": ms(99.9),
            "max_ms": round(h.get_max_value() / 1000.0, 3),
            "throughput_rps": round(self.requests / elapsed_s, 2) if elapsed_s > 0 else 0.0,
            "requests": self.requests,
            "errors": dict(self.errors),
        }


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
        return exc.code().name  # type: ignore[attr-defined, no-any-return]
    return None


def run_closed_loop(
    call: Callable[[int], Any], concurrency: int, duration_s: float, recorder: Recorder
) -> float:
    """`concurrency` workers, each sending its next request when the last
    returns. Returns the elapsed time."""
    stop_at = time.perf_counter() + duration_s
    counter = iter(range(1 << 62))
    lock = threading.Lock()

    def worker() -> None:
        while time.perf_counter() < stop_at:
            with lock:
                i = next(counter)
            start = time.perf_counter()
            error = _outcome(lambda i=i: call(i))
            recorder.record(time.perf_counter() - start, error)

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
) -> float:
    """Sends on a fixed schedule regardless of responses; each latency counts
    from the request's intended send time, including any wait for a worker."""
    offsets = open_loop_offsets(rate, duration_s)
    start = clock()

    def send(i: int, intended: float) -> None:
        error = _outcome(lambda: call(i))
        recorder.record(clock() - intended, error)

    with ThreadPoolExecutor(max_workers=max_workers) as pool:
        for i, offset in enumerate(offsets):
            intended = start + offset
            delay = intended - clock()
            if delay > 0:
                sleep(delay)
            pool.submit(send, i, intended)
    return clock() - start


# -- seeding -------------------------------------------------------------------


def seed_workspace(
    admin: Client,
    gateway: str,
    memories: int,
    seed: int,
    creds_dir: Path,
    log: Callable[[str], None],
) -> Client:
    """A workspace holding `memories` synthetic memories; reused when already
    seeded (its owner token is kept in creds_dir)."""
    slug = f"load-{memories}-{seed}"
    creds_path = creds_dir / f"{slug}.json"
    if creds_path.exists():
        creds = json.loads(creds_path.read_text())
        client = Client(gateway, creds["token"], timeout=30)
        if client.status().memories >= memories:
            log(f"reusing seeded workspace {slug}")
            return client
    else:
        ws = admin.create_workspace(slug).workspace
        member = admin.create_member(ws.id, "loader", owner=True).member
        token = admin.create_token(member.id, "load").token
        creds_dir.mkdir(parents=True, exist_ok=True)
        creds_path.write_text(json.dumps({"workspace_id": ws.id, "token": token}))
        client = Client(gateway, token, timeout=30)
    _seed(client, memories, seed, log)
    return client


def _seed(client: Client, count: int, seed: int, log: Callable[[str], None]) -> None:
    items = list(synthetic.memories(count, seed))
    ids: list[str | None] = [None] * count
    started = time.perf_counter()

    def write(i: int) -> None:
        m = items[i]
        # Deterministic request ids: a rerun after an interruption resumes.
        rid = f"load-{seed}-{i}"
        if m.derived_from and all(ids[j] for j in m.derived_from):
            resp = client.derive(
                [ids[j] for j in m.derived_from],  # type: ignore[misc]
                m.title,
                m.body,
                m.kind,
                request_id=rid,
            )
        else:
            resp = client.remember(
                m.title,
                m.body,
                m.kind,
                audience_to="workspace",
                mention_names=m.mentions,
                request_id=rid,
            )
        ids[i] = resp.memory.id

    # Chunks keep derivations' sources (the 10 before) written first.
    chunk = 200
    with ThreadPoolExecutor(max_workers=8) as pool:
        for begin in range(0, count, chunk):
            list(pool.map(write, range(begin, min(begin + chunk, count))))
            if (begin // chunk) % 25 == 0:
                log(f"seeded {min(begin + chunk, count)}/{count}")
    log(f"seeded {count} memories in {time.perf_counter() - started:.1f}s")


# -- the command ------------------------------------------------------------------


@contextmanager
def _gateway(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """(gateway address, operator token): the given gateway, or a stack of
    our own whose data persists in --state-dir so seeding is reused."""
    if args.gateway:
        token = os.environ.get("RECALLATRON_ADMIN_TOKEN", "")
        yield args.gateway, token
        return
    from recallatron_cli.stack import Stack, StackConfig, free_port

    env = {"RECALLATRON_JOB_POLL_SECONDS": "0.2"}
    config = StackConfig(
        state_dir=Path(args.state_dir),
        pg_port=free_port(),
        ports={"gateway": 0, "store": 0, "embed": 0, "rank": 0},
        models_dir=Path(os.environ.get("RECALLATRON_MODELS_DIR", "") or _default_models()),
        cross_encoder_dir=args.cross_encoder or "",
        env=env,
    )
    stack = Stack(config)
    stack.start()
    try:
        yield stack.gateway, stack.admin_token
    finally:
        stack.stop()


def _default_models() -> Path:
    from recallatron.settings import default_state_dir

    return default_state_dir() / "models"


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    log = _log
    with _gateway(args) as (gateway, admin_token):
        admin = Client(gateway, admin_token, timeout=60)
        client = seed_workspace(
            admin, gateway, args.memories, args.seed, Path(args.state_dir) / "load-creds", log
        )
        started = time.perf_counter()
        status = client.wait_embedded(timeout=args.embed_timeout)
        log(
            f"embedded {status.embedded}/{status.memories} "
            f"(waited {time.perf_counter() - started:.1f}s)"
        )
        qs = synthetic.queries(1000, seed=args.seed + 1)
        rerank = args.rerank

        def call(i: int) -> Any:
            return client.recall(
                qs[i % len(qs)], mode=args.mode, limit=10, skip_rerank=not rerank, timeout=10
            )

        # Warm caches and connections before measuring.
        for i in range(min(20, len(qs))):
            _outcome(lambda i=i: call(i))
        recorder = Recorder()
        if args.rate:
            elapsed = run_open_loop(call, args.rate, args.duration, recorder)
        else:
            elapsed = run_closed_loop(call, args.concurrency, args.duration, recorder)
        result = recorder.summary(elapsed)
        result.update(
            mode=args.mode,
            memories=args.memories,
            rerank=rerank,
            concurrency=None if args.rate else args.concurrency,
            rate=args.rate or None,
            duration_s=args.duration,
        )
        return result


def add_parser(sub: Any) -> None:
    p = sub.add_parser("load", help="seed a workspace and load-test recall")
    p.add_argument("--memories", type=int, default=10_000)
    loop = p.add_mutually_exclusive_group()
    loop.add_argument("--concurrency", type=int, default=1, help="closed loop workers")
    loop.add_argument("--rate", type=float, default=0.0, help="open loop, requests per second")
    p.add_argument("--duration", type=float, default=30.0, help="seconds")
    p.add_argument("--mode", choices=["lexical", "dense", "hybrid"], default="hybrid")
    p.add_argument("--rerank", action=argparse.BooleanOptionalAction, default=False)
    p.add_argument("--cross-encoder", help="cross-encoder dir for the own stack")
    p.add_argument("--seed", type=int, default=7)
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
    return (
        f"recall {r['mode']} rerank={r['rerank']} at {r['memories']} memories, {loop}, "
        f"{r['duration_s']}s\n"
        f"p50 {r['p50_ms']} ms  p95 {r['p95_ms']} ms  p99 {r['p99_ms']} ms  "
        f"p99.9 {r['p999_ms']} ms  max {r['max_ms']} ms\n"
        f"{r['requests']} requests, {r['throughput_rps']} req/s, errors: {errors}"
    )
