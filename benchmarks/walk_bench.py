"""Recall latency over deep and wide provenance: the one-row permission walk
(not part of `make test`):

    python -m benchmarks.walk_bench --duration 20 [--json] [--keep-state]

The target (docs/recall.md, "Recall at scale"): a 1,000-deep derive chain and
a 1,000-wide fan-in leave recall latency within 2x of a corpus without them.

The walk (services/store/sql/memory_queries.py, ADMIT) reads one row per
candidate: each memory keeps its provenance's trust (migration 0006, section
3: provenance_audience / provenance_purposes, intersections over everything
it reaches, folded from the direct targets when its links are inserted;
provenance_forgotten, set by a forget on every memory that reaches the
forgotten one). There is no depth or reach cap and no walk budget: a chain
member of any depth, and a memory reaching the whole fan-in, is admitted.

Starts its own stack (embedded Postgres in a fresh temporary state directory,
every service a process on loopback, the embedding job running), creates a
workspace with one owner, seeds a base corpus of --memories synthetic
memories (`recallatron load`'s seed, workspace audience), then adds three
sets, every memory's title and body carrying the set's marker word next to
ordinary synthetic text, and its body a code word (a pseudo-word) of its own:

  chain    (marker `chainmark`): a told root and --chain derives, each from
           the one before: provenance depths 0..1,000.
  fan-in   (marker `fanmark`): --fan-roots told roots; --fan memories each
           derived from all of those roots (a 1,000-wide fan-in into each
           root); hubs, each derived from 50 distinct fan memories (each
           reaches 55 memories); apexes, each derived from every hub (at most
           50 of them: 20 hubs, each apex reaching the whole fan-in, 1,025
           memories). The apexes and hubs are the newest marker matches, so
           the lexical arm (ties newest first) puts them among the candidates
           of every fan-in query: the recalls that a walk along the links
           would make cover the whole structure. Here each is one row.
  control  (marker `ctrlmark`): --control told memories, the same text shape.

After the embeddings are done, the stored provenance columns are summarised
per role (read as the operator), and recall is measured through the gateway
at concurrency 1, hybrid and lexical (skip_rerank, limit 10), --duration
seconds per mode: one closed-loop run per mode whose queries go round robin
across the sets (and `base`, ordinary questions over the base corpus), so
every set is measured over the same seconds of a shared machine. A set's
queries are "<marker> <code word>" (two terms, so the 15% common-term rule
never drops the marker), each code word that of one of the set's memories,
none repeated in a run. Reported per set: p50/p99 (`recallatron load`'s
HdrHistogram recorder), p50 over the control's, the rank service's mean
`walk` stage time (a separate sequential pass of --stage-queries queries per
set), the counts.admitted seen, how often the coded memory came back, which
provenance came back, and for the chain the deepest member returned and the
coded member found per depth band (members of every depth must come back).

Then phase 2 forgets one fan-in root, which moves the walk's cost to the
write path: the forget marks provenance_forgotten on every memory that
reaches the root (the 1,000 fan memories, the hubs and the apexes). The
forget call is timed (through the gateway, next to the median of
--forget-baseline forgets of fresh memories nothing links to), the marks are
counted against the memories that reach the root, and fan-in and control are
measured again: every fan-in candidate but the other roots is refused."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import services
from recallatron.client import Client
from recallatron_devkit import synthetic
from recallatron_devkit.load import models_dir
from recallatron_devkit.loadgen import QueryMix, measure
from recallatron_devkit.seeding import seed_workspace
from recallatron_devkit.stack import FAST_JOB, Stack, free_port, own_config, running

MARKERS = {"chain": "chainmark", "fan-in": "fanmark", "control": "ctrlmark"}
# Derive takes at most this many sources (services/store/domain/validation.py MAX_LINKS).
MAX_SOURCES = 50
MODES = ("hybrid", "lexical")
CONTROL = "control"
BASE = "base"
TARGET_RATIO = 2.0
# Unrecorded recalls per set before each mode's run (not from the pools).
WARMUP_PER_SET = 5
WRITERS = 8
# Chain depth bands for the coded-member-found figures.
DEPTH_BAND = 250
# Roles whose memories reach every fan-in root (each fan memory is derived
# from all of them): what a root's forget must mark.
REACHES_FAN_ROOTS = ("fan-in/fan", "fan-in/hub", "fan-in/apex")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- the layout ----------------------------------------------------------------


@dataclass(frozen=True)
class Placed:
    """A seeded memory of a walk set: its set, role and provenance depth (as
    planned)."""

    set: str
    role: str
    depth: int
    code: str


@dataclass
class Layout:
    workspace_id: str = ""
    memories: dict[str, Placed] = field(default_factory=dict)
    # Set -> [(code word, memory id)], in creation order.
    codes: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    roles: dict[str, list[str]] = field(default_factory=dict)

    def add(self, memory_id: str, placed: Placed) -> None:
        self.memories[memory_id] = placed
        self.codes.setdefault(placed.set, []).append((placed.code, memory_id))
        self.roles.setdefault(f"{placed.set}/{placed.role}", []).append(memory_id)


class Texts:
    """Ordinary synthetic text marked for a set: the marker in the title and
    the body, and a code word of the memory's own at the end of the body."""

    def __init__(self, set_name: str, count: int, seed: int, code_offset: int) -> None:
        self.marker = MARKERS[set_name]
        self.items = list(synthetic.memories(count, seed=seed))
        self.offset = code_offset
        self.next = 0

    def take(self) -> tuple[str, str, str, str]:
        """(kind, title, body, code) of the next memory."""
        m = self.items[self.next % len(self.items)]
        code = synthetic.rare_word(self.offset + self.next)
        self.next += 1
        return m.kind, f"{m.title} {self.marker}", f"{m.body} {self.marker} {code}.", code


