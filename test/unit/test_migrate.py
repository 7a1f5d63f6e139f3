"""The Machine API <-> Cluster API conversion (api/migration, docs/cluster-api.md#migrating-from-the-machine-api) on
the installer's objects (config/samples, hack/ovirt_install.py): both directions, the round trip giving back the same
spec, every field that cannot be converted refused by its path, and invalid input refused with a clear error."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from api import capi
from api.infrastructure import TEMPLATE_SPEC_PATH, load_ovirt_machine_spec
from api.meta import LabelSelector
from api.migration import (
    ADOPT_VM_ANNOTATION,
    CONVERTED_FROM_ANNOTATION,
    ConversionError,
    ToClusterAPI,
    ToMachineAPI,
    machine_to_capi,
    machine_to_mapi,
    machinedeployment_to_mapi,
    machineset_to_capi,
    set_labels,
)
from api.validation import load_provider_spec
from hack.ovirt_install import Installation, machine_for

SAMPLES = Path(__file__).resolve().parents[2] / "config" / "samples"
VM_ID = "0b6f5d1c-3a5e-4c1f-9f0e-2a7d9e4b8c11"
TO_CAPI = ToClusterAPI(cluster_name="ocp")
BACK = ToMachineAPI(credentials_secret="ovirt-credentials", authoritative_api=None)


def installer_machineset() -> dict[str, Any]:
    return yaml.safe_load((SAMPLES / "machineset.yaml").read_text())


def installer_machine() -> dict[str, Any]:
    """A worker Machine as the installer's MachineSet made it and the controller provisioned it."""
    ms = installer_machineset()
    value = ms["spec"]["template"]["spec"]["providerSpec"]["value"]
    inst = Installation("ocp-demo-x7k2p", value["cluster_id"], value["template_name"], ("ocp-demo-x7k2p-compute",))
    m = machine_for(inst, "openshift-machine-api", "ocp-demo-x7k2p-worker-7xq2v")
    m["metadata"]["labels"] = ms["spec"]["template"]["metadata"]["labels"]  # with its set's label
    m["metadata"].update(uid="4f1d", resourceVersion="912", generation=1, creationTimestamp="2026-11-29T00:00:00Z",
                         finalizers=["machine.machine.openshift.io"],
                         annotations={"VmId": VM_ID, "machine.openshift.io/instance-state": "up"},
                         ownerReferences=[{"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
                                           "name": "ocp-demo-x7k2p-worker", "uid": "77", "controller": True}])
    m["spec"]["providerID"] = f"ovirt://{VM_ID}"
    m["status"] = {"phase": "Running", "providerStatus": {"instanceId": VM_ID, "instanceState": "up"},
                   "nodeRef": {"kind": "Node", "name": "ocp-demo-x7k2p-worker-7xq2v"}}
    return m


def refusals(e: pytest.ExceptionInfo[ConversionError]) -> dict[str, str]:
    return {err.path: err.message for err in e.value.errors}


def _same_spec(before: dict[str, Any], after: dict[str, Any], machine_spec_path: tuple[str, ...]) -> None:
    """`after` holds `before`'s settings: the provider specs parse the same, and everything else is equal (the empty
    `metadata: {}` the installer writes in a Machine's spec holds nothing)."""
    b, a = copy.deepcopy(before), copy.deepcopy(after)
    bspec, aspec = b["spec"], a["spec"]
    for key in machine_spec_path:
        bspec, aspec = bspec[key], aspec[key]
    assert load_provider_spec(aspec["providerSpec"]["value"]) == load_provider_spec(bspec["providerSpec"]["value"])
    del bspec["providerSpec"], aspec["providerSpec"]
    if bspec.get("metadata") == {}:
        del bspec["metadata"]
    assert a["spec"] == b["spec"]


# --- MachineSet <-> MachineDeployment + OvirtMachineTemplate -------------------------------------------------------


