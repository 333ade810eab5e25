"""The NetworkPolicies, evaluated: a small model of Kubernetes NetworkPolicy
semantics (pod/namespace selectors, ipBlock, ports, policy types, additive
allow rules, both ends of a connection) computes which connections the
rendered policies admit, and the result must equal the intended call graph
exactly. Mutating the policies must make the check fail."""

from __future__ import annotations

import copy
import ipaddress
from dataclasses import dataclass, field

import pytest

NAMESPACE = "recallatron"
COMPONENT = "app.kubernetes.io/component"


@dataclass(frozen=True)
class Endpoint:
    name: str
    namespace: str | None  # None: outside the cluster
    labels: tuple[tuple[str, str], ...] = ()
    namespace_labels: tuple[tuple[str, str], ...] = ()
    ip: str | None = None
    # (port, protocol) this endpoint listens on, when it is a destination.
    ports: tuple[tuple[int, str], ...] = ()
    named_ports: tuple[tuple[str, int], ...] = field(default=())

    @property
    def label_map(self) -> dict[str, str]:
        return dict(self.labels)


def selector_matches(selector: dict, labels: dict[str, str]) -> bool:
    known = {"matchLabels", "matchExpressions"}
    assert set(selector) <= known, f"unsupported selector fields {set(selector) - known}"
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        if op == "In":
            ok = labels.get(key) in values
        elif op == "NotIn":
            ok = labels.get(key) not in values
        elif op == "Exists":
            ok = key in labels
        elif op == "DoesNotExist":
            ok = key not in labels
        else:
            raise AssertionError(f"unknown operator {op}")
        if not ok:
            return False
    return True


def peer_matches(peer: dict, policy_namespace: str, ep: Endpoint) -> bool:
    known = {"podSelector", "namespaceSelector", "ipBlock"}
    assert set(peer) <= known, f"unsupported peer fields {set(peer) - known}"
    if "ipBlock" in peer:
        # Models ipBlock as addresses outside the cluster (pod IPs are
        # implementation-defined for ipBlock; the manifests do not rely on them).
        if ep.namespace is not None or ep.ip is None:
            return False
        ip = ipaddress.ip_address(ep.ip)
        block = peer["ipBlock"]
        if ip not in ipaddress.ip_network(block["cidr"]):
            return False
        return not any(ip in ipaddress.ip_network(e) for e in block.get("except", []))
    if ep.namespace is None:
        return False
    if "namespaceSelector" in peer:
        ns_ok = selector_matches(peer["namespaceSelector"], dict(ep.namespace_labels))
    else:
        ns_ok = ep.namespace == policy_namespace
    pod_ok = "podSelector" not in peer or selector_matches(peer["podSelector"], ep.label_map)
    return ns_ok and pod_ok


def port_matches(rule: dict, port: int, protocol: str, dst: Endpoint) -> bool:
    ports = rule.get("ports")
    if not ports:
        return True
    for p in ports:
        if p.get("protocol", "TCP") != protocol:
            continue
        if "port" not in p:
            return True
        want = p["port"]
        if isinstance(want, str):
            want = dict(dst.named_ports).get(want)
            if want is None:
                continue
        if want == port or (p.get("endPort") and want <= port <= p["endPort"]):
            return True
    return False


def policy_types(policy: dict) -> set[str]:
    spec = policy["spec"]
    if "policyTypes" in spec:
        return set(spec["policyTypes"])
    return {"Ingress"} | ({"Egress"} if "egress" in spec else set())


def side_allows(
    policies: list[dict], direction: str, subject: Endpoint, peer: Endpoint, port: int, proto: str
) -> bool:
    """Whether the policies selecting `subject` admit this connection in
    `direction` ("Ingress": peer -> subject; "Egress": subject -> peer)."""
    selecting = [
        p
        for p in policies
        if p["metadata"].get("namespace") == subject.namespace
        and direction in policy_types(p)
        and selector_matches(p["spec"]["podSelector"], subject.label_map)
    ]
    if not selecting:
        return True  # not isolated in this direction
    key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    dst = subject if direction == "Ingress" else peer
    for p in selecting:
        for rule in p["spec"].get(key) or []:
            peers = rule.get(peers_key)
            if peers and not any(peer_matches(x, subject.namespace, peer) for x in peers):
                continue
            if port_matches(rule, port, proto, dst):
                return True
    return False


