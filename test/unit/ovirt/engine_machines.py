"""Machines with their VM already in the simulated engine, for the actuator's tests."""

from __future__ import annotations

import time

import ovirtsdk4.types as types

from api import keys
from api.machine import Machine
from hack import ovirt_install


def machine_with_a_down_vm(conn, name: str, annotated: bool = True):
    """The Machine `name` and its VM, created in the engine beside it and down (its disks unlocked); and the
    engine's VMs service. `annotated`: the Machine records the VM's id in its VmId annotation; else it records
    nothing and finds its VM by its name (a VM made by an earlier process whose writes were lost)."""
    inst = ovirt_install.prepare(conn, "infra-1")
    raw = ovirt_install.machine_for(inst, "ns", name, affinity_groups_names=None)
    vms = conn.system_service().vms_service()
    vm = vms.add(types.Vm(name=name, cluster=types.Cluster(id=inst.cluster_id),
                          template=types.Template(name=inst.template_name)))
    deadline = time.monotonic() + 30
    while vms.vm_service(vm.id).get().status != types.VmStatus.DOWN:
        assert time.monotonic() < deadline, "the new VM's disks were not unlocked"
        time.sleep(0.1)
    if annotated:
        raw["metadata"].setdefault("annotations", {})[keys.ANNOTATION_VM_ID] = vm.id
    return Machine.from_dict(raw), vm, vms


def delete_as_the_queue_would(actuator, machine: Machine, progress, retried: tuple[type[Exception], ...] = (),
                              timeout_s: float = 10.0):
    """Call `actuator.delete(machine)` again when `progress` says, until the deletion is done, as the Machine
    controller's work queue would; an error of the `retried` kinds is retried a moment later, as the queue's backoff
    would. Returns the last progress."""
    deadline = time.monotonic() + timeout_s
    while not progress.done:
        assert time.monotonic() < deadline, progress
        time.sleep(progress.requeue_after)
        try:
            progress = actuator.delete(machine)
        except retried:
            progress = type(progress)(done=False, requeue_after=0.1)
    return progress