def test_the_installers_machineset_becomes_a_machinedeployment_and_its_template():
    ms = installer_machineset()
    md, template, _ = machineset_to_capi(ms, TO_CAPI)
    assert (md["apiVersion"], md["kind"]) == ("cluster.x-k8s.io/v1beta2", "MachineDeployment")
    assert md["metadata"]["name"] == "ocp-demo-x7k2p-worker"
    assert md["metadata"]["namespace"] == "openshift-machine-api"
    assert md["metadata"]["labels"] == {**ms["metadata"]["labels"], capi.CLUSTER_NAME_LABEL: "ocp"}
    assert md["metadata"]["annotations"] == {
        CONVERTED_FROM_ANNOTATION: "MachineSet.machine.openshift.io openshift-machine-api/ocp-demo-x7k2p-worker",
        capi.PAUSED_ANNOTATION: ""}
    spec = md["spec"]
    assert spec["clusterName"] == "ocp" and spec["replicas"] == 1
    assert spec["selector"] == ms["spec"]["selector"]
    assert spec["template"]["metadata"] == {"labels": ms["spec"]["template"]["metadata"]["labels"]}
    assert spec["template"]["spec"] == {
        "clusterName": "ocp", "bootstrap": {"dataSecretName": "worker-user-data"},
        "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "OvirtMachineTemplate",
                              "name": template["metadata"]["name"]}}
    assert spec["rollout"] == {"strategy": {"type": "OnDelete"}}  # a MachineSet never replaces its Machines
    assert "deletion" not in spec  # no deletePolicy: Cluster API's default order is the same, Random
    assert (template["kind"], template["metadata"]["namespace"]) == ("OvirtMachineTemplate", "openshift-machine-api")
    assert template["metadata"]["name"].startswith("ocp-demo-x7k2p-worker-")
    vm = load_ovirt_machine_spec(template["spec"]["template"]["spec"], TEMPLATE_SPEC_PATH)
    provider = load_provider_spec(ms["spec"]["template"]["spec"]["providerSpec"]["value"])
    assert (vm.template_name, vm.cluster_id, vm.cpu, vm.memory_mb, vm.os_disk, vm.type, vm.affinity_groups_names) == (
        provider.template_name, provider.cluster_id, provider.cpu, provider.memory_mb, provider.os_disk, provider.type,
        provider.affinity_groups_names)
    # The Machine API's Secret references have no place in an OvirtMachine's spec.
    assert not {"userDataSecret", "credentialsSecret", "id", "name"} & set(template["spec"]["template"]["spec"])


def test_the_converted_machineset_carries_the_converted_machines_for_the_machinedeployment():
    """Cluster API's MachineDeployment adopts an ownerless MachineSet its selector matches, and a MachineSet the
    ownerless Machines its selector matches: the installer's workers stay, none is made again."""
    md, _, machine_set = machineset_to_capi(installer_machineset(), TO_CAPI)
    machine, _ = machine_to_capi(installer_machine(), TO_CAPI)  # owned by the installer's MachineSet

    def selects(selector: dict, labels: dict) -> bool:
        return LabelSelector.from_dict(selector).matches(labels)

    assert (machine_set["kind"], machine_set["metadata"]["name"]) == ("MachineSet", "ocp-demo-x7k2p-worker")
    assert "ownerReferences" not in machine_set["metadata"]
    assert selects(md["spec"]["selector"], machine_set["metadata"]["labels"])
    assert machine_set["metadata"]["labels"]["machine-template-hash"] == "machine-api"  # what the MD reads of it
    assert selects(machine_set["spec"]["selector"], machine["metadata"]["labels"])
    assert selects(machine_set["spec"]["selector"], machine_set["spec"]["template"]["metadata"]["labels"])
    assert machine_set["spec"]["replicas"] == md["spec"]["replicas"] == 1
    assert machine_set["spec"]["template"]["spec"] == md["spec"]["template"]["spec"]
    # A standalone Machine (no MachineSet of the Machine API controls it) is no set's.
    standalone = installer_machine()
    standalone["metadata"].pop("ownerReferences")
    assert not selects(machine_set["spec"]["selector"], machine_to_capi(standalone, TO_CAPI)[0]["metadata"]["labels"])


