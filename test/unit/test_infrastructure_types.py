"""The Cluster API front end's types (api/infrastructure.py, api/capi.py): JSON round trips and defaults, one VM
definition and one validation shared with the provider spec (the same rules, the same words, at `spec.<key>`), the
bridge back to a provider spec, and the generated CRDs' contract label, names and columns."""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
from pathlib import Path

import pytest
import yaml

from api import capi, infrastructure
from api._fields import json_fields
from api.capi import CapiCluster, CapiMachine
from api.field_errors import InvalidProviderSpec
from api.infrastructure import (
    OvirtCluster,
    OvirtMachine,
    OvirtMachineSpec,
    OvirtMachineTemplate,
    StatusCondition,
    load_ovirt_machine_spec,
    set_status_condition,
    to_provider_spec,
)
from api.meta import ObjectMeta
from api.provider_spec import PROVIDER_SPEC_PATH, OvirtMachineProviderSpec, VMSpec
from api.validation import load_provider_spec
from hack import gen_crds

CRD_DIR = Path(__file__).resolve().parents[2] / "config" / "crd"
ID_1 = "0000000a-000a-000a-000a-00000000000a"
ID_2 = "0000000b-000b-000b-000b-00000000000b"
VM = {
    "template_name": "ubuntu-2404-kube",
    "cluster_id": ID_1,
    "cpu": {"sockets": 1, "cores": 2, "threads": 1},
    "memory_mb": 4096,
    "os_disk": {"size_gb": 20},
    "type": "server",
}
OVIRT_MACHINE = {
    "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
    "kind": "OvirtMachine",
    "metadata": {"name": "md-0-abcde", "namespace": "team-a", "labels": {"cluster.x-k8s.io/cluster-name": "c1"},
                 "finalizers": ["ovirtmachine.infrastructure.cluster.x-k8s.io"], "generation": 2},
    "spec": {**VM, "network_interfaces": [{"vnic_profile_id": ID_2}], "affinity_groups_names": ["workers"],
             "clone": False, "providerID": f"ovirt://{ID_2}"},
    "status": {
        "initialization": {"provisioned": True},
        "addresses": [{"type": "InternalIP", "address": "10.0.0.7"}, {"type": "Hostname", "address": "md-0-abcde"}],
        "failureDomain": "fd-a",
        "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 2,
                        "lastTransitionTime": "2026-11-29T01:00:00Z", "reason": "Provisioned", "message": ""}],
        "instanceId": ID_2,
        "instanceState": "up",
    },
}


def vm_with(**changes) -> dict:
    """VM with keys replaced; None removes one."""
    d = copy.deepcopy(VM)
    for key, new in changes.items():
        if new is None:
            d.pop(key, None)
        else:
            d[key] = new
    return d


def crd(plural: str) -> dict:
    return yaml.safe_load((CRD_DIR / f"{infrastructure.GROUP}_{plural}.yaml").read_text())


# --- JSON ------------------------------------------------------------------------------------------------------------

def test_ovirt_machine_round_trips_with_its_exact_keys():
    assert OvirtMachine.from_dict(OVIRT_MACHINE).to_dict() == OVIRT_MACHINE


def test_ovirt_cluster_and_template_round_trip():
    cluster = {"apiVersion": infrastructure.API_VERSION, "kind": "OvirtCluster",
               "metadata": {"name": "c1", "namespace": "team-a"},
               "spec": {"controlPlaneEndpoint": {"host": "api.c1.example", "port": 6443},
                        "identityRef": {"name": "c1-engine"}, "clusterId": ID_1,
                        "failureDomains": [{"name": "fd-a", "clusterId": ID_1, "controlPlane": True},
                                           {"name": "fd-b", "clusterId": ID_2}]},
               "status": {"initialization": {"provisioned": True},
                          "failureDomains": [{"name": "fd-a", "controlPlane": True, "attributes": {"clusterId": ID_1}}],
                          "conditions": [{"type": "Ready", "status": "True", "reason": "Provisioned", "message": "",
                                          "lastTransitionTime": "2026-11-29T01:00:00Z"}]}}
    template = {"apiVersion": infrastructure.API_VERSION, "kind": "OvirtMachineTemplate",
                "metadata": {"name": "md-0-t1", "namespace": "team-a"},
                "spec": {"template": {"metadata": {"labels": {"tier": "web"}}, "spec": VM}},
                "status": {"capacity": {"cpu": "2", "memory": "4Gi"},
                           "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux"}}}
    assert OvirtCluster.from_dict(cluster).to_dict() == cluster
    assert OvirtMachineTemplate.from_dict(template).to_dict() == template


