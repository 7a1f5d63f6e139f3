"""Install machine-api-operator (release-4.13, hack/controlplane/mao_operator.py) into a cluster the way the
cluster-version operator installs it from a release payload, so the operator itself renders `machine-api-controllers`
with this project's image as the oVirt provider (docs/compatibility.md#the-operator-at-release-413).

What the payload and the rest of OpenShift would provide, and who provides it here:

- MAO's `install/` manifests (ServiceAccounts, RBAC, the kube-rbac-proxy config, Services, the ClusterOperator and
  the operator's Deployment) are applied from the pinned commit, each image reference replaced the way the
  cluster-version operator replaces them (`images`), and the images ConfigMap written with `images.json`.
- What this image needs beside MAO's own RBAC, as README "On OpenShift" step 2 applies it: the RBAC objects and
  CRDs of `config/openshift`, bound to MAO's `machine-api-controllers` ServiceAccount (not its Deployment: here
  MAO's container is the only candidate for the Lease).
- Every object of namespace `openshift-machine-api` goes to `namespace` instead: MAO runs its controllers in its
  own pod's namespace (`COMPONENT_NAMESPACE`), which lets a test keep them apart from the others sharing the
  cluster; for the same reason ClusterRoles and ClusterRoleBindings get the namespace as a suffix. Objects of
  OpenShift's other namespaces (openshift-config, openshift-config-managed, openshift-monitoring) are left out.
- The config.openshift.io CRDs the operator watches, the Proxy `cluster` (no proxy) and, beside it,
  install_openshift_config's Infrastructure: the oVirt platform.
- The serving certificates the service CA operator would write for the Services' `serving-cert-secret-name`
  annotations are self-signed here (hack/controlplane/certs.py), one Secret per annotation, as a cluster admin
  without that operator would make them.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml

from hack.controlplane.certs import self_signed_serving
from hack.controlplane.mao_operator import MaoOperator, ensure_operator
from hack.crds_established import wait_established

Kubectl = Callable[..., subprocess.CompletedProcess[str]]
MAO_NAMESPACE = "openshift-machine-api"
# The install manifests applied, by their file's name after the 0000_30_machine-api-operator_ prefix.
MANIFESTS = ("09_rbac.yaml", "10_kube-rbac-proxy-config.yaml", "10_service.yaml", "08_webhook_service.yaml",
             "08_machine_webhook_service.yaml", "12_clusteroperator.yaml", "11_deployment.yaml")
SERVING_CERT_ANNOTATIONS = ("service.beta.openshift.io/serving-cert-secret-name",
                            "service.alpha.openshift.io/serving-cert-secret-name")
# What the operator renders and applies outside its namespace, named by its code (pkg/webhooks): removed with it.
WEBHOOK_CONFIGURATIONS = ("validatingwebhookconfiguration/machine-api", "mutatingwebhookconfiguration/machine-api")
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "ClusterOperator", "Namespace", "CustomResourceDefinition"}
RBAC = {"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
REPO = Path(__file__).resolve().parents[1]


def images_json(mao: str, kube_rbac_proxy: str, ovirt_provider: str) -> str:
    """The `images.json` of MAO's images ConfigMap; `clusterAPIControllerOvirt` is the oVirt provider's key
    (pkg/operator/config.go at release-4.13)."""
    return json.dumps({"machineAPIOperator": mao, "kubeRBACProxy": kube_rbac_proxy,
                       "clusterAPIControllerOvirt": ovirt_provider}, indent=1)


def move(docs: Iterable[dict[str, Any]], namespace: str, images: dict[str, str]) -> list[dict[str, Any]]:
    """`docs` as they go into `namespace` (`_into`), those of OpenShift's other namespaces left out."""
    docs = [d for d in docs if d]
    own = {d["metadata"]["name"] for d in docs if d["kind"] == "ClusterRole"}
    return [d for d in (_into(doc, namespace, images, own) for doc in docs) if d]


