"""Named Postgres servers (design §3): the control plane records a workspace's
server by name; names map to admin URLs (and so to credentials) in the
store's settings only. This module holds the pure parts: reading the names
from settings, keeping URLs out of text, and the placement policy."""

from __future__ import annotations

import getpass
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from psycopg import pq
from psycopg.conninfo import conninfo_to_dict, make_conninfo

SERVER_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
# `name=url` pairs split at a comma that starts the next pair: a multi-host
# URL (`postgresql://h1,h2/db`) keeps its own commas.
_SHOWABLE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_PAIR_SPLIT = re.compile(r",\s*(?=[a-z][a-z0-9-]{0,62}=)")


class ServerConfigError(ValueError):
    """The settings name servers badly; raised at start-up, before serving."""


@dataclass(frozen=True)
class ServerMap:
    """Server name -> admin URL, and the default server's name."""

    urls: Mapping[str, str]
    default: str

    def url(self, name: str) -> str:
        """The admin URL of a configured server ('' means the default)."""
        try:
            return self.urls[name or self.default]
        except KeyError:
            raise UnknownServer(name) from None

    @property
    def names(self) -> list[str]:
        return sorted(self.urls)

    def secrets(self, extra: Iterable[str] = ()) -> list[str]:
        """Every string that must never reach an answer or a log: the URLs,
        the passwords and password files in them, the passwords libpq takes
        for them from its environment (PGPASSWORD, PGPASSFILE, ~/.pgpass) and
        the password file PGPASSFILE names, and ``extra``. Read afresh each
        time: a password file may be rotated under a running process."""
        found = set(self.urls.values()) | {e for e in extra if e}
        for url in self.urls.values():
            try:
                params = conninfo_to_dict(url)
                found |= set(libpq_passwords(url))
            except Exception:  # a bad URL is itself kept out: it is in the list
                continue
            found |= {str(params[k]) for k in ("password", "passfile") if params.get(k)}
        found |= {v for v in (_environment().get("passfile"),) if v}
        return sorted((s for s in found if len(s) >= 4), key=len, reverse=True)


class UnknownServer(LookupError):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def unknown_server(name: str, configured: Iterable[str]) -> str:
    """What an answer says of a server name that is not configured. The name
    is echoed only when it is a valid server name: anything else may be a URL
    or a conninfo string holding a password."""
    names = ", ".join(configured)
    if SERVER_NAME_RE.fullmatch(name):
        return f"unknown server {name!r}; configured: {names}"
    return (
        "is not a valid server name (1-63 characters of a-z, 0-9 and '-', starting "
        f"with a letter); configured: {names}"
    )


def parse_pairs(text: str) -> dict[str, str]:
    """``name=url,name=url`` (commas or newlines between pairs)."""
    out: dict[str, str] = {}
    for raw in _PAIR_SPLIT.split(text.replace("\n", ",").strip(", ")):
        item = raw.strip()
        if not item:
            continue
        name, sep, url = item.partition("=")
        name = name.strip()
        if not sep or not url.strip():
            raise ServerConfigError(
                f"RECALLATRON_POSTGRES_SERVERS: expected name=url pairs, got an entry "
                f"named {_shown(name)} without a URL"
            )
        _check_name(name, "RECALLATRON_POSTGRES_SERVERS")
        if name in out:
            raise ServerConfigError(f"RECALLATRON_POSTGRES_SERVERS: {name!r} is named twice")
        out[name] = url.strip()
    return out


def read_dir(directory: str) -> dict[str, str]:
    """One file per server, named after it, holding its URL (a mounted
    Kubernetes Secret: one key per server). Dot files (the Secret volume's
    own bookkeeping) are skipped."""
    if not directory:
        return {}
    path = Path(directory)
    if not path.is_dir():
        raise ServerConfigError(f"RECALLATRON_POSTGRES_SERVERS_DIR: {directory} is not a directory")
    out: dict[str, str] = {}
    for entry in sorted(path.iterdir()):
        if entry.name.startswith(".") or not entry.is_file():
            continue
        _check_name(entry.name, "RECALLATRON_POSTGRES_SERVERS_DIR")
        url = entry.read_text().strip()
        if not url:
            raise ServerConfigError(f"RECALLATRON_POSTGRES_SERVERS_DIR: {entry.name} is empty")
        out[entry.name] = url
    return out


def _shown(name: str) -> str:
    """A name for an error message; anything else (a URL given without its
    name, which may hold a password) is not echoed."""
    return repr(name) if _SHOWABLE.match(name) else "(not shown: it is no name)"


def _check_name(name: str, where: str) -> None:
    if not SERVER_NAME_RE.match(name):
        raise ServerConfigError(
            f"{where}: server name {_shown(name)} must be 1-63 characters of a-z, 0-9 "
            "and '-', starting with a letter"
        )


