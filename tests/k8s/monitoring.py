"""What the dashboard and the alert rules of k8s/monitoring/ ask of the
metrics: every PromQL expression, the metric names it reads and the labels it
matches, groups or prints. Shared by the offline checks (tests/k8s) and the
check against the running services (tests/integration)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

MONITORING = Path(__file__).resolve().parents[2] / "k8s" / "monitoring"
ALERTS = MONITORING / "alerts.yaml"
ALERT_TESTS = MONITORING / "alerts.test.yaml"
DASHBOARD = MONITORING / "dashboard.json"

# Labels Prometheus attaches when it scrapes (the target's, from Kubernetes
# service discovery), not the services: docs/kubernetes.md asks the scrape
# config for namespace and pod.
TARGET_LABELS = frozenset({"namespace", "pod", "instance", "job"})

# Grafana's variables, replaced by values PromQL accepts.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$namespace": ".*"}

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_METRIC = re.compile(r"\b(recallatron_[A-Za-z0-9_]+)\b")
_SELECTOR = re.compile(r"\b(recallatron_[A-Za-z0-9_]+)\s*\{([^}]*)\}")
_MATCHER = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)\s*"')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")
_TEMPLATE_LABEL = re.compile(r"\{\{\s*\$labels\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_LEGEND_LABEL = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


@dataclass
class Query:
    """One expression and where it comes from ("alert X", "panel Y")."""

    where: str
    expr: str
    # Labels it prints: an alert's annotations, a panel's legend.
    printed: set[str] = field(default_factory=set)

    @property
    def metrics(self) -> set[str]:
        return set(_METRIC.findall(_STRING.sub('""', self.expr)))

    def matched(self) -> dict[str, set[str]]:
        """metric -> the label names its selectors match on."""
        out: dict[str, set[str]] = {}
        for name, body in _SELECTOR.findall(self.expr):
            out.setdefault(name, set()).update(_MATCHER.findall(body))
        return out

    def grouped(self) -> set[str]:
        """Label names of by / without / on / ignoring clauses."""
        bare = _STRING.sub('""', self.expr)
        return {
            label.strip()
            for clause in _GROUPING.findall(bare)
            for label in clause.split(",")
            if label.strip()
        }


def alert_rules() -> list[dict]:
    doc = yaml.safe_load(ALERTS.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def alert_queries() -> list[Query]:
    out = []
    for rule in alert_rules():
        printed = {
            label
            for text in rule.get("annotations", {}).values()
            for label in _TEMPLATE_LABEL.findall(text)
        }
        out.append(Query(f"alert {rule['alert']}", rule["expr"], printed))
    return out


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def panels() -> list[dict]:
    """Every panel, those inside rows included, rows themselves left out."""
    out = []
    for panel in dashboard()["panels"]:
        out += panel.get("panels", [])
        if panel["type"] != "row":
            out.append(panel)
    return out


def dashboard_queries() -> list[Query]:
    out = []
    for panel in panels():
        for target in panel.get("targets", []):
            expr = target["expr"]
            for variable, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(variable, value)
            printed = set(_LEGEND_LABEL.findall(target.get("legendFormat", "")))
            out.append(Query(f"panel {panel['title']!r} {target['refId']}", expr, printed))
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            text = query["query"] if isinstance(query, dict) else query
            match = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", text)
            assert match, f"variable {variable['name']}: {text}"
            # label_values(metric, label): the metric must carry the label.
            out.append(Query(f"variable {variable['name']}", match[1], {match[2]}))
    return out


def every_query() -> list[Query]:
    return alert_queries() + dashboard_queries()


def unexported(queries: list[Query], exported: dict[str, set[str]]) -> list[str]:
    """What the queries ask for that the services do not export: metric
    names (as sample names: *_total, *_bucket, ...) and labels, each as one
    line naming the query. ``exported``: sample name -> its label names."""
    problems = []
    for q in queries:
        names = q.metrics
        missing = sorted(n for n in names if n not in exported)
        problems += [f"{q.where}: no service exports {n}" for n in missing]
        carried = set(TARGET_LABELS).union(*(exported.get(n, set()) for n in names))
        for name, labels in q.matched().items():
            own = exported.get(name, set()) | TARGET_LABELS
            problems += [
                f"{q.where}: {name} carries no label {label!r}"
                for label in sorted(labels - own)
                if name in exported
            ]
        for label in sorted((q.grouped() | q.printed) - carried):
            problems.append(f"{q.where}: no metric it reads carries the label {label!r}")
    return problems
