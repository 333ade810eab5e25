"""The whole stack on one machine: Postgres (embedded default, or an external
one by URL) and the four services plus the embedding job, each a separate
process on loopback. Used by `recallatron up` and by the integration tests."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from recallatron.grpcclient import make_channel, peer_serving
from recallatron.secretfiles import private_dir, private_log, read_or_create
from recallatron_devkit import ports, statelock
from recallatron_devkit.localpg import DEFAULT_MAX_CONNECTIONS, LocalPostgres, server_group

# Kept importable from here, where the stack's users look for it.
from recallatron_devkit.ports import free_port as free_port

SERVICES = ("store", "embed", "rank", "gateway")
DEFAULT_PORTS = {"gateway": 7400, "store": 7401, "embed": 7402, "rank": 7403}
DEFAULT_PG_PORT = 7432
# The processes that connect to Postgres (and so get its URL and passwords).
DATABASE_USERS = ("store", "embedding-job")
# The embedded default server's data directory, in the state directory.
PGDATA = "pgdata"


# Linux: the child gets SIGTERM if the stack's process dies, even by SIGKILL,
# so no service outlives it (PR_SET_PDEATHSIG, kept across exec). Set by a
# small launcher that then becomes the real command, not by a preexec_fn:
# that forces fork() in a parent whose gRPC threads are live, and gRPC's fork
# handlers then sometimes abort the child before it execs (seen restarting a
# service from the tests).
_GUARDED = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL('libc.so.6', use_errno=True).prctl(1, signal.SIGTERM)\n"
    "except OSError:\n"
    "    pass\n"
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n"
)


def how_it_ended(returncode: int) -> str:
    """A process's end as its exit status says it: a status, or the signal."""
    if returncode < 0:
        with suppress(ValueError):
            return f"was killed by {signal.Signals(-returncode).name}"
    return f"exited with {returncode}"


def last_error(log_text: str) -> str | None:
    """A service's own reason, from its JSON log: the message (and `error`) of
    the last ERROR or CRITICAL record; None when it logged none, or when the log
    ends in plain text (a traceback says more than an earlier record)."""
    lines = [line for line in log_text.splitlines() if line.strip()]
    if lines and not lines[-1].lstrip().startswith("{"):
        return None
    for line in reversed(lines):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("level") in ("ERROR", "CRITICAL"):
            error = record.get("error") or record.get("exc_info")
            return f"{record.get('message')}" + (f" ({error})" if error else "")
    return None


@dataclass
class StackConfig:
    state_dir: Path
    # External Postgres admin URL; empty: the embedded server in state_dir/pgdata.
    database_url: str = ""
    pg_port: int = DEFAULT_PG_PORT
    # 0 picks a free port.
    ports: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_PORTS))
    admin_token: str = ""
    models_dir: Path | None = None
    cross_encoder_dir: str = ""
    embedding_job: bool = True
    # Which of SERVICES to start (all by default).
    services: tuple[str, ...] = SERVICES
    # Prometheus /metrics port per process (service name or "embedding-job").
    metrics_ports: dict[str, int] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    start_timeout: float = 180.0
    # More embedded Postgres servers, by name, beside the default one (each
    # in state_dir/pgdata-<name>, on a free port): named to the store as
    # RECALLATRON_POSTGRES_SERVERS (docs/servers.md).
    extra_servers: tuple[str, ...] = ()
    # The embedded default server's max_connections.
    pg_max_connections: int = DEFAULT_MAX_CONNECTIONS


