"""What one hop costs in the shared gRPC plumbing, without a stack (not a test).

    python -m benchmarks.hop_bench [--calls 2000] [--rounds 2]

One client thread calls an echo method (100 bytes) on a server in this
process: a plain `grpc.server`, then :class:`recallatron.grpcserver.Server`
(internal: the caller assertion checked, the fair pool, the deadline scope,
metrics). Prints p50 ms of each way of calling, per round: a blocking call; a
background call (`.future().result()`); :func:`recallatron.grpcclient.unary`
inside a served call's scope (how the gateway and rank call their peers) on a
plain channel and on a peer channel (:func:`recallatron.grpcclient.peer_channel`);
and the CPU of the assertion work (a new token verified, a remembered one,
one signed)."""

from __future__ import annotations

import argparse
import statistics
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


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
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
