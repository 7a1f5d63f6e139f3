"""A Machine API Machine converted to Cluster API (api/migration) takes over its VM, against the simulated engine:
the converted OvirtMachine, described to the actuator as its controller describes it (seam_machine), finds the VM by
the recorded id, marks it as its own before anything else and goes on with it: no second VM, no stop, no start. Only
an unmarked, uncommented VM of the object's name and of the id the converter recorded is taken; anything else stays
another's (docs/cluster-api.md#migrating-from-the-machine-api, docs/architecture.md#acting-only-on-what-is-ours)."""

from __future__ import annotations

import time

import ovirtsdk4.types as types
import pytest

from api.capi import CapiMachine
from api.infrastructure import OvirtCluster
from api.machine import Machine
from api.meta import ObjectMeta
from api.migration import ADOPT_VM_ANNOTATION, ToClusterAPI, machine_to_capi
from hack import ovirt_install
from machine_controller.controllers.infrastructure.seam_machine import seam_machine
from machine_controller.controllers.provider import InstanceNotOwned
from machine_controller.ovirt.actuator import OvirtActuator
from machine_controller.ovirt.cluster_vm_lists import ClusterVmLists
from machine_controller.ovirt.owner_mark import OwnerMarks, VmOfAnother

MARKS = OwnerMarks(kind="OvirtMachine")
USER_DATA = '{"ignition": {"version": "3.2.0"}}'


def _writes(sim) -> dict[str, int]:
    return {k: n for k, n in sim.control.counts().items() if not k.startswith("GET ") and "/sso/" not in k}


def _running_vm(vms, inst, name: str, comment: str | None = None) -> types.Vm:
    """A Machine API worker's VM as the Machine API made it: its Machine's name, no mark; up."""
    vm = vms.add(types.Vm(name=name, cluster=types.Cluster(id=inst.cluster_id),
                          template=types.Template(name=inst.template_name), comment=comment))
    deadline = time.monotonic() + 30
    while vms.vm_service(vm.id).get().status != types.VmStatus.DOWN:
        assert time.monotonic() < deadline, "the new VM's disks were not unlocked"
        time.sleep(0.05)
    vms.vm_service(vm.id).start()
    while (vm := vms.vm_service(vm.id).get()).status != types.VmStatus.UP:
        assert time.monotonic() < deadline, "the VM did not come up"
        time.sleep(0.05)
    return vm


def _converted(inst, vm_id: str, name: str = "worker-0", adopt: str | None = None):
    """The seam Machine of the OvirtMachine converted from the Machine API Machine `name` whose VM is `vm_id`
    (`adopt` replaces the id the converter recorded, as a copied or edited manifest would)."""
    raw = ovirt_install.machine_for(inst, "openshift-machine-api", name, affinity_groups_names=None)
    raw["spec"]["providerID"] = f"ovirt://{vm_id}"
    machine, ovirt_machine = machine_to_capi(raw, ToClusterAPI(cluster_name="ocp", namespace="workers"))
    if adopt is not None:
        ovirt_machine["metadata"]["annotations"][ADOPT_VM_ANNOTATION] = adopt
    ovirt_machine["metadata"]["uid"] = "uid-om"
    ovirt_cluster = OvirtCluster.from_dict({"metadata": {"name": "ocp", "namespace": "workers"},
                                            "spec": {"clusterId": inst.cluster_id}})
    machine["spec"]["bootstrap"]["dataSecretName"] = "worker-user-data"
    return seam_machine(ObjectMeta.from_dict(ovirt_machine["metadata"]), ovirt_machine["spec"], None,
                        CapiMachine.from_dict(machine), ovirt_cluster)


@pytest.fixture
def bed(sim_and_client):
    sim, ovirt = sim_and_client
    conn = sim.connection()
    try:
        inst = ovirt_install.prepare(conn, "infra-1")
        yield sim, ovirt, conn.system_service().vms_service(), inst
    finally:
        conn.close()


def _actuator(ovirt) -> OvirtActuator:
    return OvirtActuator(ovirt, user_data=lambda ns, name: USER_DATA, owner_marks=MARKS,
                         vm_lists=ClusterVmLists(ovirt))


def test_a_converted_machine_adopts_its_running_vm_marking_it_first_without_stopping_or_recreating_it(bed):
    sim, ovirt, vms, inst = bed
    vm = _running_vm(vms, inst, "worker-0")
    machine = _converted(inst, vm.id)
    sim.control.reset_counts()
    progress = _actuator(ovirt).provision(machine)
    assert progress.done and progress.instance_id == vm.id
    after = vms.vm_service(vm.id).get()
    assert after.comment == "ovirt-machine-controller owner: OvirtMachine workers/worker-0 uid uid-om"
    assert after.status == types.VmStatus.UP
    assert _writes(sim) == {"PUT /vms/{vm}": 1}  # the mark only: no create, stop or start
    assert [v.id for v in vms.list(search="name=worker-0")] == [vm.id]
    # Once marked, it is the OvirtMachine's as every VM it made: its status is read, nothing more is written.
    sim.control.reset_counts()
    assert _actuator(ovirt).status(machine).instance_id == vm.id
    assert _writes(sim) == {}


@pytest.mark.parametrize("comment", ["ovirt-machine-controller owner: OvirtMachine team-a/worker-0 uid u",
                                     "kept for the audit, do not touch"], ids=["another-owners-mark", "a-note"])
def test_a_vm_with_any_comment_is_not_adopted(bed, comment):
    sim, ovirt, vms, inst = bed
    vm = _running_vm(vms, inst, "worker-0", comment=comment)
    sim.control.reset_counts()
    with pytest.raises(InstanceNotOwned):
        _actuator(ovirt).provision(_converted(inst, vm.id))
    assert _writes(sim) == {}
    assert vms.vm_service(vm.id).get().comment == comment


def test_a_vm_whose_id_the_converter_did_not_record_is_not_adopted(bed):
    """The providerID names the VM, but the adoption names another id (an edited or copied manifest): refused."""
    sim, ovirt, vms, inst = bed
    vm = _running_vm(vms, inst, "worker-0")
    sim.control.reset_counts()
    with pytest.raises(InstanceNotOwned):
        _actuator(ovirt).provision(_converted(inst, vm.id, adopt="5f4c6a1e-8d3b-4f2a-9c7e-1b2d3e4f5a6b"))
    assert _writes(sim) == {}
    assert vms.vm_service(vm.id).get().comment == ""


def test_a_vm_of_another_name_is_not_adopted_even_with_its_id_recorded(bed):
    sim, ovirt, vms, inst = bed
    vm = _running_vm(vms, inst, "worker-1")
    sim.control.reset_counts()
    with pytest.raises(InstanceNotOwned, match=r"is named 'worker-1', not 'worker-0'"):
        _actuator(ovirt).provision(_converted(inst, vm.id))
    assert _writes(sim) == {}
    assert vms.vm_service(vm.id).get().comment == ""


def test_an_unmarked_vm_of_the_name_is_still_refused_without_the_adoption(bed):
    """An OvirtMachine not converted (no adoption recorded) never takes a Machine API VM of its name."""
    sim, ovirt, vms, inst = bed
    _running_vm(vms, inst, "worker-0")
    raw = ovirt_install.machine_for(inst, "workers", "worker-0", affinity_groups_names=None)
    raw["metadata"]["uid"] = "uid-om"
    sim.control.reset_counts()
    with pytest.raises(VmOfAnother, match=r"bears no owner mark"):
        _actuator(ovirt).provision(Machine.from_dict(raw))
    assert _writes(sim) == {}