def server_map(database_url: str, default: str, pairs: str, directory: str) -> ServerMap:
    """Every configured server: ``database_url`` is the default server's (the
    control plane lives there), the others come from the pairs and the
    directory. A name given twice with different URLs is an error."""
    _check_name(default, "RECALLATRON_DEFAULT_SERVER")
    urls: dict[str, str] = {}
    sources = [
        ({default: database_url} if database_url else {}),
        parse_pairs(pairs),
        read_dir(directory),
    ]
    for source in sources:
        for name, url in source.items():
            if name in urls and urls[name] != url:
                raise ServerConfigError(f"server {name!r} is given two different URLs")
            urls[name] = url
    if default not in urls:
        raise ServerConfigError(
            f"no URL for the default server {default!r}: set RECALLATRON_DATABASE_URL "
            "(`recallatron up` sets it to the embedded Postgres) or name it in "
            "RECALLATRON_POSTGRES_SERVERS"
        )
    for name, url in urls.items():
        try:
            conninfo_to_dict(url)
        except Exception:
            # libpq's own message quotes the part it could not read, which
            # may be the password: neither it nor the URL is shown.
            raise ServerConfigError(
                f"server {name!r}: its URL is not a Postgres connection URL libpq reads "
                "(a password holding %, @, : or / must be percent-encoded); the URL is "
                "not shown"
            ) from None
    return ServerMap(urls, default)


# libpq's TCP options that tcp_watch sets.
TCP_WATCH_KEYS = (
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
)


