"""Every fault path a controller must handle, as the unmodified SDK surfaces it
(docs/compatibility.md#engine-faults-and-retries)."""

from __future__ import annotations

import time

import ovirtsdk4 as sdk
import pytest
from ovirtsdk4 import types

from .helpers import create_down_vm, create_vm, default_cluster, rhcos_template, start_up_vm, vm_service


def _error(call) -> sdk.Error:
    with pytest.raises(sdk.Error) as info:
        call()
    return info.value


def test_unknown_vm_is_404_without_fault(conn):
    err = _error(lambda: vm_service(conn, "2f1c7c1e-0000-4000-8000-000000000000").get())
    assert isinstance(err, sdk.NotFoundError) and err.code == 404 and err.fault is None


def test_action_on_unknown_vm_is_backend_400(conn):
    err = _error(lambda: vm_service(conn, "2f1c7c1e-0000-4000-8000-000000000000").start())
    assert err.code == 400 and err.fault.detail == "[Cannot run VM. VM is not found.]"


def test_missing_name_is_incomplete_parameters(conn):
    cluster, template = default_cluster(conn), rhcos_template(conn)
    err = _error(lambda: conn.system_service().vms_service().add(
        types.Vm(cluster=types.Cluster(id=cluster.id), template=types.Template(id=template.id))))
    assert err.code == 400
    assert (err.fault.reason, err.fault.detail) == ("Incomplete parameters", "Vm [name] required for add")


def test_unknown_cluster_in_body_is_entity_not_found(conn):
    template = rhcos_template(conn)
    err = _error(lambda: conn.system_service().vms_service().add(
        types.Vm(name="x", cluster=types.Cluster(name="nope"), template=types.Template(id=template.id))))
    assert err.code == 404 and err.fault.detail == "Entity not found: Cluster: name=nope"


def test_duplicate_name_is_409(conn):
    create_vm(conn, "dup")
    err = _error(lambda: create_vm(conn, "dup"))
    assert err.code == 409
    assert err.fault.detail == ("[Cannot add VM. The VM name is already in use, please choose a unique name and "
                                "try again.]")


def test_invalid_name_and_memory_are_400(conn):
    err = _error(lambda: create_vm(conn, "bad name!"))
    assert err.code == 400 and "special characters" in err.fault.detail
    err = _error(lambda: create_vm(conn, "memtest", memory_policy=types.MemoryPolicy(guaranteed=64 * 2**30)))
    assert err.code == 400
    assert err.fault.detail == "[Cannot add VM. Physical Memory Guaranteed cannot exceed Memory Size.]"


def test_hugepages_must_be_numeric(conn):
    err = _error(lambda: create_vm(conn, "hp", custom_properties=[types.CustomProperty(name="hugepages",
                                                                                      value="1G")]))
    assert err.code == 400 and "hugepages" in err.fault.detail


def test_shrinking_a_disk_is_400_and_locked_disk_is_409(conn):
    vm = create_down_vm(conn, "grow")
    disk_id = vm_service(conn, vm.id).disk_attachments_service().list()[0].id
    disk_svc = conn.system_service().disks_service().disk_service(disk_id)
    size = disk_svc.get().provisioned_size
    err = _error(lambda: disk_svc.update(types.Disk(provisioned_size=size - 2**30)))
    assert err.code == 400
    assert err.fault.detail == ("[Cannot extend Virtual Disk. New disk size must be larger than the current disk "
                                "size.]")
    assert disk_svc.update(types.Disk(provisioned_size=size + 2**30)).status == types.DiskStatus.LOCKED
    err = _error(lambda: vm_service(conn, vm.id).start())
    assert err.code == 409 and "The following disks are locked" in err.fault.detail


def test_state_conflicts_use_the_engine_messages(conn):
    vm = start_up_vm(conn, "busy")
    svc = vm_service(conn, vm.id)
    err = _error(svc.start)
    assert (err.code, err.fault.detail) == (409, "[Cannot run VM because the VM is in Up status.]")
    err = _error(svc.remove)
    assert (err.code, err.fault.detail) == (409, "[Cannot remove VM. VM is running.]")
    svc.stop()
    err = _error(svc.reboot)  # powering_down
    assert err.code == 409 and "Powering Down" in err.fault.detail
    from .helpers import wait_status

    wait_status(conn, vm.id, types.VmStatus.DOWN)
    err = _error(svc.stop)
    assert (err.code, err.fault.detail) == (409, "[Cannot stop VM. VM is not running.]")
    err = _error(svc.shutdown)
    assert (err.code, err.fault.detail) == (409, "[Cannot shutdown VM. VM is not running.]")
    err = _error(lambda: svc.start(use_cloud_init=True, use_ignition=True))
    assert err.code == 409
    assert err.fault.detail == "[Cannot use multiple initialization tags simultaneously when running VM.]"


def test_token_expiry_mid_run_is_transparent_to_the_sdk(sim, conn):
    vms = conn.system_service().vms_service()
    vms.list()
    assert sim.control.expire_tokens() >= 1
    vms.list()  # 401 -> the SDK logs in again and replays once
    counts = sim.control.counts()
    assert counts["POST /sso/oauth/token"] == 2
    assert counts["GET /vms"] == 3  # first call, the 401, the replay


def test_wrong_password_is_auth_error(sim):
    bad = sim.connection(password="wrong")
    with pytest.raises(sdk.AuthError) as info:
        bad.system_service().get()
    assert "access_denied" in str(info.value)


def test_dropped_connection_then_recovery(sim, conn):
    vms = conn.system_service().vms_service()
    sim.control.drop_connection("/vms", method="GET", count=1)
    # The SDK reports a reply-less connection as a plain Error from curl, with no HTTP code and no fault.
    err = _error(vms.list)
    assert err.code is None and err.fault is None and "Failed to read response" in str(err)
    assert vms.list() is not None  # the rule fired once; the next call goes through


