"""clusterctl (v1.14.2, built from the pinned module: hack/controlplane/capi.py) with the provider's repository as
`make clusterctl-repo` renders it from config/ (hack/clusterctl_repo.py;
docs/cluster-api.md#installing-with-clusterctl):

- `clusterctl generate cluster --flavor workers` renders a Cluster that Cluster API's real core manager and this
  project's controller run to Running Machines with nodeRefs, and `clusterctl describe cluster` shows the provider's
  conditions for it;
- `clusterctl init --infrastructure ovirt` from the local repository, on a control plane of its own: it stops at
  cert-manager, which cannot be had here (module docstring of test_clusterctl_init_* says what was refused); what
  init would install of this provider, as clusterctl renders it (`clusterctl generate provider`: variables, target
  namespace, labels), is then applied to that control plane and its objects checked: CRDs served, RBAC granting
  the controller what it needs in the target namespace, Cluster API's aggregated manager role covering the kinds.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Callable, Iterator

import pytest
import yaml

from api.infrastructure import CONTRACT_LABEL, GROUP, VERSION
from capi_clusters import WorkloadCluster
from hack import clusterctl_repo
from hack.capi import controlplane as capi_controlplane
from hack.capi.manifests import BOOTSTRAP_CLOUD_CONFIG, DEPLOYMENT_NAME_LABEL
from hack.controlplane.build import Binaries, ensure_binaries
from hack.controlplane.capi import CAPI_VERSION, CapiBinaries, ensure_capi
from hack.controlplane.cluster import LocalControlPlane
from hack.ovirtsim.seed import KUBE_NODE_TEMPLATE_NAME, KUBELET_VERSIONS
from machines import unique_name, wait_for

TARGET_NAMESPACE = "ovirt-infra"  # `clusterctl init --target-namespace`: not the components' own capovirt-system
SERVICE_ACCOUNT = "machine-api-controllers"
MOVE_LABEL = "clusterctl.cluster.x-k8s.io/move"
# The cert-manager release clusterctl v1.14.2 installs by default (its config/cert_manager_client.go).
CERT_MANAGER_VERSION = "v1.21.1"


@pytest.fixture(scope="module")
def repository(tmp_path_factory) -> clusterctl_repo.Repository:
    """The provider's repository with Cluster API's core provider of the pinned release beside it."""
    kubectl = ensure_binaries(Binaries()).path("kubectl")
    return clusterctl_repo.render(tmp_path_factory.mktemp("clusterctl-repo"), kubectl, core=True)


class Clusterctl:
    """clusterctl with the repository's clusterctl.yaml (and `settings` added to it), its own config home
    (overrides, cache) and no version check (it would ask GitHub)."""

    def __init__(self, repo: clusterctl_repo.Repository, home: Path, settings: dict | None = None):
        self.repo = repo
        self.path = ensure_capi().path("clusterctl")
        self.config = repo.config
        if settings:
            home.mkdir(parents=True, exist_ok=True)
            self.config = home / "clusterctl.yaml"
            self.config.write_text(json.dumps({**yaml.safe_load(repo.config.read_text()), **settings}))
        self.env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        self.env.update(XDG_CONFIG_HOME=str(home), CLUSTERCTL_DISABLE_VERSIONCHECK="true")

    def __call__(self, *args: str, kubeconfig: Path | None = None, variables: dict[str, str] | None = None,
                 check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        cluster = ["--kubeconfig", str(kubeconfig)] if kubeconfig else []
        out = subprocess.run([str(self.path), *args, "--config", str(self.config), *cluster],
                             env={**self.env, **(variables or {})}, capture_output=True, text=True, timeout=timeout)
        if check:
            assert out.returncode == 0, f"clusterctl {' '.join(args)}: {out.stdout}{out.stderr}"
        return out


@pytest.fixture
def clusterctl(repository, tmp_path) -> Clusterctl:
    return Clusterctl(repository, tmp_path / "clusterctl-home")


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class GeneratedCluster(WorkloadCluster):
    """A Cluster of the `workers` flavor: its MachineDeployment is `<cluster>-md-0`."""

    @property
    def deployment_name(self) -> str:
        return f"{self.name}-md-0"

    def machines(self) -> list[dict]:
        return self.env.get("machines.cluster.x-k8s.io", selector=f"{DEPLOYMENT_NAME_LABEL}={self.deployment_name}")

    def deployment(self) -> dict:
        return self.env.get("machinedeployments.cluster.x-k8s.io", self.deployment_name)


def _workers_variables(capi, plane: capi_controlplane.ManagementControlPlane) -> dict[str, str]:
    """What a user sets for the workers flavor: the test's engine and identity, the bed's control plane."""
    sim, endpoint = capi.sim, capi_controlplane.endpoint(capi.cluster.kubeconfig)
    return {"OVIRT_URL": sim.pod_url, "OVIRT_USERNAME": sim.username, "OVIRT_PASSWORD": sim.password,
            "OVIRT_CA_BUNDLE_B64": _b64(Path(sim.ca_file).read_text()),
            "OVIRT_CLUSTER_ID": sim.installation.cluster_id, "OVIRT_TEMPLATE_NAME": KUBE_NODE_TEMPLATE_NAME,
            "OVIRT_WORKER_MEMORY_MB": "2048",
            "CONTROL_PLANE_API_GROUP": capi_controlplane.GROUP, "CONTROL_PLANE_KIND": capi_controlplane.KIND,
            "CONTROL_PLANE_NAME": plane.name, "CONTROL_PLANE_ENDPOINT_HOST": endpoint["host"],
            "CONTROL_PLANE_ENDPOINT_PORT": str(endpoint["port"]),
            "WORKER_BOOTSTRAP_DATA_B64": _b64(BOOTSTRAP_CLOUD_CONFIG)}


def _condition(obj: dict, type_: str) -> str | None:
    return next((c["status"] for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


def test_generated_workers_cluster_runs_and_describe_shows_the_providers_conditions(capi, clusterctl):
    capi.controller()
    name = unique_name("cc")
    # The control plane that exists already: the bed's, reported by its own provider (hack/capi/controlplane.py).
    plane = capi_controlplane.ManagementControlPlane(capi.k, capi.cluster.kubeconfig, capi.namespace, name)
    capi.apply(*plane.manifests())
    plane.report_initialized()

    rendered = clusterctl("generate", "cluster", name, "--infrastructure", f"ovirt:{clusterctl.repo.version}",
                          "--flavor", "workers", "--target-namespace", capi.namespace,
                          "--kubernetes-version", KUBELET_VERSIONS[KUBE_NODE_TEMPLATE_NAME],
                          "--worker-machine-count", "2", kubeconfig=capi.cluster.kubeconfig,
                          variables=_workers_variables(capi, plane)).stdout
    assert "${" not in rendered, rendered
    capi.k("apply", "-f", "-", input=rendered)

    wc = GeneratedCluster(capi, name)
    wc.wait_running(2)
    cluster = capi.get("clusters.cluster.x-k8s.io", name)
    assert cluster["status"]["initialization"] == {"infrastructureProvisioned": True,
                                                   "controlPlaneInitialized": True}, cluster["status"]
    ovirt_cluster = capi.get(f"ovirtclusters.{GROUP}", name)
    assert _condition(ovirt_cluster, "Ready") == "True", ovirt_cluster.get("status")
    # What `clusterctl move` needs of the Secrets no owner reference links to the Cluster: the move label.
    for secret in (f"{name}-ovirt", f"{name}-md-0-bootstrap"):
        assert MOVE_LABEL in capi.get("secret", secret)["metadata"]["labels"], secret

    shown = clusterctl("describe", "cluster", name, "--namespace", capi.namespace, "--show-conditions", "all",
                       "--grouping=false", "--echo", kubeconfig=capi.cluster.kubeconfig).stdout
    # With --echo, describe shows each Machine's infrastructure object too (otherwise hidden when it agrees with its
    # Machine), each object with its own conditions under it.
    assert _described(shown, "OvirtCluster", capi.namespace, name).get("Ready") == "True", shown
    infra_machines = sorted(wc.ovirt_machines())
    assert len(infra_machines) == 2
    for om in infra_machines:
        conditions = _described(shown, "OvirtMachine", capi.namespace, om)
        assert conditions.get("Ready") == conditions.get("InstanceProvisioned") == "True", shown


def _described(shown: str, kind: str, namespace: str, name: str) -> dict[str, str]:
    """The conditions `clusterctl describe cluster --show-conditions all` lists under one object of its tree."""
    lines = shown.splitlines()
    at = next((i for i, line in enumerate(lines) if f"{kind} {namespace}/{name}" in line), None)
    assert at is not None, f"{kind} {namespace}/{name} not in:\n{shown}"
    conditions = {}
    for line in lines[at + 1:]:
        found = re.search(r"[├└]─(\w+)\s+(True|False|Unknown)\b", line)
        if not found:
            break
        conditions[found[1]] = found[2]
    return conditions


# --- clusterctl init ---------------------------------------------------------------------------------------------

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def fresh_plane(tmp_path) -> Iterator[tuple[Path, Kubectl]]:
    """A control plane of its own (its admin kubeconfig and kubectl on it): clusterctl init installs Cluster API's
    CRDs and its inventory, which the session's plane (Cluster API's bed, shared by the other tests) must not get."""
    kubectl = ensure_binaries(Binaries()).path("kubectl")
    with LocalControlPlane(tmp_path / "plane") as plane:
        admin = plane.kubeconfig("admin")

        def k(*args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
            out = subprocess.run([str(kubectl), f"--kubeconfig={admin}", *args], input=stdin, capture_output=True,
                                 text=True, timeout=60)
            assert not check or out.returncode == 0, f"kubectl {' '.join(args)}: {out.stderr}"
            return out

        yield admin, k


def test_clusterctl_init_from_the_local_repository(clusterctl, fresh_plane, tmp_path):
    """`clusterctl init` reads both providers from the local repository and then needs cert-manager: it looks for a
    working one (it creates a test Issuer and Certificate), and, finding none, fetches cert-manager's release
    manifest. From GitHub (its default) this machine gets "lookup api.github.com ... no such host" after two minutes
    of retries; no cert-manager manifest or image is at hand here, nor a registry. So init is pointed where an
    air-gapped user puts the manifest (clusterctl.yaml `cert-manager: url:`, a file:// path), finds nothing there and
    stops before it installs a provider, saying so. What it installs of this provider is proven by other means:
    rendered by clusterctl itself and applied to the same control plane; and the default flavor is checked against
    the real CRDs of Cluster API's core and kubeadm providers of the pinned release."""
    admin, k = fresh_plane
    manifest = clusterctl.repo.root / "cert-manager" / CERT_MANAGER_VERSION / "cert-manager.yaml"
    offline = Clusterctl(clusterctl.repo, tmp_path / "offline-home", {"cert-manager": {"url": f"file://{manifest}"}})
    version = f"ovirt:{clusterctl.repo.version}"
    init = offline("init", "--infrastructure", version, "--bootstrap", "-", "--control-plane", "-",
                   "--target-namespace", TARGET_NAMESPACE, kubeconfig=admin, check=False)
    said = init.stdout + init.stderr
    assert init.returncode != 0, said
    assert 'failed to read "cert-manager.yaml" from provider\'s repository "cert-manager"' in said, said
    # It got as far as the cluster before it stopped: the inventory's CRD is its first write.
    assert k("get", "crd", "providers.clusterctl.cluster.x-k8s.io", check=False).returncode == 0, said

    # What init installs of this provider, rendered by clusterctl itself: variables filled with their defaults, the
    # target namespace enforced, clusterctl's labels added.
    components = clusterctl("generate", "provider", "--infrastructure", version, "--target-namespace",
                            TARGET_NAMESPACE).stdout
    assert "${" not in components
    docs = [d for d in yaml.safe_load_all(components) if d]
    assert all(d["metadata"]["labels"].get(clusterctl_repo.PROVIDER_LABEL) == clusterctl_repo.PROVIDER
               for d in docs)
    k("apply", "--server-side", "-f", "-", stdin=components)
    _check_installed_components(k)
    # Cluster API's CRDs (here from the pinned release, as its core and kubeadm providers install them) before the
    # rights on them are asked about: kubectl answers "no" for a kind the server does not serve.
    _check_default_flavor_against_the_pinned_crds(k, clusterctl, admin)
    _check_controllers_rights(k)
    _check_capi_manager_aggregates_the_kinds(k, clusterctl.repo)


def _check_installed_components(k: Kubectl) -> None:
    crds = [f"{p}.{GROUP}" for p in ("ovirtclusters", "ovirtmachines", "ovirtmachinetemplates")]
    k("wait", "--for=condition=Established", "--timeout=60s", *(f"crd/{c}" for c in crds))
    for crd in crds:
        labels = json.loads(k("get", "crd", crd, "-o", "json").stdout)["metadata"]["labels"]
        assert labels[CONTRACT_LABEL] == VERSION and labels[clusterctl_repo.PROVIDER_LABEL] == "infrastructure-ovirt"
    deployment = json.loads(k("-n", TARGET_NAMESPACE, "get", "deployment", "ovirt-machine-controller", "-o",
                              "json").stdout)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["name"] == "manager" and "--log-level=info" in container["args"], container


def _check_controllers_rights(k: Kubectl) -> None:
    """The controllers' ServiceAccount, in the namespace init chose, may do what they do."""
    account = f"--as=system:serviceaccount:{TARGET_NAMESPACE}:{SERVICE_ACCOUNT}"
    everywhere = "--all-namespaces"
    for can in (("patch", f"ovirtmachines.{GROUP}", everywhere), ("patch", f"ovirtclusters.{GROUP}", everywhere),
                ("patch", f"ovirtmachines.{GROUP}", "--subresource=status", everywhere),
                ("watch", "machines.cluster.x-k8s.io", everywhere), ("watch", "clusters.cluster.x-k8s.io", everywhere),
                ("get", "secrets", everywhere), ("create", "events", everywhere),
                ("patch", "ovirtremediations.remediation.ovirt.org", everywhere),
                ("create", "leases.coordination.k8s.io", f"--namespace={TARGET_NAMESPACE}")):
        assert k("auth", "can-i", *can, account, check=False).stdout.strip() == "yes", can


def _check_capi_manager_aggregates_the_kinds(k: Kubectl, repo: clusterctl_repo.Repository) -> None:
    """Cluster API's manager role, as its core components declare it, comes to cover the provider's kinds: the
    cluster's role aggregation controller adds the provider's labelled ClusterRoles to it."""
    core_components = repo.root / "cluster-api" / CAPI_VERSION / "core-components.yaml"
    # The release's image, as the release's own core-components.yaml names it.
    assert f"image: registry.k8s.io/cluster-api/cluster-api-controller:{CAPI_VERSION}" in core_components.read_text()
    (role,) = [d for d in yaml.safe_load_all(core_components.read_text())
               if d and d["kind"] == "ClusterRole" and d.get("aggregationRule")]
    k("apply", "-f", "-", stdin=json.dumps(role))
    k("create", "clusterrolebinding", "capi-manager", f"--clusterrole={role['metadata']['name']}",
      "--serviceaccount=capi-system:capi-manager")
    manager = "--as=system:serviceaccount:capi-system:capi-manager"
    for verb, resource in (("create", f"ovirtmachines.{GROUP}"), ("delete", f"ovirtmachines.{GROUP}"),
                           ("create", "ovirtremediations.remediation.ovirt.org")):
        wait_for(f"Cluster API's aggregated manager role to let it {verb} {resource}",
                 lambda verb=verb, resource=resource: k("auth", "can-i", verb, resource, "--all-namespaces",
                                                         manager, check=False).stdout.strip() == "yes", timeout=30)


# What a user sets for the default flavor (the engine's objects need not exist: nothing reconciles them here).
DEFAULT_FLAVOR_VARIABLES = {
    "OVIRT_URL": "https://engine.example.com/ovirt-engine/api", "OVIRT_USERNAME": "admin@internal",
    "OVIRT_PASSWORD": "secret", "OVIRT_CLUSTER_ID": "2bd9b8a8-6a4e-4c4a-9c7e-8c0f7a6f4f10",
    "OVIRT_TEMPLATE_NAME": KUBE_NODE_TEMPLATE_NAME, "CONTROL_PLANE_ENDPOINT_HOST": "10.0.0.10"}


def _check_default_flavor_against_the_pinned_crds(k: Kubectl, clusterctl: Clusterctl, admin: Path) -> None:
    """The default flavor, rendered by clusterctl, passes a server-side dry run against the CRDs of Cluster API's
    core, kubeadm bootstrap and kubeadm control plane providers of the pinned release and this provider's admission
    policy (Cluster API's own webhooks are not served on this plane)."""
    module = clusterctl_repo.capi_module()
    crds = [*CapiBinaries().crds(), *sorted(module.glob("bootstrap/kubeadm/config/crd/bases/*.yaml")),
            *sorted(module.glob("controlplane/kubeadm/config/crd/bases/*.yaml"))]
    names = []
    for path in crds:
        names.append(k("apply", "--server-side", "-f", str(path), "-o", "name").stdout.strip())
    k("wait", "--for=condition=Established", "--timeout=60s", *names)
    k("create", "namespace", "clusters")
    rendered = clusterctl("generate", "cluster", "work", "--infrastructure", f"ovirt:{clusterctl.repo.version}",
                          "--target-namespace", "clusters", "--kubernetes-version",
                          KUBELET_VERSIONS[KUBE_NODE_TEMPLATE_NAME], "--control-plane-machine-count", "3",
                          "--worker-machine-count", "2", kubeconfig=admin, variables=DEFAULT_FLAVOR_VARIABLES).stdout
    assert "${" not in rendered
    kinds = sorted(d["kind"] for d in yaml.safe_load_all(rendered) if d)
    created = k("apply", "--dry-run=server", "-f", "-", stdin=rendered).stdout
    assert created.count("created (server dry run)") == len(kinds) == 8, created
