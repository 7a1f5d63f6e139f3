"""Engine behaviour beyond single calls: scheduling, affinity, storage space, search, follow, NICs, tags."""

from __future__ import annotations

import ovirtsdk4 as sdk
import pytest
from ovirtsdk4 import types

from .helpers import create_down_vm, create_vm, default_cluster, start_up_vm, vm_service, wait_for, wait_status


def _groups(conn):
    return conn.system_service().clusters_service().cluster_service(default_cluster(conn).id) \
        .affinity_groups_service()


def test_enforcing_negative_affinity_spreads_vms_and_refuses_a_fourth(conn):
    groups = _groups(conn)
    group = groups.add(types.AffinityGroup(name="masters", vms_rule=types.AffinityRule(
        enabled=True, enforcing=True, positive=False)))
    members = groups.group_service(group.id).vms_service()
    hosts = set()
    for i in range(3):
        vm = create_down_vm(conn, f"master-{i}", memory_gib=2)
        members.add(types.Vm(id=vm.id))
        vm_service(conn, vm.id).start()
        hosts.add(wait_status(conn, vm.id, types.VmStatus.UP).host.id)
    assert len(hosts) == 3  # three hosts seeded, one member on each

    fourth = create_down_vm(conn, "master-3", memory_gib=2)
    members.add(types.Vm(id=fourth.id))
    with pytest.raises(sdk.Error) as info:
        vm_service(conn, fourth.id).start()
    assert info.value.code == 409
    detail = info.value.fault.detail
    assert detail.startswith("[Cannot run VM. There is no host that satisfies current scheduling constraints.")
    assert "matched negative affinity rules masters" in detail
    with pytest.raises(sdk.Error) as info:  # re-adding a member is the engine's 400
        members.add(types.Vm(id=fourth.id))
    assert info.value.code == 400 and "Duplicate" in info.value.fault.detail
    with pytest.raises(sdk.Error) as info:
        groups.add(types.AffinityGroup(name="masters"))
    assert info.value.code == 400 and "name already exists" in info.value.fault.detail


def test_host_memory_capacity_limits_scheduling(sim, conn):
    hosts = conn.system_service().hosts_service().list(search="cluster=Default")
    assert len(hosts) == 3 and all(h.memory == 128 * 2**30 for h in hosts)
    for i in range(3):  # 100 GiB guaranteed each: one per host
        start_up_vm(conn, f"big-{i}", memory_gib=100)
    vm = create_down_vm(conn, "big-3", memory_gib=100)
    with pytest.raises(sdk.Error) as info:
        vm_service(conn, vm.id).start()
    assert info.value.code == 409 and "available memory is too low" in info.value.fault.detail
    assert all(h.max_scheduling_memory == 28 * 2**30 for h in conn.system_service().hosts_service().list())


def test_full_storage_domain_refuses_new_disks(sim, conn):
    sim.control.fill_storage_domain("nfs-data", free_bytes=2**20)
    sd = conn.system_service().storage_domains_service().list(search="name=nfs-data")[0]
    assert sd.available == 2**20
    with pytest.raises(sdk.Error) as info:
        create_vm(conn, "nospace")
    assert info.value.code == 409
    assert info.value.fault.detail == "[Cannot add VM. Low disk space on Storage Domain nfs-data.]"
    with pytest.raises(sdk.Error) as info:
        conn.system_service().disks_service().add(types.Disk(
            name="d", provisioned_size=2**30, format=types.DiskFormat.RAW, sparse=False,
            storage_domains=[types.StorageDomain(id=sd.id)]))
    assert info.value.code == 409 and "Low disk space" in info.value.fault.detail


def test_raw_sparse_is_refused_on_block_storage(conn):
    sd = conn.system_service().storage_domains_service().list(search="name=iscsi-data")[0]
    with pytest.raises(sdk.Error) as info:
        conn.system_service().disks_service().add(types.Disk(
            name="d", provisioned_size=2**30, format=types.DiskFormat.RAW, sparse=True,
            storage_domains=[types.StorageDomain(id=sd.id)]))
    assert info.value.code == 400 and "RAW Sparse" in info.value.fault.detail