def test_the_template_name_follows_the_vm_settings_only():
    ms = installer_machineset()
    _, first, _ = machineset_to_capi(ms, TO_CAPI)
    ms["spec"]["replicas"] = 5
    assert machineset_to_capi(ms, TO_CAPI)[1]["metadata"]["name"] == first["metadata"]["name"]
    ms["spec"]["template"]["spec"]["providerSpec"]["value"]["memory_mb"] = 32768
    assert machineset_to_capi(ms, TO_CAPI)[1]["metadata"]["name"] != first["metadata"]["name"]


def test_a_target_namespace_and_unpaused_objects_when_asked():
    to = ToClusterAPI("ocp", namespace="clusters", paused=False)
    md, template, _ = machineset_to_capi(installer_machineset(), to)
    assert md["metadata"]["namespace"] == template["metadata"]["namespace"] == "clusters"
    assert capi.PAUSED_ANNOTATION not in md["metadata"]["annotations"]


def test_the_installers_machineset_round_trip_gives_back_the_same_spec():
    ms = installer_machineset()
    back = machinedeployment_to_mapi(*machineset_to_capi(ms, TO_CAPI)[:2], BACK)
    assert back["metadata"] == ms["metadata"]
    _same_spec(ms, back, ("template", "spec"))


def test_every_mapped_field_round_trips():
    ms = installer_machineset()
    ms["spec"].update(replicas=0, minReadySeconds=30, deletePolicy="Oldest")
    ms["metadata"]["annotations"] = {"machine.openshift.io/cluster-api-autoscaler-node-group-max-size": "6"}
    ms["spec"]["template"]["metadata"]["annotations"] = {"example.com/team": "storage"}
    ms["spec"]["template"]["spec"]["lifecycleHooks"] = {
        "preDrain": [{"name": "EtcdQuorum", "owner": "clusteroperator/etcd"}],
        "preTerminate": [{"name": "Backup", "owner": "backup-operator"}]}
    ms["spec"]["template"]["spec"]["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    md, template, _ = machineset_to_capi(ms, TO_CAPI)
    assert md["spec"]["deletion"] == {"order": "Oldest"} and md["spec"]["replicas"] == 0
    capi_machine = md["spec"]["template"]
    assert capi_machine["spec"]["minReadySeconds"] == 30
    assert capi_machine["spec"]["taints"] == [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule",
                                               "propagation": "OnInitialization"}]
    assert capi_machine["metadata"]["annotations"] == {
        "example.com/team": "storage",
        "pre-drain.delete.hook.machine.cluster.x-k8s.io/EtcdQuorum": "clusteroperator/etcd",
        "pre-terminate.delete.hook.machine.cluster.x-k8s.io/Backup": "backup-operator"}
    back = machinedeployment_to_mapi(md, template, BACK)
    assert back["metadata"] == ms["metadata"]
    _same_spec(ms, back, ("template", "spec"))


def test_the_machinedeployment_as_cluster_apis_webhook_stored_it_converts_back():
    """Cluster API's defaulting adds its cluster-name label to the object, the selector and the template: they are
    Cluster API's (spec.clusterName says it), not the MachineSet's."""
    ms = installer_machineset()
    md, template, _ = machineset_to_capi(ms, TO_CAPI)
    for labels in (md["spec"]["selector"]["matchLabels"], md["spec"]["template"]["metadata"]["labels"]):
        labels[capi.CLUSTER_NAME_LABEL] = "ocp"
    md["metadata"].update(uid="9", resourceVersion="3", generation=2, managedFields=[{"manager": "kubectl"}],
                          finalizers=["cluster.x-k8s.io/machinedeployment"], ownerReferences=[
                              {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "ocp", "uid": "1"}])
    md["metadata"]["annotations"]["machinedeployment.clusters.x-k8s.io/revision"] = "1"
    md["status"] = {"replicas": 1, "phase": "Running"}
    template["status"] = {"capacity": {"cpu": "4"}}
    back = machinedeployment_to_mapi(md, template, BACK)
    assert back["metadata"] == ms["metadata"]
    assert back["spec"]["selector"] == ms["spec"]["selector"]
    assert back["spec"]["template"]["metadata"] == ms["spec"]["template"]["metadata"]