def connection_allowed(policies, src: Endpoint, dst: Endpoint, port: int, proto: str) -> bool:
    # Only this namespace's policies are ours; other namespaces are unrestricted.
    if src.namespace == NAMESPACE and not side_allows(policies, "Egress", src, dst, port, proto):
        return False
    return dst.namespace != NAMESPACE or side_allows(policies, "Ingress", dst, src, port, proto)


# ---------------------------------------------------------------------------
# The world the policies are evaluated in


def pod_template(obj: dict) -> dict | None:
    if obj["kind"] in ("Deployment", "StatefulSet", "Job", "DaemonSet"):
        return obj["spec"]["template"]
    return None


def endpoints(objs: list[dict]) -> tuple[list[Endpoint], list[Endpoint]]:
    """(sources, destinations): every workload of the namespace, plus pods and
    hosts elsewhere."""
    ns_obj = next(o for o in objs if o["kind"] == "Namespace")
    ns_labels = {"kubernetes.io/metadata.name": NAMESPACE, **ns_obj["metadata"].get("labels", {})}
    ours = []
    for obj in objs:
        tpl = pod_template(obj)
        if tpl is None:
            continue
        ports = []
        named = []
        for c in tpl["spec"]["containers"]:
            for p in c.get("ports", []):
                ports.append((p["containerPort"], p.get("protocol", "TCP")))
                if "name" in p:
                    named.append((p["name"], p["containerPort"]))
        labels = tpl["metadata"]["labels"]
        ours.append(
            Endpoint(
                name=labels.get(COMPONENT, obj["metadata"]["name"]),
                namespace=NAMESPACE,
                labels=tuple(sorted(labels.items())),
                namespace_labels=tuple(sorted(ns_labels.items())),
                ports=tuple(ports),
                named_ports=tuple(named),
            )
        )
    # Anything else someone may run in the namespace (a debug pod).
    stranger = Endpoint(
        "stranger",
        NAMESPACE,
        (("run", "debug"),),
        tuple(sorted(ns_labels.items())),
        ports=((8080, "TCP"),),
    )
    other_ns = Endpoint(
        "other-namespace",
        "apps",
        (("app", "client"),),
        (("kubernetes.io/metadata.name", "apps"),),
    )
    monitoring = Endpoint(
        "monitoring",
        "monitoring",
        (("app", "prometheus"),),
        (("kubernetes.io/metadata.name", "monitoring"),),
    )
    internet = Endpoint("internet", None, ip="203.0.113.10")
    dns = Endpoint(
        "kube-dns",
        "kube-system",
        (("k8s-app", "kube-dns"),),
        (("kubernetes.io/metadata.name", "kube-system"),),
        ports=((53, "UDP"), (53, "TCP"), (9153, "TCP")),
    )
    kube_other = Endpoint(
        "kube-system-other",
        "kube-system",
        (("k8s-app", "metrics-server"),),
        (("kubernetes.io/metadata.name", "kube-system"),),
        ports=((53, "UDP"), (443, "TCP")),
    )
    external_db = Endpoint("external-postgres", None, ip="198.51.100.7", ports=((5432, "TCP"),))
    web = Endpoint("internet-https", None, ip="198.51.100.80", ports=((443, "TCP"),))
    sources = [*ours, stranger, other_ns, monitoring, internet]
    destinations = [*ours, stranger, dns, kube_other, external_db, web]
    return sources, destinations


def allowed_matrix(objs: list[dict]) -> set[tuple[str, str, int, str]]:
    policies = [o for o in objs if o["kind"] == "NetworkPolicy"]
    sources, destinations = endpoints(objs)
    out = set()
    for src in sources:
        for dst in destinations:
            if src is dst or NAMESPACE not in (src.namespace, dst.namespace):
                continue  # traffic that never touches the namespace is not ours
            for port, proto in dst.ports:
                if connection_allowed(policies, src, dst, port, proto):
                    out.add((src.name, dst.name, port, proto))
    return out


