"""The noisy-neighbour benchmark (not part of `make test`; docs/reliability.md):

    python -m benchmarks.noisy_neighbour --out /tmp/noisy.json

Starts the stack (embedded Postgres, every service as a process), seeds two
workspaces: *noisy*, holding a 1,000-deep `derive` chain, and *quiet*, 300
ordinary memories. It measures the quiet workspace's recall (hybrid, limit
10, one call after another) idle, then while a separate process runs 24
concurrent heavy recalls in the noisy workspace (hybrid, limit 50, over the
chain, each with a 1 s deadline, as a client that gives up), and reports
both as percentiles, with what the noisy calls got (status codes). The load
runs in its own process so the measuring client does not share its GIL.
`--heavy recall dedup flood` runs three loads in turn on the same seeded
stack: the heavy recalls, 24 concurrent `ListDuplicatePairs(limit 200)`, and
1,000 cheap recalls sent at once on one connection, again and again.
`--heavy garbage` sends no recalls: 24 threads, each on its own connection,
call the store and rank ports directly with an 8 KB garbage caller assertion
(every call refused UNAUTHENTICATED or RESOURCE_EXHAUSTED; issue 35, item 3).

Targets (design §9, issue 22): the quiet p50 under load within 2x of idle,
its p99 under 250 ms."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from recallatron.client import Client
from recallatron.v1 import gateway_pb2 as pb
from recallatron.vocabulary import MODE
from recallatron_devkit.load import models_dir
from recallatron_devkit.stack import FAST_JOB, Stack, own_config, running

CHAIN = 1_000
QUIET_MEMORIES = 300
TOPICS = ("harbour", "glacier", "orchard", "lantern", "compass", "meadow", "quarry", "beacon")
HEAVY_QUERY = "chain ledger reconciliation harbour step"
# Cheap recalls sent at once in the flood.
FLOOD = 1_000
# The garbage load's assertion: shaped like one (version, payload, signature),
# 8 KB, so that a server without a size bound decodes it and computes a
# signature over it.
GARBAGE = "v1." + "A" * 6_000 + "." + "B" * 2_180


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    return {
        "n": len(ordered),
        "p50_ms": round(at(0.50), 1),
        "p90_ms": round(at(0.90), 1),
        "p99_ms": round(at(0.99), 1),
        "max_ms": round(ordered[-1] * 1000, 1),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 1),
    }


def owner(stack: Stack, slug: str) -> Client:
    operator = Client(stack.gateway, stack.admin_token)
    try:
        ws = operator.create_workspace(slug).workspace
        member = operator.create_member(ws.id, "owner", owner=True).member
        token = operator.create_token(member.id, "bench").token
    finally:
        operator.close()
    return Client(stack.gateway, token, timeout=30)


def seed(stack: Stack) -> tuple[str, Client]:
    """The noisy owner's token and the quiet owner's client."""
    noisy = owner(stack, "noisy")
    previous = noisy.remember(
        "Chain root: harbour ledger", "The first ledger entry.", audience_to="workspace"
    ).memory.id
    for i in range(1, CHAIN):
        previous = noisy.derive(
            [previous],
            f"Chain step {i}: ledger reconciliation",
            f"Step {i} of the harbour ledger reconciliation chain, derived from step {i - 1}.",
            "summary",
        ).memory.id
        if i % 200 == 0:
            log(f"chain: {i} steps")
    quiet = owner(stack, "quiet")
    for i in range(QUIET_MEMORIES):
        topic = TOPICS[i % len(TOPICS)]
        quiet.remember(
            f"{topic.title()} note {i}",
            f"Everything the team wrote down about the {topic}, entry {i}: "
            f"owner {TOPICS[(i * 3) % len(TOPICS)]}, status {i % 5}.",
            "fact",
            audience_to="workspace",
        )
    log("waiting for the embedding job")
    noisy.wait_embedded(timeout=900, poll=1.0)
    quiet.wait_embedded(timeout=900, poll=1.0)
    token = noisy.token
    noisy.close()
    return token, quiet


def measure_quiet(
    quiet: Client, calls: int, while_: Callable[[], bool] = lambda: True
) -> tuple[list[float], Counter[str]]:
    """Up to ``calls`` recalls one after another, while ``while_()`` holds."""
    samples: list[float] = []
    codes: Counter[str] = Counter()
    for i in range(calls):
        if not while_():
            break
        topic = TOPICS[i % len(TOPICS)]
        started = time.perf_counter()
        try:
            quiet.recall(f"{topic} note owner status", mode="hybrid", limit=10, timeout=10)
            codes["OK"] += 1
        except grpc.RpcError as exc:
            codes[exc.code().name] += 1  # type: ignore[attr-defined]
        samples.append(time.perf_counter() - started)
    return samples, codes


def run_flood(client: Client, seconds: float) -> dict[str, Any]:
    """1,000 cheap recalls at once on one connection, again and again."""
    stop = time.monotonic() + seconds
    codes: Counter[str] = Counter()
    request = pb.RecallRequest(query="ledger", limit=1, mode=MODE.value("lexical"))
    while time.monotonic() < stop:
        futures = [
            client.memory.Recall.future(request, metadata=client._md(), timeout=30)
            for _ in range(FLOOD)
        ]
        for future in futures:
            try:
                future.result()
                codes["OK"] += 1
            except grpc.RpcError as exc:
                codes[exc.code().name] += 1  # type: ignore[attr-defined]
    return {"codes": dict(codes)}


def run_garbage(targets: list[str], concurrency: int, seconds: float) -> dict[str, Any]:
    """``concurrency`` threads, each on its own connection to the store or
    rank in turn, each sending a call with a garbage assertion as soon as the
    last is refused."""
    from recallatron import internal_auth
    from recallatron.v1 import rank_pb2, rank_pb2_grpc, store_pb2, store_pb2_grpc

    stop = time.monotonic() + seconds
    codes: Counter[str] = Counter()
    lock = threading.Lock()
    metadata = internal_auth.metadata(GARBAGE)

    def worker(i: int) -> None:
        channel = grpc.insecure_channel(
            targets[i % len(targets)], options=[("grpc.use_local_subchannel_pool", 1)]
        )
        call: Callable[[], Any]
        if i % 2 == 0:
            store = store_pb2_grpc.StoreServiceStub(channel)
            request = store_pb2.GetMemoriesRequest(ids=["x"])
            call = lambda: store.GetMemories(request, timeout=1.0, metadata=metadata)  # noqa: E731
        else:
            rank = rank_pb2_grpc.RankServiceStub(channel)
            ranked = rank_pb2.RankRequest(query=HEAVY_QUERY)
            call = lambda: rank.Rank(ranked, timeout=1.0, metadata=metadata)  # noqa: E731
        while time.monotonic() < stop:
            try:
                call()
                code = "OK"
            except grpc.RpcError as exc:
                code = exc.code().name  # type: ignore[attr-defined]
            with lock:
                codes[code] += 1
        channel.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"codes": dict(codes), "calls_per_second": round(sum(codes.values()) / seconds)}


def run_load(
    address: str, token: str, heavy: str, concurrency: int, seconds: float, out: Path
) -> None:
    """The noisy workspace's load (in its own process): ``concurrency``
    threads, each sending its heavy call again as soon as the last ends
    (recall over the chain, or the dedup review's pairs); or the flood."""
    if heavy == "garbage":
        # The address is the store's and rank's, comma-separated.
        out.write_text(json.dumps(run_garbage(address.split(","), concurrency, seconds)))
        return
    client = Client(address, token, timeout=1.0)
    if heavy == "flood":
        out.write_text(json.dumps(run_flood(client, seconds)))
        return
    stop = time.monotonic() + seconds
    codes: Counter[str] = Counter()
    latencies: list[float] = []
    lock = threading.Lock()

    def heavy_call() -> None:
        if heavy == "dedup":
            client.duplicate_pairs(limit=200)
        else:
            client.recall(HEAVY_QUERY, mode="hybrid", limit=50, timeout=1.0)

    def worker() -> None:
        while time.monotonic() < stop:
            started = time.perf_counter()
            try:
                heavy_call()
                code = "OK"
            except grpc.RpcError as exc:
                code = exc.code().name  # type: ignore[attr-defined]
                if code == "RESOURCE_EXHAUSTED":
                    time.sleep(0.05)  # a client that honours the retry hint, roughly
            with lock:
                codes[code] += 1
                latencies.append(time.perf_counter() - started)

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    summary = percentiles(latencies) if latencies else {}
    out.write_text(json.dumps({"codes": dict(codes), "latency": summary}))


def under_load(
    stack: Stack, state: Path, token: str, quiet: Client, heavy: str, args: argparse.Namespace
) -> dict[str, Any]:
    """The quiet workspace's recalls while the noisy one runs ``heavy``."""
    result_file = state / f"load-{heavy}.json"
    # Long enough for the quiet calls under load, and a margin either side.
    seconds = 8 + args.calls * 0.1
    load = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchmarks.noisy_neighbour",
            "--heavy",
            heavy,
            "--concurrency",
            str(args.concurrency),
            "--load",
            f"{stack.address('store')},{stack.address('rank')}"
            if heavy == "garbage"
            else stack.gateway,
            token,
            str(seconds),
            str(result_file),
        ],
        env=dict(os.environ),
    )
    time.sleep(3.0)  # the load reaches its steady state
    # Only while the load runs: a call it held up long would otherwise be
    # followed by calls measured after it ended.
    busy, busy_codes = measure_quiet(quiet, args.calls, lambda: load.poll() is None)
    load.wait(timeout=seconds + 120)
    noisy = json.loads(result_file.read_text())
    log(f"{heavy}: quiet {percentiles(busy)}; noisy {noisy['codes']}")
    time.sleep(3.0)  # what the load left running ends
    return {
        "quiet": {**percentiles(busy), "codes": dict(busy_codes)},
        "noisy": {"concurrency": args.concurrency if heavy != "flood" else FLOOD, **noisy},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--heavy",
        nargs="+",
        choices=("recall", "dedup", "flood", "garbage"),
        default=["recall"],
        help="the noisy loads, one after another: recalls over the chain, "
        "ListDuplicatePairs(limit 200), 1,000 cheap recalls at once on one connection, "
        "or calls to the store and rank with an 8 KB garbage caller assertion",
    )
    parser.add_argument("--concurrency", type=int, default=24)
    parser.add_argument("--calls", type=int, default=400, help="quiet recalls per phase")
    parser.add_argument("--out", type=Path, help="JSON results here")
    parser.add_argument("--label", default="", help="a name for this run (e.g. before, after)")
    # Internal: the load process.
    parser.add_argument("--load", nargs=4, metavar=("ADDRESS", "TOKEN", "SECONDS", "OUT"))
    args = parser.parse_args(argv)
    if args.load:
        address, token, seconds, out = args.load
        run_load(address, token, args.heavy[0], args.concurrency, float(seconds), Path(out))
        return 0

    state = Path(tempfile.mkdtemp(prefix="recallatron-noisy-"))
    stack = Stack(own_config(state, models_dir(), env=FAST_JOB))
    with running(stack):
        token, quiet = seed(stack)
        measure_quiet(quiet, 40)  # warm-up
        idle, idle_codes = measure_quiet(quiet, args.calls)
        log(f"idle: {percentiles(idle)}")
        runs = {heavy: under_load(stack, state, token, quiet, heavy, args) for heavy in args.heavy}
        quiet.close()
    idle_p50 = max(percentiles(idle)["p50_ms"], 0.1)
    result = {
        "label": args.label,
        "command": "python -m benchmarks.noisy_neighbour " + " ".join(argv or sys.argv[1:]),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "quiet_idle": {**percentiles(idle), "codes": dict(idle_codes)},
        "under_load": {
            heavy: {**run, "p50_ratio": round(run["quiet"]["p50_ms"] / idle_p50, 2)}
            for heavy, run in runs.items()
        },
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
