"""The lexical arm's candidate functions as an earlier release had them
(dropped from the schema by migration 0048, which the workspace baseline
replaces), for the benchmarks that time them against the current ones: each
is created again, verbatim from the last migration that defined it (read
from the release before the baseline), in the benchmark's own database."""

from __future__ import annotations

import re

import psycopg

from benchmarks import before_baseline
from services.store.infrastructure.db import APP_ROLE

# Each function and the migration whose definition it last had.
DEFINED_IN = {
    "lexical_candidates": "0006_recall_at_scale.sql",
    "lexical_candidates_newest": "0006_recall_at_scale.sql",
    "lexical_candidates_bm25_newest": "0021_lexical_one_purpose.sql",
}


def definition(name: str) -> str:
    """The CREATE FUNCTION statement of `name`, as its migration wrote it."""
    text = before_baseline.migration(DEFINED_IN[name])
    found = re.search(
        rf"^CREATE (?:OR REPLACE )?FUNCTION {name}\(.*?^END \$\$;$", text, re.S | re.M
    )
    if found is None:
        raise LookupError(f"{name}: no definition in {DEFINED_IN[name]}")
    return found.group(0).replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)


def restore(url: str, *names: str) -> None:
    """Create `names` again in the database at `url` (a role that may own
    SECURITY DEFINER functions past row security), callable by the services'."""
    with psycopg.connect(url, autocommit=True) as conn:
        for name in names:
            conn.execute(definition(name).encode())
            conn.execute(f"REVOKE ALL ON FUNCTION {name} FROM PUBLIC".encode())
            conn.execute(f"GRANT EXECUTE ON FUNCTION {name} TO {APP_ROLE}".encode())
