"""Owner marks, against the simulated engine: Cluster API's actuator marks each VM it creates with its owner's kind,
namespace and name, and takes a VM of the object's name as the object's only when it bears that mark; another's VM
of the same name (an OvirtMachine of that name in another namespace) is refused and nothing is sent to it. The
Machine API's actuator, which requires no mark, still adopts the VMs of its Machines' names
(docs/architecture.md#acting-only-on-what-is-ours, docs/cluster-api.md#the-contract-rule-by-rule)."""

from __future__ import annotations

import time

import ovirtsdk4.types as types
import pytest

from api.machine import Machine
from hack import ovirt_install
from machine_controller.controllers.provider import InstanceNotOwned
from machine_controller.ovirt.actuator import OvirtActuator
from machine_controller.ovirt.cluster_vm_lists import ClusterVmLists
from machine_controller.ovirt.owner_mark import OwnerMarks, VmOfAnother

MARKS = OwnerMarks(kind="OvirtMachine")
USER_DATA = '{"ignition": {"version": "3.2.0"}}'


def _machine(inst, namespace: str, name: str, uid: str) -> Machine:
    raw = ovirt_install.machine_for(inst, namespace, name, affinity_groups_names=None)
    raw["metadata"]["uid"] = uid
    return Machine.from_dict(raw)


def _actuator(ovirt, marks: OwnerMarks | None, now: list[float] | None = None) -> OvirtActuator:
    clock = (lambda: now[0]) if now is not None else time.monotonic
    return OvirtActuator(ovirt, user_data=lambda ns, name: USER_DATA, owner_marks=marks,
                         vm_lists=ClusterVmLists(ovirt, clock=clock))


def _writes(sim) -> dict[str, int]:
    """The engine's requests since the counts were reset that are not reads (a login is not one)."""
    return {k: n for k, n in sim.control.counts().items() if not k.startswith("GET ") and "/sso/" not in k}


def _down(vms, vm_id: str) -> types.Vm:
    deadline = time.monotonic() + 30
    while (vm := vms.vm_service(vm_id).get()).status != types.VmStatus.DOWN:
        assert time.monotonic() < deadline, "the new VM's disks were not unlocked"
        time.sleep(0.1)
    return vm


def _vm_made_directly(vms, inst, name: str, comment: str | None = None) -> types.Vm:
    """A VM of `name` created in the engine through its API, not by this actuator (with `comment` as its mark)."""
    return vms.add(types.Vm(name=name, cluster=types.Cluster(id=inst.cluster_id),
                            template=types.Template(name=inst.template_name), comment=comment))


@pytest.fixture
def bed(sim_and_client):
    sim, ovirt = sim_and_client
    conn = sim.connection()
    try:
        inst = ovirt_install.prepare(conn, "infra-1")
        cluster = conn.system_service().clusters_service().cluster_service(inst.cluster_id).get().name
        yield sim, ovirt, conn, inst, cluster
    finally:
        conn.close()


def _stale_lists(actuator: OvirtActuator, cluster: str, name: str, now: list[float]) -> None:
    """The actuator's list of the cluster, taken before any VM of `name` exists, made long stale: the look before a
    create takes it for "absent", and the engine's refusal of a second name is what finds the VM."""
    assert actuator.vm_lists.by_name(cluster, name) == []
    now[0] += 600.0


def test_a_created_vm_bears_its_owners_mark_in_the_engine_on_get_and_in_lists(bed):
    sim, ovirt, conn, inst, cluster = bed
    machine = _machine(inst, "team-a", "w1", "uid-a")
    progress = _actuator(ovirt, MARKS).provision(machine)
    mark = "ovirt-machine-controller owner: OvirtMachine team-a/w1 uid uid-a"
    vms = conn.system_service().vms_service()
    assert vms.vm_service(progress.instance_id).get().comment == mark  # GET /vms/{id}
    assert [v.comment for v in vms.list(search="name=w1")] == [mark]  # GET /vms, as the SDK reads it
    listed = _actuator(ovirt, MARKS).vm_lists.by_name(cluster, "w1")  # GET /vms of the cluster, streamed
    assert [v.comment for v in listed] == [mark]


