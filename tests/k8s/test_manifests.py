"""Offline checks of the rendered Kubernetes manifests (both overlays): schema
validity, security context, probes and ports against the servers' settings,
graceful termination, configuration keys against the settings classes, peer
targets against headless Services, autoscalers, disruption budgets."""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from recallatron.grpcserver import LIVENESS

REPO = Path(__file__).resolve().parents[2]

NAMESPACE = "recallatron"
IMAGE_NAME = "recallatron"
# The oldest and the newest Kubernetes minor the manifests are checked against
# (native gRPC probes: 1.27; the preStop sleep action is on by default from 1.30).
SCHEMA_VERSIONS = ("1.30.0", "1.37.0")


@dataclass(frozen=True)
class Process:
    """One Recallatron process as the manifests run it."""

    settings: str  # "module:Class"
    # The server's listen setting (None for processes that serve no gRPC).
    listen_field: str | None = None


PROCESSES: dict[tuple[str, ...], Process] = {
    ("python", "-m", "services.gateway"): Process(
        "services.gateway.settings:GatewaySettings", "gateway_listen"
    ),
    ("python", "-m", "services.rank"): Process(
        "services.rank.settings:RankSettings", "rank_listen"
    ),
    ("python", "-m", "services.embed"): Process(
        "services.embed.settings:EmbedSettings", "embed_listen"
    ),
    ("python", "-m", "services.store"): Process(
        "services.store.settings:StoreSettings", "store_listen"
    ),
    # The embedding job and the bootstrap/migrations belong to the store and
    # read its settings.
    ("recallatron", "embed-job"): Process("services.store.settings:StoreSettings"),
    ("recallatron", "migrate-db"): Process("services.store.settings:StoreSettings"),
}

# Which workload runs which process (component label -> command).
EXPECTED_COMMANDS = {
    "gateway": ("python", "-m", "services.gateway"),
    "rank": ("python", "-m", "services.rank"),
    "embed": ("python", "-m", "services.embed"),
    "store": ("python", "-m", "services.store"),
    "embed-job": ("recallatron", "embed-job"),
    "migrate-db": ("recallatron", "migrate-db"),
}

# A *_TARGET setting names the service it reaches.
TARGET_TO_COMPONENT = {"store_target": "store", "rank_target": "rank", "embed_target": "embed"}

COMPONENT = "app.kubernetes.io/component"
TARGET_RE = re.compile(r"dns:///([a-z0-9-]+)\.([a-z0-9-]+)\.svc\.cluster\.local:(\d+)")


# ---------------------------------------------------------------------------
# Helpers over rendered objects


def by_kind(objs: list[dict], kind: str) -> list[dict]:
    return [o for o in objs if o["kind"] == kind]


def find(objs: list[dict], kind: str, name: str) -> dict | None:
    for o in objs:
        if o["kind"] == kind and o["metadata"]["name"] == name:
            return o
    return None


def pod_template(obj: dict) -> dict | None:
    kind = obj["kind"]
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
        return obj["spec"]["template"]
    if kind == "CronJob":
        return obj["spec"]["jobTemplate"]["spec"]["template"]
    return None


def workloads(objs: list[dict]) -> list[dict]:
    return [o for o in objs if pod_template(o) is not None]


def all_containers(pod_spec: dict) -> list[dict]:
    return [*pod_spec.get("initContainers", []), *pod_spec.get("containers", [])]


def is_recallatron(container: dict) -> bool:
    image = container["image"].split("@")[0]
    repo = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
    return repo.rsplit("/", 1)[-1] == IMAGE_NAME


def recallatron_containers(objs: list[dict]) -> list[tuple[dict, dict, dict]]:
    """(workload, pod spec, container) for every container running the image."""
    out = []
    for w in workloads(objs):
        spec = pod_template(w)["spec"]
        for c in all_containers(spec):
            if is_recallatron(c):
                out.append((w, spec, c))
    return out


def component_of(workload: dict) -> str:
    return pod_template(workload)["metadata"]["labels"][COMPONENT]


def workload_by_component(objs: list[dict], component: str) -> dict:
    found = [w for w in workloads(objs) if component_of(w) == component]
    assert len(found) == 1, f"expected one workload labelled {component}, got {len(found)}"
    return found[0]


