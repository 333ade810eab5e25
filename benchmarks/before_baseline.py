"""The workspace migrations as the last release before the baseline held them
(services/store/sql/migrations/workspace/0067_baseline stands for them now),
read from the repository's history, for the benchmarks that time an old
migration at upgrade or an old function against the current one."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# A release whose tree still holds every migration the baseline replaces.
RELEASE = "67a3533"
FOLDER = "services/store/sql/migrations/workspace"


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args], cwd=REPO, check=True, capture_output=True, text=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise LookupError(
            f"the workspace migrations before the baseline are read from revision {RELEASE}"
            f" of the repository's history, which this checkout cannot show: {exc}"
        ) from None


def migration(name: str) -> str:
    """The text of one migration file (e.g. `0045_recall_provenance_in_arms.sql`)."""
    return _git("show", f"{RELEASE}:{FOLDER}/{name}")


def migration_files() -> list[tuple[str, str]]:
    """(version, sql) of every workspace migration of that release, in order."""
    names = sorted(
        Path(path).name
        for path in _git("ls-tree", "--name-only", f"{RELEASE}:{FOLDER}/").split()
        if path.endswith(".sql")
    )
    return [(name.removesuffix(".sql"), migration(name)) for name in names]