def _parallel(count: int, write: Callable[[int], None]) -> None:
    with ThreadPoolExecutor(max_workers=WRITERS) as pool:
        list(pool.map(write, range(count)))


def seed_chain(client: Client, layout: Layout, length: int, texts: Texts) -> None:
    kind, title, body, code = texts.take()
    prev = client.remember(title, body, kind, audience_to="workspace").memory.id
    layout.add(prev, Placed("chain", "root", 0, code))
    started = time.perf_counter()
    for depth in range(1, length + 1):
        kind, title, body, code = texts.take()
        prev = client.derive([prev], title, body, kind).memory.id
        layout.add(prev, Placed("chain", "link", depth, code))
        if depth % 200 == 0:
            log(f"chain: {depth}/{length} derives ({time.perf_counter() - started:.1f}s)")


def seed_fan(client: Client, layout: Layout, args: argparse.Namespace, texts: Texts) -> None:
    lock = threading.Lock()

    def told(role: str) -> str:
        with lock:
            kind, title, body, code = texts.take()
        memory_id: str = client.remember(title, body, kind, audience_to="workspace").memory.id
        with lock:
            layout.add(memory_id, Placed("fan-in", role, 0, code))
        return memory_id

    def derived(sources: Sequence[str], role: str, depth: int) -> str:
        with lock:
            kind, title, body, code = texts.take()
        memory_id: str = client.derive(list(sources), title, body, kind).memory.id
        with lock:
            layout.add(memory_id, Placed("fan-in", role, depth, code))
        return memory_id

    roots = [told("root") for _ in range(args.fan_roots)]
    fan: list[str] = [""] * args.fan

    def write_fan(i: int) -> None:
        fan[i] = derived(roots, "fan", 1)

    started = time.perf_counter()
    _parallel(args.fan, write_fan)
    elapsed = time.perf_counter() - started
    log(f"fan-in: {args.fan} memories from {len(roots)} roots ({elapsed:.1f}s)")
    width = args.hub_sources
    hubs = [derived(fan[h : h + width], "hub", 2) for h in range(0, len(fan) - width + 1, width)]
    # Every hub when they fit in one derive; else a different window of them.
    k = min(len(hubs), MAX_SOURCES)
    for a in range(args.apexes if k else 0):
        derived([hubs[(a + t) % len(hubs)] for t in range(k)], "apex", 3)
    log(
        f"fan-in: {len(hubs)} hubs of {width} fan memories, "
        f"{len(layout.roles.get('fan-in/apex', []))} apexes of {k} hubs"
    )