def test_search_language_as_clients_use_it(conn):
    vms = conn.system_service().vms_service()
    tags = conn.system_service().tags_service()
    tags.add(types.Tag(name="cluster-abc"))
    for name in ("abc-master-0", "abc-worker-0", "abc-worker-1", "other"):
        create_vm(conn, name)
    vm_service(conn, vms.list(search="name=abc-worker-1")[0].id).tags_service().add(types.Tag(name="cluster-abc"))

    def names(query, **kw):
        return sorted(v.name for v in vms.list(search=query, **kw))

    assert names("name=abc-worker-0") == ["abc-worker-0"]
    assert names('name="abc-worker-0"') == ["abc-worker-0"]  # ansible quotes
    assert names("name=abc-worker*") == ["abc-worker-0", "abc-worker-1"]
    assert names("name=ABC-MASTER-0") == ["abc-master-0"]  # case-insensitive by default
    assert names("name=ABC-MASTER-0", case_sensitive=True) == []
    assert names("name=abc-* and cluster=Default") == ["abc-master-0", "abc-worker-0", "abc-worker-1"]
    assert names("name=abc-* and cluster=Nope") == []
    assert names("tag=cluster-abc") == ["abc-worker-1"]
    assert names("status=image_locked or status=down") == ["abc-master-0", "abc-worker-0", "abc-worker-1", "other"]
    assert len(vms.list(search="name=abc-*", max=2)) == 2
    assert [v.name for v in vms.list(search="name=abc-* sortby name desc")][0] == "abc-worker-1"
    with pytest.raises(sdk.Error) as info:
        vms.list(search="flavour=vanilla")
    assert info.value.code == 400


def test_follow_inlines_and_links_resolve(conn):
    vm = create_down_vm(conn, "followed")
    full = vm_service(conn, vm.id).get(follow="disk_attachments.disk,nics")
    assert full.disk_attachments[0].disk.provisioned_size == 16 * 2**30
    assert full.nics[0].name == "nic1"
    plain = vm_service(conn, vm.id).get()
    assert conn.follow_link(plain.nics)[0].id == full.nics[0].id
    assert conn.follow_link(plain.graphics_consoles)[0].protocol == types.GraphicsType.VNC
    listed = conn.system_service().vms_service().list(search="name=followed", follow="nics")
    assert listed[0].nics[0].mac.address == full.nics[0].mac.address


def test_nics_replaced_like_the_actuator_does(conn):
    vm = create_down_vm(conn, "nics")
    nics = vm_service(conn, vm.id).nics_service()
    profile = conn.system_service().vnic_profiles_service().list()[0]
    for nic in nics.list():
        nics.nic_service(nic.id).remove()
    added = [nics.add(types.Nic(name=f"nic{i}", vnic_profile=types.VnicProfile(id=profile.id))) for i in (1, 2)]
    assert [n.name for n in nics.list()] == ["nic1", "nic2"]
    assert len({n.mac.address for n in added}) == 2
    with pytest.raises(sdk.Error) as info:
        nics.add(types.Nic(name="nic1"))
    assert info.value.code == 409
    vm_service(conn, vm.id).start()
    wait_status(conn, vm.id, types.VmStatus.UP)
    devices = wait_for(lambda: vm_service(conn, vm.id).reported_devices_service().list())
    assert sorted(d.name for d in devices) == ["eth0", "eth1", "lo"]


def test_high_performance_vm_and_auto_pinning(conn):
    hosts = conn.system_service().hosts_service().list(search="cluster=Default")
    vm = create_down_vm(conn, "hp", type=types.VmType.HIGH_PERFORMANCE,
                        placement_policy=types.VmPlacementPolicy(affinity=types.VmAffinity.USER_MIGRATABLE,
                                                                 hosts=[types.Host(id=h.id) for h in hosts]))
    svc = vm_service(conn, vm.id)
    for console in svc.graphics_consoles_service().list():
        svc.graphics_consoles_service().console_service(console.id).remove()
    assert svc.graphics_consoles_service().list() == []
    svc.auto_pin_cpu_and_numa_nodes(optimize_cpu_settings=True)
    pinned = svc.get()
    assert pinned.cpu_pinning_policy == types.CpuPinningPolicy.RESIZE_AND_PIN_NUMA
    assert pinned.cpu.topology.sockets == hosts[0].cpu.topology.sockets


