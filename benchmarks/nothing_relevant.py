"""`nothing_relevant` measured as a detector, and the dense floor's rule run
on each dataset (docs/recall.md, "Nothing relevant" and "The floor rule"):

    python -m benchmarks.nothing_relevant ../shared/eval/locomo-dev/conv-26 \\
        ../shared/eval/locomo-dev/conv-30 ../shared/eval/locomo-dev/conv-41 \\
        --signals docs/benchmarks/nothing_relevant.json --out docs/benchmarks/nothing_relevant.md

It starts a temporary local stack, loads each dataset into a workspace of its
own (as `recallatron eval` does), and runs every dataset's judged questions
against every workspace (hybrid, limit 10, no cross-encoder): a workspace's own
questions should rarely be flagged, another conversation's (other people,
other events) nearly always. For each recall it keeps the flag the service
answered and the returned rows' scores, so the trade-off curve and the
leave-one-out choice of the thresholds are computed from the same answers
(`--from-signals FILE` redoes that part without a stack).

Then, per workspace: `calibrate-floor`'s rule (services/store/domain/floor.py)
and recall quality with the floor it chooses against the default 0.30."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from recallatron.settings import default_state_dir
from recallatron.vocabulary import MAX_QUERY_CHARS
from recallatron_devkit.evaluate import (
    DEPTH,
    Dataset,
    Workspace,
    _retrying,
    load_dataset,
    mean,
    query_metrics,
)
from recallatron_devkit.stack import FAST_JOB, Stack, own_config, running
from services.rank.fusion import Scores
from services.rank.relevance import RELEVANT_COSINE, nothing_relevant

WORKERS = 2
SETTINGS_SETTLE_SECONDS = 11.0
CALIBRATE = [sys.executable, "-m", "recallatron_cli.main", "calibrate-floor", "--json", "--apply"]
# The leave-one-out choice: at most this share of the training conversations'
# own questions flagged (a margin under the 10% target), over these thresholds.
OWN_BUDGET = 0.03
THRESHOLDS = [round(0.40 + 0.01 * i, 2) for i in range(31)]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _rows(outcome: Any) -> list[list[float]]:
    """The returned rows' scores: [lexical_rank, lexical_score, dense_rank,
    dense_cosine, matches_every_term (1 or 0)]."""
    return [
        [
            r.scores.lexical_rank,
            r.scores.lexical_score,
            r.scores.dense_rank,
            r.scores.dense_cosine,
            int(r.scores.matches_every_term),
        ]
        for r in outcome.results
    ]


def _scores(row: Sequence[float]) -> Scores:
    """A recorded row's scores (a record made before matches_every_term has four)."""
    every = len(row) > 4 and bool(row[4])
    return Scores(int(row[0]), float(row[1]), int(row[2]), float(row[3]), matches_every_term=every)


def collect(ws: Workspace, datasets: Sequence[Dataset]) -> list[dict[str, Any]]:
    """Every dataset's questions against ``ws``: one record per recall."""
    out: list[dict[str, Any]] = []
    for dataset in datasets:

        def one(query: Any, ds: Dataset = dataset) -> dict[str, Any]:
            for _ in range(5):
                resp = _retrying(
                    lambda: ws.client.recall(
                        query.text[:MAX_QUERY_CHARS], mode="hybrid", limit=DEPTH, skip_rerank=True
                    )
                )
                if resp.outcome.dense_available:
                    break
                time.sleep(0.5)
            outcome = resp.outcome
            docs = [ws.doc_of.get(r.memory.id, "") for r in outcome.results]
            own = ds.name == ws.dataset.name
            return {
                "workspace": ws.dataset.name,
                "queries": ds.name,
                "query": query.id,
                "category": query.category,
                "flagged": outcome.nothing_relevant,
                "dense_available": outcome.dense_available,
                "rows": _rows(outcome),
                "metrics": query_metrics(docs, ds.qrels[query.id]) if own else None,
            }

        with ThreadPoolExecutor(WORKERS) as pool:
            out.extend(pool.map(one, dataset.queries))
        log(f"{ws.dataset.name}: {dataset.name}'s questions done")
    return out