def seed_control(client: Client, layout: Layout, count: int, texts: Texts) -> None:
    lock = threading.Lock()

    def write(_: int) -> None:
        with lock:
            kind, title, body, code = texts.take()
        memory_id = client.remember(title, body, kind, audience_to="workspace").memory.id
        with lock:
            layout.add(memory_id, Placed("control", "told", 0, code))

    _parallel(count, write)


def workspace_url(stack: Stack, layout: Layout) -> str:
    """The workspace database's URL, as the operator."""
    from services.store.domain.control import ControlPlane
    from services.store.infrastructure.db import Databases
    from services.store.settings import StoreSettings

    dbs = Databases(StoreSettings(database_url=stack.database_url, app_password=stack.app_password))
    dbs.bootstrap()
    try:
        ws = ControlPlane(dbs).workspace(layout.workspace_id)
        return dbs.database_url(ws.server, ws.database_name)
    finally:
        dbs.close()


def stored_provenance(url: str, layout: Layout) -> dict[str, dict[str, Any]]:
    """Per role, the stored provenance columns (migration 0006, section 3):
    how many memories are provenance_forgotten, how many have the workspace
    as their provenance audience, and the distinct provenance purposes."""
    import psycopg

    out: dict[str, dict[str, Any]] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for role, ids in layout.roles.items():
            row = conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE provenance_forgotten),"
                " count(*) FILTER (WHERE provenance_audience IS NULL),"
                " count(*) FILTER (WHERE invalidated_at IS NOT NULL),"
                " array(SELECT DISTINCT array_to_string(provenance_purposes, '+')"
                "       FROM memory WHERE id = ANY(%s::uuid[]) ORDER BY 1)"
                " FROM memory WHERE id = ANY(%s::uuid[])",
                (ids, ids),
            ).fetchone()
            assert row is not None
            out[role] = {
                "memories": row[0],
                "provenance_forgotten": row[1],
                "workspace_audience": row[2],
                "forgotten": row[3],
                "purposes": list(row[4]),
            }
    return out


def read_provenance(stack: Stack, layout: Layout) -> dict[str, Any]:
    try:
        return stored_provenance(workspace_url(stack, layout), layout)
    except Exception as exc:  # the figures stand without it
        log(f"stored provenance not read: {exc!r}")
        return {"error": repr(exc)}


def timed_forget(client: Client, memory_id: str, reason: str) -> float:
    """Milliseconds of one Forget through the gateway."""
    started = time.perf_counter()
    client.forget(memory_id, reason)
    return (time.perf_counter() - started) * 1000


def forget_root(
    client: Client, layout: Layout, stack: Stack, baseline: int, embed_timeout: float
) -> dict[str, Any]:
    """Phase 2's write: forgets the first fan-in root, timed, next to forgets
    of fresh memories nothing links to; then counts the marks it left."""
    fresh = [
        client.remember(
            f"walk baseline {i}", "a plain memory nothing links to", audience_to="workspace"
        ).memory.id
        for i in range(baseline)
    ]
    if fresh:
        client.wait_embedded(timeout=embed_timeout, poll=0.5)
    baseline_ms = [timed_forget(client, m, "walk benchmark: forget baseline") for m in fresh]
    root = layout.roles["fan-in/root"][0]
    root_ms = timed_forget(client, root, "walk benchmark: forget through a 1,000-wide fan-in")
    expected = sum(len(layout.roles.get(role, [])) for role in REACHES_FAN_ROOTS)
    after = read_provenance(stack, layout)
    marked = None if "error" in after else sum(s["provenance_forgotten"] for s in after.values())
    out: dict[str, Any] = {
        "root_ms": round(root_ms, 1),
        "baseline_ms_median": round(statistics.median(baseline_ms), 1) if baseline_ms else None,
        "baseline_ms": [round(x, 1) for x in baseline_ms],
        "reach_root": expected,
        "marked": marked,
        "provenance_after": after,
    }
    log(
        f"forget: root {out['root_ms']} ms (fresh memory median "
        f"{out['baseline_ms_median']} ms); marked {marked} of {expected} reaching it"
    )
    return out


# -- measuring -----------------------------------------------------------------


