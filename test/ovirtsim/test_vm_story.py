"""The whole VM story of a Machine, driven only through the unmodified `ovirtsdk4` over HTTPS (CA-file check)."""

from __future__ import annotations

import ipaddress

import ovirtsdk4 as sdk
from ovirtsdk4 import types

from .helpers import IGNITION, default_cluster, rhcos_template, vm_service, wait_for, wait_status


def test_machine_lifecycle_from_template_to_removal(sim, conn):
    system = conn.system_service()
    assert conn.test(raise_exception=True)
    api = system.get()
    assert api.product_info.name == "oVirt Engine"
    assert (api.product_info.version.major, api.product_info.version.minor) == (4, 5)

    # Find the template and cluster, and the template's disk (for per-disk format/sparse/storage domain).
    template = rhcos_template(conn)
    cluster = default_cluster(conn)
    template_das = conn.follow_link(template.disk_attachments)
    assert len(template_das) == 1 and template_das[0].bootable
    sd = system.storage_domains_service().list(search="name=nfs-data")[0]
    free_before = sd.available

    # Create from the template with Ignition user data, cloned, hugepages: 202 and image_locked at first.
    vms = system.vms_service()
    vm = vms.add(types.Vm(
        name="worker-0", cluster=types.Cluster(id=cluster.id), template=types.Template(id=template.id),
        memory=8 * 2**30, memory_policy=types.MemoryPolicy(guaranteed=4 * 2**30),
        cpu=types.Cpu(topology=types.CpuTopology(cores=4, sockets=1, threads=1)), type=types.VmType.SERVER,
        initialization=types.Initialization(custom_script=IGNITION, host_name="worker-0"),
        custom_properties=[types.CustomProperty(name="hugepages", value="1048576")],
        placement_policy=types.VmPlacementPolicy(affinity=types.VmAffinity.MIGRATABLE),
        disk_attachments=[types.DiskAttachment(disk=types.Disk(
            id=template_das[0].id, format=types.DiskFormat.RAW, sparse=False,
            storage_domains=[types.StorageDomain(id=sd.id)]))]), clone=True)
    assert vm.status == types.VmStatus.IMAGE_LOCKED
    assert vm.initialization.custom_script == IGNITION
    svc = vm_service(conn, vm.id)

    # The engine refuses to start a locked VM (409, engine message), then the VM goes down.
    try:
        svc.start()
        raise AssertionError("start of an image_locked VM must fail")
    except sdk.Error as err:
        assert err.code == 409
        assert err.fault.detail == "[Cannot run VM: VM is locked. Please try again in a few minutes.]"
    vm = wait_status(conn, vm.id, types.VmStatus.DOWN)
    assert vm.memory == 8 * 2**30 and vm.memory_policy.guaranteed == 4 * 2**30
    assert vm.custom_properties[0].name == "hugepages" and vm.custom_properties[0].value == "1048576"
    assert vm.template.id == template.id and vm.cluster.id == cluster.id

    # The VM's disk is a raw preallocated copy on the requested domain, which lost that much space.
    attachments = conn.follow_link(vm.disk_attachments)
    disk = conn.follow_link(attachments[0].disk)
    assert (disk.format, disk.sparse, disk.status) == (types.DiskFormat.RAW, False, types.DiskStatus.OK)
    assert disk.storage_domains[0].id == sd.id and disk.id != template_das[0].id
    assert system.storage_domains_service().storage_domain_service(sd.id).get().available == \
        free_before - disk.provisioned_size

    # Affinity group membership, as the actuator does it before start.
    groups = system.clusters_service().cluster_service(cluster.id).affinity_groups_service()
    group = groups.add(types.AffinityGroup(name="workers", vms_rule=types.AffinityRule(
        enabled=True, enforcing=True, positive=False)))
    groups.group_service(group.id).vms_service().add(types.Vm(id=vm.id))
    assert [v.name for v in groups.group_service(group.id).vms_service().list()] == ["worker-0"]

    # Start; up; the guest agent reports eth0 (unique IPv4 + IPv6 link-local) and lo.
    svc.start()
    assert svc.get().status in (types.VmStatus.WAIT_FOR_LAUNCH, types.VmStatus.POWERING_UP, types.VmStatus.UP)
    vm = wait_status(conn, vm.id, types.VmStatus.UP)
    assert vm.host is not None
    devices = wait_for(lambda: svc.reported_devices_service().list())
    by_name = {d.name: d for d in devices}
    assert set(by_name) == {"eth0", "lo"}
    versions = {ip.version: ip.address for ip in by_name["eth0"].ips}
    assert ipaddress.ip_address(versions[types.IpVersion.V4]).is_private
    assert ipaddress.ip_address(versions[types.IpVersion.V6]).is_link_local
    nic = svc.nics_service().list()[0]
    assert by_name["eth0"].mac.address == nic.mac.address

    # Attach a new floating disk while up, see it in the guest by serial, then detach it (disk kept).
    disks = system.disks_service()
    data = disks.add(types.Disk(name="data-0", provisioned_size=2**30, format=types.DiskFormat.COW,
                                storage_domains=[types.StorageDomain(id=sd.id)]))
    wait_for(lambda: disks.disk_service(data.id).get().status == types.DiskStatus.OK)
    das = svc.disk_attachments_service()
    da = das.add(types.DiskAttachment(disk=types.Disk(id=data.id), interface=types.DiskInterface.VIRTIO,
                                      bootable=False, active=True))
    assert da.id == data.id
    guest_disks = sim.control.vm(vm.id)["block_devices"]
    assert {"serial": data.id[:20], "by_id": [f"/dev/disk/by-id/virtio-{data.id[:20]}"]}.items() <= \
        next(d for d in guest_disks if d["disk_id"] == data.id).items()
    das.attachment_service(data.id).remove()
    assert [a.id for a in das.list()] == [disk.id]
    assert disks.disk_service(data.id).get().status == types.DiskStatus.OK  # detach_only defaults to true

    # Stop, wait down, remove: the VM is gone (404) and its disk is deleted after a short lock.
    svc.stop(force=True)
    wait_status(conn, vm.id, types.VmStatus.DOWN)
    svc.remove()
    try:
        svc.get()
        raise AssertionError("a removed VM must be gone")
    except sdk.NotFoundError as err:
        assert err.code == 404
    wait_for(lambda: not disks.list(search=f"id={disk.id}"))
    assert groups.group_service(group.id).vms_service().list() == []


