"""The recall benchmark suite (not part of `make test`): `make bench`, or

    python -m benchmarks.recall_bench --memories 10000 100000 --out docs/benchmarks.md

For each corpus size it starts the stack (embedded Postgres, every service as
a process, the tiny test cross-encoder standing in for the real one), seeds a
synthetic workspace (reused across runs), then measures through the gateway:
recall latency by mode at concurrency 1 and 8, overall and per query class
(rare terms, common terms, entity names, questions: `recallatron load`'s
mix), the same for a narrow caller (member 0 recalling for audit, who sees a
small part of the workspace), the highest open-loop rate with p99 under
100 ms, the cost of the service split (the same pipeline run in this process
on the same SQL and ONNX sessions), the write path under recall load, and
where the time goes in one hybrid recall.

No query repeats within a measured run (a run stops early if the mix runs
out); each run starts the mix afresh, so runs share queries. The stack has no
result or embedding cache; were one added, runs would need their own
queries, or the figures would flatter it."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import plots
from recallatron.client import Client
from recallatron_devkit import synthetic
from recallatron_devkit.load import models_dir as load_models_dir
from recallatron_devkit.loadgen import QueryMix, Recorder, measure
from recallatron_devkit.seeding import seed_workspace, wait_embedded
from recallatron_devkit.stack import (
    FAST_JOB,
    Stack,
    free_port,
    metrics_everywhere,
    own_config,
    running,
)
from services.store.domain.recall import CANDIDATE_CAP

MODES = [("lexical", False), ("dense", False), ("hybrid", False), ("hybrid", True)]
# Open-loop rates tried in turn until p99 passes 100 ms (fine steps where this
# machine saturates).
RATES = [20, 30, 40, 50, 60, 80, 100, 150, 200]
RERANK_DEPTH = 20
ANALYSIS = "## Targets and analysis"
# Distinct queries per class: far more than a 20 s run sends here.
POOL = 6000
CLASSES = synthetic.QUERY_CLASSES
# The narrow caller: the owner (member 0) recalling for audit.
NARROW_MEMBER, NARROW_PURPOSE = 0, "audit"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def brief(run: dict[str, Any]) -> dict[str, Any]:
    """A run's figures for the log, without its distributions."""
    return {k: v for k, v in run.items() if k not in ("distribution", "classes")}


