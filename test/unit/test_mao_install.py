"""How MAO's install manifests are moved into a test's namespace (hack/mao_install.py): what MAO would run in
openshift-machine-api runs in that namespace, cluster-wide RBAC names cannot collide with another test's, and what
belongs to OpenShift's other namespaces is left out."""

from __future__ import annotations

import json

from hack.mao_install import images_json, move

NS = "e2e-mao-abcde"


def test_namespaced_objects_move_and_their_images_are_replaced():
    deployment = {"kind": "Deployment",
                  "metadata": {"name": "machine-api-operator", "namespace": "openshift-machine-api"},
                  "spec": {"template": {"spec": {"containers": [
                      {"name": "machine-api-operator", "image": "quay.io/openshift/origin-machine-api-operator"},
                      {"name": "other", "image": "kept:1"}]}}}}
    [out] = move([deployment], NS, {"quay.io/openshift/origin-machine-api-operator": "mao:4.13"})
    assert out["metadata"]["namespace"] == NS
    assert [c["image"] for c in out["spec"]["template"]["spec"]["containers"]] == ["mao:4.13", "kept:1"]


def test_objects_of_openshifts_other_namespaces_are_left_out():
    role = {"kind": "Role", "metadata": {"name": "machine-api-controllers", "namespace": "openshift-config-managed"}}
    assert move([role], NS, {}) == []
    # A binding in MAO's namespace that grants only to another namespace's ServiceAccount (Prometheus').
    binding = {"kind": "RoleBinding", "metadata": {"name": "prometheus", "namespace": "openshift-machine-api"},
               "roleRef": {"kind": "Role", "name": "prometheus"},
               "subjects": [{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "openshift-monitoring"}]}
    assert move([binding], NS, {}) == []


def test_cluster_wide_rbac_gets_the_namespace_as_suffix_and_grants_to_its_service_account():
    role = {"kind": "ClusterRole", "metadata": {"name": "machine-api-controllers"}}
    binding = {"kind": "ClusterRoleBinding", "metadata": {"name": "machine-api-controllers"},
               "roleRef": {"kind": "ClusterRole", "name": "machine-api-controllers"},
               "subjects": [{"kind": "ServiceAccount", "name": "machine-api-controllers",
                             "namespace": "openshift-machine-api"}]}
    # A namespaced binding keeps its name; a built-in ClusterRole it names (not installed with it) keeps its own.
    builtin = {"kind": "RoleBinding", "metadata": {"name": "x", "namespace": "openshift-machine-api"},
               "roleRef": {"kind": "ClusterRole", "name": "view"},
               "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "openshift-machine-api"}]}
    # The ClusterOperator keeps its name: MAO writes its status by that name.
    co = {"kind": "ClusterOperator", "metadata": {"name": "machine-api"}}
    role_out, binding_out, builtin_out, co_out = move([role, binding, builtin, co], NS, {})
    assert role_out["metadata"]["name"] == f"machine-api-controllers-{NS}"
    assert (binding_out["metadata"]["name"], binding_out["roleRef"]["name"]) == (f"machine-api-controllers-{NS}",) * 2
    assert binding_out["subjects"][0]["namespace"] == NS
    assert (builtin_out["metadata"], builtin_out["roleRef"]["name"]) == ({"name": "x", "namespace": NS}, "view")
    assert co_out == {"kind": "ClusterOperator", "metadata": {"name": "machine-api"}}


def test_images_json_names_this_image_under_the_ovirt_key():
    assert json.loads(images_json("mao:4.13", "krp:v1", "omc:abc")) == {
        "machineAPIOperator": "mao:4.13", "kubeRBACProxy": "krp:v1", "clusterAPIControllerOvirt": "omc:abc"}