def expected_matrix(overlay: str, objs: list[dict]) -> set[tuple[str, str, int, str]]:
    # Every pod of the namespace, a stray one included, may resolve names.
    ours = [e.name for e in endpoints(objs)[0] if e.namespace == NAMESPACE]
    expected = {
        # Only the gateway's gRPC and HTTP/JSON ports are reachable from
        # outside the namespace.
        *(
            (source, "gateway", port, "TCP")
            for source in ("other-namespace", "monitoring", "internet")
            for port in (7400, 7420)
        ),
        # The call graph.
        ("gateway", "store", 7401, "TCP"),
        ("gateway", "rank", 7403, "TCP"),
        ("rank", "store", 7401, "TCP"),
        ("rank", "embed", 7402, "TCP"),
        ("embed-job", "store", 7401, "TCP"),
        ("embed-job", "embed", 7402, "TCP"),
    }
    for name in ours:
        expected |= {(name, "kube-dns", 53, "UDP"), (name, "kube-dns", 53, "TCP")}
    db = "database" if overlay == "dev" else "external-postgres"
    for name in ("store", "embed-job", "migrate-db"):
        expected.add((name, db, 5432, "TCP"))
    return expected


def diff(actual: set, expected: set) -> list[str]:
    return [f"unexpectedly allowed: {x}" for x in sorted(actual - expected)] + [
        f"unexpectedly denied: {x}" for x in sorted(expected - actual)
    ]


# ---------------------------------------------------------------------------


def test_policies_admit_exactly_the_call_graph(overlay):
    name, objs = overlay
    problems = diff(allowed_matrix(objs), expected_matrix(name, objs))
    assert not problems, f"{name}:\n" + "\n".join(problems)


def test_every_pod_is_isolated_both_ways(overlay):
    _, objs = overlay
    policies = [o for o in objs if o["kind"] == "NetworkPolicy"]
    deny = [
        p
        for p in policies
        if p["spec"]["podSelector"] == {}
        and policy_types(p) == {"Ingress", "Egress"}
        and not p["spec"].get("ingress")
        and not p["spec"].get("egress")
    ]
    assert len(deny) == 1, "one default-deny policy for ingress and egress"


def _without(objs: list[dict], name: str) -> list[dict]:
    out = [o for o in objs if not (o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == name)]
    assert len(out) == len(objs) - 1, f"no NetworkPolicy {name}"
    return out


@pytest.mark.parametrize(
    "mutation",
    [
        "drop default deny",
        "drop store ingress",
        "open embed to gateway",
        "drop dns",
        "metrics from outside",
    ],
)
def test_the_check_catches_a_broken_policy(rendered, mutation):
    """The evaluation is not vacuous: each of these changes must be reported."""
    objs = copy.deepcopy(rendered["dev"])
    if mutation == "drop default deny":
        objs = _without(objs, "default-deny-all")
    elif mutation == "drop store ingress":
        objs = _without(objs, "store-ingress")
    elif mutation == "open embed to gateway":
        for o in objs:
            if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "embed-ingress":
                o["spec"]["ingress"][0]["from"][0]["podSelector"]["matchExpressions"][1][
                    "values"
                ].append("gateway")
            if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "gateway-egress":
                o["spec"]["egress"][0]["to"].append(
                    {"podSelector": {"matchLabels": {COMPONENT: "embed"}}}
                )
                o["spec"]["egress"][0]["ports"].append({"protocol": "TCP", "port": 7402})
    elif mutation == "drop dns":
        objs = _without(objs, "allow-dns-egress")
    elif mutation == "metrics from outside":
        for o in objs:
            if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "gateway-ingress":
                o["spec"]["ingress"][0]["ports"].append({"protocol": "TCP", "port": 9100})
    assert diff(allowed_matrix(objs), expected_matrix("dev", objs))


def test_the_metrics_component_opens_only_the_metrics_port(tmp_path, kustomize):
    """k8s/components/metrics-scrape, added to prod, admits Prometheus to 9100
    and changes nothing else."""
    import os

    build, k8s = kustomize
    # kustomize takes only relative paths to other kustomizations.
    prod = os.path.relpath(k8s / "overlays" / "prod", tmp_path)
    component = os.path.relpath(k8s / "components" / "metrics-scrape", tmp_path)
    (tmp_path / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\n"
        "kind: Kustomization\n"
        f"namespace: {NAMESPACE}\n"
        f"resources: [{prod}]\n"
        f"components: [{component}]\n"
    )
    objs = build(tmp_path)
    expected = expected_matrix("prod", objs)
    for e in endpoints(objs)[0]:
        if e.namespace == NAMESPACE and (9100, "TCP") in e.ports:
            expected.add(("monitoring", e.name, 9100, "TCP"))
    problems = diff(allowed_matrix(objs), expected)
    assert not problems, "\n".join(problems)
