"""Deleting a Cluster API Cluster, through Cluster API's own core controllers (v1.14.2) and this project's
OvirtCluster and OvirtMachine controllers, removes every VM its Machines were given, and nothing else: another
Cluster's VMs on the same engine and a VM created in the engine directly stay (issue 40 item 3)."""

from __future__ import annotations

import uuid

from ovirtsdk4 import types


def _vm_outside_cluster_api(sim, prefix: str) -> str:
    """A VM someone made in the engine by hand, named like a Cluster's VMs are (`<cluster>-...`)."""
    conn = sim.connection()
    try:
        vm = conn.system_service().vms_service().add(types.Vm(
            name=f"{prefix}-{uuid.uuid4().hex[:5]}", cluster=types.Cluster(id=sim.installation.cluster_id),
            template=types.Template(name="Blank")))
        return vm.id
    finally:
        conn.close()


def test_deleting_a_cluster_removes_its_vms_and_leaves_another_clusters_and_a_manual_vm(capi):
    capi.controller()
    doomed = capi.create_cluster(replicas=2)
    kept = capi.create_cluster(replicas=1)
    doomed.wait_running(2)
    kept.wait_running(1)
    doomed_vms = {vm["id"] for vm in doomed.vms()}
    manual = _vm_outside_cluster_api(capi.sim, doomed.name)  # its name alone makes it no VM of the Cluster's
    kept_vms = {vm["id"] for vm in kept.vms()}

    doomed.delete()
    doomed.wait_deleted()

    left = {vm["id"] for vm in capi.sim.control.vms()}
    assert not doomed_vms & left, (f"VMs of the deleted Cluster still in the engine: "
                                   f"{[capi.sim.control.vm(i) for i in doomed_vms & left]}\n{capi.logs()}")
    assert kept_vms <= left and manual in left, f"removed: {(kept_vms | {manual}) - left}\n{capi.logs()}"
    assert doomed.machines() == [] and doomed.ovirt_machines() == {}
    # The other Cluster is untouched: still its one Running Machine on the same VM.
    kept.wait_running(1, timeout=5.0)
    assert {vm["id"] for vm in kept.vms()} == kept_vms
