"""What ranking the rare terms' matches costs the lexical arm's capped path
(docs/recall.md, "Recall at scale"; migration 0036): the capped statement as
it was (`lexical_candidates_bm25_newest`, dropped by migration 0048 and
created again here by benchmarks.old_arms) against the
store's now (`lexical_candidates_bm25_capped`), interleaved query by query in
one database, as the services' role.

    python -m benchmarks.capped_cost [--memories 10000 100000] [--per-class 60] [--rounds 5]
        [--no-vacuum]

For each corpus size it starts a stack of its own and writes the synthetic
memories of `recallatron load` into its database, as benchmarks.bm25_cost
does, then vacuums it as the embedding job's upkeep would have
(--no-vacuum: analyzed only, as bm25_cost leaves it, the newest writes still
in the GIN index's pending list). The queries are the load tool's mix (rare,
common, entity, question) and `rare+common`: a rare word the corpus holds
beside one common word (the case the change is for). Only the queries the
store sends down the capped path are timed, both statements per call,
alternating which goes first. It prints, per query class, the medians and
90th percentiles of each and their ratios, and how many answers (rows, order
and scores) were the same: every one of a query without rare terms must be."""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import psycopg

from benchmarks import old_arms
from benchmarks.bm25_cost import (
    arm_params,
    as_the_services,
    compared,
    each_size,
    sizes_parser,
    timed,
)
from recallatron_devkit import synthetic
from services.store.domain import recall as r

# The capped statement before migration 0036, verbatim.
NEWEST = """
SELECT id::text, score FROM lexical_candidates_bm25_newest(
    %(tsquery)s::tsquery, %(terms)s::text[], %(idfs)s::float8[], %(limit)s, %(cap)s,
    %(prefilter)s, %(include_superseded)s, %(kinds)s::memory_kind[], %(expiry_days)s,
    %(entities)s::uuid[], %(by_index)s)
"""
# Words of the synthetic memories from about 5% of them (a project's noun)
# to about 30% (every decision, every call note): beside a rare word, each
# sends the query down the capped path from 10,000 memories.
COMMON_WORDS = [
    "decided", "talked", "weekly", "forward", "services", "customers", "Atlas", "Falcon",
]  # fmt: skip
PAIRED = "rare+common"


def query_classes(memories: int, per_class: int) -> dict[str, list[str]]:
    """The load tool's mix for this corpus, and rare words beside common ones."""
    mix = synthetic.query_mix(per_class, memories)
    words = synthetic.rare_words_used(memories)[-per_class:]
    mix[PAIRED] = [f"{w} {COMMON_WORDS[i % len(COMMON_WORDS)]}" for i, w in enumerate(words)]
    return mix


def answer(conn: psycopg.Connection, sql: str, params: dict[str, Any]) -> list[tuple[str, float]]:
    return [(row[0], float(row[1])) for row in conn.execute(sql, params)]


@dataclass
class Group:
    """One row of the report: its capped queries' answers and timings."""

    queries: int = 0
    # Capped queries: "capped", "with_rare", and of their answers "same"
    # (without rare terms) and "changed" (with them).
    counts: Counter[str] = field(default_factory=Counter)
    times: dict[str, list[float]] = field(default_factory=lambda: {"before": [], "after": []})

    def report(self) -> dict[str, Any]:
        # The rows over all classes count capped queries only.
        out: dict[str, Any] = {"queries": self.queries} if self.queries else {}
        n = self.counts
        out |= {
            "capped_queries": n["capped"],
            "with_rare_terms": n["with_rare"],
            "same_answers_without_rare_terms": f"{n['same']} of {n['capped'] - n['with_rare']}",
            "changed_answers_with_rare_terms": f"{n['changed']} of {n['with_rare']}",
        }
        return out | ratios(self.times) if self.times["after"] else out


def measure(url: str, owner: str, classes: dict[str, list[str]], rounds: int) -> dict[str, Any]:
    """Per class, and over all classes with rare terms and without: both
    statements' answers compared and their timings on the capped queries."""
    groups: dict[str, Group] = {name: Group(len(qs)) for name, qs in classes.items()}
    split = {True: Group(), False: Group()}
    order = [("before", NEWEST), ("after", r.LEXICAL_CAPPED)]
    with as_the_services(url, owner) as conn:
        for name, queries in classes.items():
            capped = []
            for query in queries:
                terms = r.query_terms(conn, query)
                if terms is not None and terms.capped:
                    capped.append((bool(terms.rare), arm_params(terms)))
            for rare, params in capped:
                differ = answer(conn, NEWEST, params) != answer(conn, r.LEXICAL_CAPPED, params)
                for g in groups[name], split[rare]:
                    g.counts.update(
                        capped=1, with_rare=rare, changed=rare and differ, same=not (rare or differ)
                    )
            for i, (rare, params) in enumerate(capped * rounds):
                for label, sql in order if i % 2 else order[::-1]:
                    took = timed(conn, sql, params)
                    groups[name].times[label].append(took)
                    split[rare].times[label].append(took)
    report = {name: g.report() for name, g in groups.items()}
    report["all, with rare terms"] = split[True].report()
    report["all, no rare term"] = split[False].report()
    return report


def ratios(times: dict[str, list[float]]) -> dict[str, Any]:
    """compared()'s medians and p50 ratio, with the p90 ratio beside them."""
    out = compared(times, "before", "after")
    out["p90_ratio"] = round(out["after"]["p90_ms"] / out["before"]["p90_ms"], 3)
    return out


def table(report: dict[str, dict[str, Any]]) -> str:
    """The report as the Markdown table of docs/benchmarks.md."""
    lines = [
        "| memories | class | capped queries (with rare terms) | before p50 / p90 ms"
        " | after p50 / p90 ms | ratio p50 / p90 | same answers, no rare term |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for n, classes in report.items():
        for name, e in classes.items():
            if "before" not in e:
                continue
            old, new = e["before"], e["after"]
            lines.append(
                f"| {int(n):,} | {name} | {e['capped_queries']} ({e['with_rare_terms']})"
                f" | {old['p50_ms']:.2f} / {old['p90_ms']:.2f}"
                f" | {new['p50_ms']:.2f} / {new['p90_ms']:.2f}"
                f" | {e['p50_ratio']:.2f} / {e['p90_ratio']:.2f}"
                f" | {e['same_answers_without_rare_terms']} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = sizes_parser(__doc__.split("\n\n")[0], vacuum=True)
    parser.add_argument("--per-class", type=int, default=60)
    args = parser.parse_args(argv)

    def run(n: int, url: str, owner: str) -> dict[str, Any]:
        old_arms.restore(url, "lexical_candidates_bm25_newest")
        return measure(url, owner, query_classes(n, args.per_class), args.rounds)

    report = each_size(args.memories, run, args.vacuum)
    print(json.dumps(report, indent=2))
    print(table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
