"""The objects a user applies to run workers on oVirt with upstream Cluster API, as plain manifests: a Cluster, its
OvirtCluster and the identity Secret that names the engine, an OvirtMachineTemplate, a MachineDeployment, and the
bootstrap data Secret its Machines share (docs/cluster-api.md#the-objects). Pure builders: nothing here talks to a
cluster or an engine, so the end-to-end tests, `make demo` and the benchmark write the same objects.

    docs = [identity_secret(ns, "c1-ovirt", engine), ovirt_cluster(ns, "c1", "c1-ovirt", cluster_id, endpoint),
            bootstrap_secret(ns, "c1-bootstrap", "c1"), cluster(ns, "c1", control_plane_ref=plane_ref),
            machine_template(ns, "c1-t1", vm_spec(template_name, cluster_id)),
            machine_deployment(ns, "c1", "c1", replicas=3, template="c1-t1", version="v1.35.4",
                               bootstrap_secret="c1-bootstrap")]
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from api import capi, infrastructure

CLUSTER_NAME_LABEL = capi.CLUSTER_NAME_LABEL
DEPLOYMENT_NAME_LABEL = f"{capi.GROUP}/deployment-name"
# The type Cluster API gives the Secrets it writes for a Cluster (kubeconfig, bootstrap data, certificates).
CLUSTER_SECRET_TYPE = f"{capi.GROUP}/secret"
# clusterctl's label for objects `clusterctl move` takes though nothing links them to a Cluster.
MOVE_LABEL = "clusterctl.cluster.x-k8s.io/move"
# The bootstrap data every Machine of a MachineDeployment shares, as kubeadm's bootstrap provider would write it for
# a node image: the kubelet learns its provider ID from the instance id (hack/ovirtsim/cloud_config.py), the form
# this provider gives OvirtMachine.spec.providerID.
BOOTSTRAP_CLOUD_CONFIG = """## template: jinja
#cloud-config
write_files:
- path: /etc/default/kubelet
  content: |
    KUBELET_EXTRA_ARGS="--provider-id=ovirt://{{ v1.instance_id }}"
runcmd:
- [kubeadm, join, --config, /run/kubeadm/kubeadm-join-config.yaml]
"""


@dataclass(frozen=True)
class Engine:
    """How to reach an engine: what the OvirtCluster's identity Secret holds."""

    url: str
    username: str
    password: str
    ca_pem: str


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _meta(namespace: str, name: str, cluster: str | None = None, moved: bool = False) -> dict[str, Any]:
    """`moved`: a Secret no owner reference links to its Cluster carries clusterctl's move label, as the
    templates' do (docs/cluster-api.md#moving-a-cluster-clusterctl-move)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    labels = {**({CLUSTER_NAME_LABEL: cluster} if cluster else {}), **({MOVE_LABEL: ""} if moved else {})}
    if labels:
        meta["labels"] = labels
    return meta


def infrastructure_ref(kind: str, name: str) -> dict[str, str]:
    """A reference to one of this provider's objects (the Cluster's and the Machines' `infrastructureRef`)."""
    return {"apiGroup": infrastructure.GROUP, "kind": kind, "name": name}