class Stack:
    def __init__(self, config: StackConfig) -> None:
        self.config = config
        self.state_dir = config.state_dir.resolve()
        self.log_dir = self.state_dir / "logs"
        # Keys, passwords, tokens and logs: this user's alone (0700/0600).
        private_dir(self.state_dir, server_group())
        self.postgres: LocalPostgres | None = None
        self.extra_postgres: dict[str, LocalPostgres] = {}
        self.database_url = config.database_url
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.ports: dict[str, int] = {}
        self.admin_token = config.admin_token or self._admin_token()
        # The stack's internal key: every call to store, rank and embed carries
        # an assertion signed with it (recallatron/internal_auth.py).
        self.internal_key_file = self.state_dir / "internal.key"
        read_or_create(self.internal_key_file)
        # Set (say, by a signal) to abandon a start that is still waiting.
        self.abort = threading.Event()
        # Held from start to stop (recallatron_devkit/statelock.py).
        self._lock_fd: int | None = None

    def _admin_token(self) -> str:
        """The local operator token, kept in the state directory (mode 0600)."""
        path = self.state_dir / "admin-token"
        if path.exists():
            return path.read_text().strip()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        token = "rcadm_" + secrets.token_urlsafe(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token)
        return token

    @property
    def internal_key(self) -> bytes:
        """The stack's internal key (for tools and tests that call store,
        rank or embed directly; see recallatron.internal_auth)."""
        from recallatron.internal_auth import load_key

        return load_key(key_file=str(self.internal_key_file))

    def address(self, name: str) -> str:
        return f"127.0.0.1:{self.ports[name]}"

    @property
    def gateway(self) -> str:
        return self.address("gateway")

    @property
    def review_url(self) -> str:
        """The dedup review page, once the gateway has started it."""
        return f"{self._side_url('review')}/"

    @property
    def http_url(self) -> str:
        """The gateway's HTTP/JSON API (Connect protocol), once the gateway has started it."""
        return self._side_url("http")

    def _side_url(self, side: str) -> str:
        port = (self.state_dir / "run" / f"{side}.port").read_text().strip()
        return f"http://127.0.0.1:{port}"

    def env_for(self, name: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.config.env)
        env.update(
            {
                "RECALLATRON_STATE_DIR": str(self.state_dir),
                "PYTHONUNBUFFERED": "1",
            }
        )
        # The operator token only where it is checked: the gateway.
        if name == "gateway":
            env["RECALLATRON_ADMIN_TOKEN"] = self.admin_token
        else:
            env.pop("RECALLATRON_ADMIN_TOKEN", None)
        if not {"RECALLATRON_INTERNAL_KEY", "RECALLATRON_INTERNAL_KEY_FILE"} & set(self.config.env):
            env.pop("RECALLATRON_INTERNAL_KEY", None)
            env["RECALLATRON_INTERNAL_KEY_FILE"] = str(self.internal_key_file)
        if name in DATABASE_USERS:
            # Only the processes that talk to Postgres get its credentials.
            env["RECALLATRON_DATABASE_URL"] = self.database_url
            if self.postgres is not None:
                env["RECALLATRON_APP_PASSWORD"] = self.postgres.app_password
                # A generated 256-bit password needs no key stretching
                # (services/store/settings.py).
                env.setdefault("RECALLATRON_APP_PASSWORD_SCRAM_ITERATIONS", "1")
            if self.extra_postgres and "RECALLATRON_POSTGRES_SERVERS" not in self.config.env:
                env["RECALLATRON_POSTGRES_SERVERS"] = self.servers_setting
        else:
            for secret in (
                "RECALLATRON_DATABASE_URL",
                "RECALLATRON_APP_PASSWORD",
                "RECALLATRON_POSTGRES_SERVERS",
                "RECALLATRON_POSTGRES_SERVERS_DIR",
            ):
                env.pop(secret, None)
        if self.config.models_dir is not None:
            env["RECALLATRON_MODELS_DIR"] = str(self.config.models_dir)
        if self.config.cross_encoder_dir:
            env["RECALLATRON_CROSS_ENCODER_DIR"] = self.config.cross_encoder_dir
        for peer in SERVICES:
            if peer in self.ports:
                env[f"RECALLATRON_{peer.upper()}_TARGET"] = self.address(peer)
        if name in self.config.metrics_ports:
            env["RECALLATRON_METRICS_PORT"] = str(self.config.metrics_ports[name])
        if name in SERVICES:
            env[f"RECALLATRON_{name.upper()}_LISTEN"] = (
                f"127.0.0.1:{self.config.ports.get(name, 0)}"
            )
            env["RECALLATRON_PORT_FILE"] = str(self.state_dir / "run" / f"{name}.port")
        if name == "gateway":
            # The review page and HTTP/JSON follow the gateway: a free port
            # when the gateway got one, and the same port again on a restart.
            for side in ("review", "http"):
                port_file = self.state_dir / "run" / f"{side}.port"
                listen = f"RECALLATRON_{side.upper()}_LISTEN"
                if port_file.exists():
                    env.setdefault(listen, f"127.0.0.1:{port_file.read_text()}")
                elif not self.config.ports.get("gateway"):
                    env.setdefault(listen, "127.0.0.1:0")
                env[f"RECALLATRON_{side.upper()}_PORT_FILE"] = str(port_file)
        if name == "embed":
            # Without prepared models the stack cannot serve: the embed service
            # exits with its reason at once instead of waiting for them.
            env.setdefault("RECALLATRON_WAIT_FOR_MODELS", "false")
        return env

    @property
    def app_password(self) -> str:
        """The app role's password the store is given ('' when it is left to
        the environment, as with an external Postgres)."""
        if self.postgres is not None:
            return self.postgres.app_password
        return self.config.env.get("RECALLATRON_APP_PASSWORD") or os.environ.get(
            "RECALLATRON_APP_PASSWORD", ""
        )

    @property
    def servers_setting(self) -> str:
        """RECALLATRON_POSTGRES_SERVERS for the extra embedded servers."""
        return ",".join(f"{name}={pg.url}" for name, pg in self.extra_postgres.items())

    def start_postgres(self) -> None:
        for name in self.config.extra_servers:
            # Passwords and pgpass apart per server; the app role's password
            # is the default server's, which the store sets on every server.
            pg = LocalPostgres(
                self.state_dir / f"pgdata-{name}",
                free_port(),
                secrets_dir=private_dir(self.state_dir / "servers") / name,
            )
            pg.start()
            self.extra_postgres[name] = pg
        if self.database_url:
            return
        self.postgres = LocalPostgres(
            self.state_dir / PGDATA,
            self.config.pg_port,
            max_connections=self.config.pg_max_connections,
        )
        self.postgres.start()
        self.database_url = self.postgres.url

    def start_service(self, name: str) -> None:
        private_dir(self.state_dir / "run")
        private_dir(self.log_dir)
        port_file = self.state_dir / "run" / f"{name}.port"
        port_file.unlink(missing_ok=True)
        if name == "embedding-job":
            cmd = [sys.executable, "-m", "services.embedding_job"]
        else:
            cmd = [sys.executable, "-m", f"services.{name}"]
        log = private_log(self.log_dir / f"{name}.log")
        self.processes[name] = subprocess.Popen(
            [sys.executable, "-c", _GUARDED, *cmd[1:]],
            env=self.env_for(name),
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        if name in SERVICES:
            self.ports[name] = self._await_port(name, port_file)
            # A restart binds the same port, so peers keep finding it.
            self.config.ports[name] = self.ports[name]

    def _await_port(self, name: str, port_file: Path) -> int:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            self._check_alive([name])
            if port_file.exists():
                return int(port_file.read_text())
            time.sleep(0.05)
        raise RuntimeError(self._failure(name, "did not bind a port within 60 s"))

    def _failure(self, name: str, what: str) -> str:
        """What went wrong with a service, in its own words when its log has them."""
        log = self.log_dir / f"{name}.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        reason = last_error(text)
        if reason is None:
            return f"{name} {what}; its log ends:\n{text[-3000:]}\n(see {log})"
        return f"{name} {what}: {reason} (see {log})"

    def _check_alive(self, names: Iterable[str]) -> None:
        if self.abort.is_set():
            raise RuntimeError("start abandoned")
        for name in names:
            proc = self.processes[name]
            if proc.poll() is not None:
                raise RuntimeError(self._failure(name, f"exited with {proc.returncode}"))

    def exited(self) -> str | None:
        """What of the running stack has ended by itself, in one phrase
        ('postgres was killed by SIGKILL', 'rank exited with 1'), or None. Its
        Postgres servers come first: a service may end because one did."""
        watched: dict[str, subprocess.Popen[bytes] | None] = {}
        if self.postgres is not None:
            watched["postgres"] = self.postgres.process
        for name, pg in self.extra_postgres.items():
            watched[f"postgres {name}"] = pg.process
        watched.update(self.processes)
        for name, proc in watched.items():
            if proc is not None and proc.poll() is not None:
                return f"{name} {how_it_ended(proc.returncode)}"
        return None

    def wait_serving(
        self, name: str, timeout: float | None = None, watch: Iterable[str] = ()
    ) -> None:
        """Until ``name`` reports SERVING; fails as soon as it, or a process in
        ``watch``, exits."""
        timeout = timeout or self.config.start_timeout
        deadline = time.monotonic() + timeout
        watched = list(dict.fromkeys([name, *watch]))
        channel = make_channel(
            self.address(name), ca_file=self.env_for(name).get("RECALLATRON_TLS_CA_FILE", "")
        )
        try:
            while time.monotonic() < deadline:
                self._check_alive(watched)
                if peer_serving(channel, timeout=1.0):
                    return
                time.sleep(0.1)
        finally:
            channel.close()
        raise RuntimeError(self._failure(name, f"not SERVING after {timeout:g} s"))

    def _fixed_listens(self) -> dict[str, str]:
        """Where the embedded Postgres, the services and the gateway's pages
        will listen (host:port; a port 0 is chosen by the server)."""
        listens = {} if self.database_url else {"postgres": f"127.0.0.1:{self.config.pg_port}"}
        for name in self.config.services:
            listens[name] = self.env_for(name)[f"RECALLATRON_{name.upper()}_LISTEN"]
        if "gateway" in self.config.services:
            from services.gateway.settings import GatewaySettings

            env = self.env_for("gateway")
            for side in ("review", "http"):
                default = GatewaySettings.model_fields[f"{side}_listen"].default
                listens[side] = env.get(f"RECALLATRON_{side.upper()}_LISTEN", default)
        return listens

    def start(self) -> None:
        # Refused before the try: a stack that is not ours is never stopped.
        if self._lock_fd is None:
            self._lock_fd = statelock.take(self.state_dir)
        try:
            ports.check_free(self._fixed_listens())
            self.start_postgres()
            for name in self.config.services:
                self.start_service(name)
            if self.config.embedding_job:
                self.start_service("embedding-job")
            for name in self.config.services:
                # Any process that exits meanwhile fails the start at once.
                self.wait_serving(name, watch=self.processes)
        except BaseException:
            self.stop()
            raise

    def stop_service(self, name: str, sig: int = signal.SIGTERM, timeout: float = 20.0) -> None:
        proc = self.processes.get(name)
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def restart_service(self, name: str) -> None:
        self.stop_service(name)
        self.start_service(name)
        if name in SERVICES:
            self.wait_serving(name)

    def stop(self) -> None:
        for name in ["embedding-job", *reversed(SERVICES)]:
            self.stop_service(name)
        if self.postgres is not None:
            self.postgres.stop()
        for pg in self.extra_postgres.values():
            pg.stop()
        if self._lock_fd is not None:
            statelock.release(self._lock_fd)
            self._lock_fd = None


def has_embedded_server(state_dir: Path) -> bool:
    """True when a stack started in ``state_dir`` keeps its data in the
    embedded server, running or not."""
    return (state_dir / PGDATA / "PG_VERSION").exists()


def beside_env(state_dir: Path) -> dict[str, str] | None:
    """For a process that works on the databases of the local stack running
    in ``state_dir`` (an operator command), the settings `up` gives its
    embedding job (env_for): the embedded default server's URL (the password
    is in its pgpass file, never in the URL), the app role's password, the
    internal key file and the embed service's address. None when the
    embedded server is not running there."""
    state_dir = state_dir.resolve()
    postgres = LocalPostgres.running(state_dir / PGDATA)
    if postgres is None:
        return None
    env = {"RECALLATRON_DATABASE_URL": postgres.url}
    if postgres.app_password_file.exists():
        env["RECALLATRON_APP_PASSWORD"] = postgres.app_password_file.read_text().strip()
        # As `up` sets it: the command sets the role's password again, and
        # 4096 rounds would slow every new backend of the running stack.
        env["RECALLATRON_APP_PASSWORD_SCRAM_ITERATIONS"] = "1"
    key_file = state_dir / "internal.key"
    if key_file.exists():
        env["RECALLATRON_INTERNAL_KEY_FILE"] = str(key_file)
    embed_port = state_dir / "run" / "embed.port"
    if embed_port.exists():
        env["RECALLATRON_EMBED_TARGET"] = f"127.0.0.1:{embed_port.read_text().strip()}"
    return env


# The embedding job polls every 0.2 s instead of its default: a run that
# waits for its memories to be embedded does not wait a poll interval each time.
FAST_JOB = {"RECALLATRON_JOB_POLL_SECONDS": "0.2"}


def metrics_everywhere(services: tuple[str, ...] = SERVICES) -> dict[str, int]:
    """A free /metrics port for each service and the embedding job."""
    return {name: free_port() for name in (*services, "embedding-job")}


def own_config(
    state_dir: Path,
    models_dir: Path | None = None,
    *,
    env: dict[str, str] | None = None,
    services: tuple[str, ...] = SERVICES,
    metrics_ports: dict[str, int] | None = None,
    cross_encoder_dir: str = "",
    embedding_job: bool = True,
    extra_servers: tuple[str, ...] = (),
) -> StackConfig:
    """A stack of its own beside any other (the tests', the benchmarks', the
    evaluation's): embedded Postgres on a free port and every service on one
    picked at start."""
    return StackConfig(
        state_dir=state_dir,
        pg_port=free_port(),
        ports={name: 0 for name in SERVICES},
        models_dir=models_dir,
        cross_encoder_dir=cross_encoder_dir,
        embedding_job=embedding_job,
        services=services,
        metrics_ports=dict(metrics_ports or {}),
        env=dict(env or {}),
        extra_servers=extra_servers,
    )


@contextmanager
def running(stack: Stack, remove_state: bool = False) -> Iterator[Stack]:
    """The stack started for the block and stopped however the block ends;
    with ``remove_state`` (a temporary state directory), removed after."""
    try:
        stack.start()
        yield stack
    finally:
        stack.stop()
        if remove_state:
            shutil.rmtree(stack.state_dir, ignore_errors=True)