def tree_cpu(roots: dict[str, int]) -> dict[str, float]:
    """CPU seconds (user + system) used so far by each named process and all
    its descendants, from /proc (Linux); this process alone (its children are
    the stack's processes, counted under their own names)."""
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    used: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(entry.name)] = int(fields[1])
        used[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
    out: dict[str, float] = {}
    for name, root in roots.items():
        if root == os.getpid():
            out[name] = used.get(root, 0.0)
            continue
        total = 0.0
        for pid in used:
            p = pid
            while p > 1 and p != root:
                p = parent.get(p, 0)
            if p == root:
                total += used[pid]
        out[name] = total
    return out


def cpu_roots(stack: Stack) -> dict[str, int]:
    roots = {name: proc.pid for name, proc in stack.processes.items()}
    if stack.postgres is not None and stack.postgres.process is not None:
        roots["postgres"] = stack.postgres.process.pid
    roots["load generator"] = os.getpid()
    return roots


def copy_state(source: Path, copy: Path) -> None:
    """A copy of a seeded state directory at ``copy`` (replaced if there):
    `cp -a` keeps the data directory's owner (the Postgres user's), and the
    ports the original's last run kept are left behind (the copy picks its
    own). Beside the original: a private temporary directory would shut out
    the Postgres user."""
    shutil.rmtree(copy, ignore_errors=True)
    subprocess.run(["cp", "-a", str(source), str(copy)], check=True)
    shutil.rmtree(copy / "run", ignore_errors=True)


def scrape(
    port: int, histogram: str = "recallatron_rank_stage_seconds", label: str = "stage"
) -> dict[tuple[str, str], float]:
    """Sum and count of a histogram on a process's /metrics, by the value of
    one label (by default rank's stage histogram, by stage); a histogram
    without that label is keyed by ""."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    kinds = {f"{histogram}_sum": "sum", f"{histogram}_count": "count"}
    return {
        (sample.labels.get(label, ""), kinds[sample.name]): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name in kinds
    }


def means_ms(
    before: dict[tuple[str, str], float], after: dict[tuple[str, str], float]
) -> dict[str, float]:
    """Mean ms per label value over what two scrapes (:func:`scrape`) saw between them."""
    out: dict[str, float] = {}
    for (key, kind), total in after.items():
        count = after.get((key, "count"), 0) - before.get((key, "count"), 0)
        if kind == "sum" and count > 0:
            out[key] = (total - before.get((key, "sum"), 0)) / count * 1000
    return out


class InProcess:
    """The same recall pipeline in this process: the store's own query code
    against the same Postgres, the embed service's own ONNX sessions."""

    def __init__(self, stack: Stack, models_dir: Path, cross_encoder_dir: str) -> None:
        from concurrent.futures import ThreadPoolExecutor

        from services.embed.models import BiEncoder, CrossEncoder
        from services.embed.settings import EmbedSettings
        from services.rank.pipeline import Pipeline, PipelineConfig
        from services.store.domain.control import ControlPlane
        from services.store.domain.graph import GraphStore
        from services.store.domain.memories import MemoryStore
        from services.store.domain.recall import RecallQueries
        from services.store.infrastructure.db import Databases
        from services.store.settings import StoreSettings

        settings = StoreSettings(database_url=stack.database_url, app_password=stack.app_password)
        self.dbs = Databases(settings)
        self.dbs.bootstrap()
        self.control = ControlPlane(self.dbs)
        self.memories = MemoryStore(self.dbs, self.control)
        self.recall_queries = RecallQueries(self.control, settings.dense_exact_rows)
        self.graph = GraphStore(self.control)
        self.cards = ThreadPoolExecutor(1, thread_name_prefix="cards")
        # The embed service's own ONNX settings (one thread per call), so that
        # the in-process pipeline runs the model as the service does.
        embed = EmbedSettings()
        self.query_graph = embed.query_graph
        self.bi = BiEncoder(
            models_dir / "all-MiniLM-L6-v2",
            threads=embed.onnx_threads,
            chunk_size=embed.embed_chunk_size,
        )
        self.cross = (
            CrossEncoder(
                Path(cross_encoder_dir),
                threads=embed.onnx_threads,
                chunk_size=embed.rerank_chunk_size,
            )
            if cross_encoder_dir
            else None
        )
        self.pipeline = Pipeline(_Store(self), _Embed(self), PipelineConfig())

    def recall(
        self, workspace_id: str, member_id: str, query: str, mode: str, cards: bool = False
    ) -> Any:
        """With ``cards``, the pipeline also builds the entity cards of the
        names its query contains, beside the arms, as rank does for the
        gateway: then it does the same work as a recall through the services."""
        from services.rank.pipeline import Request
        from services.store.domain.recall import Filters
        from services.store.infrastructure.db import Caller

        caller = Caller(workspace_id, member_id, "assist")
        return self.pipeline.recall(
            Request(
                caller,
                workspace_id,
                query,
                mode,
                10,
                Filters(),
                skip_rerank=True,
                entity_cards=cards,
            )
        )

    def close(self) -> None:
        self.cards.shutdown()
        self.dbs.close()


class _Store:
    def __init__(self, p: InProcess) -> None:
        self.p = p

    def settings(self, workspace_id: str, timeout: float | None = None) -> Any:
        from services.rank.pipeline import WorkspaceSettings

        s = self.p.control.settings(workspace_id)
        return WorkspaceSettings(s.default_recall_mode, s.rerank_depth)

    def lexical(
        self, caller: Any, query: str, limit: int, filters: Any, timeout: float | None = None
    ) -> Any:
        return self.p.recall_queries.lexical(caller, query, limit, filters).candidates

    def dense(
        self,
        caller: Any,
        vector: Any,
        limit: int,
        filters: Any,
        timeout: float | None = None,
        words: str = "",
    ) -> Any:
        from recallatron.embed_input import EMBED_INPUT_VERSION
        from services.rank.pipeline import DenseArm

        res = self.p.recall_queries.dense(
            caller, vector.values, vector.model_id, EMBED_INPUT_VERSION, limit, filters, words=words
        )
        return DenseArm(res.candidates, res.embeddings_available, res.floor)

    def walk(
        self,
        caller: Any,
        ids: Any,
        hydrate: int,
        filters: Any,
        timeout: float | None = None,
        neighbours_of: int = 0,
    ) -> Any:
        from services.rank.pipeline import Walked

        walk = self.p.memories.walk(
            caller, ids, hydrate, bool(filters and filters.include_superseded), neighbours_of
        )
        return Walked(walk.admitted, {m.id: m for m in walk.memories}, walk.neighbours)

    def entity_cards(self, caller: Any, text: str, timeout: float | None = None) -> Any:
        return self.p.cards.submit(self.p.graph.named_in, caller, text).result

    def history(self, caller: Any, query: str, limit: int, timeout: float | None = None) -> Any:
        from services.store.domain.history import HistorySearch

        search = HistorySearch(self.p.dbs, self.p.control)
        return self.p.cards.submit(search.search, caller, query, limit).result


class _Embed:
    def __init__(self, p: InProcess) -> None:
        self.p = p

    def embed_query(self, text: str, timeout: float | None = None) -> Any:
        from services.rank.pipeline import QueryVector

        # As the embed service embeds a query: on the query graph when its
        # settings allow (services/embed/models.py, EmbedModels.embed).
        bi = self.p.bi
        vector = bi.embed_queries([text]) if self.p.query_graph else bi.embed([text])
        return QueryVector(bi.model_id, vector[0])

    def rerank(self, query: str, passages: Any, timeout: float | None = None) -> list[float]:
        assert self.p.cross is not None
        return [float(x) for x in self.p.cross.score(query, passages)]


def closed(
    client: Client,
    pools: dict[str, list[str]],
    mode: str,
    rerank: bool,
    concurrency: int,
    duration: float,
    purpose: str = "assist",
) -> dict[str, Any]:
    """A closed-loop run over the mix (from its start), overall and per class."""

    def recall(query: str) -> Any:
        return client.recall(
            query, mode=mode, limit=10, purpose=purpose, skip_rerank=not rerank, timeout=10
        )

    result = measure(recall, QueryMix(pools), duration, concurrency=concurrency)
    if result["exhausted"]:
        log(f"{mode} c{concurrency}: stopped early, the query mix ran out")
    return result


def opened(
    client: Client, pools: dict[str, list[str]], rate: float, duration: float
) -> dict[str, Any]:
    def recall(query: str) -> Any:
        return client.recall(query, mode="hybrid", limit=10, skip_rerank=True, timeout=10)

    return measure(recall, QueryMix(pools), duration, rate=rate, max_workers=128)


def mix_sequence(pools: dict[str, list[str]]) -> list[str]:
    """The mix in the order a run sends it, up to its first repeat: the
    query list of the measurements that take one query after another."""
    mix = QueryMix(pools)
    return [mix.at(i) for i in range(mix.capacity())]


def new_stack(
    n: int,
    args: argparse.Namespace,
    models_dir: Path,
    tiny: str = "",
    metrics: dict[str, int] | None = None,
) -> Stack:
    """The stack on the size's own state directory (its seeded workspace reused)."""
    return Stack(
        own_config(
            Path(f"{args.state_prefix}{n}"),
            models_dir,
            env=FAST_JOB,
            metrics_ports=metrics,
            cross_encoder_dir=tiny,
        )
    )


def seeded(stack: Stack, n: int, args: argparse.Namespace) -> list[Client]:
    """One client per member of the size's seeded workspace (seeded now when
    missing, reused otherwise), once every memory is embedded."""
    admin = Client(stack.gateway, stack.admin_token, timeout=60)
    clients = seed_workspace(
        admin,
        stack.gateway,
        n,
        args.seed,
        Path(f"{args.state_prefix}{n}") / "load-creds",
        log,
        members=args.members,
    )
    wait_embedded(clients[0], timeout=7200)
    return clients


def bench_size(n: int, args: argparse.Namespace, tiny: str, models_dir: Path) -> dict[str, Any]:
    metrics = metrics_everywhere()
    stack = new_stack(n, args, models_dir, tiny, metrics)
    out: dict[str, Any] = {"memories": n}
    with running(stack):
        clients = seeded(stack, n, args)
        client = clients[0]
        client.update_settings(rerank_depth=RERANK_DEPTH)
        # The class mix; its rare words are those of this size's corpus.
        pools = synthetic.query_mix(POOL, n, args.seed, args.seed + 1, CLASSES)
        qs = mix_sequence(pools)
        prewarm(stack, _identity(stack, client)[0])
        for mode, _ in MODES[:3]:  # warm up, not recorded
            closed(client, pools, mode, False, 2, args.warmup)
        out["closed"] = {}
        for mode, rerank in MODES:
            for c in (1, 8):
                key = f"{mode}{'+rerank' if rerank else ''}@c{c}"
                out["closed"][key] = closed(client, pools, mode, rerank, c, args.duration)
                log(f"{n} {key}: {brief(out['closed'][key])}")
        # The narrow caller, one recall at a time, every mode.
        narrow = clients[NARROW_MEMBER]
        out["narrow_share"] = synthetic.visible_share(
            n, args.seed, len(clients), NARROW_MEMBER, NARROW_PURPOSE
        )
        out["narrow"] = {}
        for mode, rerank in MODES:
            key = f"{mode}{'+rerank' if rerank else ''}@c1"
            out["narrow"][key] = closed(
                narrow, pools, mode, rerank, 1, args.duration, purpose=NARROW_PURPOSE
            )
            log(f"{n} narrow {key}: {brief(out['narrow'][key])}")
        out["open"] = {}
        for rate in RATES:
            r = opened(client, pools, rate, args.duration)
            out["open"][rate] = r
            log(f"{n} open {rate}/s: {brief(r)}")
            if r["p99_ms"] > 100 or r["errors"]:
                break
        out["split"] = split_cost(stack, client, qs, models_dir, tiny, args)
        out["stages"] = stages(stack, client, pools, metrics["rank"], args)
        out["writes"] = write_path(client, qs, args)
    return out


STAGES = ("embed", "lexical", "dense", "walk", "recall")


def _local_stage_sums() -> dict[str, tuple[float, float]]:
    """(sum, count) of this process's own rank stage histogram, by stage."""
    from prometheus_client import REGISTRY

    out = {}
    for stage in STAGES:
        total = REGISTRY.get_sample_value("recallatron_rank_stage_seconds_sum", {"stage": stage})
        count = REGISTRY.get_sample_value("recallatron_rank_stage_seconds_count", {"stage": stage})
        out[stage] = (total or 0.0, count or 0.0)
    return out


def grpc_rtt(stack: Stack, calls: int = 300) -> float:
    """p50 ms of a bare unary call (a health check) to the gateway: the floor
    of one hop between two of these processes."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    stub = health_pb2_grpc.HealthStub(grpc.insecure_channel(stack.gateway))
    request = health_pb2.HealthCheckRequest(service="")
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        stub.Check(request, timeout=5)
        times.append(time.perf_counter() - t)
    return statistics.median(times[20:]) * 1000


def prewarm(stack: Stack, workspace_id: str) -> None:
    """Reads the workspace's tables and indexes into the OS cache (pg_prewarm,
    mode 'read'), so that every mode is measured on a warm working set rather
    than the first ones paying for the disk."""
    import psycopg

    from services.store.domain.control import ControlPlane
    from services.store.infrastructure.db import Databases
    from services.store.settings import StoreSettings

    dbs = Databases(StoreSettings(database_url=stack.database_url, app_password=stack.app_password))
    dbs.bootstrap()
    try:
        ws = ControlPlane(dbs).workspace(workspace_id)
        url = dbs.database_url(ws.server, ws.database_name)
    finally:
        dbs.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        blocks = conn.execute(
            "SELECT sum(pg_prewarm(c.oid, 'read')) FROM pg_class c"
            " WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'i', 't')"
        ).fetchone()
    log(f"prewarmed {blocks[0] if blocks else 0} blocks of {ws.database_name}")


def split_cost(
    stack: Stack,
    client: Client,
    qs: list[str],
    models_dir: Path,
    tiny: str,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """p50 in this process versus through the gateway, taking turns so all
    see the same machine: the pipeline alone in this process,
    the pipeline building the entity cards beside the arms, as rank does (the same
    work as a recall through the services: ``ratio`` compares these), and
    through the services; the in-process stage means (the same pipeline code
    records them here); a bare gRPC round trip."""
    ident = _identity(stack, client)
    local = InProcess(stack, models_dir, tiny)
    try:
        in_proc: list[float] = []
        with_cards: list[float] = []
        via: list[float] = []
        # This process's CPU over the in-process recalls (pipeline alone):
        # ONNX, the store's code and psycopg, the pipeline.
        cpu = [0.0]

        def alone(q: str) -> None:
            c = time.process_time()
            local.recall(ident[0], ident[1], q, "hybrid")
            cpu[0] += time.process_time() - c

        ways: list[tuple[list[float], Any]] = [
            (in_proc, alone),
            (with_cards, lambda q: local.recall(ident[0], ident[1], q, "hybrid", cards=True)),
            (via, lambda q: client.recall(q, mode="hybrid", skip_rerank=True)),
        ]
        before = _local_stage_sums()
        # The ways take turns, each with queries of its own from the same mix:
        # a query just run another way would find Postgres's pages warm.
        for turn in range(args.split_blocks * 50 * len(ways)):
            times, recall = ways[turn % len(ways)]
            q = qs[turn % len(qs)]
            t = time.perf_counter()
            recall(q)
            times.append(time.perf_counter() - t)
        after = _local_stage_sums()
    finally:
        local.close()
    stages = {
        stage: round((after[stage][0] - before[stage][0]) / n * 1000, 2)
        for stage in STAGES
        if (n := after[stage][1] - before[stage][1]) > 0
    }
    p50_in, p50_cards = statistics.median(in_proc) * 1000, statistics.median(with_cards) * 1000
    p50_via = statistics.median(via) * 1000
    return {
        "in_process_p50_ms": round(p50_in, 2),
        "in_process_cards_p50_ms": round(p50_cards, 2),
        "services_p50_ms": round(p50_via, 2),
        "ratio": round(p50_via / p50_cards, 2),
        "ratio_pipeline_only": round(p50_via / p50_in, 2),
        "in_process_cpu_ms": round(cpu[0] / len(in_proc) * 1000, 2),
        "in_process_stages": stages,
        "grpc_rtt_p50_ms": round(grpc_rtt(stack), 3),
    }


def steps_alone(stack: Stack, client: Client, qs: list[str], models_dir: Path) -> dict[str, float]:
    """p50 ms of each step of a hybrid recall measured by itself, one after the
    other in this process (no other recall running): the query embedding, the
    two arms' SQL, the walk with hydration, and a bare gRPC round trip."""
    from recallatron.embed_input import EMBED_INPUT_VERSION
    from services.rank.pipeline import rrf
    from services.store.domain.recall import Filters
    from services.store.infrastructure.db import Caller

    workspace_id, member_id = _identity(stack, client)
    caller = Caller(workspace_id, member_id, "assist")
    local = InProcess(stack, models_dir, "")
    times: dict[str, list[float]] = {}

    def timed(step: str, fn: Any) -> Any:
        t = time.perf_counter()
        value = fn()
        times.setdefault(step, []).append(time.perf_counter() - t)
        return value

    agree = capped = 0
    try:
        for q in qs[:300]:
            same = _prefilter_agrees(local, caller, q)
            if same is not None:
                capped += 1
                agree += same
            vector = timed("embed (ONNX, one thread)", lambda q=q: local.bi.embed([q])[0])
            lexical = timed(
                "lexical arm (store code + SQL)",
                lambda q=q: local.recall_queries.lexical(caller, q, 100, Filters()),
            )
            dense = timed(
                "dense arm (store code + SQL)",
                lambda v=vector: local.recall_queries.dense(
                    caller, v, local.bi.model_id, EMBED_INPUT_VERSION, 100, Filters()
                ),
            )
            fused = rrf(lexical.candidates, dense.candidates)
            timed(
                "walk + hydration of 10 (store code + SQL)",
                lambda f=fused: local.memories.walk(caller, [x.id for x in f], 10),
            )
    finally:
        local.close()
    out = {step: round(statistics.median(ts[20:]) * 1000, 2) for step, ts in times.items()}
    out["bare gRPC round trip"] = round(grpc_rtt(stack), 3)
    log(
        f"lexical prefilter: top 100 identical to ranking all {CANDIDATE_CAP} newest matches "
        f"with BM25 in {agree} of {capped} queries that took the capped path"
    )
    return out


