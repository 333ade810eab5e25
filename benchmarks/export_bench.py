"""Export and import of the `recallatron load` workspace (10,000 memories)
plus a graph: the time each way, the archive's size, and whether the copy
answers as the original (docs/export.md, Benchmark).

    python -m benchmarks.export_bench [--memories 10000] [--graph 500] [--recalls 200]
                                      [--modes hybrid,lexical,dense] [--state-dir DIR]
                                      [--exact-dense] [--reindex-baseline] [--json]

Starts its own stack in --state-dir (kept: a second run reuses the seeded
workspace), seeds it through the gateway, adds --graph memories stating
claims, relations and aliases about 200 entities, waits for the embedding
job, then runs `recallatron export --vectors` and `recallatron import` as
an operator would and compares, for the owner: --recalls hybrid recalls
(the load tool's queries), a lookup of every entity name and alias of the
archive, and a read of --recalls memories.

With --exact-dense it then sets aside the vector indexes of both workspaces
(dropped, and built again from their definitions after), so that the dense
arm ranks every vector exactly, and asks both the dense and hybrid recalls
again: whether the copy's data answers as the original's, apart from its
approximate (HNSW) index, whose graph depends on random levels drawn at
build time and can never be the original's.

With --reindex-baseline it then asks the original the same recalls, builds
its vector indexes anew (REINDEX, as `recallatron rebuild` or a restore
would) and asks again: how far the original moves from itself when only its
approximate (HNSW) index is rebuilt, the yardstick for the copy's dense and
hybrid answers."""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from recallatron.client import Client
from recallatron.progress import Progress
from recallatron_devkit import synthetic
from recallatron_devkit.archive_check import (
    Calls,
    Comparison,
    compare,
    compare_with_record,
    record,
    summary,
)
from recallatron_devkit.load import models_dir
from recallatron_devkit.seeding import seed_workspace, wait_embedded
from recallatron_devkit.stack import Stack, own_config, running

ENTITIES = 200
PREDICATES = ("works_with", "reports_to", "owns", "depends_on")


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def seed_graph(owner: Client, count: int, creds: Path) -> None:
    """``count`` memories each stating two attribute claims and a relation
    about the 200 entities "Node <k>", every tenth an alias; once per state
    directory (recorded beside the load workspace's tokens)."""
    record = json.loads(creds.read_text()) if creds.exists() else {}
    if record.get("graph", 0) >= count:
        _log("reusing the seeded graph")
        return
    rng = random.Random(34)

    def write(i: int) -> None:
        k, j = i % ENTITIES, rng.randrange(ENTITIES)
        subject, other = f"Node {k}", f"Node {j if j != k else (j + 1) % ENTITIES}"
        owner.remember(
            f"Graph note {i} on {subject}",
            f"{subject} {PREDICATES[i % 4].replace('_', ' ')} {other}; round {i}.",
            kind="fact",
            audience_to="workspace",
            mention_names=[subject, other],
            claims=[
                {"entity": {"name": subject, "type": "node"}, "attribute": "round",
                 "value": str(i)},
                {"entity": {"name": subject}, "attribute": "tier", "value": str(i % 3),
                 "valid_from": f"20{10 + i % 15}-01-01T00:00:00Z"},
            ],
            relations=[
                {"subject": {"name": subject}, "predicate": PREDICATES[i % 4],
                 "object": {"name": other}}
            ],
            aliases=[{"entity": {"name": subject}, "alias": f"N{k}"}] if i % 10 == 0 else [],
            request_id=f"export-bench-graph-{i}",
        )  # fmt: skip

    with Progress("graph", total=count, unit="memories") as bar, ThreadPoolExecutor(8) as pool:
        for _ in pool.map(write, range(count)):
            bar.advance()
    creds.write_text(json.dumps({**record, "graph": count}))


def _cli(stack: Stack, *args: str) -> tuple[dict[str, Any], float]:
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "recallatron_cli.main", *args, "--json"],
        env={**stack.env_for("store"), "RECALLATRON_PROGRESS": "lines"},
        capture_output=True,
        text=True,
    )
    seconds = time.monotonic() - began
    if done.returncode != 0:
        sys.exit(f"{args[0]} failed: {done.stdout}{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result, seconds


def _names(archive: Path) -> list[str]:
    names: set[str] = set()
    for file, key in (("entities.jsonl", "name"), ("aliases.jsonl", "alias")):
        with (archive / file).open() as f:
            names.update(json.loads(line)[key] for line in f if line.strip())
    return sorted(names)


def _memory_ids(archive: Path, count: int) -> list[str]:
    with (archive / "memories.jsonl").open() as f:
        ids = [json.loads(line)["id"] for line in f if line.strip()]
    return random.Random(5).sample(ids, min(count, len(ids)))


def _workspace_url(stack: Stack, slug: str) -> str:
    control = stack.database_url.replace("/postgres?", "/recallatron?")
    with psycopg.connect(control) as conn:
        row = conn.execute(
            "SELECT database_name FROM workspace WHERE slug = %s", (slug,)
        ).fetchone()
    assert row is not None, slug
    return stack.database_url.replace("/postgres?", f"/{row[0]}?")


# Every HNSW index of a workspace's database, with its definition.
HNSW_INDEXES = """
SELECT c.relname, pg_get_indexdef(i.indexrelid)
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_am a ON a.oid = c.relam
WHERE a.amname = 'hnsw'
ORDER BY c.relname
"""


@contextmanager
def exact_dense(stack: Stack, slugs: Sequence[str]) -> Iterator[int]:
    """The workspaces' HNSW indexes dropped for the block, so the dense arm
    ranks every vector of the caller's purpose exactly (a scan and a sort),
    and built again from their definitions after; yields how many were set
    aside."""
    urls = [_workspace_url(stack, slug) for slug in slugs]
    aside: list[tuple[str, list[tuple[str, str]]]] = []
    try:
        for url in urls:
            with psycopg.connect(url, autocommit=True) as conn:
                indexes = [(str(r[0]), str(r[1])) for r in conn.execute(HNSW_INDEXES)]
                aside.append((url, indexes))
                for name, _definition in indexes:
                    conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(name)))
        yield sum(len(indexes) for _url, indexes in aside)
    finally:
        for url, indexes in aside:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("SET maintenance_work_mem = '256MB'")
                for _name, definition in indexes:
                    conn.execute(sql.SQL(definition))  # as Postgres printed it