def test_defaults_of_a_new_ovirt_machine():
    """The provider spec's Go-style keys (template_name, cluster_id always written); nothing else until set."""
    assert OvirtMachine().to_dict() == {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "OvirtMachine", "metadata": {},
        "spec": {"template_name": "", "cluster_id": ""}, "status": {"initialization": {}},
    }
    assert OvirtMachineTemplate().spec.template.spec == OvirtMachineSpec()
    assert OvirtCluster().to_dict()["spec"] == {"controlPlaneEndpoint": {}, "identityRef": {}}


def test_ovirt_machine_spec_is_the_provider_specs_vm_settings_plus_provider_id():
    """One definition, two front ends: the same keys in the same order, without the Machine API's two Secret
    references (and its Go header), with providerID."""
    vm_keys = [f.metadata["key"] for f in json_fields(VMSpec)]
    provider_keys = [f.metadata["key"] for f in json_fields(OvirtMachineProviderSpec)]
    assert provider_keys == ["apiVersion", "kind", "userDataSecret", "credentialsSecret", "id", "name", *vm_keys]
    assert [f.metadata["key"] for f in json_fields(OvirtMachineSpec)] == [*vm_keys, "providerID"]
    assert issubclass(OvirtMachineSpec, VMSpec) and issubclass(OvirtMachineProviderSpec, VMSpec)


# --- validation: the provider spec's, at spec.<key> -------------------------------------------------------------------

INVALID = {
    "no_template": {"template_name": None},
    "template_with_a_wildcard": {"template_name": "ubuntu-*"},
    "no_cluster": {"cluster_id": ""},
    "cluster_not_an_id": {"cluster_id": "Default"},
    "instance_type_with_memory": {"instance_type_id": ID_2, "cpu": None},
    "no_memory": {"memory_mb": None},
    "negative_memory": {"memory_mb": -1},
    "zero_sockets": {"cpu": {"sockets": 0, "cores": 2, "threads": 1}},
    "too_many_vcpus": {"cpu": {"sockets": 400, "cores": 2, "threads": 1}},
    "guaranteed_over_memory": {"guaranteed_memory_mb": 8192},
    "no_os_disk": {"os_disk": None},
    "zero_os_disk": {"os_disk": {"size_gb": 0}},
    "no_type": {"type": None},
    "unknown_type": {"type": "gaming"},
    "unknown_auto_pinning": {"auto_pinning_policy": "adjust"},
    "bad_hugepages": {"hugepages": 4096},
    "unknown_format": {"format": "qcow2"},
    "thin_raw": {"clone": False, "format": "raw"},
    "thin_on_another_domain": {"type": "desktop", "storage_domain_id": ID_2},
    "thin_preallocated": {"clone": False, "sparse": False},
    "duplicate_affinity_group": {"affinity_groups_names": ["a", "a"]},
    "blank_affinity_group": {"affinity_groups_names": [" "]},
    "nic_without_profile": {"network_interfaces": [{}]},
    "nic_profile_not_an_id": {"network_interfaces": [{"vnic_profile_id": "ovirtmgmt"}]},
    "everything_missing": {key: None for key in VM},
}


def _errors(call, *args) -> list[str]:
    with pytest.raises(InvalidProviderSpec) as refused:
        call(*args)
    return [str(e) for e in refused.value.errors]


