"""What each process of a running stack holds (benchmarks/soak.py): resident
memory, threads, open file descriptors and its connections to Postgres, read
from /proc; for Postgres itself, the server's processes together and its
client backends."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

import psycopg

from recallatron_devkit.stack import Stack
from services.store.infrastructure.servers import demand
from services.store.settings import StoreSettings

# Allowed growth from the end of the warm-up to the end of the run.
GROWTH = 0.10
# Small counts move by a few without any leak (a gRPC poller thread, a
# socket being replaced): this much is allowed beyond the 10% of each.
SLACK = {"rss_mb": 0.0, "threads": 2.0, "fds": 6.0, "pg_connections": 2.0}


@dataclass(frozen=True)
class Usage:
    rss_mb: float
    threads: int
    fds: int
    pg_connections: int


def _status(pid: int) -> dict[str, str]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return fields


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def _connected_to(port: int) -> dict[str, int]:
    """Socket inode -> 1 for every TCP connection whose remote port is ``port``."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            remote_port = int(parts[2].rsplit(":", 1)[1], 16)
            # 01: ESTABLISHED
            if remote_port == port and parts[3] == "01":
                found[parts[9]] = 1
    return found


def children(pid: int) -> list[int]:
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            kids.append(int(entry))
    return kids


def usage(pid: int, pg_port: int) -> Usage:
    status = _status(pid)
    pg = _connected_to(pg_port)
    return Usage(
        rss_mb=round(int(status["VmRSS"].split()[0]) / 1024, 1),
        threads=int(status["Threads"]),
        fds=len(os.listdir(f"/proc/{pid}/fd")),
        pg_connections=sum(1 for inode in _socket_inodes(pid) if inode in pg),
    )


def postgres_usage(postmaster: int) -> Usage:
    """The server's processes together; its connections are its client
    backends (children other than its own workers are not told apart, so
    this counts every child process)."""
    pids = [postmaster, *children(postmaster)]
    rss = threads = fds = 0
    for pid in pids:
        try:
            status = _status(pid)
            rss += int(status["VmRSS"].split()[0])
            threads += int(status["Threads"])
            fds += len(os.listdir(f"/proc/{pid}/fd"))
        except (OSError, KeyError):
            continue
    return Usage(round(rss / 1024, 1), threads, fds, len(pids) - 1)


def snapshot(stack: Stack) -> dict[str, dict[str, float]]:
    """Every process of the stack (and Postgres), by name."""
    assert stack.postgres is not None and stack.postgres.process is not None
    port = stack.postgres.port
    out = {}
    for name, proc in sorted(stack.processes.items()):
        if proc.poll() is None:
            out[name] = asdict(usage(proc.pid, port))
    out["postgres"] = asdict(postgres_usage(postmaster(stack)))
    return out


def postmaster(stack: Stack) -> int:
    """The postmaster's pid: the first line of postmaster.pid."""
    assert stack.postgres is not None
    pid_file = stack.postgres.data_dir / "postmaster.pid"
    return int(pid_file.read_text().split("\n", 1)[0])


def connection_ceilings(settings: StoreSettings | None = None) -> dict[str, int]:
    """The most connections the store and the embedding job open to the
    default server by design: their budget, control pool, listeners and admin
    connections, the figure the start-up check holds against max_connections
    (services/store/infrastructure/servers.py). A baseline taken while the
    pools were below it (the job just started again, one workspace's work at a
    time) fills up to it later: that is the pools, not a leak; past it is."""
    s = settings or StoreSettings()
    control = s.control_pool_max_size
    return {
        "store": demand("store", s.connection_budget, control, True).total,
        "embedding-job": demand("embedding job", s.job_connection_budget, control, True).total,
    }


# Processes of the server's own beside the client backends (postgres_usage
# counts every child): the checkpointer, background writer, WAL writer,
# autovacuum launcher and logical replication launcher, then those its
# settings bound (SERVER_WORKERS).
AUXILIARY_PROCESSES = 5
SERVER_WORKERS = """
SELECT current_setting('autovacuum_max_workers')::int
     + current_setting('max_worker_processes')::int
     + coalesce(current_setting('io_workers', true)::int, 0)
"""


def server_ceiling(conn: psycopg.Connection, ceilings: dict[str, int]) -> int:
    """The most child processes the server has by design while the store and
    the job hold their ceilings: theirs, this tool's own connection, and the
    server's own processes (autovacuum and parallel workers come and go with
    the load, so a count of them alone can grow by several in two minutes)."""
    row = conn.execute(SERVER_WORKERS).fetchone()
    workers = int(row[0]) if row else 0
    return sum(ceilings.values()) + 1 + AUXILIARY_PROCESSES + workers


def growth(
    start: dict[str, dict[str, float]],
    end: dict[str, dict[str, float]],
    ceilings: dict[str, int] | None = None,
) -> list[str]:
    """Each figure that grew past 10% (plus its slack) from start to end; a
    process's Postgres connections only when also past its ceiling
    (:func:`connection_ceilings`; the server's under "postgres": :func:`server_ceiling`)."""
    ceilings = connection_ceilings() if ceilings is None else ceilings
    over = []
    for name, figures in start.items():
        for key, before in figures.items():
            if name == "postgres" and key != "pg_connections":
                # The server's memory is its shared buffers filling and its
                # descriptors each backend's open relation files (up to
                # max_files_per_process): reported, judged by its connections.
                continue
            after = end.get(name, {}).get(key)
            if after is None:
                continue
            if key == "pg_connections" and after <= ceilings.get(name, -1):
                continue
            if after > before * (1 + GROWTH) + SLACK[key]:
                over.append(f"{name} {key}: {before} -> {after}")
    return over
