"""Migration 0048 dropped the lexical arm's older candidate functions, which
lacked the walk's provenance condition (migration 0045): the workspace
baseline that replaces the migrations defines none of them, neither this
store nor the previous release's calls them, and the benchmarks that time
them against the current ones create them again in their own database."""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks import old_arms
from services.store.infrastructure import migrate

ROOT = Path(__file__).resolve().parents[2]
DROPPED = set(old_arms.DEFINED_IN)


def test_the_baseline_defines_none_of_the_older_functions() -> None:
    base = migrate.baseline("workspace")
    assert base is not None
    defined = {
        name
        for _, sql in base.parts
        for name in re.findall(r"^CREATE (?:OR REPLACE )?FUNCTION (\w+)\(", sql, re.M)
    }
    assert "lexical_candidates_bm25" in defined
    assert defined & DROPPED == set()


def test_no_service_calls_a_dropped_function() -> None:
    called = re.compile(r"\b(" + "|".join(sorted(DROPPED)) + r")\s*\(")
    for path in [*ROOT.glob("services/**/*.py"), *ROOT.glob("recallatron*/**/*.py")]:
        found = called.search(path.read_text())
        assert found is None, (path, found and found.group(0))


def test_the_benchmarks_can_create_each_again() -> None:
    for name in DROPPED:
        statement = old_arms.definition(name)
        assert statement.startswith(f"CREATE OR REPLACE FUNCTION {name}(")
        assert statement.endswith("END $$;")
