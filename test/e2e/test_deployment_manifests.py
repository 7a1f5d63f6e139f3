"""Both kustomize entry points (docs/architecture.md#deployment-modes) pass `kubectl apply -k --dry-run=server`: the
API server validates every object, including the OpenShift overlay's ServiceMonitor against the real
monitoring.coreos.com CRD. The overlay ships what MAO does not: nothing of MAO's Namespace, machine.openshift.io
CRDs or ServiceAccount, and only the RBAC of the controllers it runs."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from hack.ovirt_install import REPO
from machines import MACHINE_API_NS

# The ServiceMonitor CRD comes from the prometheus-operator Go module, fetched through the Go module proxy at test
# set-up (cached in the Go module cache, never copied into this repository). v0.85.0 is the newest release the
# proxy serves: v0.86.0 and v0.87.0 are refused ("This module version is not available", 403).
PROMETHEUS_OPERATOR = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
MONITORING_CRDS = {"servicemonitors.monitoring.coreos.com":
                   "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml",
                   "prometheusrules.monitoring.coreos.com":
                   "example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml"}

GROUPS = ("manager", "machine", "machineset", "machineset-capacity", "nodelink", "machinehealthcheck", "remediation",
          "ovirt-nodes")
OPENSHIFT_GROUPS = ("manager", "machine", "machineset-capacity", "ovirt-nodes", "remediation", "metrics-auth")


def _module_dir(module: str) -> Path:
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}
    with tempfile.TemporaryDirectory() as outside_any_module:
        out = subprocess.run(["go", "mod", "download", "-json", module], cwd=outside_any_module, env=env,
                             capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"go mod download {module}: {out.stdout}{out.stderr}"
    return Path(json.loads(out.stdout)["Dir"])


@pytest.fixture(scope="module")
def monitoring_crds(cluster) -> None:
    """prometheus-operator's ServiceMonitor and PrometheusRule CRDs, which config/monitoring's objects need."""
    for name, path in MONITORING_CRDS.items():
        if cluster.kubectl("get", "crd", name, check=False).returncode != 0:  # a real OpenShift has its own
            cluster.kubectl("apply", "--server-side", "-f", str(_module_dir(PROMETHEUS_OPERATOR) / path))
        cluster.wait_established(name)
    cluster._wait_discoverable("monitoring.coreos.com/v1")


def _dry_run(cluster, entry_point: str) -> str:
    # A dry run creates nothing, so the namespace the objects go into must exist already (MAO's, on OpenShift).
    cluster.ensure_namespace(MACHINE_API_NS)
    return cluster.kubectl("apply", "-k", str(REPO / entry_point), "--dry-run=server").stdout


def _built(cluster, entry_point: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(cluster.kubectl("kustomize", str(REPO / entry_point)).stdout) if d]


def test_standalone_entry_point_passes_server_side_dry_run(cluster, monitoring_crds):
    out = _dry_run(cluster, "config")
    for obj in ("prometheusrule.monitoring.coreos.com/ovirt-machine-controller",
                "prometheusrule.monitoring.coreos.com/ovirt-machine-controller-machines",
                "servicemonitor.monitoring.coreos.com/ovirt-machine-controller",
                "service/ovirt-machine-controller-metrics", "configmap/ovirt-machine-controller-dashboard",
                "customresourcedefinition.apiextensions.k8s.io/machines.machine.openshift.io",
                "customresourcedefinition.apiextensions.k8s.io/ovirtremediations.remediation.ovirt.org",
                "namespace/openshift-machine-api", "deployment.apps/ovirt-machine-controller",
                "serviceaccount/machine-api-controllers",
                *(f"rolebinding.rbac.authorization.k8s.io/ovirt-machine-controller-{g}"
                  for g in GROUPS if g not in ("ovirt-nodes",)),
                *(f"clusterrolebinding.rbac.authorization.k8s.io/ovirt-machine-controller-{g}"
                  for g in ("manager", "machine", "nodelink", "remediation", "ovirt-nodes"))):
        assert obj in out, out


def test_openshift_overlay_passes_server_side_dry_run(cluster, monitoring_crds):
    out = _dry_run(cluster, "config/openshift")
    # MAO ships its own alerts on Machines and health checks: only this project's are added beside them.
    assert "prometheusrule.monitoring.coreos.com/ovirt-machine-controller-machines" not in out, out
    for obj in ("prometheusrule.monitoring.coreos.com/ovirt-machine-controller",
                "configmap/ovirt-machine-controller-dashboard",
                "customresourcedefinition.apiextensions.k8s.io/ovirtremediations.remediation.ovirt.org",
                "customresourcedefinition.apiextensions.k8s.io/ovirtremediationtemplates.remediation.ovirt.org",
                "deployment.apps/ovirt-machine-controller", "service/ovirt-machine-controller-metrics",
                "servicemonitor.monitoring.coreos.com/ovirt-machine-controller",
                "clusterrolebinding.rbac.authorization.k8s.io/ovirt-machine-controller-metrics-auth",
                "clusterrolebinding.rbac.authorization.k8s.io/ovirt-machine-controller-metrics-reader"):
        assert obj in out, out

    objects = _built(cluster, "config/openshift")
    kinds = {(d["kind"], d["metadata"]["name"]) for d in objects}
    # MAO ships these; declaring them again would fight the cluster-version operator over them.
    assert not {k for k, _ in kinds} & {"Namespace", "ServiceAccount"}, kinds
    assert not [n for k, n in kinds if k == "CustomResourceDefinition" and n.endswith(".machine.openshift.io")]
    # The Cluster API front end's kinds serve no controller this deployment runs.
    assert not [n for k, n in kinds if k == "CustomResourceDefinition" and n.endswith(".cluster.x-k8s.io")]
    # Only the rules of what runs: nothing of MAO's own machineset, nodelink and health-check controllers.
    roles = {n for k, n in kinds if k in ("Role", "ClusterRole") and n.startswith("ovirt-machine-controller-")}
    assert roles == {f"ovirt-machine-controller-{g}" for g in OPENSHIFT_GROUPS} | {
        "ovirt-machine-controller-metrics-reader"}, roles

    pod = next(d for d in objects if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    assert "--controllers=machine,machineset-capacity,ovirt-nodes,remediation" in args and "--metrics-secure" in args
    assert pod["priorityClassName"] == "system-node-critical"
    assert pod["nodeSelector"] == {"node-role.kubernetes.io/master": ""}
    assert {"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"} in pod["tolerations"]
    service = next(d for d in objects if d["kind"] == "Service")
    secret = service["metadata"]["annotations"]["service.beta.openshift.io/serving-cert-secret-name"]
    assert {"name": "metrics-tls", "secret": {"secretName": secret}} in pod["volumes"]