def _into(doc: dict[str, Any], namespace: str, images: dict[str, str], own: set[str]) -> dict[str, Any] | None:
    """`doc` moved from openshift-machine-api to `namespace`, its cluster-wide RBAC names (and references to the
    ClusterRoles `own`, installed with it) suffixed with it, its images replaced; None when it belongs to, or only
    grants to, another of OpenShift's namespaces."""
    meta = doc["metadata"]
    if doc["kind"] not in CLUSTER_SCOPED:
        if meta.get("namespace") != MAO_NAMESPACE:
            return None
        meta["namespace"] = namespace
    subjects = doc.get("subjects") or []
    if subjects and not any(s.get("namespace") == MAO_NAMESPACE for s in subjects):
        return None
    for subject in subjects:
        if subject.get("namespace") == MAO_NAMESPACE:
            subject["namespace"] = namespace
    if doc["kind"] in ("ClusterRole", "ClusterRoleBinding"):
        meta["name"] = f"{meta['name']}-{namespace}"
    if (doc.get("roleRef") or {}).get("kind") == "ClusterRole" and doc["roleRef"]["name"] in own:
        doc["roleRef"]["name"] = f"{doc['roleRef']['name']}-{namespace}"
    for container in ((doc.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers", []):
        container["image"] = images.get(container["image"], container["image"])
    return doc


def manifests(m: MaoOperator, namespace: str, images: dict[str, str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name in MANIFESTS:
        text = (m.install_dir / f"0000_30_machine-api-operator_{name}").read_text()
        out += yaml.safe_load_all(text)
    return move(out, namespace, images)


def provider_manifests(kubectl: Kubectl, namespace: str) -> list[dict[str, Any]]:
    """The RBAC objects of config/openshift (README "On OpenShift" step 2), moved as MAO's are."""
    built = kubectl("kustomize", str(REPO / "config" / "openshift")).stdout
    return move((d for d in yaml.safe_load_all(built) if d and d["kind"] in RBAC), namespace, {})


def _serving_secrets(kubectl: Kubectl, services: Iterable[dict[str, Any]], namespace: str) -> None:
    """One kubernetes.io/tls Secret per Service that asks the service CA for one, for the Service's DNS names."""
    with tempfile.TemporaryDirectory() as tmp:
        for svc in services:
            annotations = svc["metadata"].get("annotations") or {}
            secret = next((annotations[a] for a in SERVING_CERT_ANNOTATIONS if a in annotations), None)
            if secret is None:
                continue
            name = svc["metadata"]["name"]
            crt = self_signed_serving(Path(tmp) / secret, (f"{name}.{namespace}.svc",
                                                           f"{name}.{namespace}.svc.cluster.local"))
            kubectl("-n", namespace, "create", "secret", "tls", secret, f"--cert={crt}",
                    f"--key={crt.with_name('tls.key')}")


def install(kubectl: Kubectl, namespace: str, images: dict[str, str], provider_images: str) -> list[str]:
    """Install MAO into `namespace` (which must exist). `images` maps the payload's image names in the manifests to
    the images to run; `provider_images` is the images.json. Returns the cluster-scoped objects created, for
    `uninstall`."""
    m = ensure_operator()
    if kubectl("get", "crd", "clusteroperators.config.openshift.io", check=False).returncode != 0:
        kubectl("apply", "--server-side", *(f"--filename={crd}" for crd in m.crds()))
    wait_established(lambda *args: kubectl(*args, check=False).stdout, "clusteroperators.config.openshift.io",
                     "proxies.config.openshift.io", "featuregates.config.openshift.io")
    created = []
    if kubectl("get", "proxies.config.openshift.io", "cluster", check=False).returncode != 0:
        kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "config.openshift.io/v1", "kind": "Proxy",
                                                      "metadata": {"name": "cluster"}, "spec": {}}))
        created.append("proxies.config.openshift.io/cluster")
    if kubectl("get", "crd", "ovirtremediations.remediation.ovirt.org", check=False).returncode != 0:
        kubectl("apply", "--server-side", *(f"--filename={crd}" for crd in (REPO / "config" / "crd").glob(
            "remediation.ovirt.org_*.yaml")))
    docs = manifests(m, namespace, images) + provider_manifests(kubectl, namespace)
    _serving_secrets(kubectl, (d for d in docs if d["kind"] == "Service"), namespace)
    kubectl("-n", namespace, "create", "configmap", "machine-api-operator-images",
            f"--from-literal=images.json={provider_images}")
    # The Deployment last: the operator starts with everything it reads in place.
    docs.sort(key=lambda d: d["kind"] == "Deployment")
    kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
    created += [f"{d['kind'].lower()}/{d['metadata']['name']}" for d in docs if d["kind"] in CLUSTER_SCOPED]
    return created


def uninstall(kubectl: Kubectl, namespace: str, created: list[str]) -> None:
    """Stop the operator first (it would render again what is removed), then remove what it and `install` made
    outside `namespace`; the namespace itself is the caller's."""
    kubectl("-n", namespace, "delete", "deployment", "machine-api-operator", "--wait=true", "--timeout=60s",
            check=False)
    kubectl("-n", namespace, "delete", "deployment", "machine-api-controllers", "--wait=false", check=False)
    for obj in (*WEBHOOK_CONFIGURATIONS, *created):
        kubectl("delete", obj, "--ignore-not-found", "--wait=false", check=False)