def test_another_owners_vm_of_the_same_name_is_refused_and_left_untouched(bed):
    """An OvirtMachine `w1` of namespace team-b, on the engine where team-a's `w1` has its VM: found in its
    cluster's list, that VM is refused naming it and its mark, and no request but reads reaches it; deleting
    team-b's `w1` leaves it."""
    sim, ovirt, conn, inst, cluster = bed
    vms = conn.system_service().vms_service()
    theirs = _actuator(ovirt, MARKS).provision(_machine(inst, "team-a", "w1", "uid-a")).instance_id
    before = _down(vms, theirs)
    ours = _actuator(ovirt, MARKS)
    machine = _machine(inst, "team-b", "w1", "uid-b")
    sim.control.reset_counts()
    with pytest.raises(VmOfAnother) as refused:
        ours.provision(machine)
    message = str(refused.value)
    assert f"VM w1 ({theirs})" in message and "OvirtMachine team-a/w1" in message, message
    assert _writes(sim) == {}
    assert ours.delete(machine).done  # the VM of its name is another's: none of its own to remove
    assert _writes(sim) == {}
    after = vms.vm_service(theirs).get()
    assert (after.comment, after.status, after.name) == (before.comment, types.VmStatus.DOWN, "w1")


def test_a_stale_list_and_the_create_conflict_refuse_another_owners_vm(bed):
    """The create itself is refused by the engine (its name is taken), and the VM it then finds is another's."""
    sim, ovirt, conn, inst, cluster = bed
    vms = conn.system_service().vms_service()
    now = [100.0]
    ours = _actuator(ovirt, MARKS, now)
    _stale_lists(ours, cluster, "w1", now)
    theirs = _vm_made_directly(vms, inst, "w1", "ovirt-machine-controller owner: OvirtMachine team-a/w1 uid uid-a")
    machine = _machine(inst, "team-b", "w1", "uid-b")
    sim.control.reset_counts()
    with pytest.raises(VmOfAnother, match=r"team-a/w1"):
        ours.provision(machine)
    assert _writes(sim) == {"POST /vms": 1}  # the create, refused by the engine: nothing of that VM was changed
    assert [v.id for v in vms.list(search="name=w1")] == [theirs.id]


def test_a_vm_of_the_objects_name_without_any_mark_is_refused(bed):
    sim, ovirt, conn, inst, cluster = bed
    vms = conn.system_service().vms_service()
    unmarked = _vm_made_directly(vms, inst, "w1")
    _down(vms, unmarked.id)
    sim.control.reset_counts()
    with pytest.raises(VmOfAnother, match=r"bears no owner mark"):
        _actuator(ovirt, MARKS).provision(_machine(inst, "team-b", "w1", "uid-b"))
    assert _writes(sim) == {}


def test_a_lost_create_answer_with_our_own_mark_is_adopted(bed):
    """A create whose answer was lost left a VM bearing this object's mark (its uid since changed, as after
    `clusterctl move`): found by the engine's refusal of a second one, it is adopted, never duplicated."""
    sim, ovirt, conn, inst, cluster = bed
    vms = conn.system_service().vms_service()
    now = [100.0]
    ours = _actuator(ovirt, MARKS, now)
    _stale_lists(ours, cluster, "w1", now)
    earlier = _vm_made_directly(vms, inst, "w1", MARKS.mark(_machine(inst, "team-b", "w1", "uid-before-the-move")))
    sim.control.reset_counts()
    progress = ours.provision(_machine(inst, "team-b", "w1", "uid-b"))
    assert progress.instance_id == earlier.id
    assert [v.id for v in vms.list(search="name=w1")] == [earlier.id]


def test_a_recorded_id_naming_a_vm_of_the_same_name_but_another_mark_is_not_owned(bed):
    sim, ovirt, conn, inst, cluster = bed
    vms = conn.system_service().vms_service()
    theirs = _actuator(ovirt, MARKS).provision(_machine(inst, "team-a", "w1", "uid-a")).instance_id
    _down(vms, theirs)
    raw = ovirt_install.machine_for(inst, "team-b", "w1", affinity_groups_names=None)
    raw["metadata"]["uid"] = "uid-b"
    raw["spec"]["providerID"] = f"ovirt://{theirs}"
    sim.control.reset_counts()
    with pytest.raises(InstanceNotOwned, match=r"team-a/w1"):
        _actuator(ovirt, MARKS).find_vm(Machine.from_dict(raw))
    assert _writes(sim) == {}


@pytest.mark.parametrize("stale", [False, True], ids=["found-in-the-list", "found-by-the-create-conflict"])
def test_the_machine_api_actuator_still_adopts_a_vm_of_its_name_without_a_mark(bed, stale):
    """The Go provider and earlier versions made VMs without a mark: the Machine API's actuator requires none."""
    sim, ovirt, conn, inst, cluster = bed
    vms = conn.system_service().vms_service()
    now = [100.0]
    actuator = _actuator(ovirt, None, now)
    if stale:
        _stale_lists(actuator, cluster, "worker-0", now)
    earlier = _vm_made_directly(vms, inst, "worker-0")
    progress = actuator.provision(_machine(inst, "openshift-machine-api", "worker-0", "uid-m"))
    assert progress.instance_id == earlier.id
    assert vms.vm_service(earlier.id).get().comment == ""
