"""Migration 0048 dropped the lexical arm's older candidate functions, which
lacked the walk's provenance condition (migration 0045): neither this store
nor the previous release's calls them, and the benchmarks that time them
against the current ones create them again in their own database."""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks import old_arms

ROOT = Path(__file__).resolve().parents[2]
DROPPED = set(old_arms.DEFINED_IN)


def test_the_migration_drops_exactly_the_older_functions() -> None:
    text = (old_arms.MIGRATIONS / "0048_drop_old_lexical_arms.sql").read_text()
    assert set(re.findall(r"DROP FUNCTION IF EXISTS (\w+)\(", text)) == DROPPED


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
