"""Where the store's part of a recall goes on a workspace just woken (design
§10; docs/benchmarks.md, "Many workspaces on one server"), in one process:
the store's own domain code (entity cards, lexical arm, dense arm) on a
budget of its settings, each workspace visited once on a new backend, against
the same calls repeated on one workspace whose connection stays open.

    python -m benchmarks.tenants --workspaces 150 --breakdown --state-dir DIR
    python -m benchmarks.cold_workspace --state-dir DIR [--workspaces 100]

It starts only the state directory's embedded Postgres. Each connect the
budget makes is timed apart, so the table separates the backend's start from
its first statements. The first visit to a database after the server starts
also rebuilds that database's relation cache file; `--visits 2` visits each
workspace twice and reports the second round, as a server that has run for a
while sees it. `--statements` adds each statement the calls send, its median
on a backend just opened against warm (times per recall: a statement some
recalls skip counts for its share)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from recallatron.vocabulary import DEFAULT_PURPOSE
from recallatron_devkit.load import models_dir
from recallatron_devkit.stack import Stack, own_config
from services.store.domain.control import ControlPlane
from services.store.domain.graph import GraphStore
from services.store.domain.recall import Filters, RecallQueries
from services.store.infrastructure import budget
from services.store.infrastructure.db import Caller, Databases
from services.store.settings import StoreSettings

MODEL = "all-MiniLM-L6-v2"
QUERY = "report filed"
MEMBERS = """
SELECT w.id::text, (SELECT m.id::text FROM member m
                    WHERE m.workspace_id = w.id AND m.removed_at IS NULL LIMIT 1)
FROM workspace w ORDER BY w.created_at
"""


def timed_connects() -> list[float]:
    """Times every connect the budget makes (ms), from now on."""
    times: list[float] = []
    connect = psycopg.connect

    def timed(*args: Any, **kwargs: Any) -> psycopg.Connection:
        started = time.perf_counter()
        conn = connect(*args, **kwargs)
        times.append((time.perf_counter() - started) * 1000)
        return conn

    budget.psycopg.connect = timed  # type: ignore[assignment]
    return times


def timed_statements() -> list[tuple[str, float]]:
    """Times every statement sent from now on (ms), each keyed by its first
    words: what a backend just opened pays for its first statements."""
    times: list[tuple[str, float]] = []
    execute = psycopg.Cursor.execute

    def timed(self: psycopg.Cursor[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(self, query, *args, **kwargs)
        finally:
            text = query if isinstance(query, str) else repr(query)
            times.append((" ".join(text.split())[:60], (time.perf_counter() - started) * 1000))

    psycopg.Cursor.execute = timed  # type: ignore[method-assign]
    return times


def per_statement(
    cold: list[tuple[str, float]], warm: list[tuple[str, float]], recalls: int
) -> dict[str, dict[str, float]]:
    """Median ms of each statement, just woken and warm, and how often a recall sends it."""
    out: dict[str, dict[str, float]] = {}
    for name, runs in (("just woken", cold), ("warm", warm)):
        by: dict[str, list[float]] = {}
        for key, ms in runs:
            by.setdefault(key, []).append(ms)
        for key, values in by.items():
            row = out.setdefault(key, {})
            row[name] = round(statistics.median(values), 2)
            row[f"{name}, per recall"] = round(len(values) / recalls, 2)
    return out


def stages(calls: dict[str, Callable[[], object]]) -> dict[str, float]:
    out = {}
    for name, call in calls.items():
        started = time.perf_counter()
        call()
        out[name] = (time.perf_counter() - started) * 1000
    return out


def run(state_dir: Path, workspaces: int, visits: int, statements: bool = False) -> dict[str, Any]:
    stack = Stack(own_config(state_dir, models_dir()))
    stack.start_postgres()
    try:
        os.environ.update(stack.env_for("store"))
        settings = StoreSettings()
        dbs = Databases(settings)
        dbs.bootstrap()
        control = ControlPlane(dbs)
        arms, graph = RecallQueries(control, settings.dense_exact_rows), GraphStore(control)
        connects = timed_connects()
        sent = timed_statements() if statements else []
        with dbs.control_conn() as conn:
            found = [(w, m) for w, m in conn.execute(MEMBERS).fetchall() if m]
        if len(found) < workspaces + 1:
            raise SystemExit(f"{state_dir} holds {len(found)} workspaces; make more with tenants")
        vector = np.random.default_rng(1).standard_normal(384).astype(np.float32)
        vector = (vector / np.linalg.norm(vector)).tolist()

        def recall(workspace: str, member: str) -> dict[str, float]:
            caller = Caller(workspace, member, DEFAULT_PURPOSE)
            before = len(connects)
            out = stages(
                {
                    "entity cards": lambda: graph.named_in(caller, QUERY),
                    "lexical arm": lambda: arms.lexical(caller, QUERY, 50, Filters()),
                    "dense arm": lambda: arms.dense(caller, vector, MODEL, "1", 50, Filters()),
                }
            )
            out["connect"] = sum(connects[before:])
            return out

        cold: list[dict[str, float]] = []
        for _ in range(visits):
            sent.clear()
            cold = [recall(w, m) for w, m in found[1 : workspaces + 1]]
        sent_cold = list(sent)
        warm = [recall(*found[0]) for _ in range(10)]
        sent.clear()
        warm = [recall(*found[0]) for _ in range(workspaces)]
        sent_warm = list(sent)
    finally:
        stack.stop()
    report: dict[str, Any] = {"workspaces": workspaces, "visit_reported": visits}
    for name, runs in (("just woken", cold), ("warm", warm)):
        report[name] = {k: round(statistics.median(r[k] for r in runs), 2) for k in runs[0]}
    if statements:
        report["statements"] = per_statement(sent_cold, sent_warm, workspaces)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--workspaces", type=int, default=100)
    parser.add_argument("--visits", type=int, default=2, choices=(1, 2))
    parser.add_argument("--statements", action="store_true", help="each statement's cost too")
    args = parser.parse_args(argv)
    report = run(args.state_dir, args.workspaces, args.visits, args.statements)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