def _prefilter_agrees(local: InProcess, caller: Any, query: str) -> bool | None:
    """Whether the lexical arm's 100 rows equal the exact ranking's (every one
    of the newest matches ranked by BM25: the capped function with no
    prefilter); None when the query does not take the capped path."""
    from services.store.domain import recall as r
    from services.store.infrastructure.db import caller_transaction

    with caller_transaction(local.control.caller_pool(caller), caller) as conn:
        terms = r.query_terms(conn, query)
        if terms is None or not terms.capped:
            return None
        params = {
            **r._filter_params(r.Filters(), 0),
            "limit": 100,
            "cap": r.CANDIDATE_CAP,
            "prefilter": r.CANDIDATE_CAP,
            **terms.params(),
            "by_index": terms.by_index,
        }
        exact = {row[0] for row in conn.execute(r.LEXICAL_CAPPED, params)}
    arm = local.recall_queries.lexical(caller, query, 100, r.Filters())
    return {c.id for c in arm.candidates} == exact


def run_steps_alone(n: int, args: argparse.Namespace, models_dir: Path) -> dict[str, float]:
    with running(new_stack(n, args, models_dir)) as stack:
        client = seeded(stack, n, args)[0]
        prewarm(stack, _identity(stack, client)[0])
        pools = synthetic.query_mix(POOL, n, args.seed, args.seed + 1, CLASSES)
        return steps_alone(stack, client, mix_sequence(pools), models_dir)