@dataclass
class Seen:
    """What the recalls of one set returned."""

    admitted: list[int] = field(default_factory=list)
    found: int = 0
    # Returned memories of a walk set by role; the deepest chain member.
    roles: Counter[str] = field(default_factory=Counter)
    deepest_returned: int = -1
    # Chain depth band start -> [queries for a member of the band, found].
    depth_found: dict[int, list[int]] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        a = self.admitted
        return {
            "admitted_mean": round(statistics.fmean(a), 1) if a else None,
            "admitted_min": min(a) if a else None,
            "admitted_max": max(a) if a else None,
            "target_found_share": round(self.found / len(a), 3) if a else None,
            "returned_by_role": dict(self.roles),
            "deepest_chain_returned": self.deepest_returned,
            "chain_found_by_depth": {
                f"{band}-{band + DEPTH_BAND - 1}": f"{n[1]}/{n[0]}"
                for band, n in sorted(self.depth_found.items())
            },
        }


class Observer:
    """Maps each query to its set and coded memory; records what came back."""

    def __init__(self, layout: Layout, targets: dict[str, tuple[str, str]]) -> None:
        self.layout = layout
        self.targets = targets  # query -> (set, target id or "")
        self.seen: dict[str, Seen] = {}
        self.lock = threading.Lock()

    def reset(self) -> None:
        with self.lock:
            self.seen = {}

    def observe(self, query: str, response: Any) -> None:
        set_name, target = self.targets[query]
        outcome = response.outcome
        ids = [r.memory.id for r in outcome.results]
        with self.lock:
            s = self.seen.setdefault(set_name, Seen())
            s.admitted.append(outcome.counts.admitted)
            s.found += bool(target) and target in ids
            placed_target = self.layout.memories.get(target) if target else None
            if placed_target is not None and placed_target.set == "chain":
                band = placed_target.depth // DEPTH_BAND * DEPTH_BAND
                counts = s.depth_found.setdefault(band, [0, 0])
                counts[0] += 1
                counts[1] += target in ids
            for memory_id in ids:
                placed = self.layout.memories.get(memory_id)
                if placed is None:
                    continue
                s.roles[f"{placed.set}/{placed.role}"] += 1
                if placed.set == "chain":
                    s.deepest_returned = max(s.deepest_returned, placed.depth)


def set_pools(
    layout: Layout, sets: Sequence[str], base: list[str]
) -> tuple[dict[str, list[str]], dict[str, list[str]], dict[str, tuple[str, str]]]:
    """(measured pools, warm-up queries, query -> (set, target)): each set's
    "<marker> <code>" queries in a fixed shuffled order; `base` the ordinary
    questions. The warm-up queries are left out of the pools."""
    import random

    pools: dict[str, list[str]] = {}
    warm: dict[str, list[str]] = {}
    targets: dict[str, tuple[str, str]] = {}
    for name in sets:
        if name == BASE:
            queries = list(base)
            for q in queries:
                targets[q] = (BASE, "")
        else:
            coded = list(layout.codes[name])
            random.Random(f"walk:{name}").shuffle(coded)
            queries = []
            for code, memory_id in coded:
                q = f"{MARKERS[name]} {code}"
                targets[q] = (name, memory_id)
                queries.append(q)
        warm[name], pools[name] = queries[:WARMUP_PER_SET], queries[WARMUP_PER_SET:]
    return pools, warm, targets


