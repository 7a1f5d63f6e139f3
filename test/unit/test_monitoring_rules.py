"""The alerts and the dashboard of config/monitoring, checked by Prometheus' own promtool (built from its Go module,
hack/controlplane/promtool.py): the rules parse and pass `promtool check rules`, each alert fires and stays quiet as
its promtool unit test says (test/unit/monitoring/*_test.yaml), every alert carries what an on-call engineer needs,
and every dashboard query is valid PromQL. Whether the metrics they read are exported is
test/e2e/test_monitoring_metrics.py's."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from hack.controlplane.go_tools import build_tool
from hack.controlplane.promtool import PROMTOOL
from testbed import monitoring

TESTS = Path(__file__).parent / "monitoring"
SEVERITIES = {"critical", "warning", "info"}


@pytest.fixture(scope="module")
def promtool() -> Path:
    return build_tool(PROMTOOL)


@pytest.fixture
def rule_dir(tmp_path) -> Path:
    """Each PrometheusRule's groups as the plain rule file promtool reads, beside the unit tests of them."""
    for name, path in monitoring.RULE_FILES.items():
        (tmp_path / name).write_text(yaml.safe_dump({"groups": monitoring.prometheus_rule_groups(path)}))
    for test in TESTS.glob("*_test.yaml"):
        (tmp_path / test.name).write_text(test.read_text())
    return tmp_path


def _promtool(promtool: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(promtool), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_rules_pass_promtool_check(promtool, rule_dir):
    r = _promtool(promtool, "check", "rules", *monitoring.RULE_FILES, cwd=rule_dir)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def test_each_alert_fires_and_stays_quiet_as_its_promtool_test_says(promtool, rule_dir):
    tests = sorted(p.name for p in TESTS.glob("*_test.yaml"))
    assert tests, "no promtool tests"
    r = _promtool(promtool, "test", "rules", *tests, cwd=rule_dir)
    assert r.returncode == 0, r.stdout + r.stderr


def test_promtool_tests_catch_a_wrong_threshold(promtool, rule_dir):
    """The unit tests can fail: the same tests on a rule whose threshold was changed fail."""
    rules = yaml.safe_load((rule_dir / "ovirt-rules.yaml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == "OvirtEngineErrors":
                rule["expr"] = rule["expr"].replace("> 0.1", "> 0.5")
    (rule_dir / "ovirt-rules.yaml").write_text(yaml.safe_dump(rules))
    r = _promtool(promtool, "test", "rules", "ovirt_rules_test.yaml", cwd=rule_dir)
    assert r.returncode != 0 and "OvirtEngineErrors" in r.stdout + r.stderr


def test_every_alert_is_tested_firing_and_names_its_runbook():
    tested_firing: set[str] = set()
    for test in TESTS.glob("*_test.yaml"):
        for case in yaml.safe_load(test.read_text())["tests"]:
            tested_firing |= {t["alertname"] for t in case.get("alert_rule_test", []) if t.get("exp_alerts")}
    names = []
    for _file, rule in monitoring.alerts():
        name = rule["alert"]
        names.append(name)
        assert name in tested_firing, f"{name} has no promtool test in which it fires"
        assert rule["labels"]["severity"] in SEVERITIES, name
        assert re.fullmatch(r"\d+[smh]", rule["for"]), f"{name}: `for` is {rule.get('for')!r}"
        notes = rule["annotations"]
        assert notes["summary"] and notes["description"], name
        assert notes["runbook_url"] == f"docs/runbooks/{name}.md", name
        assert (monitoring.REPO / notes["runbook_url"]).is_file(), f"{name}: no runbook at {notes['runbook_url']}"
    assert len(names) == len(set(names)), "an alert is defined twice"


def test_every_dashboard_query_is_promql_that_promtool_accepts(promtool, tmp_path):
    queries = monitoring.dashboard_queries()
    assert len(queries) >= 10
    # promtool parses expressions only inside rules: each query becomes a recording rule.
    rules = [{"record": f"dashboard:query_{i}", "expr": expr} for i, (_title, expr) in enumerate(queries)]
    (tmp_path / "dashboard.yaml").write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    r = _promtool(promtool, "check", "rules", "dashboard.yaml", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_dashboard_is_a_grafana_dashboard_its_sidecar_loads():
    board = monitoring.dashboard()
    assert board["uid"] and board["title"] and isinstance(board["schemaVersion"], int)
    assert [v["name"] for v in board["templating"]["list"]] == ["datasource"]
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    taken: set[tuple[int, int]] = set()
    for panel in board["panels"]:
        g = panel["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24, panel["title"]
        cells = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & taken, f"panel {panel['title']!r} overlaps another"
        taken |= cells
        if panel["type"] == "row":
            continue
        assert panel["type"] == "timeseries" and panel["targets"], panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
    # What Grafana's sidecar looks for: a ConfigMap labelled grafana_dashboard holding the JSON file.
    kustomization = yaml.safe_load((monitoring.MONITORING / "ovirt" / "kustomization.yaml").read_text())
    generated = kustomization["configMapGenerator"][0]
    assert generated["options"]["labels"]["grafana_dashboard"] == "1"
    assert generated["files"] == [monitoring.DASHBOARD.name]
