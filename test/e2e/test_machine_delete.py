"""Deleting a Machine drains its Node (honouring PodDisruptionBudgets), removes the VM but keeps attached data
disks (BZ 2024328), deletes the Node and drops the finalizer (docs/compatibility.md#machine-phases)."""

from __future__ import annotations

import json
import time

import ovirtsdk4.types as types
import yaml

from machines import unique_name

GIB = 1024 ** 3


def _attach_data_disk(sim, vm_id: str, name: str) -> str:
    conn = sim.connection()
    try:
        system = conn.system_service()
        sd = next(s for s in system.storage_domains_service().list() if s.type == types.StorageDomainType.DATA)
        disk = system.disks_service().add(types.Disk(
            name=name, provisioned_size=GIB, format=types.DiskFormat.COW, sparse=True,
            storage_domains=[types.StorageDomain(id=sd.id)]))
        disk_svc = system.disks_service().disk_service(disk.id)
        deadline = time.monotonic() + 30
        while disk_svc.get().status != types.DiskStatus.OK:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        system.vms_service().vm_service(vm_id).disk_attachments_service().add(types.DiskAttachment(
            disk=types.Disk(id=disk.id), interface=types.DiskInterface.VIRTIO_SCSI, bootable=False, active=True))
        return disk.id
    finally:
        conn.close()


def _disk_exists(sim, disk_id: str) -> bool:
    conn = sim.connection()
    try:
        return any(d.id == disk_id for d in conn.system_service().disks_service().list())
    finally:
        conn.close()


def test_delete_removes_vm_and_node_and_keeps_attached_data_disk(menv):
    menv.controller()
    name = menv.create_machine(unique_name())
    m = menv.wait_phase(name, "Running", timeout=90)
    vm_id = m["metadata"]["annotations"]["VmId"]
    disk_id = _attach_data_disk(menv.sim, vm_id, f"pv-{name}")

    menv.cluster.kubectl("-n", menv.namespace, "delete", "machine", name, "--wait=false")
    menv.wait_gone(name, timeout=90)
    assert menv.vms_named(name) == []
    assert _disk_exists(menv.sim, disk_id), "the data disk was deleted with the VM"
    assert menv.cluster.kubectl("get", "node", name, check=False).returncode != 0


def test_drain_waits_for_pod_disruption_budget_then_evicts(menv):
    menv.controller()
    name = menv.create_machine(unique_name())
    menv.wait_phase(name, "Running", timeout=90)
    ns = menv.namespace
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "guarded", "namespace": ns, "labels": {"app": "guarded"}},
           "spec": {"nodeName": name, "containers": [{"name": "c", "image": "registry.invalid/pause:1"}]}}
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "guard", "namespace": ns},
           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}}
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([pod, pdb]))
    # No kubelet runs here: report the pod Running and Ready as the node's kubelet would. (A Pending pod may be
    # evicted whatever its budget says, so the budget only guards a running one.)
    running = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    menv.cluster.kubectl("-n", ns, "patch", "pod", "guarded", "--subresource=status", "--type=merge",
                         "-p", json.dumps(running))
    menv.cluster.kubectl("-n", ns, "wait", "pdb/guard", "--timeout=60s",
                         "--for=jsonpath={.status.currentHealthy}=1")

    menv.cluster.kubectl("-n", ns, "delete", "machine", name, "--wait=false")

    def blocked(m):
        return any(c["type"] == "Drained" and c["status"] == "False" and "PodDisruptionBudget" in c["message"]
                   for c in m["status"].get("conditions", []))
    m = menv.wait_machine(name, blocked, "blocked by the PDB", timeout=60)
    assert m["status"]["phase"] == "Deleting"
    node = json.loads(menv.cluster.kubectl("get", "node", name, "-o", "json").stdout)
    assert node["spec"].get("unschedulable") is True  # cordoned
    assert len(menv.vms_named(name)) == 1  # nothing removed while the budget forbids it

    menv.cluster.kubectl("-n", ns, "delete", "pdb", "guard")
    # The eviction now goes through; with no kubelet here, the test confirms the pod's termination as one would.
    deadline = time.monotonic() + 60
    while True:
        got = json.loads(menv.cluster.kubectl("-n", ns, "get", "pod", "guarded", "-o", "json", check=False).stdout
                         or "{}")
        if got.get("metadata", {}).get("deletionTimestamp"):
            menv.cluster.kubectl("-n", ns, "delete", "pod", "guarded", "--force", "--grace-period=0")
            break
        assert time.monotonic() < deadline, "the pod was never evicted"
        time.sleep(0.3)
    menv.wait_gone(name, timeout=90)
    assert menv.vms_named(name) == []