def test_injected_fault_is_engine_shaped_and_counted(sim, conn):
    vm = create_down_vm(conn, "inj")
    sim.control.inject_fault("/vms/*/start", method="POST", status=409,
                             detail="[Cannot run VM. Related operation is currently in progress.]", count=2)
    svc = vm_service(conn, vm.id)
    for _ in range(2):
        err = _error(svc.start)
        assert err.code == 409 and err.fault.detail == "[Cannot run VM. Related operation is currently in progress.]"
    svc.start()
    assert sim.control.counts()["POST /vms/{vm}/start"] == 3
    assert sim.control.faults()[0]["fired"] == 2


def test_injected_empty_404_and_delay(sim, conn):
    sim.control.inject_fault("/clusters", status=404, reason=None, detail=None)
    with pytest.raises(sdk.NotFoundError):
        conn.system_service().clusters_service().list()
    sim.control.delay("/clusters", 0.5)
    t0 = time.monotonic()
    assert conn.system_service().clusters_service().list()[0].name == "Default"
    assert time.monotonic() - t0 >= 0.5


def test_sso_endpoint_fault(sim):
    sim.control.inject_fault("/ovirt-engine/sso/oauth/token", status=500, count=1)
    fresh = sim.connection()
    with pytest.raises(sdk.Error):
        fresh.authenticate()
    fresh.authenticate()  # the next login works
    fresh.close()


def test_over_long_vm_name_is_refused_and_nothing_created(conn):
    """`MaxVmNameLength` is 64 (docs/compatibility.md#engine-limits); 64 characters are fine, 65 are not."""
    vms = conn.system_service().vms_service()
    err = _error(lambda: create_vm(conn, "w" * 65))
    assert (err.code, err.fault.reason, err.fault.detail) == (400, "Operation Failed",
                                                              "[Cannot add VM. The given name is too long.]")
    assert vms.list(search="name=w*") == []
    vm = create_down_vm(conn, "w" * 64)
    err = _error(lambda: vm_service(conn, vm.id).update(types.Vm(name="v" * 65)))
    assert (err.code, err.fault.detail) == (400, "[Cannot edit VM. The given name is too long.]")
    assert vm_service(conn, vm.id).get().name == "w" * 64


def test_memory_beyond_the_cluster_level_limit_is_refused(conn):
    """Cluster level 4.7 allows 16 TiB of maximum memory; without a maximum the engine asks for 4x the memory."""
    tib = 2**40
    err = _error(lambda: create_vm(conn, "huge", memory_gib=5 * 1024))  # maximum defaults to 20 TiB
    assert (err.code, err.fault.detail) == (
        400, "[Cannot add VM. Maximum memory (20971520MB) cannot exceed platform limit (16777216MB).]")
    err = _error(lambda: create_vm(conn, "huge", memory_gib=2, memory_policy=types.MemoryPolicy(max=32 * tib)))
    assert (err.code, err.fault.detail) == (
        400, "[Cannot add VM. Maximum memory (33554432MB) cannot exceed platform limit (16777216MB).]")
    err = _error(lambda: create_vm(conn, "huge", memory_gib=8, memory_policy=types.MemoryPolicy(max=4 * 2**30)))
    assert (err.code, err.fault.detail) == (
        409, "[Cannot add VM. Memory size (8192MB) cannot exceed maximum memory size (4096MB).]")
    assert conn.system_service().vms_service().list(search="name=huge") == []
    vm = create_down_vm(conn, "huge", memory_gib=4)
    err = _error(lambda: vm_service(conn, vm.id).update(types.Vm(memory_policy=types.MemoryPolicy(max=17 * tib))))
    assert err.code == 400 and "cannot exceed platform limit (16777216MB)" in err.fault.detail


def test_memory_far_beyond_every_host_is_refused_at_start(conn):
    """Within the platform limit the engine creates the VM; the scheduler's memory filter refuses to run it."""
    vm = create_down_vm(conn, "toobig", memory_gib=1024)  # 1 TiB; the seeded hosts have 128 GiB each
    err = _error(vm_service(conn, vm.id).start)
    assert err.code == 409
    lines = err.fault.detail.strip("[]").split(", ")
    assert lines[0] == ("Cannot run VM. There is no host that satisfies current scheduling constraints. "
                        "See below for details:")
    assert sorted(line.split()[2] for line in lines[1:]) == ["host1", "host2", "host3"]
    assert all("did not satisfy internal filter Memory because its available memory is too low" in line
               for line in lines[1:])
    assert vm_service(conn, vm.id).get().status == types.VmStatus.DOWN


def test_shrinking_a_disk_through_its_attachment_is_refused(conn):
    """The other resize path (`PUT /vms/{vm}/diskattachments/{disk}`) refuses a smaller size the same way."""
    vm = create_down_vm(conn, "shrink")
    attachments = vm_service(conn, vm.id).disk_attachments_service()
    attachment = attachments.list()[0]
    size = conn.system_service().disks_service().disk_service(attachment.id).get().provisioned_size
    err = _error(lambda: attachments.attachment_service(attachment.id).update(
        types.DiskAttachment(disk=types.Disk(provisioned_size=size // 2))))
    assert (err.code, err.fault.reason, err.fault.detail) == (
        400, "Operation Failed",
        "[Cannot extend Virtual Disk. New disk size must be larger than the current disk size.]")
    disk = conn.system_service().disks_service().disk_service(attachment.id).get()
    assert (disk.provisioned_size, disk.status) == (size, types.DiskStatus.OK)
