"""monitoring/: the alert rules and the Grafana dashboard read only what /metrics exports.

The metric names and the label names each selector uses are checked against a real scrape, and
every max over the nodes' copies of a project figure keeps all of its labels. PromQL syntax and
the rules' behaviour: tests/e2e/test_alert_rules.py, with promtool."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from falcon import testing
from prometheus_client.parser import text_string_to_metric_families

from support.paths import ROOT
from tracker_api.app import create_app
from tracker_api.web.config import AppConfig
from tracker_core.admin import item_verbs, project_verbs

MONITORING = ROOT / "monitoring"
TOKEN = "monitoring-token"
METRIC = re.compile(r"\b(tracker_[a-z0-9_]+)\b")
SELECTOR = re.compile(r"\b(tracker_[a-z0-9_]+)\{([^}]*)\}")
MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")
# max [by (...)] ( [functions(] tracker_metric: the max that folds the nodes' copies of a series.
MAX_OVER_NODES = re.compile(r"\bmax\b(?:\s+by\s*\(([^)]*)\))?\s*\(\s*(?:[a-z_]+\(\s*)*(tracker_[a-z0-9_]+)")
RUNBOOK = ROOT / "docs" / "runbook.md"
# Absolute with the runbook_base external label (alerts.yml's header), else the repository path.
RUNBOOK_URL = '{{ or $externalLabels.runbook_base "docs/runbook.md" }}#'
# Labels Prometheus adds to every scraped series.
TARGET_LABELS = {"instance", "job"}


@pytest.fixture
def exported(engine, admin) -> dict[str, set[str]]:
    """Sample name -> its label names, from a scrape that has every family."""
    project_verbs.create(admin, "mon-proj")
    item_verbs.add(admin, "mon-proj", ["https://example.com/a b?c=%2F#d"])
    web = testing.TestClient(create_app(engine, config=AppConfig(metrics_token=TOKEN)))
    web.simulate_post("/mon-proj/request", json={"downloader": "alice", "api_version": "2"})
    web.simulate_get("/unknown/path")
    text = web.simulate_get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).text
    names: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            names.setdefault(s.name, set()).update(s.labels)
    return names


def check_expression(expr: str, exported: dict[str, set[str]]) -> None:
    used = set(METRIC.findall(expr))
    assert used, expr
    for name in used:
        assert name in exported, f"{name} is not in /metrics: {expr}"
    labels = set().union(*(exported[name] for name in used)) | TARGET_LABELS
    for name, matchers in SELECTOR.findall(expr):
        for label in MATCHER.findall(matchers):
            assert label in exported[name] | TARGET_LABELS, f"{name} has no label {label}: {expr}"
    for grouping in GROUPING.findall(expr):
        for label in filter(None, (part.strip() for part in grouping.split(","))):
            assert label in labels | {"le"}, f"no series here has label {label}: {expr}"
    # Every node exports the same project figures: a max that dropped a label (outcome, result)
    # would keep that label's largest series instead of letting the sum around it add them up.
    for grouping, name in MAX_OVER_NODES.findall(expr):
        kept = {part.strip() for part in grouping.split(",") if part.strip()}
        assert kept == exported[name], f"max over nodes must keep every label of {name}: {expr}"


def test_every_alert_reads_exported_metrics_and_links_its_runbook_section(exported):
    rules = [
        rule
        for group in yaml.safe_load((MONITORING / "alerts.yml").read_text())["groups"]
        for rule in group["rules"]
    ]
    names = [rule["alert"] for rule in rules]
    assert len(names) == len(set(names))
    assert {
        "TrackerIrsrFalling",
        "TrackerBacklogGrowing",
        "TrackerHigh5xxRate",
        "TrackerHigh503Rate",
        "TrackerRedisMemoryNearMax",
        "TrackerMaintainLeaseLost",
    } <= set(names)
    for rule in rules:
        check_expression(rule["expr"], exported)
        assert rule["annotations"]["summary"].strip()
        assert rule["annotations"]["runbook_url"] == RUNBOOK_URL + rule["alert"].lower()
        assert f"\n### {rule['alert']}\n" in RUNBOOK.read_text()
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}


def test_every_dashboard_query_reads_exported_metrics(exported):
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert len(exprs) >= 10
    for expr in exprs:
        check_expression(expr.replace("$project", "x"), exported)
    for variable in dashboard["templating"]["list"]:
        check_expression(variable["query"], exported)
    titles = " ".join(panel["title"] for panel in dashboard["panels"]).lower()
    for shown in (
        "irsr",
        "claims/s",
        "done/s",
        "backlog",
        "growth",
        "5xx",
        "503",
        "p99",
        "redis memory",
        "redis rtt",
        "redis up",
    ):
        assert shown in titles, shown
    text = " ".join(exprs)
    assert "histogram_quantile(0.99" in text and "histogram_quantile(0.5" in text


def test_every_exported_metric_is_in_the_operations_table(exported):
    """docs/operations.md's table names every family a scrape exports (its first column)."""
    operations = (ROOT / "docs" / "operations.md").read_text()
    section = operations.split("## Metrics", 1)[1].split("\n## ", 1)[0]
    documented = {name for row in re.findall(r"^\| ([^|]+)\|", section, re.M) for name in METRIC.findall(row)}
    for sample in exported:
        base = re.sub(r"_(bucket|sum|count|created)$", "", sample)
        assert {base, base + "_total"} & documented, f"{sample} is not in docs/operations.md's table"