def test_converted_back_objects_say_cluster_api_is_authoritative_by_default():
    back = machinedeployment_to_mapi(*machineset_to_capi(installer_machineset(), TO_CAPI)[:2])
    assert back["spec"]["authoritativeAPI"] == "ClusterAPI"
    assert back["spec"]["template"]["spec"]["authoritativeAPI"] == "ClusterAPI"
    # Without the OvirtCluster's identity, the provider spec names no credentials Secret.
    assert "credentialsSecret" not in back["spec"]["template"]["spec"]["providerSpec"]["value"]


def test_a_failure_domain_becomes_its_ovirt_cluster_and_is_refused_without_the_ovirt_clusters_domains():
    md, template, _ = machineset_to_capi(installer_machineset(), TO_CAPI)
    other = "7c0e1b55-1d3b-4a59-8a8e-0c2b7b1d9f00"
    del template["spec"]["template"]["spec"]["cluster_id"]
    md["spec"]["template"]["spec"]["failureDomain"] = "rack-b"
    with pytest.raises(ConversionError) as e:
        machinedeployment_to_mapi(md, template, BACK)
    assert "spec.template.spec.failureDomain" in refusals(e)
    back = machinedeployment_to_mapi(md, template, ToMachineAPI(failure_domains={"rack-b": other}))
    assert back["spec"]["template"]["spec"]["providerSpec"]["value"]["cluster_id"] == other


# --- Machine <-> Machine + OvirtMachine ---------------------------------------------------------------------------


def test_the_installers_machine_becomes_a_machine_and_an_ovirtmachine_adopting_its_vm():
    m = installer_machine()
    cm, om = machine_to_capi(m, TO_CAPI)
    name = m["metadata"]["name"]
    assert (cm["kind"], cm["metadata"]["name"], om["kind"], om["metadata"]["name"]) == (
        "Machine", name, "OvirtMachine", name)  # the VM bears the Machine's name: the OvirtMachine keeps it
    assert cm["spec"] == {"clusterName": "ocp", "bootstrap": {"dataSecretName": "worker-user-data"},
                          "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "OvirtMachine",
                                                "name": name},
                          "providerID": f"ovirt://{VM_ID}"}
    assert cm["metadata"]["labels"] == {**m["metadata"]["labels"], capi.CLUSTER_NAME_LABEL: "ocp",
                                        **set_labels("ocp-demo-x7k2p-worker")}
    assert om["spec"]["providerID"] == f"ovirt://{VM_ID}"
    assert om["metadata"]["annotations"][ADOPT_VM_ANNOTATION] == VM_ID
    assert om["metadata"]["annotations"][CONVERTED_FROM_ANNOTATION] == f"Machine.machine.openshift.io " \
                                                                       f"openshift-machine-api/{name}"
    # Nothing of the source's server-set metadata, finalizer, owner or status is carried.
    for obj in (cm, om):
        assert set(obj["metadata"]) == {"name", "namespace", "labels", "annotations"}
        assert "status" not in obj


def test_the_installers_machine_round_trip_gives_back_the_same_spec():
    m = installer_machine()
    back = machine_to_mapi(*machine_to_capi(m, TO_CAPI), BACK)
    assert back["metadata"] == {k: m["metadata"][k] for k in ("name", "namespace", "labels", "annotations")}
    _same_spec(m, back, ())


def test_a_machine_as_cluster_api_keeps_it_converts_back():
    """What Cluster API's controllers add to a Machine they run (their finalizer, the MachineSet's ownership, the
    set labels, the status) is theirs, not a setting: left behind."""
    m = installer_machine()
    cm, om = machine_to_capi(m, TO_CAPI)
    cm["metadata"].update(uid="c1", resourceVersion="5", finalizers=["machine.cluster.x-k8s.io"], ownerReferences=[
        {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet", "name": "ocp-demo-x7k2p-worker",
         "uid": "s1", "controller": True}])
    cm["status"] = {"phase": "Running", "nodeRef": {"name": "n"}}
    om["metadata"]["finalizers"] = ["ovirtmachine.infrastructure.cluster.x-k8s.io"]
    om["status"] = {"instanceId": VM_ID, "initialization": {"provisioned": True}}
    back = machine_to_mapi(cm, om, BACK)
    assert back["metadata"]["labels"] == m["metadata"]["labels"]
    _same_spec(m, back, ())