def run_split_only(n: int, args: argparse.Namespace, models_dir: Path, tiny: str) -> dict[str, Any]:
    """The service split measurement alone (the same code as in a full run),
    with the per-stage means through the services over a concurrency-1 run."""
    ports = {name: free_port() for name in ("gateway", "rank", "store", "embed")}
    with running(new_stack(n, args, models_dir, tiny, ports)) as stack:
        client = seeded(stack, n, args)[0]
        client.update_settings(rerank_depth=RERANK_DEPTH)
        prewarm(stack, _identity(stack, client)[0])
        pools = synthetic.query_mix(POOL, n, args.seed, args.seed + 1, CLASSES)
        closed(client, pools, "hybrid", False, 1, args.warmup)
        split = split_cost(stack, client, mix_sequence(pools), models_dir, tiny, args)
        split["stages"] = stages(stack, client, pools, ports["rank"], args, ports)
        return split


def split_sentence(sp: dict[str, Any]) -> str:
    return (
        f"in process {sp['in_process_cards_p50_ms']} ms with the entity cards "
        f"({sp['in_process_p50_ms']} ms the pipeline alone), through gateway -> rank -> "
        f"store/embed {sp['services_p50_ms']} ms: ratio {sp['ratio']} "
        f"({sp['ratio_pipeline_only']} against the pipeline alone)"
    )