def reindex_vectors(stack: Stack, slug: str) -> list[str]:
    """REINDEX every HNSW index of the workspace's database; their names."""
    url = _workspace_url(stack, slug)
    with psycopg.connect(url, autocommit=True) as conn:
        names = [
            str(r[0])
            for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE indexdef LIKE '%USING hnsw%'"
            ).fetchall()
        ]
        for name in names:
            conn.execute(sql.SQL("REINDEX INDEX {}").format(sql.Identifier(name)))
    return names


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--graph", type=int, default=500)
    parser.add_argument("--recalls", type=int, default=200)
    parser.add_argument(
        "--state-dir", default=str(Path(tempfile.gettempdir()) / "recallatron-export-bench")
    )
    parser.add_argument(
        "--modes", default="hybrid,lexical,dense", help="recall modes compared, each --recalls"
    )
    parser.add_argument(
        "--exact-dense",
        action="store_true",
        help="also compare the dense and hybrid recalls with both workspaces' vector indexes "
        "set aside (exact search)",
    )
    parser.add_argument(
        "--reindex-baseline",
        action="store_true",
        help="also compare the original with itself after its vector indexes are rebuilt",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    state = Path(args.state_dir)
    stack = Stack(own_config(state, models_dir()))
    with running(stack):
        admin = Client(stack.gateway, stack.admin_token, timeout=60)
        owner = seed_workspace(admin, stack.gateway, args.memories, 7, state / "creds", _log)[0]
        slug = f"load-{args.memories}-7"
        seed_graph(owner, args.graph, state / "creds" / f"{slug}.graph.json")
        wait_embedded(owner, timeout=3600)

        archive = state / "archive"
        shutil.rmtree(archive, ignore_errors=True)
        exported, export_seconds = _cli(
            stack, "export", "--workspace", slug, "--out", str(archive), "--vectors"
        )
        size = sum(p.stat().st_size for p in archive.iterdir())
        copy_slug = f"copy-{int(time.time())}"
        imported, import_seconds = _cli(stack, "import", str(archive), "--as", copy_slug)
        _log(f"export {export_seconds:.1f} s, import {import_seconds:.1f} s; comparing")

        source_owner = next(iter(json.loads((archive / "workspace.json").read_text())["members"]))
        new_owner = imported["members"][0]["id"]
        copy = Client(stack.gateway, admin.create_token(new_owner, "bench").token, timeout=60)
        queries = synthetic.queries(args.recalls, seed=11)
        calls = Calls(
            recalls=[(q, mode, "assist") for mode in args.modes.split(",") for q in queries],
            lookups=_names(archive),
            reads=_memory_ids(archive, args.recalls),
        )
        result = compare(owner, copy, calls, {new_owner: source_owner["id"]}, Comparison())
        out = {
            "memories": exported["counts"]["memories"],
            "entities": exported["counts"]["entities"],
            "claims": exported["counts"]["attribute_claims"]
            + exported["counts"]["relation_claims"],
            "vectors": exported["counts"]["vectors"],
            "archive_mb": round(size / 1e6, 1),
            "export_seconds": round(export_seconds, 1),
            "import_seconds": round(import_seconds, 1),
            "export_in_process_seconds": exported["seconds"],
            "import_in_process_seconds": imported["seconds"],
            "import_steps": imported["steps"],
            "queued_for_embedding": imported["queued_for_embedding"],
            **summary(result),
        }
        if args.exact_dense:
            dense = Calls(recalls=[c for c in calls.recalls if c[1] != "lexical"])
            with exact_dense(stack, (slug, copy_slug)) as aside:
                _log(f"set aside {aside} vector indexes of both workspaces; asking again")
                exact = compare(owner, copy, dense, {new_owner: source_owner["id"]}, Comparison())
            out["exact_dense"] = {
                "indexes_set_aside": aside,
                "same": exact.same,
                "same_results": exact.same_results,
                "compared": exact.compared,
                "differences": exact.differences[:3],
            }
        if args.reindex_baseline:
            recalls = Calls(recalls=calls.recalls)
            before = record(owner, recalls)
            names = reindex_vectors(stack, slug)
            _log(f"rebuilt {len(names)} vector indexes of the original; asking again")
            itself = compare_with_record(owner, recalls, before, Comparison())
            out["original_after_reindex"] = {
                "indexes": len(names),
                "same": itself.same,
                "same_results": itself.same_results,
                "compared": itself.compared,
            }
        print(json.dumps(out) if args.json else json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
