"""monitoring/: promtool checks the PromQL and runs the rules' unit tests (alerts_test.yml).

Skipped without promtool (Debian package prometheus); tests/api/public/test_metrics_monitoring.py
checks the metric and label names without it."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import yaml

from support.paths import ROOT

MONITORING = ROOT / "monitoring"


def promtool(*args: str, cwd=MONITORING) -> subprocess.CompletedProcess:
    if not shutil.which("promtool"):
        pytest.skip("promtool not installed (Debian package prometheus)")
    return subprocess.run(["promtool", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_alert_rules_pass_promtool_check():
    result = promtool("check", "rules", "alerts.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_alert_rules_behave_as_their_unit_tests_say():
    """IRSR 40% over served, empty and limited on two nodes fires; the traffic floor and a
    served-dominant project do not; a 10 min maintain interval is no lost lease, a dead
    maintainer is; runbook links are absolute with runbook_base, the repository path without."""
    result = promtool("test", "rules", "alerts_test.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    tested = {
        case["alertname"]
        for group in yaml.safe_load((MONITORING / "alerts_test.yml").read_text())["tests"]
        for case in group.get("alert_rule_test", [])
        if case["exp_alerts"]
    }
    assert {"TrackerIrsrFalling", "TrackerMaintainLeaseLost"} <= tested


def test_every_dashboard_query_is_valid_promql(tmp_path):
    """Each panel's query, as a recording rule, passes promtool's parser."""
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard:query_{n}", "expr": expr.replace("$project", ".*")}
                    for n, expr in enumerate(exprs)
                ],
            }
        ]
    }
    (tmp_path / "dashboard.yml").write_text(yaml.safe_dump(rules))
    result = promtool("check", "rules", "dashboard.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in result.stdout