def print_split(results: dict[int, dict[str, Any]]) -> None:
    for n, sp in results.items():
        print(
            f"{n:,} memories: {split_sentence(sp)}; bare gRPC round trip {sp['grpc_rtt_p50_ms']} ms"
        )
        print("")
        print("| stage | through the services | in process |")
        print("| --- | --- | --- |")
        through = {k: v for k, v in sp["stages"].items() if k not in ("cpu_ms", "hops_ms")}
        for stage, ms in sorted(through.items()):
            print(f"| {stage} | {ms} | {sp['in_process_stages'].get(stage, '-')} |")
        cpu = sp["stages"].get("cpu_ms", {})
        print("")
        print("CPU ms per recall: " + ", ".join(f"{k} {v}" for k, v in cpu.items()))
        print(
            f"CPU ms per recall in process (this process, the pipeline alone): "
            f"{sp['in_process_cpu_ms']}"
        )
        print("")
        print("| hop, beyond its callee's handler (mean ms) | |")
        print("| --- | --- |")
        for hop, ms in sp["stages"].get("hops_ms", {}).items():
            print(f"| {hop} | {ms} |")
        print("")


def _identity(stack: Stack, client: Client) -> tuple[str, str]:
    from recallatron import internal_auth, internal_channels
    from recallatron.grpcclient import make_channel
    from recallatron.v1 import store_pb2, store_pb2_grpc

    channel = internal_channels.member_channel(
        make_channel(stack.address("store")),
        internal_auth.Signer(stack.internal_key, "benchmark"),
    )
    stub = store_pb2_grpc.StoreServiceStub(channel)
    resp = stub.Authenticate(store_pb2.AuthenticateRequest(token=client.token), timeout=5)
    return resp.workspace_id, resp.member_id