@pytest.mark.parametrize("base", [infrastructure.MACHINE_SPEC_PATH, infrastructure.TEMPLATE_SPEC_PATH])
@pytest.mark.parametrize("case", INVALID)
def test_every_provider_spec_rule_refuses_an_ovirt_machine_spec_in_the_same_words(case, base):
    vm = vm_with(**INVALID[case])
    said = _errors(load_ovirt_machine_spec, vm, base)
    as_provider_spec = _errors(load_provider_spec, {**vm, "userDataSecret": {"name": "boot"}})
    assert said == [e.replace(PROVIDER_SPEC_PATH, base, 1) for e in as_provider_spec]
    assert all(e.startswith(f"{base}.") for e in said), said


def test_a_value_of_the_wrong_type_names_its_spec_path():
    assert _errors(load_ovirt_machine_spec, vm_with(cpu={"sockets": "1", "cores": 2, "threads": 1})) == [
        "spec.cpu.sockets: Invalid value: expected integer, got string"]
    assert _errors(load_ovirt_machine_spec, vm_with(network_interfaces="nic"), "spec.template.spec") == [
        "spec.template.spec.network_interfaces: Invalid value: expected array, got string"]


def test_no_user_data_secret_is_asked_of_an_ovirt_machine():
    """Cluster API gives the bootstrap data; the Machine API's Secret references are no keys of OvirtMachine.spec."""
    spec = load_ovirt_machine_spec({**VM, "userDataSecret": {"name": "ignored"}, "credentialsSecret": {"name": "x"}})
    assert spec == OvirtMachineSpec.from_dict(VM)
    assert "userDataSecret" not in spec.to_dict()


@pytest.mark.parametrize("provider_id", ["aws:///us-east-1a/i-0123", "ovirt://worker-0", f"ovirt://{ID_1}\n",
                                         f"ovirt:/{ID_1}"])
def test_a_provider_id_not_naming_an_ovirt_vm_is_refused(provider_id):
    assert _errors(load_ovirt_machine_spec, vm_with(providerID=provider_id)) == [
        f'spec.providerID: Invalid value: "{provider_id}": must be ovirt://<VM id>; the VM id must be an oVirt ID, '
        "a UUID such as 5f4c6a1e-8d3b-4f2a-9c7e-1b2d3e4f5a6b"]


def test_a_valid_spec_loads_with_its_provider_id():
    spec = load_ovirt_machine_spec(vm_with(providerID=f"ovirt://{ID_2}"))
    assert spec.provider_id == f"ovirt://{ID_2}" and spec.memory_mb == 4096 and spec.effective_clone
    assert [f for f, _ in spec.ids()] == ["cluster_id", "instance_type_id", "storage_domain_id"]


# --- the bridge to the Machine API's actuator ------------------------------------------------------------------------

def test_to_provider_spec_gives_a_valid_provider_spec_with_the_same_vm_settings():
    spec = OvirtMachine.from_dict(OVIRT_MACHINE).spec
    value = to_provider_spec(spec, "md-0-abcde-bootstrap")
    parsed = load_provider_spec(value)
    assert parsed.user_data_secret is not None and parsed.user_data_secret.name == "md-0-abcde-bootstrap"
    assert parsed.credentials_secret is None and "providerID" not in value
    for f in dataclasses.fields(VMSpec):
        assert getattr(parsed, f.name) == getattr(spec, f.name), f.name
    assert value["kind"] == "OvirtMachineProviderSpec"


# --- conditions ------------------------------------------------------------------------------------------------------