def test_jobs_are_found_by_correlation_id(conn):
    template = rhcos_template(conn)
    cluster = default_cluster(conn)
    vms = conn.system_service().vms_service()
    vm = vms.add(types.Vm(name="jobbed", cluster=types.Cluster(id=cluster.id),
                          template=types.Template(id=template.id)), query={"correlation_id": "create-jobbed-1"})
    jobs = conn.system_service().jobs_service()
    found = jobs.list(search="correlation_id=create-jobbed-1")
    assert len(found) == 1 and found[0].status == types.JobStatus.STARTED
    wait_status(conn, vm.id, types.VmStatus.DOWN)
    wait_for(lambda: jobs.list(search="correlation_id=create-jobbed-1")[0].status == types.JobStatus.FINISHED)


def test_openshift_actuator_call_sequence(conn):
    """The calls of the OpenShift oVirt actuator's Create, in its order (docs/compatibility.md#listing-and-search), then
    its Delete."""
    system = conn.system_service()
    vms = system.vms_service()
    system.tags_service().add(types.Tag(name="infra-x7k2p"))
    cluster = default_cluster(conn)
    groups = system.clusters_service().cluster_service(cluster.id).affinity_groups_service()
    groups.add(types.AffinityGroup(name="infra-x7k2p-compute", vms_rule=types.AffinityRule(
        enabled=True, positive=False, enforcing=False)))

    assert [v for v in vms.list(search="name=infra-x7k2p-worker-a") if v.name == "infra-x7k2p-worker-a"] == []
    template = [t for t in system.templates_service().list(search="name=rhcos") if t.name == "rhcos"][0]
    hosts = [h for h in system.hosts_service().list() if h.cluster.id == cluster.id]
    vm = vms.add(types.Vm(
        name="infra-x7k2p-worker-a", cluster=types.Cluster(id=cluster.id), template=types.Template(id=template.id),
        type=types.VmType.HIGH_PERFORMANCE, memory=16 * 2**30,
        cpu=types.Cpu(mode=types.CpuMode.HOST_PASSTHROUGH),  # the actuator's bug: topology lost (4.3)
        memory_policy=types.MemoryPolicy(ballooning=False), soundcard_enabled=False,
        console=types.Console(enabled=True),
        placement_policy=types.VmPlacementPolicy(affinity=types.VmAffinity.USER_MIGRATABLE,
                                                 hosts=[types.Host(id=h.id) for h in hosts]),
        custom_properties=[types.CustomProperty(name="hugepages", value="2048")],
        initialization=types.Initialization(custom_script=IGNITION, host_name="infra-x7k2p-worker-a")),
        clone=True)
    svc = vms.vm_service(vm.id)
    wait_status(conn, vm.id, types.VmStatus.DOWN)
    for console in svc.graphics_consoles_service().list():
        svc.graphics_consoles_service().console_service(console.id).remove()

    boot = next(a for a in svc.disk_attachments_service().list() if a.bootable)
    disk_svc = system.disks_service().disk_service(boot.disk.id)
    disk_svc.update(types.Disk(provisioned_size=120 * 2**30), query={"correlation_id": "extend-worker-a"})
    jobs = system.jobs_service()
    wait_for(lambda: all(j.status == types.JobStatus.FINISHED
                         for j in jobs.list(search="correlation_id=extend-worker-a")))
    wait_for(lambda: disk_svc.get().status == types.DiskStatus.OK)
    assert disk_svc.get().provisioned_size == 120 * 2**30

    nics = svc.nics_service()
    for nic in nics.list():
        nics.nic_service(nic.id).remove()
    profile = system.vnic_profiles_service().list()[0]
    nics.add(types.Nic(name="nic1", vnic_profile=types.VnicProfile(id=profile.id)))
    svc.auto_pin_cpu_and_numa_nodes(optimize_cpu_settings=True)
    svc.tags_service().add(types.Tag(name="infra-x7k2p"))
    group = [g for g in groups.list() if g.name == "infra-x7k2p-compute"][0]
    groups.group_service(group.id).vms_service().add(types.Vm(id=vm.id))
    svc.start()
    wait_status(conn, vm.id, types.VmStatus.UP)
    devices = wait_for(lambda: svc.reported_devices_service().list())
    assert any(d.name.startswith("eth") for d in devices)
    assert [v.name for v in vms.list(search="tag=infra-x7k2p")] == ["infra-x7k2p-worker-a"]

    svc.stop(force=True)
    wait_status(conn, vm.id, types.VmStatus.DOWN)
    svc.remove()
    try:
        svc.remove()  # the actuator tolerates not-found
        raise AssertionError("second remove must be a 404")
    except sdk.NotFoundError:
        pass
