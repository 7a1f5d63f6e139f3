"""The delete path is fence-safe: a Machine whose VM oVirt cannot vouch for (its host stopped answering, the VM
`unknown`, the Node unreachable) is not removed, and its data disks stay attached, until the engine reports the VM
down; then the disks are detached (they may hold PersistentVolumes) and the VM removed
(docs/fencing.md#why-the-deletion-path-is-fence-safe-too)."""

from __future__ import annotations

import time

from machines import unique_name
from test_machine_delete import _attach_data_disk, _disk_exists


def _vm(menv, name: str) -> dict | None:
    vms = menv.vms_named(name)
    return vms[0] if vms else None


def test_delete_waits_for_a_confirmed_stop_while_the_vm_is_unknown(menv):
    control = menv.sim.control
    menv.controller()
    name = menv.create_machine(unique_name("unreach"))
    m = menv.wait_phase(name, "Running", timeout=90)
    vm_id = m["metadata"]["annotations"]["VmId"]
    disk_id = _attach_data_disk(menv.sim, vm_id, f"pv-{name}")
    host = control.vm(vm_id)["host"]

    control.set_host_status(host, "non_responsive")
    try:
        menv.wait_machine(name, lambda _m: (_vm(menv, name) or {}).get("status") == "unknown", "VM unknown", 30)
        menv.cluster.kubectl("-n", menv.namespace, "delete", "machine", name, "--wait=false")
        menv.wait_machine(name, lambda m: (m.get("status") or {}).get("phase") == "Deleting", "Deleting", 30)
        # For as long as the engine cannot say the VM is off, nothing is removed or detached.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            vm = control.vm(vm_id)
            assert vm["status"] == "unknown"
            assert disk_id in vm["disk_attachments"], "the data disk was detached from a VM that may still run"
            assert menv.machine(name) is not None
            time.sleep(0.5)
    finally:
        control.set_host_status(host, "up")

    menv.wait_gone(name, timeout=90)
    assert menv.vms_named(name) == []
    assert _disk_exists(menv.sim, disk_id), "the data disk was deleted with the VM"