def stages(
    stack: Stack,
    client: Client,
    pools: dict[str, list[str]],
    port: int,
    args: argparse.Namespace,
    served_ports: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Mean time per stage of hybrid recalls (no rerank), from the rank
    service's own histogram, over a concurrency-1 run; and the CPU each
    process spent per recall meanwhile. With ``served_ports`` (each service's
    metrics port), also each hop's cost beyond its callee's handler
    (:func:`hops`)."""
    roots = cpu_roots(stack)
    ports = served_ports or {}

    def served() -> dict[str, dict[tuple[str, str], float]]:
        rpc = "recallatron_rpc_duration_seconds"
        return {name: scrape(p, rpc, "method") for name, p in ports.items()}

    before, served_before = scrape(port), served()
    cpu_before = tree_cpu(roots)
    run = closed(client, pools, "hybrid", False, 1, args.duration)
    cpu_after = tree_cpu(roots)
    after, served_after = scrape(port), served()
    out: dict[str, Any] = {stage: round(ms, 2) for stage, ms in means_ms(before, after).items()}
    # The load generator's own process includes this benchmark's threads.
    out["cpu_ms"] = {
        name: round((cpu_after[name] - cpu_before[name]) / run["requests"] * 1000, 2)
        for name in roots
    }
    if ports:
        handlers = {
            name: {
                method.rsplit("/", 1)[-1]: ms
                for method, ms in means_ms(served_before[name], served_after[name]).items()
            }
            for name in ports
        }
        out["hops_ms"] = hops(run["mean_ms"], out, handlers)
    return out


def hops(
    client_mean_ms: float, stage: dict[str, Any], served: dict[str, dict[str, float]]
) -> dict[str, float]:
    """Each hop of a hybrid recall beyond its callee's own handler, in mean ms:
    the caller's time for the call less the callee's server-side time (its
    latency histogram). Transport, both ends' gRPC work and waiting for a
    thread, in the middle of a real recall."""
    gateway, rank = served["gateway"].get("Recall", 0.0), served["rank"].get("Rank", 0.0)
    store, embed = served["store"], served["embed"]
    pairs = {
        "client -> gateway": (client_mean_ms, gateway),
        "gateway's handling and gateway -> rank": (gateway, rank),
        "rank -> embed": (stage.get("embed", 0.0), embed.get("Embed", 0.0)),
        "rank -> store, lexical arm": (
            stage.get("lexical", 0.0),
            store.get("LexicalCandidates", 0.0),
        ),
        "rank -> store, dense arm": (stage.get("dense", 0.0), store.get("DenseCandidates", 0.0)),
        "rank -> store, walk": (stage.get("walk", 0.0), store.get("AdmitCandidates", 0.0)),
    }
    return {name: round(caller - callee, 2) for name, (caller, callee) in pairs.items()}


def write_path(client: Client, qs: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """remember latency and embedding throughput while recall load (4 workers)
    runs."""
    stop = threading.Event()
    load = Recorder()

    def loader() -> None:
        i = 0
        while not stop.is_set():
            t = time.perf_counter()
            try:
                client.recall(qs[i % len(qs)], mode="hybrid", skip_rerank=True)
                load.record(time.perf_counter() - t)
            except Exception as exc:  # counted, not fatal
                load.record(time.perf_counter() - t, type(exc).__name__)
            i += 1

    threads = [threading.Thread(target=loader) for _ in range(4)]
    for thread in threads:
        thread.start()
    writes = Recorder()
    count = args.write_count
    items = list(synthetic.memories(count, seed=args.seed + 99))
    started = time.perf_counter()
    base = client.status().embedded
    for m in items:
        t = time.perf_counter()
        client.remember(m.title, m.body, m.kind, audience_to="workspace")
        writes.record(time.perf_counter() - t)
    write_elapsed = time.perf_counter() - started
    status = client.wait_embedded(timeout=3600, poll=0.2)
    embed_elapsed = time.perf_counter() - started
    stop.set()
    for thread in threads:
        thread.join()
    return {
        "remember": writes.summary(write_elapsed),
        "embedded": status.embedded - base,
        "embedding_per_s": round((status.embedded - base) / embed_elapsed, 1),
        "recall_under_writes": load.summary(embed_elapsed),
    }


def _ratio(large: float, small: float) -> float | str:
    return round(large / small, 2) if small else "-"


def _mode_and_c(key: str) -> tuple[str, str]:
    mode, c = key.split("@c")
    return mode, c


def class_rows(runs: dict[str, dict[str, Any]], classes: Sequence[str] = CLASSES) -> list[str]:
    """Markdown rows, one per run (key "mode@cN"): each class's p50 / p99 ms
    and the distinct queries the run sent."""
    rows = []
    for key, s in runs.items():
        mode, c = _mode_and_c(key)
        cells = [
            f"{s['classes'][k]['p50_ms']} / {s['classes'][k]['p99_ms']}"
            if k in s.get("classes", {})
            else "-"
            for k in classes
        ]
        rows.append(
            f"| {mode} | {c} | " + " | ".join(cells) + f" | {s.get('distinct_queries', '-')} |"
        )
    return rows


def narrow_rows(
    narrow: dict[str, dict[str, Any]],
    full: dict[str, dict[str, Any]],
    classes: Sequence[str] = CLASSES,
) -> list[str]:
    """Markdown rows, one per mode: the narrow caller's p50 ms overall and
    per class, and the full caller's overall p50 at the same concurrency."""
    rows = []
    for key, s in narrow.items():
        mode, _ = _mode_and_c(key)
        cells = [str(s["classes"][k]["p50_ms"]) if k in s["classes"] else "-" for k in classes]
        base = full.get(key, {}).get("p50_ms", "-")
        rows.append(f"| {mode} | {s['p50_ms']} | " + " | ".join(cells) + f" | {base} |")
    return rows


def growth_rows(
    small: dict[str, Any], large: dict[str, Any], classes: Sequence[str] = CLASSES
) -> list[str]:
    """Markdown rows: p50 at the large size over p50 at the small one, overall
    and per class, for each closed-loop run and each narrow-caller run."""
    rows = []
    for section, caller in (("closed", "owner, assist"), ("narrow", "narrow: owner, audit")):
        for key, s in large.get(section, {}).items():
            base = small.get(section, {}).get(key)
            if base is None:
                continue
            mode, c = _mode_and_c(key)
            cells = [
                str(_ratio(s["classes"][k]["p50_ms"], base["classes"][k]["p50_ms"]))
                if k in s.get("classes", {}) and k in base.get("classes", {})
                else "-"
                for k in classes
            ]
            overall = _ratio(s["p50_ms"], base["p50_ms"])
            rows.append(f"| {mode} | {c} | {caller} | {overall} | " + " | ".join(cells) + " |")
    return rows


def render(results: list[dict[str, Any]], argv: list[str], pictures: Sequence[str] = ()) -> str:
    cmd = "python -m benchmarks.recall_bench " + " ".join(argv)
    lines = [
        "# Benchmarks",
        "",
        f"Command: `{cmd}` (or `make bench`). Machine: {os.cpu_count()} cores, "
        f"{platform.machine()}, Python {platform.python_version()}, PostgreSQL 18 + pgvector "
        "0.8.6 (embedded), every service a separate process on loopback; the load generator "
        "runs on the same machine. Before measuring, the workspace's tables and indexes are "
        "read into the OS cache (pg_prewarm) and each mode runs for the warm-up time "
        "unrecorded. Measured through the gateway with `recallatron load`'s "
        "recorder (HdrHistogram, milliseconds). Queries: `recallatron load`'s mix, round "
        "robin across four classes: rare (a pseudo-word that about six memories of the "
        "corpus carry), common (topics and phrases in many memories), entity (a person's "
        "or a project's name) and question (natural-language questions); up to "
        f"{POOL:,} distinct queries per class, none repeated within a run; limit 10. "
        f"Rerank: the tiny test cross-encoder, depth {RERANK_DEPTH}. The seed has "
        "several members, private and workspace memories and several purposes; the "
        "caller is the owner (member 0) recalling for assist unless named.",
        "",
    ]
    class_head = " | ".join(CLASSES)
    for r in results:
        n = r["memories"]
        lines += [
            f"## {n:,} memories",
            "",
            "| mode | concurrency | p50 | p95 | p99 | p99.9 | max | req/s | errors |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for key, s in r["closed"].items():
            mode, c = key.split("@c")
            lines.append(
                f"| {mode} | {c} | {s['p50_ms']} | {s['p95_ms']} | {s['p99_ms']} | "
                f"{s['p999_ms']} | {s['max_ms']} | {s['throughput_rps']} | "
                f"{sum(s['errors'].values())} |"
            )
        lines += [
            "",
            "By query class (p50 / p99 ms):",
            "",
            f"| mode | concurrency | {class_head} | distinct queries |",
            "| --- | --- |" + " --- |" * len(CLASSES) + " --- |",
            *class_rows(r["closed"]),
        ]
        if r.get("narrow"):
            lines += [
                "",
                f"Narrow caller: member {NARROW_MEMBER} recalling for {NARROW_PURPOSE}, who may "
                f"see {r['narrow_share']:.1%} of the workspace; concurrency 1, p50 ms (the "
                "last column: the owner recalling for assist, from the first table):",
                "",
                f"| mode | all | {class_head} | assist, all |",
                "| --- | --- |" + " --- |" * len(CLASSES) + " --- |",
                *narrow_rows(r["narrow"], r["closed"]),
            ]
        lines += [
            "",
            "Open loop, hybrid without rerank (latency from each request's intended send time):",
            "",
            "| rate/s | p50 | p99 | max | achieved req/s | errors | p99 by class |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for rate, s in r["open"].items():
            by_class = ", ".join(f"{k} {c['p99_ms']}" for k, c in s.get("classes", {}).items())
            lines.append(
                f"| {rate} | {s['p50_ms']} | {s['p99_ms']} | {s['max_ms']} | "
                f"{s['throughput_rps']} | {sum(s['errors'].values())} | {by_class or '-'} |"
            )
        sustained = [int(k) for k, s in r["open"].items() if s["p99_ms"] <= 100 and not s["errors"]]
        lines += [
            "",
            f"Highest rate tried with p99 <= 100 ms: {max(sustained) if sustained else 'none'}"
            " recalls/s.",
            "",
        ]
        sp = r["split"]
        lines += [
            f"Service split (hybrid, no rerank, p50, interleaved): {split_sentence(sp)}.",
            "",
        ]
        lines += [
            "Where the time goes in one hybrid recall (mean ms per stage, rank's own "
            "histogram; embed and dense run one after the other while lexical runs "
            "beside them):",
            "",
            "| stage | through the services | in process |",
            "| --- | --- | --- |",
        ]
        cpu = r["stages"].pop("cpu_ms", {})
        local = sp.get("in_process_stages", {})
        for stage, ms in sorted(r["stages"].items()):
            lines.append(f"| {stage} | {ms} | {local.get(stage, '-')} |")
        lines += [
            "",
            "In process = the same pipeline code, SQL and ONNX session in the benchmark's "
            "process, interleaved with the service calls (the split measurement above). "
            f"A bare gRPC round trip (health check to the gateway) takes "
            f"{sp.get('grpc_rtt_p50_ms', '-')} ms at p50; a hybrid recall makes five "
            "hops on its critical path (client -> gateway, gateway -> rank, rank -> embed, "
            "rank -> store for the dense arm, rank -> store for the walk; the gateway's "
            "authentication comes from its cache).",
        ]
        if cpu:
            total = sum(cpu.values())
            lines += [
                "",
                "CPU per hybrid recall (no rerank), by process, over the same run (each "
                "process with its children, from /proc):",
                "",
                "| process | CPU ms per recall |",
                "| --- | --- |",
                *[f"| {name} | {ms} |" for name, ms in sorted(cpu.items(), key=lambda kv: -kv[1])],
                f"| total | {round(total, 2)} |",
                "",
                f"At {round(total, 1)} ms of CPU per recall, {os.cpu_count()} cores serve at most "
                f"{round(1000 * (os.cpu_count() or 1) / total)} recalls/s with every core busy.",
            ]
        w = r["writes"]
        lines += [
            "",
            f"Write path under recall load (4 workers): remember p50 "
            f"{w['remember']['p50_ms']} ms, p99 {w['remember']['p99_ms']} ms; the "
            f"embedding job embedded {w['embedded']} memories at {w['embedding_per_s']}/s; "
            f"recall meanwhile p50 {w['recall_under_writes']['p50_ms']} ms, p99 "
            f"{w['recall_under_writes']['p99_ms']} ms.",
            "",
        ]
    if len(results) >= 2:
        small, large = results[0], results[-1]
        class_head = " | ".join(CLASSES)
        lines += [
            f"## Growth: p50 at {large['memories']:,} over p50 at {small['memories']:,}",
            "",
            "Overall and per query class:",
            "",
            f"| mode | concurrency | caller | all | {class_head} |",
            "| --- | --- | --- | --- |" + " --- |" * len(CLASSES),
            *growth_rows(small, large),
        ]
        lines.append("")
    lines += pictures
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser()
    p.add_argument("--memories", type=int, nargs="+", default=[10_000, 100_000])
    p.add_argument("--duration", type=float, default=20.0)
    p.add_argument("--warmup", type=float, default=10.0, help="seconds per mode, not recorded")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--members", type=int, default=8)
    p.add_argument("--split-blocks", type=int, default=6)
    p.add_argument("--write-count", type=int, default=300)
    p.add_argument("--state-prefix", default="/tmp/rl")
    p.add_argument("--out", default="docs/benchmarks.md")
    p.add_argument(
        "--pictures", default="docs/benchmarks", help="where the plots go (SVG, linked from --out)"
    )
    p.add_argument("--json", default="", help="also save the raw results here (benchmarks.plots)")
    p.add_argument(
        "--steps-alone",
        action="store_true",
        help="only print each step's cost by itself (a markdown table); docs untouched",
    )
    p.add_argument(
        "--split-only",
        action="store_true",
        help="only measure the service split and the stages (printed); docs untouched",
    )
    args = p.parse_args(argv)
    from recallatron_devkit.embed_fixture import prepare_tiny_cross_encoder
    from services.embed.prepare import prepare_bi_encoder

    models_dir = load_models_dir()
    prepare_bi_encoder(models_dir, log=log)
    _, tiny = prepare_tiny_cross_encoder(models_dir.parent / "test-models" / "tiny-cross-encoder")
    if args.steps_alone:
        alone = {n: run_steps_alone(n, args, models_dir) for n in args.memories}
        print("| step | " + " | ".join(f"{n:,} memories, p50 ms" for n in alone) + " |")
        print("| --- |" + " --- |" * len(alone))
        for step in next(iter(alone.values())):
            print(f"| {step} | " + " | ".join(str(r[step]) for r in alone.values()) + " |")
        return 0
    if args.split_only:
        print_split({n: run_split_only(n, args, models_dir, str(tiny)) for n in args.memories})
        return 0
    results = [bench_size(n, args, str(tiny), models_dir) for n in args.memories]
    out = Path(args.out)
    if args.json:
        Path(args.json).write_text(json.dumps(results))
    # Drawn before render, which consumes the CPU figures.
    drawn = plots.bench_pictures(results, Path(args.pictures))
    pictures = [
        "## Pictures",
        "",
        "Latency against percentile on the nines scale (HdrHistogram's percentile "
        "distribution; the maximum is off the scale and in the tables), from the runs above:",
        "",
        *plots.markdown(drawn, out),
    ]
    # The hand-written analysis at the end of the file survives a rerun.
    kept = ""
    if out.exists() and ANALYSIS in out.read_text():
        kept = out.read_text()[out.read_text().index(ANALYSIS) :]
    out.write_text(render(results, argv, pictures) + ("\n" + kept if kept else ""))
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