@contextmanager
def own_stack() -> Iterator[Stack]:
    """A whole local stack in a temporary directory (as `recallatron eval`
    starts one), the Stack itself: the floor's command runs beside it."""
    state = Path(tempfile.mkdtemp(prefix="recallatron-nothing-relevant-"))
    models = Path(os.environ.get("RECALLATRON_MODELS_DIR") or default_state_dir() / "models")
    log(f"starting a temporary stack in {state} ...")
    with running(Stack(own_config(state, models, env=FAST_JOB)), remove_state=True) as stack:
        yield stack


def own_quality(ws: Workspace, mode: str) -> dict[str, Any]:
    rows = []
    for query in ws.dataset.queries:
        run, _ = ws.run(query, mode, rerank=False)
        rows.append(query_metrics([h.doc for h in run.hits], ws.dataset.qrels[query.id]))
    return {**mean(rows), "queries": len(rows)}


def floor_run(stack: Stack, ws: Workspace) -> dict[str, Any]:
    """`recallatron calibrate-floor --apply` on the workspace, and recall
    quality on its own questions with the default floor and with the chosen
    one (dense and hybrid)."""
    before = {mode: own_quality(ws, mode) for mode in ("dense", "hybrid")}
    proc = subprocess.run(
        [*CALIBRATE, "--workspace", ws.workspace.slug],
        env=stack.env_for("embedding-job"),
        capture_output=True,
        text=True,
        check=True,
    )
    chosen = json.loads(proc.stdout)
    # The store's and rank's settings caches (5 s each) let the new floor in.
    time.sleep(SETTINGS_SETTLE_SECONDS)
    after = {mode: own_quality(ws, mode) for mode in ("dense", "hybrid")}
    log(f"{ws.dataset.name}: floor {chosen['floor']}")
    return {"calibration": chosen, "default_floor": before, "chosen_floor": after}