@pytest.mark.parametrize("where", ["providerID", "VmId", "providerStatus"])
def test_the_vm_id_is_taken_from_wherever_the_machine_recorded_it(where):
    m = installer_machine()
    keep = {"providerID": lambda: m["spec"].pop("providerID"),
            "VmId": lambda: m["metadata"]["annotations"].pop("VmId"),
            "providerStatus": lambda: m["status"].pop("providerStatus")}
    for name, drop in keep.items():
        if name != where:
            drop()
    _, om = machine_to_capi(m, TO_CAPI)
    assert om["metadata"]["annotations"][ADOPT_VM_ANNOTATION] == VM_ID


def test_a_machine_without_a_vm_or_with_disagreeing_ids_is_refused():
    m = installer_machine()
    m["metadata"]["annotations"]["VmId"] = "7c0e1b55-1d3b-4a59-8a8e-0c2b7b1d9f00"
    with pytest.raises(ConversionError) as e:
        machine_to_capi(m, TO_CAPI)
    assert "which VM is the Machine's is unclear" in refusals(e)["metadata.annotations[VmId]"]
    for drop in (lambda: m["spec"].pop("providerID"), lambda: m["metadata"].pop("annotations"),
                 lambda: m.pop("status")):
        drop()
    with pytest.raises(ConversionError) as e:
        machine_to_capi(m, TO_CAPI)
    assert refusals(e)["spec.providerID"].startswith("Required value: the Machine has no VM yet")


def test_an_ovirtmachine_of_another_name_than_its_machine_is_refused():
    cm, om = machine_to_capi(installer_machine(), TO_CAPI)
    om["metadata"]["name"] = cm["spec"]["infrastructureRef"]["name"] = "renamed"
    with pytest.raises(ConversionError) as e:
        machine_to_mapi(cm, om, BACK)
    assert "spec.infrastructureRef.name" in refusals(e)


# --- every field mapped or refused by name --------------------------------------------------------------------------


def test_every_field_without_a_cluster_api_equivalent_is_refused_by_its_path():
    ms = installer_machineset()
    ms["spec"]["someSpecField"] = True
    tspec = ms["spec"]["template"]["spec"]
    tspec["providerSpec"]["value"]["someField"] = "x"
    tspec["providerSpec"]["value"]["name"] = "vm-7"
    tspec["metadata"] = {"labels": {"node-role.kubernetes.io/infra": ""}}
    tspec["lifecycleHooks"] = {"preDrain": [{"name": "A1", "owner": "me", "extra": 1}], "postBoot": [{"name": "x"}]}
    ms["spec"]["template"]["metadata"]["generateName"] = "w-"
    with pytest.raises(ConversionError) as e:
        machineset_to_capi(ms, TO_CAPI)
    found = refusals(e)
    assert found == {
        "spec.someSpecField": "has no Cluster API equivalent",
        "spec.template.spec.providerSpec.value.someField": "has no Cluster API equivalent",
        "spec.template.spec.providerSpec.value.name": "has no Cluster API equivalent (the VM bears its Machine's "
                                                      "name)",
        "spec.template.spec.metadata.labels": found["spec.template.spec.metadata.labels"],
        "spec.template.spec.lifecycleHooks.preDrain[0].extra": "has no Cluster API equivalent",
        "spec.template.spec.lifecycleHooks.postBoot": "has no Cluster API equivalent",
        "spec.template.metadata.generateName": "has no Cluster API equivalent",
    }
    assert found["spec.template.spec.metadata.labels"].startswith("has no Cluster API equivalent")
    assert str(e.value).startswith("MachineSet openshift-machine-api/ocp-demo-x7k2p-worker: ")


