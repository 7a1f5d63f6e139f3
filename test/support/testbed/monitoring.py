"""The shipped monitoring config (config/monitoring) read back for its tests: the alerting rules of each
PrometheusRule, the dashboard's queries, and the metric selectors a PromQL expression names.

`selectors` is a small scanner, not a PromQL parser: promtool parses every expression for real (`promtool check
rules`, test/unit/test_monitoring_rules.py); this only finds which metric names and label matchers an expression
reads, so that test/e2e/test_monitoring_metrics.py can check them against what the controller exports.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import yaml

REPO = Path(__file__).resolve().parents[3]
MONITORING = REPO / "config" / "monitoring"
# Each PrometheusRule file, by the name promtool's tests (test/unit/monitoring/*_test.yaml) load its groups under.
RULE_FILES = {"ovirt-rules.yaml": MONITORING / "ovirt" / "rules.yaml",
              "machine-api-rules.yaml": MONITORING / "machine-api-rules.yaml"}
DASHBOARD = MONITORING / "ovirt" / "dashboard.json"

# Grafana's interval variables, replaced by a duration so that promtool can parse a dashboard query.
_GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}
# Words that are PromQL and not metric names when they stand alone (the functions and aggregations are told apart by
# the parenthesis that follows them).
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset",
             "inf", "nan"}
_LABEL_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
_IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_MATCHER = re.compile(r"\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*\"((?:[^\"\\]|\\.)*)\"\s*,?")


@dataclass(frozen=True)
class Selector:
    metric: str
    labels: tuple[str, ...]  # the label names its matchers name


def prometheus_rule_groups(path: Path) -> list[dict[str, Any]]:
    """The rule groups of a PrometheusRule manifest (its spec), as a plain Prometheus rule file holds them."""
    doc = yaml.safe_load(path.read_text())
    assert doc["kind"] == "PrometheusRule", path
    return doc["spec"]["groups"]


def alerts() -> Iterator[tuple[str, dict[str, Any]]]:
    """(rule file name, alerting rule) for every alert shipped."""
    for name, path in RULE_FILES.items():
        for group in prometheus_rule_groups(path):
            for rule in group["rules"]:
                if "alert" in rule:
                    yield name, rule


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, query with Grafana's variables replaced) for every target of every panel."""
    out = []
    for panel in dashboard()["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for variable, value in _GRAFANA_VARIABLES.items():
                expr = expr.replace(variable, value)
            out.append((panel["title"], expr))
    return out


def grouping_labels(expr: str) -> set[str]:
    """The labels `expr` aggregates or matches by (`by (...)`, `on (...)` and the like)."""
    clauses = re.finditer(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", expr)
    return {label.strip() for m in clauses for label in m.group(1).split(",") if label.strip()}


def selectors(expr: str) -> list[Selector]:
    """The metric selectors `expr` names, in order."""
    found: list[Selector] = []
    i = 0
    while i < len(expr):
        c = expr[i]
        if c == '"':  # a string outside a selector (a label_replace argument): skip it whole
            i = expr.index('"', i + 1) + 1
            continue
        if c == "[":  # a range or subquery duration
            i = expr.index("]", i) + 1
            continue
        if c == "{":  # a selector without a name ({__name__=...}) is not used in the shipped config
            raise ValueError(f"a selector without a metric name in {expr!r}")
        m = _IDENT.match(expr, i)
        if m is None or (i > 0 and (expr[i - 1].isalnum() or expr[i - 1] in "._$")):
            i += 1 if m is None else m.end() - i
            continue
        word, i = m.group(), m.end()
        rest = expr[i:].lstrip()
        if word in _LABEL_LISTS and rest.startswith("("):
            i = expr.index(")", i) + 1
            continue
        aggregation = re.match(r"(by|without)\s*\(", rest)
        if rest.startswith("(") or aggregation or word in _KEYWORDS:
            continue  # a function or an aggregation, or an operator
        labels: list[str] = []
        if rest.startswith("{"):
            j = expr.index("{", i) + 1
            while True:
                matcher = _MATCHER.match(expr, j)
                if matcher is None:
                    break
                labels.append(matcher.group(1))
                j = matcher.end()
            if expr[j:].lstrip()[:1] != "}":
                raise ValueError(f"cannot read the matchers of {word} in {expr!r}")
            i = expr.index("}", j) + 1
        found.append(Selector(word, tuple(labels)))
    return found
