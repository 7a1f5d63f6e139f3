"""Every metric and label the shipped alerts and dashboard read (config/monitoring) is one that this project's
processes export: a running controller (leading, with a Running Machine behind it) and a running volume provisioner
are scraped, and each selector of each rule and query is looked up in what they served. A rule that names a metric
nothing exports would never fire, silently."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from collections import defaultdict

import pytest

from machines import unique_name
from test_storage_provisioner import Provisioner, wait_for
from testbed import monitoring

pytestmark = pytest.mark.e2e

# Labels Prometheus itself puts on every series it scrapes (the target's), and `up`, which it makes.
TARGET_LABELS = {"job", "namespace", "pod", "instance", "service", "endpoint", "container"}
PROMETHEUS_OWN = {"up"}
_TYPE = re.compile(r"^# TYPE (\S+) (\S+)$")
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? ")
# The series names each exposition type adds to its family name (prometheus_client's text format).
_SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count", "_created"),
             "summary": ("_sum", "_count", "_created"), "gauge": ("",), "untyped": ("",), "info": ("_info",)}


def exported(text: str) -> dict[str, set[str] | None]:
    """Series name -> the label names seen on its samples (None: the family is declared but has no sample yet)."""
    series: dict[str, set[str] | None] = {}
    for line in text.splitlines():
        m = _TYPE.match(line)
        if m:
            for suffix in _SUFFIXES[m.group(2)]:
                series.setdefault(m.group(1) + suffix, None)
            continue
        m = _SAMPLE.match(line)
        if m and not line.startswith("#"):
            labels = {pair.split("=", 1)[0] for pair in re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(2) or "")}
            seen = series.get(m.group(1)) or set()
            series[m.group(1)] = seen | labels
    return series


def test_the_alerts_and_the_dashboard_read_only_what_is_exported(menv, tmp_path):
    controller = menv.controller(leader_elect=True, extra_args=(f"--leader-election-namespace={menv.namespace}",))
    name = menv.create_machine(unique_name("metrics"))
    menv.wait_phase(name, "Running", timeout=90)
    provisioner = Provisioner(menv.cluster.kubeconfig, tmp_path / "provisioner.log").start()
    try:
        provisioner_text = wait_for(lambda: _scrape(provisioner), timeout=60, what="the provisioner's metrics")
    finally:
        provisioner.stop()
    served: dict[str, set[str] | None] = defaultdict(lambda: None)
    for text in (controller.metrics(), provisioner_text):
        for series, labels in exported(text).items():
            if labels is not None or served[series] is None:
                served[series] = (served[series] or set()) | (labels or set())

    # What this scenario exercised has samples: their labels are checked, not only their names.
    for must in ("ovirt_engine_requests_total", "ovirt_engine_request_duration_seconds_bucket",
                 "rest_client_requests_total", "leader_election_master_status",
                 "mapi_machine_created_timestamp_seconds", "workqueue_depth"):
        assert served[must], f"{must} has no sample after a Machine went Running"

    # The one replica runs and leads: the leader alert's gauge says so.
    assert re.search(r'^leader_election_master_status\{name="cluster-api-provider-ovirt-leader"\} 1\.0$',
                     controller.metrics(), re.M)

    readers = [(f"alert {rule['alert']}", rule["expr"]) for _file, rule in monitoring.alerts()]
    readers += [(f"dashboard panel {title!r}", expr) for title, expr in monitoring.dashboard_queries()]
    problems = []
    for who, expr in readers:
        names: set[str] = set()
        for sel in monitoring.selectors(expr):
            if sel.metric in PROMETHEUS_OWN:
                continue
            if sel.metric not in served:
                problems.append(f"{who} reads {sel.metric}, which nothing exports")
                continue
            labels = served[sel.metric]
            names |= labels or set()
            for label in set(sel.labels) - TARGET_LABELS:
                if labels is not None and label not in labels:
                    problems.append(f"{who} matches {sel.metric} on {label!r}, which it does not carry ({labels})")
        for label in monitoring.grouping_labels(expr) - TARGET_LABELS - {"le"}:
            if names and label not in names:
                problems.append(f"{who} groups by {label!r}, which none of its metrics carries ({names})")
    assert not problems, "\n".join(problems)


def _scrape(provisioner: Provisioner) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{provisioner.metrics_port}/metrics", timeout=5) as r:
            return r.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return None