def tcp_watch(seconds: int) -> dict[str, str]:
    """libpq's TCP options that end a connection whose server went silent
    within about ``seconds`` (at least 4): an idle one after its keepalive
    probes go unanswered (idle + count x interval), one with data sent and
    unacknowledged after tcp_user_timeout. Nothing for 0. Ignored by libpq
    on a Unix socket, which no network can cut."""
    if seconds <= 0:
        return {}
    count = 3
    interval = max(1, seconds // 5)
    idle = max(1, seconds - count * interval)
    return {
        "keepalives": "1",
        "keepalives_idle": str(idle),
        "keepalives_interval": str(interval),
        "keepalives_count": str(count),
        "tcp_user_timeout": str((idle + count * interval) * 1000),
    }


def watched(url: str, seconds: int) -> str:
    """``url`` with :func:`tcp_watch`'s options it does not set itself (an
    operator's own, in the URL, win)."""
    params = conninfo_to_dict(url)
    missing = {k: v for k, v in tcp_watch(seconds).items() if k not in params}
    return make_conninfo(url, **missing) if missing else url


def with_inline_password(url: str) -> str:
    """``url`` with the password libpq would send written into it: for a
    connection Postgres itself opens (a subscription), which cannot read this
    process's environment or password file. libpq's order: the URL's
    password, PGPASSWORD, then the password file (the URL's ``passfile``,
    PGPASSFILE, ~/.pgpass), looked up for the first host of a multi-host
    URL. Never log the result."""
    params = conninfo_to_dict(url)
    found = _libpq_password(params, _environment(), 0)
    params.pop("passfile", None)
    if found:
        params["password"] = found
    return make_conninfo(**params)  # type: ignore[arg-type]


def libpq_passwords(url: str) -> list[str]:
    """Every password libpq would send for ``url``, in the order of
    :func:`with_inline_password`: one per host of a multi-host URL, since
    libpq looks each host up in the password file."""
    params = conninfo_to_dict(url)
    env = _environment()
    hosts = str(params.get("host") or params.get("hostaddr") or env.get("host") or "")
    found: list[str] = []
    for index in range(max(1, len(hosts.split(",")))):
        password = _libpq_password(params, env, index)
        if password and password not in found:
            found.append(password)
    return found


def _environment() -> dict[str, str]:
    """libpq's connection defaults taken from its environment variables
    (PGPASSWORD, PGPASSFILE, PGHOST, ...), read now."""
    return {
        o.keyword.decode(): o.val.decode()
        for o in pq.Conninfo.get_defaults()
        if o.val is not None and o.envvar is not None
    }


def _libpq_password(params: Mapping[str, object], env: Mapping[str, str], index: int) -> str | None:
    """The password libpq sends to the ``index``-th host of ``params``."""
    if params.get("password"):
        return str(params["password"])
    if env.get("password"):
        return env["password"]

    def given(key: str) -> str:
        # The URL's value, else the environment's; of a list (a multi-host
        # URL's), the host's own entry, else the first (one port for all).
        values = str(params.get(key) or env.get(key) or "").split(",")
        return values[index] if index < len(values) else values[0]

    path = Path(str(params.get("passfile") or env.get("passfile") or Path.home() / ".pgpass"))
    try:
        if not path.is_file():
            return None
        text = path.read_text()
    except (OSError, UnicodeDecodeError):  # libpq cannot read it either
        return None
    user = given("user") or getpass.getuser()
    return passfile_password(
        text, given("host") or given("hostaddr"), given("port"), given("dbname") or user, user
    )


def passfile_password(text: str, host: str, port: str, dbname: str, user: str) -> str | None:
    """The password a libpq password file gives a connection, by libpq's
    rules: the first line, not a comment, whose hostname:port:database:user
    fields match (``*`` a whole field: anything; ``\\`` escapes the
    character after it, so ``\\:`` and ``\\\\`` are literal), its password up
    to its first unescaped ``:``, unescaped. An empty host is ``localhost``."""
    want = (host or "localhost", port or "5432", dbname, user)
    for raw in text.split("\n"):
        line = raw.rstrip("\r\n")
        if not line or line.startswith("#"):
            continue
        rest: str | None = line
        for token in want:
            rest = _field(rest, token) if rest is not None else None
        if rest is not None:
            return _unescaped(rest)
    return None


def _field(rest: str, token: str) -> str | None:
    """What follows the line's next field when it matches ``token``
    (libpq's pwdfMatchesString); None when it does not."""
    if rest.startswith("*:"):
        return rest[2:]
    i = t = 0
    escaped = False
    while i < len(rest):
        if rest[i] == "\\" and not escaped:
            i += 1
            escaped = True
            if i == len(rest):
                return None
        if rest[i] == ":" and t == len(token) and not escaped:
            return rest[i + 1 :]
        escaped = False
        if t == len(token) or rest[i] != token[t]:
            return None
        i += 1
        t += 1
    return None


def _unescaped(rest: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(rest) and rest[i] != ":":
        if rest[i] == "\\" and i + 1 < len(rest):
            i += 1
        out.append(rest[i])
        i += 1
    return "".join(out)


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret replaced (for errors that quote libpq)."""
    for secret in secrets:
        if secret and secret in text:
            text = text.replace(secret, "***")
    return text


def place(names: Iterable[str], counts: Mapping[str, int], draining: Iterable[str]) -> str | None:
    """The placement policy (docs/servers.md): the server with the fewest
    workspaces among those not draining, ties to the first name in order;
    None when every server drains."""
    skip = set(draining)
    open_names = sorted(n for n in names if n not in skip)
    if not open_names:
        return None
    return min(open_names, key=lambda n: (counts.get(n, 0), n))


# Connections outside the budget, per process (docs/servers.md): the admin
# connections that create databases and run migrations (at most this many at
# once; the store's template migration opens one more of its own while its
# lock holds one), and the LISTEN connections on the default server (the
# store: token revocations, moves and deletions; the embedding job: work
# marks, moves and deletions).
ADMIN_CONNECTIONS = 2
TEMPLATE_CONNECTIONS = {"store": 1, "embedding job": 0}
LISTENERS = {"store": 3, "embedding job": 3}


@dataclass(frozen=True)
class Demand:
    """The most connections one process opens on one server."""

    budget: int  # workspace databases, shared (services/store/infrastructure/budget.py)
    control: int  # the control plane's pool: the default server only
    listeners: int
    admin: int = ADMIN_CONNECTIONS

    @property
    def total(self) -> int:
        return self.budget + self.control + self.listeners + self.admin


def demand(process: str, budget: int, control_pool: int, default_server: bool) -> Demand:
    return Demand(
        budget,
        control_pool if default_server else 0,
        LISTENERS[process] if default_server else 0,
        ADMIN_CONNECTIONS + TEMPLATE_CONNECTIONS[process],
    )


class BudgetTooLarge(RuntimeError):
    """The processes' budgets, times their replicas, exceed what the server allows."""


def check_connections(
    server: str,
    *,
    max_connections: int,
    reserved: int,
    reserve: int,
    processes: Mapping[str, tuple[int, Demand]],
) -> int:
    """Raises :class:`BudgetTooLarge` unless every process's connections, times
    its replicas, fit in ``max_connections`` less the server's own reserved
    slots and ``reserve`` kept for operators. Returns the total asked for."""
    asked = sum(replicas * d.total for replicas, d in processes.values())
    allowed = max_connections - reserved - reserve
    if asked > allowed:
        parts = " + ".join(
            f"{name} {replicas} x {d.total}" for name, (replicas, d) in processes.items()
        )
        raise BudgetTooLarge(
            f"connection budget: server {server!r} would need {parts} = {asked} connections, "
            f"but allows {allowed} (max_connections {max_connections} - {reserved} reserved by "
            f"the server - {reserve} kept for operators, RECALLATRON_CONNECTION_RESERVE); lower "
            "RECALLATRON_CONNECTION_BUDGET / RECALLATRON_JOB_CONNECTION_BUDGET or the replicas, "
            "or raise the server's max_connections"
        )
    return asked
