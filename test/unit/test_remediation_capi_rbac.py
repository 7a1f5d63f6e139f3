"""The RBAC of fencing Cluster API's Machines (config/rbac/remediation-capi, docs/fencing.md#both-front-ends).

Cluster API's core manager (v1.14.2's MachineHealthCheck controller, docs/cluster-api.md#health-checks-and-remediation)
reads the remediation template and looks for an existing request through its cached client, which serves unstructured
objects from informers (get, list, watch), creates the request, and deletes it once the Machine is healthy: its
ClusterRole aggregates these rights by label. The test bed runs that manager with the admin kubeconfig, so these are
the checks that the shipped role names what it needs. The remediation controller's own group is checked the same way,
and kept out of the OpenShift overlay, which serves no Cluster API Machine."""

from __future__ import annotations

from pathlib import Path

import yaml

from api import capi, infrastructure
from api.remediation import GROUP

RBAC = Path(__file__).resolve().parents[2] / "config" / "rbac"
GROUP_DIR = RBAC / "remediation-capi"
# What Cluster API's MachineHealthCheck controller does to each kind.
MANAGER_NEEDS = {"ovirtremediationtemplates": {"get", "list", "watch"},
                 "ovirtremediations": {"get", "list", "watch", "create", "delete"}}


def _docs() -> list[dict]:
    listed = yaml.safe_load((GROUP_DIR / "kustomization.yaml").read_text())["resources"]
    return [d for f in listed for d in yaml.safe_load_all((GROUP_DIR / f).read_text()) if d]


def _role(name: str) -> dict:
    (role,) = [d for d in _docs() if d["kind"] == "ClusterRole" and d["metadata"]["name"] == name]
    return role


def _verbs(role: dict, group: str, resource: str) -> set[str]:
    return {v for r in role["rules"] if group in r["apiGroups"] and resource in r["resources"] for v in r["verbs"]}


def test_cluster_api_manager_is_granted_by_aggregation_what_its_health_check_does_and_nothing_more():
    role = _role("ovirt-remediation-capi-manager")
    assert role["metadata"]["labels"] == {capi.AGGREGATE_TO_MANAGER_LABEL: "true"}
    for resource, verbs in MANAGER_NEEDS.items():
        assert _verbs(role, GROUP, resource) == verbs, resource
    assert {res for r in role["rules"] for res in r["resources"]} == set(MANAGER_NEEDS)
    assert {g for r in role["rules"] for g in r["apiGroups"]} == {GROUP}


def test_the_remediation_controller_watches_requests_everywhere_and_deletes_only_cluster_api_machines():
    role = _role("ovirt-machine-controller-remediation-capi")
    assert _verbs(role, GROUP, "ovirtremediations") == {"get", "list", "watch", "patch"}
    assert _verbs(role, GROUP, "ovirtremediations/status") == {"patch"}
    assert _verbs(role, capi.GROUP, "machines") == {"get", "list", "watch", "delete"}
    assert _verbs(role, capi.GROUP, "clusters") == {"get", "list", "watch"}
    assert _verbs(role, infrastructure.GROUP, "ovirtclusters") == {"get", "list", "watch"}
    assert _verbs(role, "", "secrets") == {"get"}  # the engine identity, by name: never listed
    (binding,) = [d for d in _docs() if d["kind"] == "ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


def test_the_group_ships_standalone_and_not_beside_the_machine_api_operator():
    assert "remediation-capi" in yaml.safe_load((RBAC / "kustomization.yaml").read_text())["resources"]
    openshift = yaml.safe_load((RBAC.parent / "openshift" / "kustomization.yaml").read_text())["resources"]
    assert "../rbac/remediation-capi" not in openshift


def test_the_remediation_group_reads_a_node_afresh_to_remove_its_taints():
    """remove_taints reads the Node with a GET (controllers/nodes/storage.py: the cache may not hold the taint just
    written), so the group that patches Nodes must also get them; without it the taints of a fenced Node stay."""
    docs = [d for d in yaml.safe_load_all((RBAC / "remediation" / "rbac.yaml").read_text()) if d]
    (role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    assert {"get", "patch"} <= _verbs(role, "", "nodes")