def _stage_sums(port: int) -> dict[str, tuple[float, float]]:
    """(sum, count) of the rank service's stage histogram, by stage."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out: dict[str, tuple[float, float]] = {}
    for line in text.splitlines():
        for kind in ("sum", "count"):
            prefix = f'recallatron_rank_stage_seconds_{kind}{{stage="'
            if line.startswith(prefix):
                stage = line[len(prefix) :].split('"')[0]
                total, count = out.get(stage, (0.0, 0.0))
                value = float(line.rsplit(" ", 1)[1])
                out[stage] = (value, count) if kind == "sum" else (total, value)
    return out


def stage_pass(
    recall: Callable[[str], Any], queries: Sequence[str], port: int
) -> dict[str, float | int]:
    """Mean ms per rank stage over sequential recalls of one set."""
    before = _stage_sums(port)
    errors = 0
    for q in queries:
        try:
            recall(q)
        except Exception:  # counted, not fatal
            errors += 1
    after = _stage_sums(port)
    out: dict[str, float | int] = {}
    for stage in ("lexical", "dense", "walk", "recall"):
        total, count = after.get(stage, (0.0, 0.0))
        total0, count0 = before.get(stage, (0.0, 0.0))
        if count > count0:
            out[f"{stage}_ms"] = round((total - total0) / (count - count0) * 1000, 2)
    out["queries"] = len(queries)
    out["errors"] = errors
    return out


def run_phase(
    name: str,
    client: Client,
    observer: Observer,
    pools: dict[str, list[str]],
    warm: dict[str, list[str]],
    args: argparse.Namespace,
    rank_port: int,
) -> dict[str, Any]:
    """Per mode: a warm-up, one interleaved closed-loop run over every set,
    then a sequential stage pass per set."""
    out: dict[str, Any] = {"name": name, "sets": list(pools), "modes": {}}
    for mode in MODES:

        def recall(query: str, mode: str = mode) -> Any:
            response = client.recall(query, mode=mode, limit=10, skip_rerank=True, timeout=10)
            observer.observe(query, response)
            return response

        for queries in warm.values():
            for q in queries:
                recall(q)
        observer.reset()
        mix = QueryMix(pools)
        result = measure(recall, mix, args.duration, concurrency=1)
        if result["exhausted"]:
            log(f"{name} {mode}: stopped early, a set ran out of distinct queries")
        seen = {k: s.summary() for k, s in observer.seen.items()}
        stages = {
            k: stage_pass(recall, list(reversed(pool))[: args.stage_queries], rank_port)
            for k, pool in pools.items()
        }
        control = result["classes"].get(CONTROL, {}).get("p50_ms") or 0.0
        sets: dict[str, Any] = {}
        for k, c in result["classes"].items():
            sets[k] = {
                **c,
                "p50_over_control": round(c["p50_ms"] / control, 2) if control else None,
                **(seen.get(k) or Seen().summary()),
                "stages": stages[k],
            }
        out["modes"][mode] = {
            "overall": {key: result[key] for key in ("p50_ms", "p99_ms", "requests", "errors")},
            "distinct_queries": result["distinct_queries"],
            "repeats": result["repeats"],
            "sets": sets,
        }
        log(
            f"{name} {mode}: "
            + ", ".join(f"{k} p50 {v['p50_ms']} p99 {v['p99_ms']}" for k, v in sets.items())
        )
    return out


# -- the run -------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    state_dir = Path(tempfile.mkdtemp(prefix="recallatron-walk-"))
    rank_port = free_port()
    stack = Stack(
        own_config(state_dir, models_dir(), env=FAST_JOB, metrics_ports={"rank": rank_port})
    )
    log(f"code: {Path(services.__file__).parent.parent}; state: {state_dir}")
    load_before = os.getloadavg()
    with running(stack, remove_state=not args.keep_state):
        admin = Client(stack.gateway, stack.admin_token, timeout=60)
        creds = state_dir / "load-creds"
        client = seed_workspace(
            admin, stack.gateway, args.memories, args.seed, creds, log, members=1
        )[0]
        layout = Layout()
        layout.workspace_id = json.loads(next(creds.glob("*.json")).read_text())["workspace_id"]
        # Code words past every rare word the base corpus uses, one per memory.
        chain_codes = synthetic.rare_vocabulary(args.memories) + 1000
        fan_total = args.fan_roots + args.fan + args.fan // args.hub_sources + args.apexes
        fan_codes = chain_codes + args.chain + 1
        control_codes = fan_codes + fan_total
        if control_codes + args.control > len(synthetic.SYLLABLES) ** 4:
            raise SystemExit("walk_bench: too many memories for distinct code words")
        started = time.perf_counter()
        chain_texts = Texts("chain", args.chain + 1, args.seed + 1, chain_codes)
        seed_chain(client, layout, args.chain, chain_texts)
        seed_fan(client, layout, args, Texts("fan-in", fan_total, args.seed + 2, fan_codes))
        control_texts = Texts("control", args.control, args.seed + 3, control_codes)
        seed_control(client, layout, args.control, control_texts)
        seeded_s = time.perf_counter() - started
        log(f"walk sets seeded in {seeded_s:.1f}s")
        started = time.perf_counter()
        status = client.wait_embedded(timeout=args.embed_timeout, poll=1.0)
        embed_s = time.perf_counter() - started
        log(f"embedded {status.embedded}/{status.memories} (waited {embed_s:.1f}s)")
        provenance = read_provenance(stack, layout)
        base = synthetic.query_mix(2000, args.memories, args.seed, args.seed + 1, ("question",))
        sets = ["chain", "fan-in", CONTROL, BASE]
        pools, warm, targets = set_pools(layout, sets, base["question"])
        observer = Observer(layout, targets)
        phases = [run_phase("all visible", client, observer, pools, warm, args, rank_port)]
        # Phase 2: one fan-in root forgotten; the forget marks what reaches it.
        forget = forget_root(client, layout, stack, args.forget_baseline, args.embed_timeout)
        pools2 = {k: pools[k] for k in ("fan-in", CONTROL)}
        warm2 = {k: warm[k] for k in pools2}
        phases.append(
            run_phase("a fan-in root forgotten", client, observer, pools2, warm2, args, rank_port)
        )
    if args.keep_state:
        log(f"kept {state_dir}")
    load_after = os.getloadavg()
    return {
        "command": shlex.join(["python", "-m", "benchmarks.walk_bench", *sys.argv[1:]]),
        "code": str(Path(services.__file__).parent.parent),
        "machine": {
            "cpus": os.cpu_count(),
            "arch": platform.machine(),
            "python": platform.python_version(),
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in load_after],
        },
        "corpus": {
            "base_memories": args.memories,
            "memories": status.memories,
            "by_role": {role: len(ids) for role, ids in layout.roles.items()},
            "stored_provenance": provenance,
            "walk_sets_seed_s": round(seeded_s, 1),
            "embed_wait_s": round(embed_s, 1),
        },
        "duration_s": args.duration,
        "phases": phases,
        "forget": forget,
        "target": verdict(phases),
    }


def verdict(phases: list[dict[str, Any]]) -> dict[str, Any]:
    """p50 over the control's, per set other than control and base, per mode
    and phase; met when each is within TARGET_RATIO."""
    ratios: dict[str, float | None] = {}
    for phase in phases:
        for mode, m in phase["modes"].items():
            for name, s in m["sets"].items():
                if name not in (CONTROL, BASE):
                    ratios[f"{phase['name']} / {mode} / {name}"] = s["p50_over_control"]
    met = all(r is not None and r <= TARGET_RATIO for r in ratios.values())
    return {"max_ratio": TARGET_RATIO, "p50_over_control": ratios, "met": met}


# -- output --------------------------------------------------------------------


def _notes(name: str, s: dict[str, Any]) -> str:
    roles = s.get("returned_by_role", {})
    if name == "chain":
        bands = ", ".join(f"{k} {v}" for k, v in s.get("chain_found_by_depth", {}).items())
        return (
            f"deepest returned {s['deepest_chain_returned']}; "
            f"coded member found by depth: {bands or '-'}"
        )
    if name == "fan-in":
        shown = ", ".join(
            f"{role.split('/')[1]} {n}"
            for role, n in sorted(roles.items())
            if role.startswith("fan-in/")
        )
        return f"returned: {shown or 'none of the set'}"
    return ""


def _provenance_line(title: str, p: dict[str, Any]) -> str:
    if "error" in p:
        return f"{title}: not read ({p['error']})."
    return (
        f"{title} (memories: provenance_forgotten, workspace audience, forgotten; purposes): "
        + "; ".join(
            f"{role} {s['memories']}: {s['provenance_forgotten']}, {s['workspace_audience']}, "
            f"{s['forgotten']}; {'/'.join(s['purposes']) or '-'}"
            for role, s in p.items()
        )
        + "."
    )


def render(r: dict[str, Any]) -> str:
    m = r["machine"]
    c = r["corpus"]
    lines = [
        f"$ {r['command']}",
        "",
        f"Code {r['code']}; {m['cpus']} cores ({m['arch']}), Python {m['python']}; load "
        f"average {m['loadavg_before'][0]} before, {m['loadavg_after'][0]} after (shared "
        f"machine).",
        f"Corpus: {c['base_memories']:,} base + walk sets = {c['memories']:,} memories "
        f"({', '.join(f'{k} {v}' for k, v in c['by_role'].items())}); walk sets seeded in "
        f"{c['walk_sets_seed_s']} s, embeddings waited {c['embed_wait_s']} s.",
    ]
    lines.append(_provenance_line("Stored provenance after seeding", c["stored_provenance"]))
    lines += [
        "",
        f"Recall through the gateway, concurrency 1, skip_rerank, limit 10, {r['duration_s']} s "
        "per mode, sets interleaved round robin; walk ms: the rank service's mean `walk` "
        "stage over a separate sequential pass per set.",
        "",
        "| phase | mode | set | p50 ms | p99 ms | requests | p50 / control | walk ms | "
        "admitted mean (min-max) | coded memory found | notes |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for phase in r["phases"]:
        for mode, mr in phase["modes"].items():
            for name, s in mr["sets"].items():
                admitted = (
                    f"{s['admitted_mean']} ({s['admitted_min']}-{s['admitted_max']})"
                    if s["admitted_mean"] is not None
                    else "-"
                )
                found = (
                    f"{s['target_found_share']:.0%}"
                    if name != BASE and s["target_found_share"] is not None
                    else "-"
                )
                ratio = s["p50_over_control"] if s["p50_over_control"] is not None else "-"
                errors = sum(s["errors"].values())
                notes = _notes(name, s) + (f"; {errors} errors" if errors else "")
                lines.append(
                    f"| {phase['name']} | {mode} | {name} | {s['p50_ms']} | {s['p99_ms']} | "
                    f"{s['requests']} | {ratio} | {s['stages'].get('walk_ms', '-')} | "
                    f"{admitted} | {found} | {notes} |"
                )
    f = r["forget"]
    lines += [
        "",
        f"Phase 2's forget of one fan-in root (through the gateway): {f['root_ms']} ms; "
        f"forgets of fresh memories nothing links to: median {f['baseline_ms_median']} ms "
        f"({', '.join(str(x) for x in f['baseline_ms']) or '-'}). provenance_forgotten "
        f"marked on {f['marked']} memories; {f['reach_root']} reach the root "
        f"({' + '.join(REACHES_FAN_ROOTS)}).",
        _provenance_line("Stored provenance after the forget", f["provenance_after"]),
    ]
    t = r["target"]
    lines += [
        "",
        f"Target (p50 within {t['max_ratio']}x of the control): "
        + ("met" if t["met"] else "NOT met")
        + " - "
        + ", ".join(f"{k} {v}" for k, v in t["p50_over_control"].items())
        + ".",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--duration", type=float, default=20.0, help="seconds measured per mode")
    p.add_argument("--memories", type=int, default=2000, help="base corpus")
    p.add_argument("--chain", type=int, default=1000, help="derives in the chain")
    p.add_argument("--fan", type=int, default=1000, help="memories derived from the roots")
    p.add_argument("--fan-roots", type=int, default=5, help="sources of each fan memory")
    p.add_argument(
        "--hub-sources", type=int, default=MAX_SOURCES, help="fan memories per hub (<= 50)"
    )
    p.add_argument("--apexes", type=int, default=20, help="memories derived from every hub")
    p.add_argument("--control", type=int, default=1000, help="plain memories")
    p.add_argument(
        "--stage-queries", type=int, default=60, help="sequential recalls per set for stage times"
    )
    p.add_argument(
        "--forget-baseline",
        type=int,
        default=5,
        help="fresh unlinked memories forgotten (timed) before the root",
    )
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--embed-timeout", type=float, default=3600.0)
    p.add_argument("--keep-state", action="store_true", help="keep the temporary state dir")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if not 1 <= args.fan_roots <= MAX_SOURCES or not 1 <= args.hub_sources <= MAX_SOURCES:
        p.error(f"--fan-roots and --hub-sources must lie in [1, {MAX_SOURCES}]")
    r = run(args)
    print(json.dumps(r) if args.json else render(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