def test_detach_only_removal_keeps_disks_of_cloned_vm(conn):
    vm = create_down_vm(conn, "keeper", clone=True)
    disk_id = vm_service(conn, vm.id).disk_attachments_service().list()[0].id
    vm_service(conn, vm.id).remove(detach_only=True)
    assert conn.system_service().disks_service().disk_service(disk_id).get().status == types.DiskStatus.OK
    thin = create_down_vm(conn, "thin", clone=False)
    with pytest.raises(sdk.Error) as info:
        vm_service(conn, thin.id).remove(detach_only=True)
    assert info.value.code == 409


def test_a_shared_disk_outlives_the_first_vm_removed_and_a_private_one_attaches_once(conn):
    sd = conn.system_service().storage_domains_service().list(search="name=nfs-data")[0]
    disks = conn.system_service().disks_service()

    def data_disk(name: str, shareable: bool) -> types.Disk:
        disk = disks.add(types.Disk(name=name, provisioned_size=2**30, format=types.DiskFormat.RAW, sparse=False,
                                    shareable=shareable, storage_domains=[types.StorageDomain(id=sd.id)]))
        wait_for(lambda: disks.disk_service(disk.id).get().status == types.DiskStatus.OK)
        return disk

    def attach(vm: types.Vm, disk: types.Disk) -> None:
        vm_service(conn, vm.id).disk_attachments_service().add(types.DiskAttachment(
            disk=types.Disk(id=disk.id), interface=types.DiskInterface.VIRTIO_SCSI, bootable=False, active=True))

    a, b = create_down_vm(conn, "share-a"), create_down_vm(conn, "share-b")
    shared, private = data_disk("shared", shareable=True), data_disk("private", shareable=False)
    attach(a, shared)
    attach(b, shared)
    attach(a, private)
    with pytest.raises(sdk.Error) as info:
        attach(b, private)
    assert info.value.code == 409

    vm_service(conn, a.id).remove()
    # Still attached to b: the shared disk stays as it was; the private one goes with a.
    assert disks.disk_service(shared.id).get().status == types.DiskStatus.OK
    assert [da.id for da in vm_service(conn, b.id).disk_attachments_service().list()].count(shared.id) == 1
    assert disks.disk_service(private.id).get().status == types.DiskStatus.LOCKED
    vm_service(conn, b.id).remove()
    assert disks.disk_service(shared.id).get().status == types.DiskStatus.LOCKED  # its last VM took it along


def test_update_vm_and_rename_conflict(conn):
    a = create_down_vm(conn, "upd-a")
    create_vm(conn, "upd-b")
    svc = vm_service(conn, a.id)
    updated = svc.update(types.Vm(memory=6 * 2**30, description="resized"))
    assert (updated.memory, updated.description) == (6 * 2**30, "resized")
    with pytest.raises(sdk.Error) as info:
        svc.update(types.Vm(name="upd-b"))
    assert info.value.code == 409


def test_crash_and_pause_from_the_control_api(sim, conn):
    vm = start_up_vm(conn, "victim")
    sim.control.crash_vm(vm.id)
    crashed = vm_service(conn, vm.id).get()
    assert crashed.status == types.VmStatus.DOWN and crashed.stop_reason == "crashed"
    assert vm_service(conn, vm.id).reported_devices_service().list() == []
    vm_service(conn, vm.id).start()
    wait_status(conn, vm.id, types.VmStatus.UP)
    sim.control.pause_vm(vm.id)
    assert vm_service(conn, vm.id).get().status == types.VmStatus.PAUSED
    vm_service(conn, vm.id).start()  # resumes
    assert vm_service(conn, vm.id).get().status == types.VmStatus.UP


def test_lost_host_leaves_vms_unknown_until_it_answers_again(sim, conn):
    vm = start_up_vm(conn, "stranded")
    svc = vm_service(conn, vm.id)
    wait_for(lambda: svc.reported_devices_service().list())
    host = conn.follow_link(svc.get().host)
    sim.control.set_host_status(host.name, "non_responsive")
    assert svc.get().status == types.VmStatus.UNKNOWN
    assert svc.reported_devices_service().list() == []
    with pytest.raises(sdk.Error) as info:
        svc.stop()
    assert info.value.code == 409
    sim.control.set_host_status(host.name, "up")
    assert svc.get().status == types.VmStatus.UP
    assert svc.reported_devices_service().list()
    sim.control.set_host_status(host.name, "down")  # rebooted or fenced: its VMs died with it
    assert svc.get().status == types.VmStatus.DOWN
