"""docs/servers.md's "100,000 workspaces" table holds under the code's own
rules: the migrate-db workers it counts on are no more than `migrate-db
--parallel` allows with the table's own figures (recallatron_cli/migrate_room.py),
and its time follows from them."""

from __future__ import annotations

import re
from pathlib import Path

from services.store.infrastructure.reach import Room, _processes
from services.store.settings import StoreSettings

DOC = Path(__file__).resolve().parents[2] / "docs" / "servers.md"
# PostgreSQL's default superuser_reserved_connections (reserved_connections 0).
SERVER_RESERVED = 3


def _table() -> dict[str, str]:
    text = DOC.read_text()
    section = text.split("### 100,000 workspaces", 1)[1].split("\n\n", 2)[1]
    rows = {}
    for line in section.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = " | ".join(cells[1:])
    return rows


def _parallel_bound(max_connections: int, stores: int, jobs: int) -> int:
    """What migrate_room.check allows on servers of the table's figures: the
    least of every server's room, the default server's less the command's pool."""
    settings = StoreSettings(
        database_url="postgresql://admin@localhost/postgres",
        app_password="unused",
        store_replicas=stores,
        job_replicas=jobs,
    )
    bounds = []
    for default in (True, False):
        asked = sum(n * d.total for n, d in _processes(settings, default).values())
        left = Room(max_connections, SERVER_RESERVED, asked).left
        bounds.append(left - (settings.control_pool_max_size if default else 0))
    return min(bounds)


def test_the_migration_row_counts_no_more_workers_than_migrate_db_allows() -> None:
    rows = _table()
    connections = rows["connections per server"]
    replicas = re.search(r"with (\d+) stores and (\d+) jobs", connections)
    most = re.search(r"`max_connections` (\d+)", connections)
    assert replicas is not None and most is not None, connections
    bound = _parallel_bound(int(most[1]), int(replicas[1]), int(replicas[2]))
    migration = rows["migration"]
    workers = re.search(r"100,000 x 0\.3 s / (\d+) workers", migration)
    assert workers is not None, migration
    assert int(workers[1]) <= bound, (
        f"the table counts {workers[1]} migrate-db workers; --parallel allows at most {bound}"
    )
    minutes = re.search(r"about (\d+) minutes", migration)
    assert minutes is not None, migration
    expected = 100_000 * 0.3 / int(workers[1]) / 60
    assert abs(int(minutes[1]) - expected) <= 0.15 * expected, (minutes[1], expected)
