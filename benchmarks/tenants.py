"""Many workspaces on one server (design §10; not part of `make test`):

    python -m benchmarks.tenants --workspaces 100 300 1000 --out docs/benchmarks/tenants.json \\
        --pictures docs/benchmarks

One stack on the default local settings (embedded Postgres, every service as
a process). Workspaces are added one after another by one serial client, each
with an owner, a token and three memories, up to each count in turn; at each
count it measures:

- creation: p50 and p99 of CreateWorkspace over the workspaces just added;
- connections held on the server at rest (after the idle ones closed) and at
  the peak of the recall runs below;
- idle CPU of the whole stack (Postgres included) over --idle-seconds with no
  calls, in % of one core;
- a write's way to dense-searchable: from the acknowledged `remember` to its
  vector in the workspace's database (p50, p99), writes to random workspaces;
- recall p50/p99 over all workspaces in turn against recall on one
  workspace, interleaved call by call in one run (hybrid, no reranker);
- disk per workspace (pg_database_size, mean over the workspace databases).

It prints one JSON object per count and, with --out, writes them all.
With --breakdown it measures only where a recall on a workspace just woken
spends its time: recall over all workspaces in turn and on one workspace, each
service's handler time by method over each run.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.recall_bench import cpu_roots, tree_cpu
from recallatron.client import Client
from recallatron_devkit.load import models_dir as load_models_dir
from recallatron_devkit.stack import Stack, metrics_everywhere, own_config, running
from services.store.infrastructure.db import with_database

TOPICS = ["heron", "ledger", "orchard", "lantern", "granite", "harbour", "meadow", "quartz"]
BACKENDS = """
SELECT count(*) FROM pg_stat_activity
WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
"""
WORKSPACE_SIZE = """
SELECT avg(pg_database_size(datname))::bigint, count(*) FROM pg_database
WHERE datname LIKE 'ws\\_%%'
"""
EMBEDDED = "SELECT 1 FROM memory_embedding WHERE memory_id = %s"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def pct(values: list[float], q: int) -> float:
    """The q-th percentile (statistics.quantiles, inclusive)."""
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


class Tenants:
    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.operator = Client(stack.gateway, stack.admin_token)
        # (workspace id, database name, owner client, memory ids)
        self.workspaces: list[tuple[str, str, Client, list[str]]] = []
        assert stack.postgres is not None
        self.admin_url = stack.postgres.url
        self.watch = psycopg.connect(self.admin_url, autocommit=True)
        self.peak = 0
        self._sampling = threading.Event()

    def connections(self) -> int:
        row = self.watch.execute(BACKENDS).fetchone()
        return int(row[0]) if row else 0

    def grow(self, count: int) -> list[float]:
        """Adds workspaces up to ``count``; the CreateWorkspace times (ms)."""
        times: list[float] = []
        while len(self.workspaces) < count:
            i = len(self.workspaces)
            started = time.perf_counter()
            ws = self.operator.create_workspace(f"t{i}-{uuid.uuid4().hex[:6]}").workspace
            times.append((time.perf_counter() - started) * 1000)
            member = self.operator.create_member(ws.id, "ada", owner=True).member
            client = Client(self.stack.gateway, self.operator.create_token(member.id).token)
            ids = []
            for k in range(3):
                topic = TOPICS[(i + k) % len(TOPICS)]
                made = client.remember(
                    f"{topic.title()} note {i}-{k}",
                    f"The {topic} report for team {i} was filed, item {k}.",
                )
                ids.append(made.memory.id)
            with self.watch.cursor() as cur:
                row = cur.execute(
                    "SELECT datname FROM pg_database WHERE datname = %s",
                    (f"ws_{uuid.UUID(ws.id).hex}",),
                ).fetchone()
            assert row is not None
            self.workspaces.append((ws.id, row[0], client, ids))
            if len(self.workspaces) % 100 == 0:
                log(f"  {len(self.workspaces)} workspaces")
        return times

    def at_rest(self, settle: float = 60.0) -> int:
        """Connections once the workspaces' idle ones have closed."""
        end = time.monotonic() + settle
        seen = self.connections()
        while time.monotonic() < end:
            time.sleep(1.0)
            now = self.connections()
            if now == seen and not self._workspace_backends():
                break
            seen = now
        return self.connections()

    def _workspace_backends(self) -> int:
        row = self.watch.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname LIKE 'ws\\_%%'"
        ).fetchone()
        return int(row[0]) if row else 0

    def idle_cpu(self, seconds: float) -> dict[str, float]:
        roots = cpu_roots(self.stack)
        roots.pop("load generator", None)
        before = tree_cpu(roots)
        time.sleep(seconds)
        after = tree_cpu(roots)
        per = {name: 100.0 * (after[name] - before[name]) / seconds for name in roots}
        return {"total": sum(per.values()), **per}

    def write_to_searchable(self, writes: int) -> list[float]:
        """ms from an acknowledged write to its vector being stored."""
        rng = random.Random(7)
        out: list[float] = []
        for n in range(writes):
            _, database, client, _ = rng.choice(self.workspaces)
            made = client.remember(f"Fresh note {n}", f"A fresh {TOPICS[n % 8]} note, number {n}.")
            acked = time.perf_counter()
            url = with_database(self.admin_url, database)
            with psycopg.connect(url, autocommit=True) as conn:
                while not conn.execute(EMBEDDED, (made.memory.id,)).fetchone():
                    if time.perf_counter() - acked > 30:
                        raise RuntimeError("a write was not embedded within 30 s")
                    time.sleep(0.005)
            out.append((time.perf_counter() - acked) * 1000)
        return out

    def recall_interleaved(self, calls: int) -> dict[str, list[float]]:
        """Round-robin over every workspace, and one workspace, call by call."""
        one = self.workspaces[0][2]
        order = list(range(len(self.workspaces)))
        random.Random(11).shuffle(order)
        times: dict[str, list[float]] = {"round robin": [], "one workspace": []}
        stop = threading.Event()

        def sample() -> None:
            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                while not stop.is_set():
                    row = conn.execute(BACKENDS).fetchone()
                    self.peak = max(self.peak, int(row[0]) if row else 0)
                    time.sleep(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            for n in range(calls):
                query = f"{TOPICS[n % 8]} report filed"
                for name, client in (
                    ("round robin", self.workspaces[order[n % len(order)]][2]),
                    ("one workspace", one),
                ):
                    started = time.perf_counter()
                    client.recall(query, mode="hybrid", skip_rerank=True)
                    times[name].append((time.perf_counter() - started) * 1000)
        finally:
            stop.set()
            sampler.join(5)
        return times

    def disk(self) -> tuple[int, int]:
        row = self.watch.execute(WORKSPACE_SIZE).fetchone()
        assert row is not None
        return int(row[0] or 0), int(row[1])


def measure(t: Tenants, count: int, args: argparse.Namespace) -> dict[str, Any]:
    log(f"growing to {count} workspaces")
    created = t.grow(count)
    log("waiting for every write to be embedded")
    for _, _, client, _ in t.workspaces:
        client.wait_embedded(timeout=600)
    rest = t.at_rest()
    log(f"idle CPU over {args.idle_seconds:g} s")
    cpu = t.idle_cpu(args.idle_seconds)
    log("write to dense-searchable")
    searchable = t.write_to_searchable(args.writes)
    log("recall, round robin against one workspace")
    t.peak = 0
    recall = t.recall_interleaved(args.recalls)
    size, databases = t.disk()
    result = {
        "workspaces": count,
        "creation_ms": {
            "p50": pct(created, 50),
            "p99": pct(created, 99),
            "n": len(created),
        },
        "connections_at_rest": rest,
        "connections_peak_recall": t.peak,
        "idle_cpu_percent_of_a_core": cpu,
        "write_to_searchable_ms": {
            "p50": pct(searchable, 50),
            "p99": pct(searchable, 99),
            "n": len(searchable),
        },
        "recall_ms": {
            name: {"p50": pct(v, 50), "p99": pct(v, 99), "n": len(v)} for name, v in recall.items()
        },
        "disk_per_workspace_mb": size / 1e6,
        "workspace_databases": databases,
    }
    rr, one = result["recall_ms"]["round robin"], result["recall_ms"]["one workspace"]
    result["recall_ratio_p50"] = rr["p50"] / one["p50"]
    return result


def breakdown(t: Tenants, metrics: dict[str, int], calls: int) -> dict[str, Any]:
    """Recall over every workspace in turn, then on one workspace, twice each,
    with each service's handler time by method (its /metrics) over each run:
    where a workspace just woken costs more."""
    from benchmarks.recall_bench import means_ms, scrape

    out: dict[str, Any] = {}
    one = t.workspaces[0][2]
    others = [w[2] for w in t.workspaces[1:]]
    for n, (name, pick) in enumerate(
        [("all in turn", lambda k: others[k % len(others)]), ("one workspace", lambda k: one)] * 2
    ):
        services = ("store", "rank", "gateway")
        before = {
            s: scrape(metrics[s], "recallatron_rpc_duration_seconds", "method") for s in services
        }
        times = []
        for k in range(calls):
            started = time.perf_counter()
            pick(k + 7 * n).recall("report filed", mode="hybrid", skip_rerank=True)
            times.append((time.perf_counter() - started) * 1000)
        after = {
            s: scrape(metrics[s], "recallatron_rpc_duration_seconds", "method") for s in services
        }
        out[f"{name} #{n // 2 + 1}"] = {
            "p50_ms": pct(times, 50),
            "handler_mean_ms": {
                s: {m.rsplit("/", 1)[-1]: v for m, v in means_ms(before[s], after[s]).items()}
                for s in services
            },
        }
    return out


def pictures(results: list[dict[str, Any]], directory: Path) -> list[Path]:
    from recallatron_devkit.plots import pyplot

    plt = pyplot()
    directory.mkdir(parents=True, exist_ok=True)
    xs = [r["workspaces"] for r in results]
    panels = [
        ("creation p50 (ms)", [r["creation_ms"]["p50"] for r in results], 300),
        ("connections at rest", [r["connections_at_rest"] for r in results], 50),
        ("connections, recall peak", [r["connections_peak_recall"] for r in results], 50),
        ("idle CPU, % of a core", [r["idle_cpu_percent_of_a_core"]["total"] for r in results], 3),
        (
            "write to searchable p99 (ms)",
            [r["write_to_searchable_ms"]["p99"] for r in results],
            1000,
        ),
        ("recall p50, round robin / one", [r["recall_ratio_p50"] for r in results], 1.5),
        ("disk per workspace (MB)", [r["disk_per_workspace_mb"] for r in results], None),
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.0 * len(panels), 2.8))
    for ax, (title, ys, target) in zip(axes, panels, strict=True):
        ax.plot(xs, ys, marker="o")
        if target is not None:
            ax.axhline(target, color="grey", linestyle="--", linewidth=1)
        ax.set_title(title, fontsize=8)
        ax.set_xscale("log")
        ax.set_xlabel("workspaces", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_ylim(bottom=0)
    fig.tight_layout()
    path = directory / "tenants.svg"
    fig.savefig(path)
    plt.close(fig)
    return [path]


def table(results: list[dict[str, Any]]) -> str:
    """The markdown table of docs/benchmarks.md, "Many workspaces on one server"."""
    rows = [
        (
            "CreateWorkspace p50 / p99 (ms)",
            lambda r: "{:.0f} / {:.0f}".format(r["creation_ms"]["p50"], r["creation_ms"]["p99"]),
        ),
        ("connections on the server at rest", lambda r: str(r["connections_at_rest"])),
        ("connections, peak during the recalls", lambda r: str(r["connections_peak_recall"])),
        (
            "idle CPU of the stack, % of one core",
            lambda r: "{:.1f} (Postgres {:.1f})".format(
                r["idle_cpu_percent_of_a_core"]["total"],
                r["idle_cpu_percent_of_a_core"]["postgres"],
            ),
        ),
        (
            "write to dense-searchable p50 / p99 (ms)",
            lambda r: "{:.0f} / {:.0f}".format(
                r["write_to_searchable_ms"]["p50"], r["write_to_searchable_ms"]["p99"]
            ),
        ),
        (
            "recall p50 / p99, one workspace (ms)",
            lambda r: "{:.1f} / {:.1f}".format(
                r["recall_ms"]["one workspace"]["p50"], r["recall_ms"]["one workspace"]["p99"]
            ),
        ),
        (
            "recall p50 / p99, all in turn (ms)",
            lambda r: "{:.1f} / {:.1f}".format(
                r["recall_ms"]["round robin"]["p50"], r["recall_ms"]["round robin"]["p99"]
            ),
        ),
        ("p50 all in turn / one workspace", lambda r: "{:.2f}".format(r["recall_ratio_p50"])),
        ("disk per workspace database (MB)", lambda r: "{:.1f}".format(r["disk_per_workspace_mb"])),
    ]
    head = "| workspaces | " + " | ".join(f"{r['workspaces']:,}" for r in results) + " |"
    lines = [head, "| --- |" + " --- |" * len(results)]
    lines += [f"| {name} | " + " | ".join(cell(r) for r in results) + " |" for name, cell in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workspaces", type=int, nargs="+", default=[100, 300, 1000])
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--recalls", type=int, default=400)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--pictures", type=Path)
    parser.add_argument("--state-dir", type=Path)
    parser.add_argument("--table", type=Path, help="print the table of a saved --out file and exit")
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="only where a recall on a workspace just woken spends its time (first count only)",
    )
    args = parser.parse_args(argv)
    if args.table:
        print(table(json.loads(args.table.read_text())["results"]))
        return 0
    state = args.state_dir or Path(tempfile.mkdtemp(prefix="tenants-"))
    results = []
    if args.breakdown:
        metrics = metrics_everywhere()
        config = own_config(state, load_models_dir(), metrics_ports=metrics)
        with running(Stack(config)) as stack:
            t = Tenants(stack)
            t.grow(args.workspaces[0])
            for _, _, client, _ in t.workspaces:
                client.wait_embedded(timeout=600)
            print(json.dumps(breakdown(t, metrics, args.recalls), indent=1))
        return 0
    with running(Stack(own_config(state, load_models_dir()))) as stack:
        t = Tenants(stack)
        for count in sorted(args.workspaces):
            result = measure(t, count, args)
            print(json.dumps(result), flush=True)
            results.append(result)
            if args.out:
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps({"argv": sys.argv, "results": results}, indent=1))
    if args.pictures:
        for path in pictures(results, args.pictures):
            log(f"drew {path}")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
