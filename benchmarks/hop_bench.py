"""What one hop costs in the shared gRPC plumbing, without a stack (not a test).

    python -m benchmarks.hop_bench [--calls 2000] [--rounds 2]
    python -m benchmarks.hop_bench --busy [--calls 1500]

One client thread calls an echo method (100 bytes) on a server in this
process: a plain `grpc.server`, then :class:`recallatron.grpcserver.Server`
(internal: the caller assertion checked, the fair pool, the deadline scope,
metrics). Prints p50 ms of each way of calling, per round: a blocking call; a
background call (`.future().result()`); :func:`recallatron.grpcclient.unary`
inside a served call's scope (how the gateway and rank call their peers) on a
plain channel and on a peer channel (:func:`recallatron.grpcclient.peer_channel`);
and the CPU of the assertion work (a new token verified, a remembered one,
one signed).

``--busy``: a hop to a server in another process whose handler works for a
while before it answers (as embed and the store do: milliseconds), against
one that answers at once. The handler sleeps or spins for the time asked and
reports it; printed is the p50 of the rest (the hop itself), for a sync
server called blocking, with `.future().result()`, and through
:func:`recallatron.grpcclient.unary` on a peer channel, and for a grpc.aio
server called from a grpc.aio client."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc

from recallatron import deadline, internal_auth
from recallatron.grpcclient import make_channel, peer_channel, unary
from recallatron.grpcserver import Server
from recallatron.settings import CommonSettings
from recallatron.v1 import common_pb2 as cpb

KEY = b"k" * 43
METHOD = "/test.Echo/Echo"
PAYLOAD = b"x" * 100


def _handler() -> Any:
    echo = grpc.unary_unary_rpc_method_handler(lambda request, context: request)
    return grpc.method_handlers_generic_handler("test.Echo", {"Echo": echo})


def _p50(fn: Callable[[], Any], calls: int) -> float:
    for _ in range(200):
        fn()
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def _in_scope(fn: Callable[[], Any]) -> Callable[[], Any]:
    scope = deadline.Scope(3600.0)

    def run() -> Any:
        leave = deadline.enter(scope)
        try:
            return fn()
        finally:
            leave()

    return run


def _per_call_us(fn: Callable[[], Any], n: int = 20_000) -> float:
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e6


def _work(request: bytes) -> bytes:
    """``sleep:<ms>``, ``spin:<ms>`` or ``echo``: does it, answers the ms taken."""
    kind, _, ms = request.decode().partition(":")
    start = time.perf_counter()
    if kind == "sleep":
        time.sleep(float(ms) / 1000)
    elif kind == "spin":
        while (time.perf_counter() - start) * 1000 < float(ms):
            pass
    return f"{(time.perf_counter() - start) * 1000:.4f}".encode()


def _serve_busy(sync_port: int, aio_port: int) -> None:
    """The child of ``--busy``: a sync server and a grpc.aio one."""
    handler = grpc.method_handlers_generic_handler(
        "test.Echo",
        {"Echo": grpc.unary_unary_rpc_method_handler(lambda request, context: _work(request))},
    )
    server = grpc.server(ThreadPoolExecutor(16))
    server.add_generic_rpc_handlers([handler])
    server.add_insecure_port(f"127.0.0.1:{sync_port}")
    server.start()

    async def serve_aio() -> None:
        async def work(request: bytes, context: Any) -> bytes:
            # Off the loop, as an async service would run ONNX or a query.
            return await asyncio.to_thread(_work, request)

        aio = grpc.aio.server()
        aio.add_generic_rpc_handlers(
            [
                grpc.method_handlers_generic_handler(
                    "test.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(work)}
                )
            ]
        )
        aio.add_insecure_port(f"127.0.0.1:{aio_port}")
        await aio.start()
        await aio.wait_for_termination()

    asyncio.run(serve_aio())


def _busy(calls: int) -> None:
    from recallatron_devkit.stack import free_port

    sync_port, aio_port = free_port(), free_port()
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchmarks.hop_bench",
            "--serve-busy",
            str(sync_port),
            str(aio_port),
        ]
    )
    try:
        target = f"127.0.0.1:{sync_port}"
        grpc.channel_ready_future(grpc.insecure_channel(target)).result(timeout=30)
        blocking = grpc.insecure_channel(target).unary_unary(METHOD)
        future = grpc.insecure_channel(target).unary_unary(METHOD)
        peer = peer_channel(target, CommonSettings()).unary_unary(METHOD)
        scope = deadline.Scope(3600.0)

        def through_unary(request: bytes) -> bytes:
            leave = deadline.enter(scope)
            try:
                return bytes(unary(peer, request, 5.0))
            finally:
                leave()

        ways: dict[str, Callable[[bytes], bytes]] = {
            "sync server, blocking call": lambda r: blocking(r, timeout=5),
            "sync server, .future().result()": lambda r: future.future(r, timeout=5).result(),
            "sync server, unary() on a peer channel": through_unary,
        }
        works = ["echo", "sleep:0.5", "sleep:2.5", "spin:2.5"]
        rest: dict[tuple[str, str], list[float]] = {}
        for i in range(calls):
            for work in works:
                for name, call in ways.items():
                    t = time.perf_counter()
                    took = float(call(work.encode()))
                    if i >= 100:
                        rest.setdefault((name, work), []).append(
                            (time.perf_counter() - t) * 1000 - took
                        )
        for work in works:
            rest[("grpc.aio server and client", work)] = asyncio.run(
                _aio_hops(f"127.0.0.1:{aio_port}", work, calls)
            )
        print("p50 ms of a hop beyond its handler's own time, by what the handler does")
        print(f"| way | {' | '.join(works)} |")
        print(f"| --- |{' --- |' * len(works)}")
        for name in [*ways, "grpc.aio server and client"]:
            cells = " | ".join(f"{statistics.median(rest[(name, w)]):.3f}" for w in works)
            print(f"| {name} | {cells} |")
    finally:
        child.kill()


async def _aio_hops(target: str, work: str, calls: int) -> list[float]:
    async with grpc.aio.insecure_channel(target) as channel:
        call = channel.unary_unary(METHOD)
        out = []
        for i in range(calls):
            t = time.perf_counter()
            took = float(await call(work.encode(), timeout=5))
            if i >= 100:
                out.append((time.perf_counter() - t) * 1000 - took)
        return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--busy", action="store_true", help="hops to a handler that works a while")
    p.add_argument("--serve-busy", nargs=2, type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve_busy:
        _serve_busy(*args.serve_busy)
        return 0
    if args.busy:
        _busy(args.calls)
        return 0
    plain = grpc.server(ThreadPoolExecutor(16))
    plain.add_generic_rpc_handlers([_handler()])
    plain_port = plain.add_insecure_port("127.0.0.1:0")
    plain.start()
    ours = Server(CommonSettings(internal_key=KEY.decode()), [], internal=True)
    ours.grpc_server.add_generic_rpc_handlers([_handler()])
    ours_port = ours.grpc_server.add_insecure_port("127.0.0.1:0")
    ours.grpc_server.start()
    signer = internal_auth.Signer(KEY, "bench")
    md = internal_auth.metadata(signer.service([METHOD]))
    to_plain = grpc.insecure_channel(f"127.0.0.1:{plain_port}").unary_unary(METHOD)
    made = make_channel(f"127.0.0.1:{ours_port}").unary_unary(METHOD)
    peer = peer_channel(f"127.0.0.1:{ours_port}", CommonSettings()).unary_unary(METHOD)
    cases: dict[str, Callable[[], Any]] = {
        "plain server, blocking": lambda: to_plain(PAYLOAD, timeout=5),
        "plain server, future().result()": lambda: to_plain.future(PAYLOAD, timeout=5).result(),
        "ours, blocking": lambda: made(PAYLOAD, timeout=5, metadata=md),
        "ours, blocking, a new assertion each call": lambda: made(
            PAYLOAD, timeout=5, metadata=internal_auth.metadata(signer.service([METHOD]))
        ),
        "ours, unary() in a call's scope, make_channel": _in_scope(
            lambda: unary(made, PAYLOAD, 5.0, md)
        ),
        "ours, unary() in a call's scope, peer_channel": _in_scope(
            lambda: unary(peer, PAYLOAD, 5.0, md)
        ),
    }
    results: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for name, fn in cases.items():
            results.setdefault(name, []).append(_p50(fn, args.calls))
    print("| call | p50 ms (each round) |")
    print("| --- | --- |")
    for name, r in results.items():
        print(f"| {name} | {' / '.join(f'{x:.3f}' for x in r)} |")
    caller = cpb.Caller(workspace_id="w" * 36, member_id="m" * 36, role=cpb.ROLE_OWNER)
    token = signer.member(caller, internal_auth.RECALL_METHODS)

    def verify_new() -> None:
        internal_auth._VERIFIED.clear()
        internal_auth.verify(KEY, token, internal_auth.RANK)

    print(
        f"\nassertion CPU per call: verify a new one {_per_call_us(verify_new):.1f} us, "
        f"a remembered one "
        f"{_per_call_us(lambda: internal_auth.verify(KEY, token, internal_auth.RANK)):.1f} us, "
        f"sign one "
        f"{_per_call_us(lambda: signer.member(caller, internal_auth.RECALL_METHODS)):.1f} us"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