def settings_class(process: Process) -> type:
    module, cls = process.settings.split(":")
    return getattr(importlib.import_module(module), cls)


def env_names(cls: type) -> dict[str, str]:
    """Environment variable name -> field name for a pydantic-settings class."""
    prefix = cls.model_config.get("env_prefix", "")
    names = {}
    for field_name, field in cls.model_fields.items():
        alias = field.validation_alias if isinstance(field.validation_alias, str) else None
        names[(alias or f"{prefix}{field_name}").upper()] = field_name
    return names


_MEMORY_SUFFIX = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "": 1,
}


def cpu_millis(quantity: str | int | float) -> float:
    text = str(quantity)
    return float(text[:-1]) if text.endswith("m") else float(text) * 1000


def memory_bytes(quantity: str | int) -> float:
    m = re.fullmatch(r"([0-9.]+)([KMGT]i?|k)?", str(quantity))
    assert m, f"unparsed memory quantity {quantity}"
    return float(m.group(1)) * _MEMORY_SUFFIX[m.group(2) or ""]


def port_of(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def selector_matches(selector: dict | None, labels: dict[str, str]) -> bool:
    """A Kubernetes LabelSelector (matchLabels and matchExpressions)."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise AssertionError(f"unknown selector operator {op}")
    return True


@dataclass
class ContainerEnv:
    values: dict[str, str | None]  # None: from a Secret that is not rendered
    secret_refs: list[tuple[str, str, str, bool]]  # (env name, secret, key, optional)
    problems: list[str]


def container_env(objs: list[dict], container: dict) -> ContainerEnv:
    """Every variable the container gets, resolved against the rendering."""
    values: dict[str, str | None] = {}
    refs: list[tuple[str, str, str, bool]] = []
    problems: list[str] = []

    def put(name: str, value: str | None, source: str) -> None:
        if name in values:
            problems.append(f"{name} is set twice (again by {source})")
        values[name] = value

    for source in container.get("envFrom", []):
        prefix = source.get("prefix", "")
        if "configMapRef" in source:
            name = source["configMapRef"]["name"]
            cm = find(objs, "ConfigMap", name)
            if cm is None:
                problems.append(f"envFrom ConfigMap {name} is not in the rendering")
                continue
            for key, value in (cm.get("data") or {}).items():
                put(prefix + key, value, f"ConfigMap {name}")
        elif "secretRef" in source:
            problems.append(
                f"envFrom Secret {source['secretRef']['name']}: use secretKeyRef so the "
                "variable names are visible when the Secret is external"
            )
    for entry in container.get("env", []):
        name = entry["name"]
        if "value" in entry:
            put(name, entry["value"], "env")
            continue
        ref = (entry.get("valueFrom") or {}).get("secretKeyRef")
        cm_ref = (entry.get("valueFrom") or {}).get("configMapKeyRef")
        if ref:
            refs.append((name, ref["name"], ref["key"], bool(ref.get("optional"))))
            secret = find(objs, "Secret", ref["name"])
            value = None
            if secret is not None:
                value = (secret.get("stringData") or {}).get(ref["key"])
                if value is None and ref["key"] in (secret.get("data") or {}):
                    import base64

                    value = base64.b64decode(secret["data"][ref["key"]]).decode()
            put(name, value, f"Secret {ref['name']}")
        elif cm_ref:
            cm = find(objs, "ConfigMap", cm_ref["name"])
            put(name, None if cm is None else cm["data"].get(cm_ref["key"]), "configMapKeyRef")
        else:
            problems.append(f"{name}: unsupported env source {entry}")
    return ContainerEnv(values, refs, problems)


def process_of(container: dict) -> Process:
    command = tuple(container.get("command") or ())
    assert command in PROCESSES, f"container {container['name']} runs unknown command {command}"
    return PROCESSES[command]


# ---------------------------------------------------------------------------
# Rendering and schemas


def test_both_overlays_render_recallatron(rendered):
    for name, objs in rendered.items():
        components = {component_of(w) for w in workloads(objs)}
        assert set(EXPECTED_COMMANDS) <= components, (name, components)


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
def test_every_object_validates_against_the_kubernetes_schema(overlay, version):
    try:
        import kubernetes_validate
    except ImportError:
        pytest.fail("the schemas are missing: pip install kubernetes-validate==1.37.0")
    name, objs = overlay
    errors = []
    for obj in objs:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            errors.append(f"{obj['kind']}/{obj['metadata']['name']}: {path}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError as exc:
            errors.append(exc.message)
    assert not errors, f"{name} against {version}:\n" + "\n".join(errors)


def test_everything_lives_in_one_restricted_namespace(overlay):
    name, objs = overlay
    ns = find(objs, "Namespace", NAMESPACE)
    assert ns is not None
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    for obj in objs:
        if obj["kind"] == "Namespace":
            continue
        assert obj["metadata"].get("namespace") == NAMESPACE, (name, obj["kind"], obj["metadata"])


# ---------------------------------------------------------------------------
# Pods: security, resources, termination


def test_every_container_is_locked_down(overlay):
    name, objs = overlay
    problems = []
    for w in workloads(objs):
        pod = pod_template(w)["spec"]
        pod_sc = pod.get("securityContext") or {}
        where = f"{name} {w['kind']}/{w['metadata']['name']}"
        if pod.get("automountServiceAccountToken") is not False:
            problems.append(f"{where}: service account token is mounted")
        for flag in ("hostNetwork", "hostPID", "hostIPC"):
            if pod.get(flag):
                problems.append(f"{where}: {flag}")
        for c in all_containers(pod):
            sc = c.get("securityContext") or {}
            cw = f"{where} container {c['name']}"
            if sc.get("runAsNonRoot") is not True:
                problems.append(f"{cw}: runAsNonRoot is not true")
            uid = sc.get("runAsUser", pod_sc.get("runAsUser"))
            if not uid:
                problems.append(f"{cw}: no non-zero runAsUser")
            if sc.get("allowPrivilegeEscalation") is not False:
                problems.append(f"{cw}: allowPrivilegeEscalation is not false")
            if sc.get("readOnlyRootFilesystem") is not True:
                problems.append(f"{cw}: readOnlyRootFilesystem is not true")
            if sc.get("privileged"):
                problems.append(f"{cw}: privileged")
            caps = sc.get("capabilities") or {}
            if caps.get("drop") != ["ALL"] or caps.get("add"):
                problems.append(f"{cw}: capabilities must drop ALL and add none: {caps}")
            if (sc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
                problems.append(f"{cw}: seccompProfile is not RuntimeDefault")
    assert not problems, "\n".join(problems)


def test_the_image_user_is_the_pods_user(overlay, image_user):
    uid, gid = image_user
    _, objs = overlay
    for w, pod, c in recallatron_containers(objs):
        sc = c["securityContext"]
        assert (sc["runAsUser"], sc["runAsGroup"]) == (uid, gid), (w["metadata"]["name"], c["name"])
        assert pod["securityContext"]["fsGroup"] == gid


def test_every_container_has_requests_and_limits(overlay):
    name, objs = overlay
    for w in workloads(objs):
        for c in all_containers(pod_template(w)["spec"]):
            res = c.get("resources") or {}
            req, lim = res.get("requests") or {}, res.get("limits") or {}
            where = f"{name} {w['metadata']['name']}/{c['name']}"
            for key in ("cpu", "memory"):
                assert key in req and key in lim, f"{where}: {key} request and limit"
            assert cpu_millis(req["cpu"]) <= cpu_millis(lim["cpu"]), where
            assert memory_bytes(req["memory"]) <= memory_bytes(lim["memory"]), where


def test_embed_threads_fit_its_cpu_limit_and_the_model_fits_its_memory(rendered):
    for objs in rendered.values():
        w = workload_by_component(objs, "embed")
        c = pod_template(w)["spec"]["containers"][0]
        env = container_env(objs, c).values
        threads = int(env["RECALLATRON_ONNX_THREADS"])
        assert threads * 1000 <= cpu_millis(c["resources"]["limits"]["cpu"])
        assert threads * 1000 >= cpu_millis(c["resources"]["requests"]["cpu"])
        # MEASUREMENTS: the bi-encoder takes 171 MB once loaded; the request
        # must hold it plus the interpreter (~100 MB) with room for batches.
        assert memory_bytes(c["resources"]["requests"]["memory"]) >= (171 + 100) * 10**6 * 1.5


def test_termination_grace_outlasts_the_drain(overlay):
    name, objs = overlay
    for w, pod, c in recallatron_containers(objs):
        env = container_env(objs, c).values
        drain = float(env["RECALLATRON_SHUTDOWN_GRACE_SECONDS"])
        pre_stop = ((c.get("lifecycle") or {}).get("preStop") or {}).get("sleep", {})
        sleep = pre_stop.get("seconds", 0)
        grace = pod.get("terminationGracePeriodSeconds", 30)
        assert grace > sleep + drain, (
            f"{name} {w['metadata']['name']}: grace {grace}s <= preStop {sleep}s + drain {drain}s"
        )


# ---------------------------------------------------------------------------
# Settings: every key is a setting, every setting is provided


def test_commands_are_the_known_processes(overlay):
    _, objs = overlay
    for w, _, c in recallatron_containers(objs):
        assert tuple(c["command"]) == EXPECTED_COMMANDS[component_of(w)], w["metadata"]["name"]


def test_env_is_exactly_the_settings_each_process_reads(overlay):
    name, objs = overlay
    problems = []
    for w, _, c in recallatron_containers(objs):
        process = process_of(c)
        expected = env_names(settings_class(process))
        env = container_env(objs, c)
        where = f"{name} {w['metadata']['name']} ({process.settings})"
        problems += [f"{where}: {p}" for p in env.problems]
        missing = sorted(set(expected) - set(env.values))
        unknown = sorted(set(env.values) - set(expected))
        if missing:
            problems.append(f"{where}: settings not provided: {missing}")
        if unknown:
            problems.append(f"{where}: keys that are no setting of the process: {unknown}")
    assert not problems, "\n".join(problems)


def rollout_peak(workload: dict[str, Any]) -> int:
    """The most pods of a Deployment that run at once, a rolling update's
    surge included: Recreate stops the old pods before it starts the new ones;
    RollingUpdate adds up to maxSurge (default 25%, rounded up) beside them."""
    spec = workload["spec"]
    replicas = int(spec.get("replicas", 1))
    strategy = spec.get("strategy") or {}
    if strategy.get("type", "RollingUpdate") == "Recreate":
        return replicas
    surge = (strategy.get("rollingUpdate") or {}).get("maxSurge", "25%")
    if isinstance(surge, str) and surge.endswith("%"):
        return replicas + -(-replicas * int(surge[:-1]) // 100)
    return replicas + int(surge)


def test_the_budget_check_counts_the_replicas_deployed(
    overlay: tuple[str, list[dict[str, Any]]],
) -> None:
    """The start-up connection check (docs/servers.md) multiplies each
    process's connections by the replicas it is told about: they must be the
    most pods of its Deployment that hold connections at once, so a rolling
    update's surge pod does not take the server past max_connections."""
    name, objs = overlay
    for component, key in (
        ("store", "RECALLATRON_STORE_REPLICAS"),
        ("embed-job", "RECALLATRON_JOB_REPLICAS"),
    ):
        workload = workload_by_component(objs, component)
        container = next(
            c for c in all_containers(workload["spec"]["template"]["spec"]) if is_recallatron(c)
        )
        told = container_env(objs, container).values[key]
        peak = rollout_peak(workload)
        assert told == str(peak), (
            f"{name} {component}: {key}={told}, but {workload['spec'].get('replicas', 1)} "
            f"replicas and the update strategy run {peak} at once"
        )


def test_dev_postgres_holds_the_connections_the_check_counts(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    """The in-cluster Postgres of dev must pass the start-up check it is told
    about (its max_connections less the server's 3 reserved slots and the
    operators' reserve), or the store refuses to start."""
    from services.store.infrastructure.servers import check_connections, demand

    objs = rendered["dev"]
    store = pod_template(workload_by_component(objs, "store"))
    assert store is not None
    env = container_env(objs, store["spec"]["containers"][0]).values

    def number(key: str) -> int:
        value = env[key]
        assert value is not None, key
        return int(value)

    pg = pod_template(workload_by_component(objs, "database"))
    assert pg is not None
    args = pg["spec"]["containers"][0].get("args", [])
    max_connections = next(
        int(a.split("=", 1)[1]) for a in args if a.startswith("max_connections=")
    )
    control = number("RECALLATRON_CONTROL_POOL_MAX_SIZE")
    check_connections(
        "default",
        max_connections=max_connections,
        reserved=3,  # superuser_reserved_connections' default; reserved_connections 0
        reserve=number("RECALLATRON_CONNECTION_RESERVE"),
        processes={
            "store": (
                number("RECALLATRON_STORE_REPLICAS"),
                demand("store", number("RECALLATRON_CONNECTION_BUDGET"), control, True),
            ),
            "embedding job": (
                number("RECALLATRON_JOB_REPLICAS"),
                demand("embedding job", number("RECALLATRON_JOB_CONNECTION_BUDGET"), control, True),
            ),
        },
    )


def test_settings_values_parse_with_the_settings_classes(overlay, monkeypatch):
    """Every provided value is valid for its field (types, not just names)."""
    _name, objs = overlay
    for _w, _, c in recallatron_containers(objs):
        process = process_of(c)
        cls = settings_class(process)
        env = container_env(objs, c).values
        with monkeypatch.context() as m:
            for key in env_names(cls):
                m.delenv(key, raising=False)
            for key, value in env.items():
                m.setenv(key, value if value is not None else "external-secret")
            cls()  # raises on a value of the wrong type


def test_every_configmap_is_consumed(overlay):
    name, objs = overlay
    used = set()
    for w in workloads(objs):
        for c in all_containers(pod_template(w)["spec"]):
            for src in c.get("envFrom", []):
                if "configMapRef" in src:
                    used.add(src["configMapRef"]["name"])
            for e in c.get("env", []):
                ref = (e.get("valueFrom") or {}).get("configMapKeyRef")
                if ref:
                    used.add(ref["name"])
    orphans = {cm["metadata"]["name"] for cm in by_kind(objs, "ConfigMap")} - used
    assert not orphans, f"{name}: ConfigMaps nobody reads: {orphans}"


def test_secret_keys_are_named_like_the_variables(overlay):
    _, objs = overlay
    for _, _, c in recallatron_containers(objs):
        for env_name, _secret, key, _ in container_env(objs, c).secret_refs:
            assert env_name == key, (c["name"], env_name, key)


def test_dev_secrets_are_rendered_and_complete(rendered):
    objs = rendered["dev"]
    for w, _, c in recallatron_containers(objs):
        for _env_name, secret, key, _ in container_env(objs, c).secret_refs:
            obj = find(objs, "Secret", secret)
            assert obj is not None, f"dev: {w['metadata']['name']} needs Secret {secret}"
            assert key in (obj.get("data") or {}) or key in (obj.get("stringData") or {}), (
                secret,
                key,
            )


def test_prod_secrets_are_external_and_documented(rendered):
    objs = rendered["prod"]
    doc = (REPO / "docs" / "kubernetes.md").read_text()
    assert not by_kind(objs, "Secret"), "prod must not carry Secret values in git"
    refs = {
        (secret, key)
        for _, _, c in recallatron_containers(objs)
        for _, secret, key, _ in container_env(objs, c).secret_refs
    }
    assert refs
    for secret, key in sorted(refs):
        assert secret in doc and key in doc, f"docs/kubernetes.md: how to create {secret}/{key}"


def test_dev_database_url_points_at_the_in_cluster_postgres(rendered):
    from urllib.parse import urlsplit

    objs = rendered["dev"]
    store = workload_by_component(objs, "store")
    c = pod_template(store)["spec"]["containers"][0]
    url = urlsplit(container_env(objs, c).values["RECALLATRON_DATABASE_URL"])
    svc_name, ns = url.hostname.split(".")[:2]
    assert ns == NAMESPACE
    svc = find(objs, "Service", svc_name)
    assert svc is not None and url.port in [p["port"] for p in svc["spec"]["ports"]]
    pg = find(objs, "StatefulSet", "postgres")
    assert pg is not None
    pg_labels = pod_template(pg)["metadata"]["labels"]
    assert selector_matches({"matchLabels": svc["spec"]["selector"]}, pg_labels)
    assert pg["spec"]["volumeClaimTemplates"], "dev Postgres keeps its data on a PVC"
    pg_container = pod_template(pg)["spec"]["containers"][0]
    assert "pgvector" in pg_container["image"]
    # PostgreSQL 18 images refuse a volume at the pre-18 path .../data.
    mounts = {m["name"]: m["mountPath"] for m in pg_container["volumeMounts"]}
    assert mounts["data"] == "/var/lib/postgresql", mounts
    pg_env = container_env(objs, pod_template(pg)["spec"]["containers"][0]).values
    assert url.password == pg_env["POSTGRES_PASSWORD"]
    assert url.username == "postgres", "the admin connection needs a role that bypasses RLS"


def test_prod_names_a_second_server_from_a_mounted_secret(rendered):
    """docs/servers.md: every process reading StoreSettings mounts the
    servers Secret where RECALLATRON_POSTGRES_SERVERS_DIR points, read-only."""
    objs = rendered["prod"]
    doc = (REPO / "docs" / "kubernetes.md").read_text()
    readers = [
        (w, spec, c)
        for w, spec, c in recallatron_containers(objs)
        if process_of(c).settings == "services.store.settings:StoreSettings"
    ]
    assert len(readers) == 3  # store, the embedding job, the migration Job
    for w, spec, c in readers:
        directory = container_env(objs, c).values["RECALLATRON_POSTGRES_SERVERS_DIR"]
        mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
        assert directory in mounts and mounts[directory].get("readOnly"), w["metadata"]["name"]
        volume = next(v for v in spec["volumes"] if v["name"] == mounts[directory]["name"])
        assert volume["secret"]["secretName"] == "recallatron-postgres-servers"
        assert volume["secret"]["defaultMode"] & 0o007 == 0, "no access for others"
    assert "recallatron-postgres-servers" in doc


def test_prod_has_no_in_cluster_database(rendered):
    objs = rendered["prod"]
    assert not by_kind(objs, "StatefulSet")
    assert not [o for o in objs if "postgres" in o["metadata"]["name"] and o["kind"] == "Service"]


# ---------------------------------------------------------------------------
# Ports, probes, Services, peers


def test_servers_listen_probe_and_expose_the_same_port(overlay):
    name, objs = overlay
    for w, _pod, c in recallatron_containers(objs):
        process = process_of(c)
        where = f"{name} {w['metadata']['name']}"
        env = container_env(objs, c).values
        if process.listen_field is None:
            # Not a gRPC server: no gRPC port, no gRPC probe to answer.
            assert not any(p["name"] == "grpc" for p in c.get("ports", [])), where
            continue
        listen_env = f"RECALLATRON_{process.listen_field.upper()}"
        listen = env[listen_env]
        host = listen.rsplit(":", 1)[0]
        assert host in ("0.0.0.0", "[::]"), f"{where}: {listen_env}={listen} is not reachable"
        port = port_of(listen)
        default = settings_class(process).model_fields[process.listen_field].default
        assert port == port_of(default), f"{where}: port {port} is not the server's {default}"
        grpc_ports = [p["containerPort"] for p in c["ports"] if p["name"] == "grpc"]
        assert grpc_ports == [port], where
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            spec = c.get(probe)
            assert spec is not None, f"{where}: no {probe}"
            assert set(spec) & {"grpc", "httpGet", "tcpSocket", "exec"} == {"grpc"}, (
                f"{where}: {probe} must be a native gRPC probe"
            )
            assert spec["grpc"]["port"] == port, f"{where}: {probe} port"
            # The empty service name is readiness (a dependency away turns it
            # off); liveness has a name of its own that only shutdown turns
            # off, so an outage takes pods out of Services but restarts none.
            service = LIVENESS if probe == "livenessProbe" else ""
            assert spec["grpc"].get("service", "") == service, f"{where}: {probe} service"
        # Liveness must not restart a pod merely for being NOT_SERVING briefly.
        live = c["livenessProbe"]
        assert live["periodSeconds"] * live["failureThreshold"] >= 30, where


# A server that reports NOT_SERVING until a peer serves (the gateway waits for
# the store: services/gateway/__main__.py) inherits that peer's start-up time.
WAITS_FOR = {"gateway": "store"}


def startup_allowance(container: dict[str, Any]) -> float:
    """Seconds the startupProbe lets a container stay unready before a restart."""
    probe = container["startupProbe"]
    return float(
        probe.get("initialDelaySeconds", 0)
        + probe.get("periodSeconds", 10) * probe.get("failureThreshold", 3)
    )


def test_a_server_waiting_for_a_peer_starts_as_long_as_the_peer(
    overlay: tuple[str, list[dict[str, Any]]],
) -> None:
    """Otherwise the kubelet restarts it, again and again with a growing back-off,
    while the peer is still within its own start-up allowance (the store's waits
    five minutes for Postgres and the migration Job)."""
    name, objs = overlay
    for waiter, peer in WAITS_FOR.items():
        allowances = {}
        for component in (waiter, peer):
            template = pod_template(workload_by_component(objs, component))
            assert template is not None
            allowances[component] = startup_allowance(template["spec"]["containers"][0])
        assert allowances[waiter] >= allowances[peer], (
            f"{name}: {waiter} is restarted after {allowances[waiter]:g}s NOT_SERVING while it "
            f"waits for {peer}, which may take {allowances[peer]:g}s to serve"
        )


def test_metrics_port_is_declared_and_annotated(overlay):
    _name, objs = overlay
    for w, _, c in recallatron_containers(objs):
        if w["kind"] != "Deployment":
            continue
        port = int(container_env(objs, c).values["RECALLATRON_METRICS_PORT"])
        assert port > 0, "metrics are off"
        assert [p["containerPort"] for p in c["ports"] if p["name"] == "metrics"] == [port]
        ann = pod_template(w)["metadata"].get("annotations") or {}
        assert ann.get("prometheus.io/port") == str(port), w["metadata"]["name"]


def test_every_service_selects_exactly_one_workload_and_a_real_port(overlay):
    name, objs = overlay
    for svc in by_kind(objs, "Service"):
        selector = svc["spec"].get("selector")
        assert selector, f"{name} Service {svc['metadata']['name']} selects nothing"
        matched = [
            w
            for w in workloads(objs)
            if selector_matches({"matchLabels": selector}, pod_template(w)["metadata"]["labels"])
        ]
        names = [w["metadata"]["name"] for w in matched]
        assert len(matched) == 1, (svc["metadata"]["name"], names)
        ports = {
            (p.get("name"), p["containerPort"])
            for c in all_containers(pod_template(matched[0])["spec"])
            for p in c.get("ports", [])
        }
        for sp in svc["spec"]["ports"]:
            target = sp.get("targetPort", sp["port"])
            ok = any(target in (n, num) for n, num in ports)
            assert ok, f"{svc['metadata']['name']}: targetPort {target} is no container port"


def test_internal_services_are_headless_and_only_the_gateway_is_not(overlay):
    name, objs = overlay
    for svc in by_kind(objs, "Service"):
        headless = svc["spec"].get("clusterIP") == "None"
        if svc["metadata"]["name"] == "gateway":
            assert svc["spec"].get("type", "ClusterIP") in ("ClusterIP", "LoadBalancer", "NodePort")
        else:
            assert headless, f"{name}: internal Service {svc['metadata']['name']} is not headless"


def test_peer_targets_are_dns_round_robin_over_headless_services(overlay):
    name, objs = overlay
    seen = 0
    for w, _, c in recallatron_containers(objs):
        process = process_of(c)
        fields = env_names(settings_class(process))
        env = container_env(objs, c).values
        for env_name, field in fields.items():
            if field not in TARGET_TO_COMPONENT:
                continue
            seen += 1
            target = env[env_name]
            where = f"{name} {w['metadata']['name']} {env_name}={target}"
            m = TARGET_RE.fullmatch(target)
            assert m, f"{where}: not dns:///<service>.<namespace>.svc.cluster.local:<port>"
            svc_name, ns, port = m.group(1), m.group(2), int(m.group(3))
            assert ns == NAMESPACE, where
            svc = find(objs, "Service", svc_name)
            assert svc is not None, f"{where}: no such Service"
            assert svc["spec"].get("clusterIP") == "None", f"{where}: Service is not headless"
            assert port in [p["port"] for p in svc["spec"]["ports"]], where
            peer = workload_by_component(objs, TARGET_TO_COMPONENT[field])
            peer_labels = pod_template(peer)["metadata"]["labels"]
            assert selector_matches({"matchLabels": svc["spec"]["selector"]}, peer_labels), where
            peer_c = pod_template(peer)["spec"]["containers"][0]
            peer_process = process_of(peer_c)
            peer_listen = container_env(objs, peer_c).values[
                f"RECALLATRON_{peer_process.listen_field.upper()}"
            ]
            assert port_of(peer_listen) == port, f"{where}: the peer listens on {peer_listen}"
    assert seen >= 5  # gateway 2, rank 2, store/job/migrate 1 each


def test_the_clients_balance_per_call():
    """The headless Services only help if the channel balances per call."""
    import json

    from recallatron import grpcclient

    config = json.loads(grpcclient._SERVICE_CONFIG)
    assert {"round_robin": {}} in config["loadBalancingConfig"]
    # Every call but the few sent once (writes with no request id) is resent
    # on UNAVAILABLE, the status a pod going away answers.
    default = next(m for m in config["methodConfig"] if m["name"] == [{}])
    assert default["retryPolicy"]["retryableStatusCodes"] == ["UNAVAILABLE"]


# ---------------------------------------------------------------------------
# Autoscaling and disruption


def test_hpas_scale_gateway_rank_and_embed_on_cpu(overlay):
    name, objs = overlay
    hpas = by_kind(objs, "HorizontalPodAutoscaler")
    targets = {}
    for hpa in hpas:
        ref = hpa["spec"]["scaleTargetRef"]
        assert ref["kind"] == "Deployment"
        w = find(objs, "Deployment", ref["name"])
        assert w is not None, f"{name}: HPA {hpa['metadata']['name']} targets nothing"
        targets[component_of(w)] = hpa
        # The HPA owns the count; an apply must not reset it.
        assert "replicas" not in w["spec"], f"{name}: {ref['name']} sets replicas under an HPA"
        assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
        for metric in hpa["spec"]["metrics"]:
            if metric["type"] == "Resource":
                res = metric["resource"]["name"]
                for c in pod_template(w)["spec"]["containers"]:
                    assert res in c["resources"]["requests"], "utilisation needs a request"
    assert set(targets) == {"gateway", "rank", "embed"}


def test_pdbs_cover_every_serving_deployment(overlay):
    _name, objs = overlay
    covered = {}
    for pdb in by_kind(objs, "PodDisruptionBudget"):
        matched = [
            w
            for w in workloads(objs)
            if selector_matches(pdb["spec"]["selector"], pod_template(w)["metadata"]["labels"])
        ]
        assert len(matched) == 1, pdb["metadata"]["name"]
        # maxUnavailable keeps node drains possible even at one replica.
        assert pdb["spec"].get("maxUnavailable") == 1, pdb["metadata"]["name"]
        covered[component_of(matched[0])] = pdb
    assert set(covered) == {"gateway", "rank", "embed", "store"}, covered.keys()


def test_migration_job_retries_and_cleans_up(overlay):
    _, objs = overlay
    job = find(objs, "Job", "migrate-db")
    assert job is not None
    assert job["spec"]["backoffLimit"] >= 3
    assert job["spec"].get("ttlSecondsAfterFinished") is not None
    assert pod_template(job)["spec"]["restartPolicy"] in ("OnFailure", "Never")


# ---------------------------------------------------------------------------
# Commands exist in the code


@pytest.mark.parametrize("command", sorted(PROCESSES), ids=" ".join)
def test_each_command_exists_in_the_package(command):
    if command[:2] == ("python", "-m"):
        module = command[2]
        path = REPO / Path(*module.split("."))
        assert (path / "__main__.py").exists() or path.with_suffix(".py").exists(), (
            f"`python -m {module}` has nothing to run"
        )
    else:
        main = REPO / "recallatron_cli" / "main.py"
        assert main.exists(), "the recallatron command has no main module"
        assert f'"{command[1]}"' in main.read_text(), f"no `recallatron {command[1]}` subcommand"


def test_only_the_gateway_holds_the_operator_token(overlay):
    """Least privilege: the operator token is checked by the gateway alone;
    no other process (store, rank, embed, the embedding job, migrations) is
    given it, nor any Secret that holds it."""
    name, objs = overlay
    holders = set()
    for w, _, c in recallatron_containers(objs):
        env = container_env(objs, c)
        secrets = {secret for _, secret, _, _ in env.secret_refs}
        if "RECALLATRON_ADMIN_TOKEN" in env.values or "recallatron-admin" in secrets:
            holders.add(component_of(w))
    assert holders == {"gateway"}, f"{name}: {sorted(holders)}"
