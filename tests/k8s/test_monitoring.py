"""The monitoring bundle (k8s/monitoring/), offline: the alert rules pass
`promtool check rules` and their unit tests (`promtool test rules`), every
dashboard query parses as PromQL, every alert is tested firing and quiet, and
the bundle renders with kustomize. Whether the services export what these
name: tests/integration/test_monitoring_metrics.py."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.k8s import monitoring
from tests.k8s.conftest import K8S, kustomize_build

# The alerts the issue names and the operators' docs promise.
REQUIRED_ALERTS = {
    "RecallatronDenseArmDegraded",
    "RecallatronRerankDegraded",
    "RecallatronEmbeddingBacklogGrowing",
    "RecallatronEmbeddingStalled",
    "RecallatronEmbeddingJobDown",
    "RecallatronRecallLatencyHigh",
    "RecallatronErrorRate",
    "RecallatronRateLimited",
    "RecallatronPoolSaturated",
}


def promtool(*args: str, cwd: Path = monitoring.MONITORING) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("promtool")
    if tool is None:
        pytest.fail("promtool is not installed: apt-get install prometheus (make test does)")
    return subprocess.run(
        [tool, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_rules_pass_promtool_check() -> None:
    done = promtool("check", "rules", monitoring.ALERTS.name)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(monitoring.alert_rules())} rules found" in done.stdout


def test_the_rules_pass_their_unit_tests() -> None:
    done = promtool("test", "rules", monitoring.ALERT_TESTS.name)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_a_broken_rule_fails_its_unit_test(tmp_path: Path) -> None:
    """The unit tests can fail: a dense-arm alert that never fires does."""
    rules = monitoring.ALERTS.read_text()
    assert rules.count("> 0.05") >= 1
    (tmp_path / monitoring.ALERTS.name).write_text(rules.replace("> 0.05", "> 0.9", 1))
    shutil.copy(monitoring.ALERT_TESTS, tmp_path)
    done = promtool("test", "rules", monitoring.ALERT_TESTS.name, cwd=tmp_path)
    assert done.returncode != 0
    assert "RecallatronDenseArmDegraded" in done.stdout + done.stderr


def test_an_embedding_job_that_is_gone_is_alerted(tmp_path: Path) -> None:
    """A stack whose embedding job is gone (crash-looping, scaled to zero)
    embeds nothing, yet the job's own metrics, the queue's size among them, go
    with it, so no rule on them can see the stall. Some alert must fire for
    that namespace, and none for one whose job reports."""
    shutil.copy(monitoring.ALERTS, tmp_path)
    alive = [
        # Every stack has a gateway; "gone" has no embedding job reporting.
        {"series": 'recallatron_gateway_auth_cache_live{namespace="gone"}', "values": "1x40"},
        {"series": 'recallatron_gateway_auth_cache_live{namespace="calm"}', "values": "1x40"},
        {"series": 'recallatron_embedding_job_embedded_total{namespace="calm"}', "values": "5x40"},
    ]
    cases = [
        {"eval_time": "30m", "alertname": rule["alert"], "exp_alerts": []}
        for rule in monitoring.alert_rules()
    ]
    (tmp_path / "gone.test.yaml").write_text(
        yaml.safe_dump(
            {
                "rule_files": [monitoring.ALERTS.name],
                "evaluation_interval": "1m",
                "tests": [{"interval": "1m", "input_series": alive, "alert_rule_test": cases}],
            }
        )
    )
    done = promtool("test", "rules", "gone.test.yaml", cwd=tmp_path)
    output = done.stdout + done.stderr
    # Every case expects silence: an alert that fires fails its case and is shown.
    assert done.returncode != 0 and 'namespace="gone"' in output, (
        "no alert fires for a namespace without an embedding job:\n" + output
    )
    assert 'namespace="calm"' not in output, output


def test_a_gateway_with_its_auth_cache_turned_off_is_not_alerted(tmp_path: Path) -> None:
    """RECALLATRON_AUTH_CACHE_SECONDS=0 turns the cache off (README), so that
    gateway never watches the revocation stream and reports it not live: that
    is its setting, not a lost stream, and no alert may fire for it."""
    shutil.copy(monitoring.ALERTS, tmp_path)
    off = 'namespace="off", pod="gateway-a"'
    series = [
        {"series": f"recallatron_gateway_auth_cache_live{{{off}}}", "values": "0x40"},
        {"series": f"recallatron_gateway_auth_cache_enabled{{{off}}}", "values": "0x40"},
        {"series": f"recallatron_embedding_job_embedded_total{{{off}}}", "values": "5x40"},
    ]
    cases = [
        {"eval_time": "30m", "alertname": rule["alert"], "exp_alerts": []}
        for rule in monitoring.alert_rules()
    ]
    test = {"interval": "1m", "input_series": series, "alert_rule_test": cases}
    (tmp_path / "off.test.yaml").write_text(
        yaml.safe_dump(
            {"rule_files": [monitoring.ALERTS.name], "evaluation_interval": "1m", "tests": [test]}
        )
    )
    done = promtool("test", "rules", "off.test.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_is_documented_and_tested_firing_and_quiet() -> None:
    rules = {r["alert"]: r for r in monitoring.alert_rules()}
    assert set(rules) >= REQUIRED_ALERTS
    for name, rule in rules.items():
        assert rule.get("for"), name
        assert rule["labels"]["severity"] in ("info", "warning", "critical"), name
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], name
    cases: dict[str, dict[str, int]] = {name: {"firing": 0, "quiet": 0} for name in rules}
    tests = yaml.safe_load(monitoring.ALERT_TESTS.read_text())
    assert tests["rule_files"] == [monitoring.ALERTS.name]
    for test in tests["tests"]:
        for case in test["alert_rule_test"]:
            cases[case["alertname"]]["firing" if case["exp_alerts"] else "quiet"] += 1
    assert {n: c for n, c in cases.items() if not (c["firing"] and c["quiet"])} == {}


def test_the_operators_docs_name_every_alert() -> None:
    docs = (K8S.parent / "docs" / "kubernetes.md").read_text()
    assert "k8s/monitoring" in docs and "promtool" in docs
    missing = [r["alert"] for r in monitoring.alert_rules() if r["alert"] not in docs]
    assert missing == []


def documented_metrics() -> dict[str, set[str]]:
    """The metrics table of docs/kubernetes.md, "Metrics": each full metric
    name its rows give -> the labels its row names."""
    docs = (K8S.parent / "docs" / "kubernetes.md").read_text()
    section = docs[docs.index("The metrics, by process") : docs.index("## Tracing")]
    out: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = line.split("|")
        if len(cells) > 3 and cells[1].strip().startswith("`recallatron_"):
            labels = set(re.findall(r"`([a-z_]+)`", cells[2]))
            for name in re.findall(r"`(recallatron_[a-z_]+)`", cells[1]):
                out[name] = labels
    return out


def test_the_operators_docs_list_every_metric_the_bundle_uses() -> None:
    """docs/kubernetes.md says the dashboard and the alerts use nothing but the
    metrics its table lists: each one they name is a row, with every label
    their selectors match on."""
    documented = documented_metrics()
    problems = []
    for query in monitoring.every_query():
        matched = query.matched()
        for sample in sorted(query.metrics):
            name = sample
            if name not in documented:
                name = re.sub(r"_(bucket|sum|count)$", "", sample)
            if name not in documented:
                problems.append(f"{query.where}: {sample} is not in the docs' metrics table")
                continue
            labels = matched.get(sample, set()) - documented[name] - monitoring.TARGET_LABELS
            problems += [f"{query.where}: {name} label {label!r} undocumented" for label in labels]
    assert problems == [], "\n".join(sorted(set(problems)))


def test_every_dashboard_query_parses_as_promql(tmp_path: Path) -> None:
    """promtool parses rule files only: each query becomes a recording rule."""
    queries = [q for q in monitoring.dashboard_queries() if not q.where.startswith("variable")]
    assert len(queries) >= 15
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard:query_{i}", "expr": q.expr}
                    for i, q in enumerate(queries)
                ],
            }
        ]
    }
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump(rules))
    done = promtool("check", "rules", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_dashboard_is_a_grafana_dashboard_over_every_area() -> None:
    board = monitoring.dashboard()
    assert board["uid"] and board["title"] and board["schemaVersion"] >= 36
    names = [v["name"] for v in board["templating"]["list"]]
    assert names[0] == "datasource" and "namespace" in names
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in monitoring.panels():
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        assert all(t["expr"] for t in panel["targets"]), panel["title"]
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"])
    # No two panels overlap on the grid.
    cells: set[tuple[int, int]] = set()
    for panel in board["panels"]:
        g = panel["gridPos"]
        xs, ys = range(g["x"], g["x"] + g["w"]), range(g["y"], g["y"] + g["h"])
        area = {(x, y) for x in xs for y in ys}
        assert not area & cells, panel["title"]
        assert g["x"] + g["w"] <= 24
        cells |= area
    read = set().union(*(q.metrics for q in monitoring.dashboard_queries()))
    for metric in (
        "recallatron_rpc_total",  # calls per RPC and status, refusals
        "recallatron_rpc_duration_seconds_bucket",  # latency per RPC
        "recallatron_rank_stage_seconds_bucket",  # recall stages
        "recallatron_rank_degraded_total",  # dense_available / reranked = false
        "recallatron_rank_recalls_total",
        "recallatron_embedding_job_backlog",
        "recallatron_embedding_job_embedded_total",
        "recallatron_pool_waiting",  # pool saturation
        "recallatron_pool_max",
    ):
        assert metric in read, metric


def test_the_bundle_renders_with_the_files_inside() -> None:
    objects = kustomize_build(monitoring.MONITORING)
    by_name = {o["metadata"]["name"]: o for o in objects}
    assert {o["kind"] for o in objects} == {"ConfigMap"}
    dashboard = by_name["recallatron-dashboard"]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["recallatron.json"]) == monitoring.dashboard()
    rules = by_name["recallatron-alerts"]
    assert rules["data"]["recallatron-alerts.yaml"] == monitoring.ALERTS.read_text()


def test_the_query_reader_finds_names_and_labels() -> None:
    """The reader the metric check relies on, on a known expression."""
    q = monitoring.Query(
        "example",
        'sum by (namespace, le) (rate(recallatron_x_bucket{method="/recallatron.v1.A/B", '
        'code=~"OK|INTERNAL"}[5m])) / ignoring(code) recallatron_y_total',
        {"pool"},
    )
    assert q.metrics == {"recallatron_x_bucket", "recallatron_y_total"}
    assert q.matched() == {"recallatron_x_bucket": {"method", "code"}}
    assert q.grouped() == {"namespace", "le", "code"}
    exported = {"recallatron_x_bucket": {"method", "le"}}
    assert monitoring.unexported([q], exported) == [
        "example: no service exports recallatron_y_total",
        "example: recallatron_x_bucket carries no label 'code'",
        "example: no metric it reads carries the label 'code'",
        "example: no metric it reads carries the label 'pool'",
    ]