def identity_secret(namespace: str, name: str, engine: Engine) -> dict[str, Any]:
    """The Secret an OvirtCluster's `spec.identityRef` names: one engine per OvirtCluster."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": _meta(namespace, name, moved=True),
            "data": {infrastructure.IDENTITY_URL_KEY: _b64(engine.url),
                     infrastructure.IDENTITY_USERNAME_KEY: _b64(engine.username),
                     infrastructure.IDENTITY_PASSWORD_KEY: _b64(engine.password),
                     infrastructure.IDENTITY_CA_KEY: _b64(engine.ca_pem)}}


def ovirt_cluster(namespace: str, name: str, identity: str, cluster_id: str,
                  endpoint: dict[str, Any]) -> dict[str, Any]:
    """An OvirtCluster whose VMs go to the oVirt cluster `cluster_id`, on the engine of the Secret `identity`."""
    return {"apiVersion": infrastructure.API_VERSION, "kind": infrastructure.OVIRT_CLUSTER_KIND,
            "metadata": _meta(namespace, name),
            "spec": {"controlPlaneEndpoint": endpoint, "identityRef": {"name": identity}, "clusterId": cluster_id}}


def bootstrap_secret(namespace: str, name: str, cluster: str, value: str = BOOTSTRAP_CLOUD_CONFIG,
                     data_format: capi.BootstrapFormat = capi.DEFAULT_BOOTSTRAP_FORMAT) -> dict[str, Any]:
    """Bootstrap data given directly, as a bootstrap provider would write it: the Secret a Machine's
    `spec.bootstrap.dataSecretName` names (keys `value` and `format`)."""
    return {"apiVersion": "v1", "kind": "Secret", "type": CLUSTER_SECRET_TYPE,
            "metadata": _meta(namespace, name, cluster, moved=True),
            "data": {capi.BOOTSTRAP_DATA_KEY: _b64(value), capi.BOOTSTRAP_FORMAT_KEY: _b64(str(data_format))}}


def cluster(namespace: str, name: str, control_plane_ref: dict[str, str] | None = None) -> dict[str, Any]:
    """A Cluster whose infrastructure is the OvirtCluster of the same name."""
    spec: dict[str, Any] = {"infrastructureRef": infrastructure_ref(infrastructure.OVIRT_CLUSTER_KIND, name)}
    if control_plane_ref:
        spec["controlPlaneRef"] = control_plane_ref
    return {"apiVersion": capi.API_VERSION, "kind": capi.CLUSTER_KIND, "metadata": _meta(namespace, name),
            "spec": spec}


def vm_spec(template_name: str, cluster_id: str, memory_mb: int = 2048, cores: int = 2,
            os_disk_gb: int = 20) -> dict[str, Any]:
    """An OvirtMachine spec (the provider spec's snake_case fields): a server VM from the engine's template."""
    return {"template_name": template_name, "cluster_id": cluster_id, "memory_mb": memory_mb,
            "cpu": {"sockets": 1, "cores": cores, "threads": 1}, "os_disk": {"size_gb": os_disk_gb}, "type": "server"}


def machine_template(namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """An OvirtMachineTemplate of the OvirtMachine spec `spec`."""
    return {"apiVersion": infrastructure.API_VERSION, "kind": infrastructure.OVIRT_MACHINE_TEMPLATE_KIND,
            "metadata": _meta(namespace, name), "spec": {"template": {"spec": spec}}}


def machine_deployment(namespace: str, name: str, cluster_name: str, replicas: int, template: str, version: str,
                       bootstrap_secret: str, max_surge: int = 1, max_unavailable: int = 0) -> dict[str, Any]:
    """A MachineDeployment of `replicas` workers of the OvirtMachineTemplate `template`, rolled out one at a time
    (RollingUpdate, `max_surge`, `max_unavailable`). `version` is the kubelet's: Cluster API counts a Machine up
    to date only when its Node's kubelet runs the Machine's version."""
    labels = {CLUSTER_NAME_LABEL: cluster_name, DEPLOYMENT_NAME_LABEL: name}
    return {"apiVersion": capi.API_VERSION, "kind": "MachineDeployment",
            "metadata": _meta(namespace, name, cluster_name),
            "spec": {"clusterName": cluster_name, "replicas": replicas,
                     "selector": {"matchLabels": labels},
                     "rollout": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {
                         "maxSurge": max_surge, "maxUnavailable": max_unavailable}}},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "clusterName": cluster_name, "version": version,
                         "bootstrap": {"dataSecretName": bootstrap_secret},
                         "infrastructureRef": infrastructure_ref(infrastructure.OVIRT_MACHINE_TEMPLATE_KIND,
                                                                 template)}}}}