def test_a_condition_keeps_its_transition_time_until_its_status_changes():
    t0 = dt.datetime(2026, 11, 29, 1, 0, tzinfo=dt.timezone.utc)
    t1 = dt.datetime(2026, 11, 29, 2, 0, tzinfo=dt.timezone.utc)
    other = StatusCondition(type="Paused", status="False", last_transition_time="2026-11-28T00:00:00Z")
    first = set_status_condition([other], StatusCondition(type="Ready", status="False", reason="Waiting"), at=t0)
    assert [c.type for c in first] == ["Paused", "Ready"] and first[1].last_transition_time == "2026-11-29T01:00:00Z"
    same = set_status_condition(first, StatusCondition(type="Ready", status="False", reason="Creating",
                                                       message="VM being created"), at=t1)
    assert same[1].last_transition_time == "2026-11-29T01:00:00Z" and same[1].reason == "Creating"
    flipped = set_status_condition(same, StatusCondition(type="Ready", status="True", reason="Provisioned"), at=t1)
    assert flipped[1].last_transition_time == "2026-11-29T02:00:00Z" and flipped[0] == other
    assert first[1].reason == "Waiting"  # the input list is not modified


# --- Cluster API's own objects, read ----------------------------------------------------------------------------------

def test_a_cluster_api_machine_and_cluster_are_read_as_v1beta2_writes_them():
    machine = CapiMachine.from_dict({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": "md-0-abcde", "namespace": "team-a", "labels": {capi.CLUSTER_NAME_LABEL: "c1"}},
        "spec": {"clusterName": "c1", "bootstrap": {"dataSecretName": "md-0-abcde-bootstrap"},
                 "infrastructureRef": {"apiGroup": infrastructure.GROUP, "kind": "OvirtMachine", "name": "md-0-abcde"},
                 "failureDomain": "fd-a", "providerID": f"ovirt://{ID_2}", "version": "v1.34.0"},
        "status": {"nodeRef": {"name": "md-0-abcde"}, "phase": "Running"},
    })
    assert machine.spec.cluster_name == "c1" and machine.bootstrap_data_secret == "md-0-abcde-bootstrap"
    assert machine.spec.infrastructure_ref.kind == "OvirtMachine" and machine.spec.failure_domain == "fd-a"
    assert machine.status.node_ref is not None and machine.status.node_ref.name == "md-0-abcde"
    assert capi.cluster_name(machine.metadata) == "c1"
    assert CapiMachine.from_dict({"spec": {"bootstrap": {"dataSecretName": ""}}}).bootstrap_data_secret is None

    cluster = CapiCluster.from_dict({"spec": {"paused": True, "controlPlaneEndpoint": {"host": "h", "port": 6443},
                                              "infrastructureRef": {"kind": "OvirtCluster", "name": "c1"}},
                                     "status": {"initialization": {"infrastructureProvisioned": True}}})
    assert cluster.infrastructure_provisioned and cluster.spec.control_plane_endpoint.port == 6443
    assert capi.is_paused(cluster, ObjectMeta())
    assert not capi.is_paused(CapiCluster(), ObjectMeta())
    assert capi.is_paused(None, ObjectMeta(annotations={capi.PAUSED_ANNOTATION: ""}))


# --- the CRDs ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("plural, kind", [("ovirtclusters", "OvirtCluster"), ("ovirtmachines", "OvirtMachine"),
                                          ("ovirtmachinetemplates", "OvirtMachineTemplate")])
def test_crds_carry_the_contract_label_and_the_names_cluster_api_computes(plural, kind):
    doc = crd(plural)
    # contract.CalculateCRDName: the lower-case plural of the kind, then the group.
    assert doc["metadata"]["name"] == f"{kind.lower()}s.infrastructure.cluster.x-k8s.io"
    assert doc["metadata"]["labels"] == {"cluster.x-k8s.io/v1beta2": "v1alpha1"}
    names = doc["spec"]["names"]
    assert (names["kind"], names["listKind"], names["categories"]) == (kind, f"{kind}List", ["cluster-api"])
    assert doc["spec"]["scope"] == "Namespaced"
    (version,) = doc["spec"]["versions"]
    # The label's value names the served version.
    assert version["name"] == doc["metadata"]["labels"]["cluster.x-k8s.io/v1beta2"] and version["served"]
    assert version["subresources"] == {"status": {}}
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert columns[0] == "Cluster" and columns[-1] == "Age"


