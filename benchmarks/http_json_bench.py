"""Recall over HTTP/JSON against recall over gRPC, at one client (not part of
`make test`; docs/api.md, "HTTP/JSON and TypeScript"):

    python -m benchmarks.http_json_bench --memories 1000 --calls 400

Starts the stack (embedded Postgres, every service as a process), seeds a
workspace of synthetic memories and waits for the embedding job, then sends
the same recalls (hybrid, limit 10, the synthetic query mix) one after
another through both paths, alternating blocks of 20 so that both see the
same machine: gRPC on one channel with the generated stub, HTTP/JSON on one
kept-alive HTTP/1.1 connection, each answer read in full and decoded (proto
bytes, JSON). With `--typescript`, the TypeScript client's example too (a
node process per call, so only its answers are compared, not timed).

Target (issue 36): the HTTP/JSON p50 within 1.3x of gRPC's."""

from __future__ import annotations

import argparse
import http.client
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format

from recallatron.client import Client
from recallatron.v1 import gateway_pb2 as pb
from recallatron.v1 import gateway_pb2_grpc
from recallatron_devkit import synthetic
from recallatron_devkit.load import models_dir
from recallatron_devkit.seeding import seed_workspace
from recallatron_devkit.stack import FAST_JOB, Stack, own_config, running

RECALL = "/recallatron.v1.MemoryService/Recall"
BLOCK = 20


def log(message: str) -> None:
    print(message, flush=True)


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    return {
        "n": len(ordered),
        "p50_ms": round(at(0.50), 2),
        "p90_ms": round(at(0.90), 2),
        "p99_ms": round(at(0.99), 2),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 2),
    }


class Grpc:
    def __init__(self, address: str, token: str) -> None:
        self.channel = grpc.insecure_channel(address)
        self.stub = gateway_pb2_grpc.MemoryServiceStub(self.channel)
        self.metadata = (("authorization", f"Bearer {token}"),)

    def recall(self, query: str) -> pb.RecallResponse:
        return self.stub.Recall(
            pb.RecallRequest(query=query, limit=10), metadata=self.metadata, timeout=30
        )


class HttpJson:
    def __init__(self, url: str, token: str) -> None:
        host, _, port = url.removeprefix("http://").rpartition(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=30)
        self.headers = {
            "Content-Type": "application/json",
            "Authorization": f"Bearer {token}",
            "Connect-Protocol-Version": "1",
        }

    def recall(self, query: str) -> dict[str, Any]:
        body = json.dumps({"query": query, "limit": 10})
        self.conn.request("POST", RECALL, body, self.headers)
        resp = self.conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {data[:200]!r}")
        answer: dict[str, Any] = json.loads(data)
        return answer


def measure(grpc_path: Grpc, http_path: HttpJson, queries: list[str], calls: int) -> dict[str, Any]:
    times: dict[str, list[float]] = {"grpc": [], "http_json": []}
    paths = {"grpc": grpc_path.recall, "http_json": http_path.recall}
    i = 0
    while len(times["grpc"]) < calls:
        for name, recall in paths.items():
            for k in range(BLOCK):
                query = queries[(i + k) % len(queries)]
                start = time.perf_counter()
                recall(query)
                times[name].append(time.perf_counter() - start)
        i += BLOCK
    result: dict[str, Any] = {name: percentiles(t) for name, t in times.items()}
    result["p50_ratio"] = round(result["http_json"]["p50_ms"] / result["grpc"]["p50_ms"], 3)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=400, help="recalls per path")
    parser.add_argument("--rounds", type=int, default=3, help="measurements, each of --calls")
    parser.add_argument("--out", type=Path, help="JSON results here")
    args = parser.parse_args(argv)
    state = Path(tempfile.mkdtemp(prefix="recallatron-httpjson-"))
    stack = Stack(own_config(state, models_dir(), env=FAST_JOB))
    with running(stack):
        admin = Client(stack.gateway, stack.admin_token)
        clients = seed_workspace(admin, stack.gateway, args.memories, 1, state / "creds", log)
        slug = f"load-{args.memories}-1"
        token = json.loads((state / "creds" / f"{slug}.json").read_text())["tokens"][0]
        while clients[0].status().pending:
            time.sleep(0.5)
        queries = synthetic.queries(200)
        grpc_path, http_path = Grpc(stack.gateway, token), HttpJson(stack.http_url, token)
        same = sum(grpc_path.recall(q) == _parsed(http_path.recall(q)) for q in queries[:50])
        log(f"answers alike on {same} of 50 queries")
        measure(grpc_path, http_path, queries, 60)  # warm-up
        rounds = [measure(grpc_path, http_path, queries, args.calls) for _ in range(args.rounds)]
        for r in rounds:
            log(json.dumps(r))
        for c in clients:
            c.close()
        admin.close()
    summary = {
        "machine": f"{platform.machine()}, {platform.python_version()}",
        "memories": args.memories,
        "calls_per_path_per_round": args.calls,
        "alike_of_50": same,
        "rounds": rounds,
        "p50_ratio_median": statistics.median(r["p50_ratio"] for r in rounds),
    }
    log(json.dumps(summary, indent=1))
    if args.out:
        args.out.write_text(json.dumps(summary, indent=1))
    return 0


def _parsed(answer: dict[str, Any]) -> pb.RecallResponse:
    return json_format.ParseDict(answer, pb.RecallResponse())


if __name__ == "__main__":
    raise SystemExit(main())