def floor_table(floors: dict[str, Any]) -> str:
    lines = [
        "| dataset | floor chosen | off-topic blocked | pairs kept | meets the rule | "
        "mode | Recall@10 at 0.30 | Recall@10 at the floor | nDCG@10 at 0.30 | "
        "nDCG@10 at the floor |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, run in sorted(floors.items()):
        c = run["calibration"]
        for mode in ("dense", "hybrid"):
            a, b = run["default_floor"][mode], run["chosen_floor"][mode]
            lines.append(
                f"| {name} | {c['floor']:.2f} | {100 * c['off_topic_blocked']:.1f}% of "
                f"{c['off_topic_queries']} | {100 * c['pairs_kept']:.1f}% of {c['pairs']} | "
                f"{'yes' if c['meets_rule'] else 'no'} | {mode} | {a['recall@10']:.3f} | "
                f"{b['recall@10']:.3f} | {a['ndcg@10']:.3f} | {b['ndcg@10']:.3f} |"
            )
    return "\n".join(lines)


# -- the analysis ------------------------------------------------------------------


def flag(record: dict[str, Any], threshold: float = RELEVANT_COSINE) -> bool:
    """The service's rule (services/rank/relevance.py) on a recorded answer."""
    rows = [_scores(r) for r in record["rows"]]
    return nothing_relevant(rows, bool(record["dense_available"]), threshold)


def rates(
    records: Sequence[dict[str, Any]], flag: Any = None
) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (workspace, questions) pair: how many questions, how many flagged."""
    table: dict[tuple[str, str], dict[str, Any]] = {}
    for r in records:
        key = (r["workspace"], r["queries"])
        row = table.setdefault(key, {"questions": 0, "flagged": 0})
        row["questions"] += 1
        row["flagged"] += int(r["flagged"] if flag is None else flag(r))
    for row in table.values():
        row["rate"] = round(row["flagged"] / row["questions"], 4)
    return table


def pair_table(records: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| workspace | questions of | questions | flagged | rate | target |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for (ws, qs), row in sorted(rates(records).items()):
        own = ws == qs
        target = "at most 10%" if own else "at least 90%"
        lines.append(
            f"| {ws} | {qs} | {row['questions']} | {row['flagged']} | "
            f"{100 * row['rate']:.1f}% | {target} |"
        )
    return "\n".join(lines)


def _share(records: Sequence[dict[str, Any]], threshold: float) -> float:
    return sum(flag(r, threshold) for r in records) / max(1, len(records))


def curve(records: Sequence[dict[str, Any]], steps: Sequence[float]) -> str:
    """Own questions flagged against other questions flagged, as the
    threshold moves."""
    own = [r for r in records if r["workspace"] == r["queries"]]
    other = [r for r in records if r["workspace"] != r["queries"]]
    lines = [
        "| threshold | own questions flagged | other questions flagged |",
        "| --- | --- | --- |",
    ]
    for t in steps:
        lines.append(f"| {t:.2f} | {100 * _share(own, t):.1f}% | {100 * _share(other, t):.1f}% |")
    return "\n".join(lines)


def leave_one_out(records: Sequence[dict[str, Any]], budget: float = OWN_BUDGET) -> str:
    """For each conversation: the threshold chosen on the other two (the
    highest whole hundredth flagging at most ``budget`` of their own
    questions), and what it does on the pairs involving the held-out one."""
    names = sorted({r["workspace"] for r in records})
    lines = [
        "| held out | threshold chosen on the others | own flagged (others) | workspace | "
        "questions of | flagged |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for held in names:
        train = [r for r in records if held not in (r["workspace"], r["queries"])]
        own = [r for r in train if r["workspace"] == r["queries"]]
        fits = [t for t in THRESHOLDS if _share(own, t) <= budget]
        chosen = max(fits) if fits else min(THRESHOLDS)
        for ws, qs in sorted(rates(records)):
            if held not in (ws, qs):
                continue
            pair = [r for r in records if (r["workspace"], r["queries"]) == (ws, qs)]
            lines.append(
                f"| {held} | {chosen:.2f} | {100 * _share(own, chosen):.1f}% | {ws} | {qs} | "
                f"{100 * _share(pair, chosen):.1f}% |"
            )
    return "\n".join(lines)


def judge_cost(records: Sequence[dict[str, Any]], rounds: int = 20) -> dict[str, float]:
    """The rule's own time per recall (microseconds), over the recorded
    answers: all the signal adds to a recall (it reads scores in memory)."""
    answers = [([_scores(r) for r in rec["rows"]], True) for rec in records]
    times = []
    for _ in range(rounds):
        for rows, dense in answers:
            start = time.perf_counter()
            nothing_relevant(rows, dense)
            times.append(time.perf_counter() - start)
    times.sort()
    return {
        "calls": len(times),
        "p50_us": round(1e6 * times[len(times) // 2], 2),
        "p99_us": round(1e6 * times[int(len(times) * 0.99)], 2),
    }


def quality(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    own = [r["metrics"] for r in records if r["workspace"] == r["queries"] and r["metrics"]]
    return {**mean(own), "queries": len(own)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.nothing_relevant")
    parser.add_argument("datasets", nargs="*", type=Path)
    parser.add_argument("--signals", type=Path, help="write every recall's record here (JSON)")
    parser.add_argument("--from-signals", type=Path, help="analyse these records; no stack")
    parser.add_argument("--out", type=Path, help="write the report (Markdown) here")
    args = parser.parse_args(argv)

    if args.from_signals:
        data = json.loads(args.from_signals.read_text())
    else:
        datasets = [load_dataset(d) for d in args.datasets]
        data = {"records": [], "floors": {}}
        with own_stack() as stack:
            for dataset in datasets:
                ws = Workspace(stack.gateway, stack.admin_token, dataset)
                try:
                    ws.load()
                    ws.wait_embedded()
                    data["records"] += collect(ws, datasets)
                    data["floors"][dataset.name] = floor_run(stack, ws)
                finally:
                    ws.close()
        if args.signals:
            args.signals.write_text(json.dumps(data, indent=1))
    records = data["records"]
    agree = sum(flag(r) == r["flagged"] for r in records)
    report = "\n\n".join(
        [
            "## Flagged per pair of datasets (the service's own answers)",
            pair_table(records),
            f"The rule re-applied to the recorded rows agrees with the service's flag on "
            f"{agree} of {len(records)} answers.",
            "## Leave one out",
            leave_one_out(records),
            "## Trade-off (all pairs)",
            curve(records, [0.30 + 0.02 * i for i in range(16)]),
            "## The rule's own cost per recall",
            json.dumps(judge_cost(records)),
            "## Recall quality on the own questions (hybrid, floor 0.30)",
            json.dumps(quality(records)),
            "## calibrate-floor per dataset, and recall quality with its floor",
            floor_table(data.get("floors", {})),
        ]
    )
    print(report)
    if args.out:
        args.out.write_text(report + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