def test_printer_columns_show_what_a_user_looks_for():
    def columns(plural: str) -> dict[str, str]:
        (version,) = crd(plural)["spec"]["versions"]
        return {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns("ovirtmachines")["Provisioned"] == ".status.initialization.provisioned"
    assert columns("ovirtmachines")["ProviderID"] == ".spec.providerID"
    assert columns("ovirtmachines")["State"] == ".status.instanceState"
    assert columns("ovirtclusters")["Provisioned"] == ".status.initialization.provisioned"
    assert columns("ovirtmachinetemplates")["Memory"] == ".status.capacity.memory"


def test_the_template_holds_the_ovirt_machine_spec_and_says_it_is_not_edited_in_place():
    (machine,) = crd("ovirtmachines")["spec"]["versions"]
    (template,) = crd("ovirtmachinetemplates")["spec"]["versions"]
    machine_spec = machine["schema"]["openAPIV3Schema"]["properties"]["spec"]
    nested = template["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["template"]["properties"]["spec"]
    assert nested["properties"] == machine_spec["properties"]
    assert "create a new OvirtMachineTemplate instead" in nested["description"]
    assert set(template["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]) == {"capacity", "nodeInfo"}


def test_the_generator_renders_the_three_kinds():
    rendered = gen_crds.render()
    for plural in ("ovirtclusters", "ovirtmachines", "ovirtmachinetemplates"):
        assert f"{infrastructure.GROUP}_{plural}.yaml" in rendered
    assert "labels" not in yaml.safe_load(rendered["machine.openshift.io_machines.yaml"])["metadata"]


# --- RBAC: what the contract asks for Cluster API's manager, and what our controllers need ----------------------------

RBAC_DIR = CRD_DIR.parent / "rbac"
KINDS = ("ovirtclusters", "ovirtmachines", "ovirtmachinetemplates")


def _rules(name: str) -> list[dict]:
    docs = [d for f in sorted((RBAC_DIR / "infrastructure").glob("*.yaml")) if f.name != "kustomization.yaml"
            for d in yaml.safe_load_all(f.read_text()) if d]
    (role,) = [d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == name]
    return role


def _allowed(role: dict, group: str, resource: str, verb: str) -> bool:
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in role["rules"])


def test_cluster_api_manager_gets_full_access_to_the_three_kinds_by_aggregation():
    role = _rules("ovirt-machine-controller-capi-manager")
    assert role["metadata"]["labels"] == {capi.AGGREGATE_TO_MANAGER_LABEL: "true"}
    for resource in (*KINDS, *(f"{k}/status" for k in KINDS)):
        for verb in ("get", "list", "watch", "create", "update", "patch", "delete"):
            assert _allowed(role, infrastructure.GROUP, resource, verb), (resource, verb)


def test_the_controllers_role_reads_cluster_api_and_patches_only_its_own_kinds():
    role = _rules("ovirt-machine-controller-infrastructure")
    for kind in KINDS:
        assert all(_allowed(role, infrastructure.GROUP, kind, v) for v in ("get", "list", "watch", "patch")), kind
        assert _allowed(role, infrastructure.GROUP, f"{kind}/status", "patch"), kind
        assert not _allowed(role, infrastructure.GROUP, kind, "delete") and not _allowed(
            role, infrastructure.GROUP, kind, "create"), kind
    for resource in ("clusters", "machines"):
        assert all(_allowed(role, capi.GROUP, resource, v) for v in ("get", "list", "watch")), resource
        assert not any(_allowed(role, capi.GROUP, resource, v) for v in ("patch", "update", "delete")), resource
    assert _allowed(role, "", "secrets", "get") and not _allowed(role, "", "secrets", "list")
    assert "infrastructure" in yaml.safe_load((RBAC_DIR / "kustomization.yaml").read_text())["resources"]
