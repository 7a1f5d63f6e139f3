"""The bed's control plane provider for Cluster API, shared by the tests, `make demo` and the benchmark: the
management cluster is also the workload cluster, so a Cluster's control plane is the local API server the bed
already runs, and the bed reports it as a control plane provider reports a control plane it manages
(docs/architecture.md#the-test-bed).

Why a control plane object at all. Cluster API's core Machine controller (v1.14.2) sets a Machine's `nodeRef` from
the Node whose `spec.providerID` is the Machine's, read through its ClusterCache, which connects to the workload
cluster once the Cluster's `status.initialization.infrastructureProvisioned` is true, with the Secret
`<cluster>-kubeconfig` (key `value`). But it starts watching that cluster's Nodes only once the Cluster's
`ControlPlaneInitialized` condition is True: before that, a Node registering or getting its providerID wakes no
Machine. Without a `spec.controlPlaneRef`, the Cluster controller sets that condition only when a Machine labelled
`cluster.x-k8s.io/control-plane` has a nodeRef; the bed's control plane is no Machine. With a `controlPlaneRef`, it
mirrors the referenced object's `status.initialization.controlPlaneInitialized` (the v1beta2 control plane contract),
and leaves the kubeconfig Secret to the control plane provider. So the bed installs a kind of its own,
`ManagementControlPlane`, labelled with the contract version it serves like any provider's CRD, and plays its
provider: it writes the object's status (initialized, available, the API server's version) and the kubeconfig Secret
pointing at the same API server. A real install with an externally managed control plane (a hosted control plane
provider) does the same through its own controller.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlparse

import yaml

from api.infrastructure import CONTRACT_LABEL
from hack.capi.manifests import CLUSTER_NAME_LABEL, CLUSTER_SECRET_TYPE
from hack.crds_established import wait_established

Kubectl = Callable[..., subprocess.CompletedProcess[str]]

GROUP = "controlplane.testbed.ovirt-machine-controller.io"
VERSION = "v1alpha1"
KIND = "ManagementControlPlane"
PLURAL = "managementcontrolplanes"
CRD_NAME = f"{PLURAL}.{GROUP}"  # contract.CalculateCRDName: the lower-case plural of the kind, then the group


def _crd() -> dict[str, Any]:
    endpoint = {"type": "object", "properties": {"host": {"type": "string"}, "port": {"type": "integer"}}}
    conditions = {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    schema = {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"version": {"type": "string"}, "controlPlaneEndpoint": endpoint}},
        "status": {"type": "object", "properties": {
            "initialization": {"type": "object", "properties": {"controlPlaneInitialized": {"type": "boolean"}}},
            "version": {"type": "string"}, "conditions": conditions}}}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": CRD_NAME, "labels": {CONTRACT_LABEL: VERSION}},
            "spec": {"group": GROUP, "scope": "Namespaced",
                     "names": {"kind": KIND, "plural": PLURAL, "singular": KIND.lower(), "listKind": f"{KIND}List"},
                     "versions": [{"name": VERSION, "served": True, "storage": True,
                                   "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": schema}}]}}


def install(kubectl: Kubectl) -> None:
    """Install the kind (idempotent) and wait until the API server serves it."""
    kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(_crd()))
    wait_established(lambda *args: kubectl(*args, check=False).stdout, CRD_NAME)


def ref(name: str) -> dict[str, str]:
    """The Cluster's `spec.controlPlaneRef` to it."""
    return {"apiGroup": GROUP, "kind": KIND, "name": name}


def endpoint(kubeconfig: Path) -> dict[str, Any]:
    """The API server of a kubeconfig as a Cluster API endpoint ({host, port})."""
    doc = yaml.safe_load(kubeconfig.read_text())
    url = urlparse(doc["clusters"][0]["cluster"]["server"])
    return {"host": url.hostname, "port": url.port or 443}


class ManagementControlPlane:
    """One Cluster's control plane: the API server of `kubeconfig`, reported initialized and available."""

    def __init__(self, kubectl: Kubectl, kubeconfig: Path, namespace: str, cluster: str):
        self.kubectl = kubectl
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.cluster = cluster
        self.name = f"{cluster}-control-plane"

    def _server_version(self) -> str:
        return json.loads(self.kubectl("version", "-o", "json").stdout)["serverVersion"]["gitVersion"]

    def manifests(self) -> list[dict[str, Any]]:
        """The control plane object and the kubeconfig Secret, created with the Cluster."""
        version = self._server_version()
        meta = {"namespace": self.namespace, "labels": {CLUSTER_NAME_LABEL: self.cluster}}
        plane = {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": {"name": self.name, **meta},
                 "spec": {"version": version, "controlPlaneEndpoint": endpoint(self.kubeconfig)}}
        # The Secret Cluster API's ClusterCache reads (`<cluster>-kubeconfig`, key `value`): the same API server.
        secret = {"apiVersion": "v1", "kind": "Secret", "type": CLUSTER_SECRET_TYPE,
                  "metadata": {"name": f"{self.cluster}-kubeconfig", **meta},
                  "data": {"value": base64.b64encode(self.kubeconfig.read_bytes()).decode()}}
        return [plane, secret]

    def report_initialized(self) -> None:
        """Write the status a control plane provider writes once its API server serves: initialized, Available,
        at the version it runs (Cluster API's MachineSet preflight checks read it)."""
        version = self._server_version()
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = {"initialization": {"controlPlaneInitialized": True}, "version": version,
                  "conditions": [{"type": "Available", "status": "True", "reason": "Available", "message": "",
                                  "lastTransitionTime": now}]}
        self.kubectl("-n", self.namespace, "patch", f"{PLURAL}.{GROUP}", self.name, "--subresource=status",
                     "--type=merge", "-p", json.dumps({"status": status}))