def test_every_field_without_a_machine_api_equivalent_is_refused_by_its_path():
    md, template, _ = machineset_to_capi(installer_machineset(), TO_CAPI)
    md["spec"]["rollout"] = {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}
    md["spec"]["remediation"] = {"maxInFlight": 1}
    md["spec"]["template"]["spec"]["version"] = "v1.35.0"
    md["spec"]["template"]["spec"]["readinessGates"] = [{"conditionType": "Ok"}]
    md["spec"]["template"]["spec"]["bootstrap"]["configRef"] = {"kind": "KubeadmConfigTemplate", "name": "x"}
    md["spec"]["template"]["spec"]["taints"] = [{"key": "k", "effect": "NoSchedule", "propagation": "Always"}]
    template["spec"]["template"]["metadata"] = {"labels": {"a": "b"}}
    template["spec"]["template"]["spec"]["gpu"] = 1
    with pytest.raises(ConversionError) as e:
        machinedeployment_to_mapi(md, template, BACK)
    found = refusals(e)
    assert set(found) == {
        "spec.rollout.strategy.type", "spec.rollout.strategy.rollingUpdate", "spec.remediation",
        "spec.template.spec.version", "spec.template.spec.readinessGates", "spec.template.spec.bootstrap.configRef",
        "spec.template.spec.taints[0].propagation", "OvirtMachineTemplate.spec.template.metadata.labels",
        "OvirtMachineTemplate.spec.template.spec.gpu"}, found
    assert found["OvirtMachineTemplate.spec.template.spec.gpu"] == "has no Machine API equivalent"
    assert "RollingUpdate" in found["spec.rollout.strategy.type"]


def test_a_machines_unconvertible_fields_are_refused_by_their_path():
    m = installer_machine()
    m["spec"]["metadata"] = {"annotations": {"a": "b"}}
    m["metadata"]["finalizers"].append("example.com/keep")
    m["metadata"]["ownerReferences"].append({"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "1"})
    with pytest.raises(ConversionError) as e:
        machine_to_capi(m, TO_CAPI)
    assert set(refusals(e)) == {"spec.metadata.annotations", "metadata.finalizers", "metadata.ownerReferences[1]"}


# --- invalid input ---------------------------------------------------------------------------------------------------


def test_an_invalid_provider_spec_is_refused_with_its_path_in_the_machineset():
    ms = installer_machineset()
    ms["spec"]["template"]["spec"]["providerSpec"]["value"]["cpu"]["sockets"] = 0
    ms["spec"]["template"]["spec"]["providerSpec"]["value"]["memory_mb"] = "lots"
    with pytest.raises(ConversionError) as e:
        machineset_to_capi(ms, TO_CAPI)
    assert list(refusals(e)) == ["spec.template.spec.providerSpec.value.memory_mb"]
    assert "expected integer" in str(e.value)
    ms["spec"]["template"]["spec"]["providerSpec"]["value"]["memory_mb"] = 4096
    with pytest.raises(ConversionError, match=r"spec\.template\.spec\.providerSpec\.value\.cpu\.sockets: Invalid"):
        machineset_to_capi(ms, TO_CAPI)


@pytest.mark.parametrize("mutate, path", [
    (lambda o: o.update(kind="MachineHealthCheck"), "kind"),
    (lambda o: o.update(apiVersion="machine.openshift.io/v1"), "apiVersion"),
    (lambda o: o["metadata"].pop("name"), "metadata.name"),
    (lambda o: o["metadata"].update(deletionTimestamp="2026-11-29T00:00:00Z"), "metadata.deletionTimestamp"),
    (lambda o: o["spec"].update(replicas=-1), "spec.replicas"),
    (lambda o: o["spec"].update(replicas="3"), "spec.replicas"),
    (lambda o: o["spec"].update(selector=[]), "spec.selector"),
    (lambda o: o["spec"]["template"]["spec"].update(providerSpec={"value": None}),
     "spec.template.spec.providerSpec.value"),
    (lambda o: o["spec"]["template"]["spec"]["providerSpec"]["value"].update(kind="AWSMachineProviderConfig"),
     "spec.template.spec.providerSpec.value.kind"),
])
def test_invalid_input_is_refused_naming_the_field(mutate, path):
    ms = installer_machineset()
    mutate(ms)
    with pytest.raises(ConversionError) as e:
        machineset_to_capi(ms, TO_CAPI)
    assert path in refusals(e), str(e.value)


def test_a_document_that_is_no_object_is_refused():
    with pytest.raises(ConversionError, match="expected an object, got list"):
        machineset_to_capi([], TO_CAPI)  # type: ignore[arg-type]
