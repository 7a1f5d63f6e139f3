"""The clusterctl repository rendered from config/ (hack/clusterctl_repo.py) keeps clusterctl's provider contract:
every object labelled with the provider, one Namespace, the `manager` container watching every namespace,
metadata.yaml mapping this release to contract v1beta2, templates in the target namespace whose Secrets `clusterctl
move` takes, and every `${VARIABLE}` listed in docs/cluster-api.md (docs/cluster-api.md#installing-with-clusterctl).
Rendering runs `kubectl kustomize` (the cached kubectl); no API server."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

from api.infrastructure import CONTRACT_LABEL, CONTRACT_VERSION, GROUP, VERSION
from hack import clusterctl_repo as cr
from hack.controlplane.build import Binaries, ensure_binaries

DOC = cr.REPO / "docs" / "cluster-api.md"
MOVE_LABEL = "clusterctl.cluster.x-k8s.io/move"


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> cr.Repository:
    return cr.render(tmp_path_factory.mktemp("clusterctl"), ensure_binaries(Binaries()).path("kubectl"))


def _docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_repository_layout_is_clusterctls_local_repository(repo):
    version = "v" + tomllib.loads((cr.REPO / "pyproject.toml").read_text())["project"]["version"]
    assert repo.folder == repo.root / "infrastructure-ovirt" / version
    assert sorted(p.name for p in repo.folder.iterdir()) == [
        "cluster-template-workers.yaml", "cluster-template.yaml", "infrastructure-components.yaml", "metadata.yaml"]
    assert yaml.safe_load(repo.config.read_text()) == {"providers": [
        {"name": "ovirt", "type": "InfrastructureProvider", "url": f"file://{repo.components}"}]}


def test_metadata_maps_this_release_to_the_contract_of_the_crds(repo):
    meta = yaml.safe_load((repo.folder / "metadata.yaml").read_text())
    major, minor = (int(n) for n in repo.version.lstrip("v").split(".")[:2])
    assert meta == {"apiVersion": "clusterctl.cluster.x-k8s.io/v1alpha3", "kind": "Metadata",
                    "releaseSeries": [{"major": major, "minor": minor, "contract": "v1beta2"}]}
    assert CONTRACT_LABEL == f"cluster.x-k8s.io/{CONTRACT_VERSION}"


def test_every_component_is_labelled_with_the_provider_and_in_its_namespace(repo):
    docs = _docs(repo.components)
    unlabelled = [cr._name(d) for d in docs if d["metadata"].get("labels", {}).get(cr.PROVIDER_LABEL)
                  != "infrastructure-ovirt"]
    assert not unlabelled
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"] == ["capovirt-system"]
    namespaced = {d["metadata"].get("namespace") for d in docs if d["kind"] not in cr._CLUSTER_SCOPED}
    assert namespaced == {"capovirt-system"}


def test_components_are_the_cluster_api_front_end_only(repo):
    docs = _docs(repo.components)
    crds = {d["metadata"]["name"]: d for d in docs if d["kind"] == "CustomResourceDefinition"}
    infrastructure = [f"{p}.{GROUP}" for p in ("ovirtclusters", "ovirtmachines", "ovirtmachinetemplates")]
    fencing = [f"{p}.remediation.ovirt.org" for p in ("ovirtremediations", "ovirtremediationtemplates")]
    assert sorted(crds) == infrastructure + fencing  # nothing of the Machine API's
    assert all(crds[c]["metadata"]["labels"][CONTRACT_LABEL] == VERSION for c in infrastructure)
    aggregated = [d for d in docs if d["kind"] == "ClusterRole"
                  and d["metadata"]["labels"].get("cluster.x-k8s.io/aggregate-to-manager") == "true"]
    granted = {r for role in aggregated for rule in role["rules"] for r in rule["resources"]}
    assert {"ovirtmachines", "ovirtclusters", "ovirtmachinetemplates", "ovirtremediationtemplates",
            "ovirtremediations"} <= granted
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["name"] == "manager"
    assert container["image"] == "docker.io/library/ovirt-machine-controller:latest"  # canonical, as clusterctl asks
    assert "--controllers=ovirtcluster,ovirtmachine,ovirtmachinetemplate,remediation" in container["args"]
    assert "--namespace=" in container["args"]  # every namespace, as clusterctl installs every provider
    assert "--leader-election-namespace=$(POD_NAMESPACE)" in container["args"]
    assert {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}} in container["env"]
    policies = [d["metadata"]["name"] for d in docs if d["kind"] == "ValidatingAdmissionPolicy"]
    assert policies == ["ovirt-infrastructure-machine-spec"]


def test_components_variables_have_defaults(repo):
    found = cr.variables(repo.components.read_text())
    assert set(found) == {"OVIRT_LOG_LEVEL", "OVIRT_CONTROLLER_WORKERS", "OVIRT_CONNECTIONS", "OVIRT_TIMEOUT"}
    assert all(default for default in found.values())


def test_templates_flavors_and_target_namespace(repo):
    assert cr.flavors(p.name for p in repo.folder.glob("cluster-template*.yaml")) == ["", "workers"]
    for path in repo.folder.glob("cluster-template*.yaml"):
        assert {d["metadata"]["namespace"] for d in _docs(path)} == {"${NAMESPACE}"}, path.name


def test_workers_flavor_has_no_control_plane_of_its_own(repo):
    docs = _docs(repo.folder / "cluster-template-workers.yaml")
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == ["Cluster", "MachineDeployment", "OvirtCluster", "OvirtMachineTemplate", "Secret", "Secret"]
    (cluster,) = [d for d in docs if d["kind"] == "Cluster"]
    assert cluster["spec"]["controlPlaneRef"] == {"apiGroup": "${CONTROL_PLANE_API_GROUP}",
                                                  "kind": "${CONTROL_PLANE_KIND}", "name": "${CONTROL_PLANE_NAME}"}


def test_default_flavor_is_a_kubeadm_cluster(repo):
    kinds = sorted(d["kind"] for d in _docs(repo.folder / "cluster-template.yaml"))
    assert kinds == ["Cluster", "KubeadmConfigTemplate", "KubeadmControlPlane", "MachineDeployment", "OvirtCluster",
                     "OvirtMachineTemplate", "OvirtMachineTemplate", "Secret"]


def test_template_secrets_carry_the_move_label(repo):
    """No owner reference links the identity and bootstrap Secrets to the Cluster: `clusterctl move` takes a Secret
    of the moved namespace only with the move label (the clusterctl provider contract's Move section)."""
    for path in repo.folder.glob("cluster-template*.yaml"):
        secrets = [d for d in _docs(path) if d["kind"] == "Secret"]
        assert secrets and all(MOVE_LABEL in s["metadata"]["labels"] for s in secrets), path.name


def test_every_variable_is_in_the_docs_table_and_only_those(repo):
    used: set[str] = set()
    for path in repo.folder.glob("*.yaml"):
        used |= set(cr.variables(path.read_text()))
    table = set(re.findall(r"^\| `([A-Z][A-Z0-9_]*)` \|", DOC.read_text(), re.MULTILINE))
    assert used - table == set(), "variables missing from docs/cluster-api.md#installing-with-clusterctl"
    assert table - used == set(), "docs/cluster-api.md lists variables no file uses"


def test_variables_parser_reads_envsubst_defaults():
    assert cr.variables("${A} ${B:=x} ${C:=\"\"} ${D:-y} ${E=z} ${A:=later}") == {
        "A": "later", "B": "x", "C": '""', "D": "y", "E": "z"}


@pytest.mark.parametrize("change, message", [
    (lambda docs: docs[1]["metadata"]["labels"].clear(), "ClusterRole r is not labelled"),
    (lambda docs: docs.append({"kind": "Namespace", "metadata": {"name": "two", "labels": dict(docs[0]["metadata"]
                                                                                                ["labels"])}}),
     "2 Namespace objects"),
    (lambda docs: docs[2]["metadata"].update(namespace="elsewhere"), "Deployment elsewhere/d is not in the target"),
    (lambda docs: docs[2]["spec"]["template"]["spec"]["containers"][0].update(name="controller"),
     "has no container named manager"),
])
def test_check_components_refuses_what_the_contract_forbids(change, message):
    label = {cr.PROVIDER_LABEL: cr.PROVIDER}
    docs = [{"kind": "Namespace", "metadata": {"name": "ns", "labels": dict(label)}},
            {"kind": "ClusterRole", "metadata": {"name": "r", "labels": dict(label)}},
            {"kind": "Deployment", "metadata": {"name": "d", "namespace": "ns", "labels": dict(label)},
             "spec": {"template": {"spec": {"containers": [{"name": "manager"}]}}}}]
    cr.check_components(docs)
    change(docs)
    with pytest.raises(cr.RepositoryError, match=message):
        cr.check_components(docs)
