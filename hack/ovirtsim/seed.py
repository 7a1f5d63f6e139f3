"""The default inventory of a fresh engine: what an oVirt installation for OpenShift has before the installer runs
its first Machine (one data center and cluster, hosts with capacity, NFS and iSCSI storage, the management network
and its vNIC profile, the Blank template, an RHCOS template and a cloud-init Kubernetes node image with one disk
each, the default instance types).

Seeded ids are stable (name-based UUIDs) so logs and test failures read the same from run to run.
"""

from __future__ import annotations

import datetime
import uuid

from ovirtsdk4 import types

from hack.controlplane.build import KUBE_VERSION
from hack.ovirtsim.store import StorageRuntime, Store, href

BLANK_ID = "00000000-0000-0000-0000-000000000000"
ROOT_TAG_ID = "00000000-0000-0000-0000-000000000000"
RHCOS_TEMPLATE_NAME = "rhcos"
# A cloud-init node image, as Cluster API users build with image-builder: its guests join by cloud-config (guest.py).
KUBE_NODE_TEMPLATE_NAME = "ubuntu-2404-kube"
# The kubelet each node image ships (what its Nodes report): RHCOS 4.16's, and the node image built for the
# Kubernetes release the local control plane runs, within Kubernetes' version skew policy of it.
KUBELET_VERSIONS = {RHCOS_TEMPLATE_NAME: "v1.29.5", KUBE_NODE_TEMPLATE_NAME: KUBE_VERSION}
CLUSTER_NAME = "Default"
GiB = 1024 ** 3
MiB = 1024 ** 2

_NS = uuid.UUID("6f0f3e54-1d0c-4a43-9b0e-0e5f1b1f0a11")


def stable_id(kind: str, name: str) -> str:
    return str(uuid.uuid5(_NS, f"{kind}/{name}"))


def _ref(cls: type, collection: str, id_: str):  # type: ignore[no-untyped-def]
    obj = cls(id=id_)
    obj.href = href(collection, id_)
    return obj


def _with_href(obj, collection: str):  # type: ignore[no-untyped-def]
    obj.href = href(collection, obj.id)
    return obj


def seed(store: Store, hosts: int = 3) -> None:
    now = datetime.datetime.now(datetime.timezone.utc)
    dc_id = stable_id("dc", "Default")
    store.data_centers.put(_with_href(types.DataCenter(
        id=dc_id, name="Default", description="The default Data Center", local=False,
        status=types.DataCenterStatus.UP, storage_format=types.StorageFormat.V5,
        version=types.Version(major=4, minor=7),
        quota_mode=types.QuotaModeType.DISABLED), "datacenters"))
    dc_ref = _ref(types.DataCenter, "datacenters", dc_id)

    cluster_id = stable_id("cluster", CLUSTER_NAME)
    store.clusters.put(_with_href(types.Cluster(
        id=cluster_id, name=CLUSTER_NAME, description="The default server cluster",
        cpu=types.Cpu(architecture=types.Architecture.X86_64, type="Secure Intel Cascadelake Server Family"),
        version=types.Version(major=4, minor=7),
        memory_policy=types.MemoryPolicy(over_commit=types.MemoryOverCommit(percent=100),
                                         transparent_huge_pages=types.TransparentHugePages(enabled=True)),
        ballooning_enabled=True, threads_as_cores=False,
        data_center=dc_ref), "clusters"))
    cluster_ref = _ref(types.Cluster, "clusters", cluster_id)

    for n in range(1, hosts + 1):
        add_host(store, f"host{n}", cluster_ref)

    for name, storage_type, capacity, used in (("nfs-data", types.StorageType.NFS, 1024 * GiB, 100 * GiB),
                                               ("iscsi-data", types.StorageType.ISCSI, 512 * GiB, 20 * GiB)):
        sd_id = stable_id("sd", name)
        store.storage_domains.put(_with_href(types.StorageDomain(
            id=sd_id, name=name, type=types.StorageDomainType.DATA, status=types.StorageDomainStatus.ACTIVE,
            external_status=types.ExternalStatus.OK, master=name == "nfs-data",
            storage=types.HostStorage(type=storage_type,
                                      address="192.168.100.5" if storage_type == types.StorageType.NFS else None,
                                      path="/exports/data" if storage_type == types.StorageType.NFS else None),
            storage_format=types.StorageFormat.V5, used=used, available=capacity - used, committed=used,
            warning_low_space_indicator=10, critical_space_action_blocker=5,
            data_centers=[_ref(types.DataCenter, "datacenters", dc_id)]), "storagedomains"))
        store.runtime.storage[sd_id] = StorageRuntime(capacity=capacity)

    net_id = stable_id("network", "ovirtmgmt")
    store.networks.put(_with_href(types.Network(
        id=net_id, name="ovirtmgmt", description="Management Network", mtu=0, stp=False,
        usages=[types.NetworkUsage.VM, types.NetworkUsage.MANAGEMENT], data_center=dc_ref), "networks"))
    profile_id = stable_id("vnicprofile", "ovirtmgmt")
    store.vnic_profiles.put(_with_href(types.VnicProfile(
        id=profile_id, name="ovirtmgmt", pass_through=types.VnicPassThrough(mode=types.VnicPassThroughMode.DISABLED),
        port_mirroring=False, network=_ref(types.Network, "networks", net_id)), "vnicprofiles"))

    store.tags.put(_with_href(types.Tag(id=ROOT_TAG_ID, name="root", description="root"), "tags"))

    store.templates.put(_with_href(types.Template(
        id=BLANK_ID, name="Blank", description="Blank template", status=types.TemplateStatus.OK,
        memory=1 * GiB, memory_policy=types.MemoryPolicy(guaranteed=1 * GiB, max=4 * GiB, ballooning=True),
        cpu=types.Cpu(architecture=types.Architecture.X86_64,
                      topology=types.CpuTopology(sockets=1, cores=1, threads=1)),
        os=types.OperatingSystem(type="other", boot=types.Boot(devices=[types.BootDevice.HD])),
        type=types.VmType.SERVER, stateless=False, delete_protected=False, creation_time=now,
        high_availability=types.HighAvailability(enabled=False, priority=0),
        version=types.TemplateVersion(version_number=1)), "templates"))

    _node_template(store, RHCOS_TEMPLATE_NAME, "Red Hat Enterprise Linux CoreOS", "rhcos_x64", "RHCOS image",
                   "766e63", cluster_ref, profile_id, now)
    _node_template(store, KUBE_NODE_TEMPLATE_NAME, "Ubuntu 24.04 with kubeadm and kubelet (cloud-init)", "other_linux",
                   "Kubernetes node image", "766e64", cluster_ref, profile_id, now)

    for name, memory, cores in (("Tiny", 512 * MiB, 1), ("Small", 2 * GiB, 1), ("Medium", 4 * GiB, 2),
                                ("Large", 8 * GiB, 2), ("XLarge", 16 * GiB, 4)):
        store.instance_types.put(_with_href(types.InstanceType(
            id=stable_id("instancetype", name), name=name, memory=memory,
            memory_policy=types.MemoryPolicy(guaranteed=memory, max=4 * memory),
            cpu=types.Cpu(topology=types.CpuTopology(sockets=1, cores=cores, threads=1))), "instancetypes"))


def _node_template(store: Store, name: str, description: str, os_type: str, disk_description: str, console_id: str,
                   cluster_ref: types.Cluster, profile_id: str, now: datetime.datetime) -> None:
    """A template with one bootable disk and one NIC on the management network, as an uploaded node image is."""
    template_id = stable_id("template", name)
    template_ref = _ref(types.Template, "templates", template_id)
    store.templates.put(_with_href(types.Template(
        id=template_id, name=name, description=description,
        status=types.TemplateStatus.OK, memory=16 * GiB,
        memory_policy=types.MemoryPolicy(guaranteed=16 * GiB, max=64 * GiB, ballooning=True),
        cpu=types.Cpu(architecture=types.Architecture.X86_64,
                      topology=types.CpuTopology(sockets=1, cores=4, threads=1)),
        os=types.OperatingSystem(type=os_type, boot=types.Boot(devices=[types.BootDevice.HD])),
        type=types.VmType.SERVER, stateless=False, delete_protected=False, creation_time=now,
        high_availability=types.HighAvailability(enabled=False, priority=0),
        cluster=cluster_ref, version=types.TemplateVersion(version_number=1)), "templates"))
    disk_id = stable_id("disk", name)
    sd_ref = _ref(types.StorageDomain, "storagedomains", stable_id("sd", "nfs-data"))
    store.disks.put(_with_href(types.Disk(
        id=disk_id, name=name, alias=name, description=disk_description, provisioned_size=16 * GiB,
        actual_size=int(2.5 * GiB), total_size=int(2.5 * GiB), format=types.DiskFormat.COW, sparse=True,
        status=types.DiskStatus.OK, storage_type=types.DiskStorageType.IMAGE, content_type=types.DiskContentType.DATA,
        shareable=False, wipe_after_delete=False, propagate_errors=False, qcow_version=types.QcowVersion.QCOW2_V3,
        image_id=stable_id("image", name), storage_domains=[sd_ref]), "disks"))
    da = types.DiskAttachment(id=disk_id, active=True, bootable=True, interface=types.DiskInterface.VIRTIO_SCSI,
                              pass_discard=False, read_only=False, uses_scsi_reservation=False,
                              disk=_ref(types.Disk, "disks", disk_id), template=template_ref)
    da.href = href("templates", template_id, "diskattachments", disk_id)
    store.template_disk_attachments.put(da)
    nic = types.Nic(id=stable_id("nic", f"{name}/nic1"), name="nic1", interface=types.NicInterface.VIRTIO,
                    linked=True, plugged=True, vnic_profile=_ref(types.VnicProfile, "vnicprofiles", profile_id),
                    template=template_ref)
    nic.href = href("templates", template_id, "nics", nic.id)
    store.template_nics.put(nic)
    console = types.GraphicsConsole(id=console_id, protocol=types.GraphicsType.VNC, template=template_ref)
    console.href = href("templates", template_id, "graphicsconsoles", console.id)
    store.template_consoles.put(console)


def add_host(store: Store, name: str, cluster_ref: types.Cluster, sockets: int = 2, cores: int = 8,
             threads: int = 2, memory: int = 128 * GiB) -> types.Host:
    host_id = stable_id("host", name)
    n = len(store.hosts) + 1
    host = _with_href(types.Host(
        id=host_id, name=name, address=f"192.168.100.{10 + n}", status=types.HostStatus.UP,
        type=types.HostType.RHEL, memory=memory, max_scheduling_memory=memory,
        cpu=types.Cpu(name="Intel(R) Xeon(R) Gold 6230", speed=2100.0,
                      topology=types.CpuTopology(sockets=sockets, cores=cores, threads=threads)),
        os=types.OperatingSystem(type="RHEL", version=types.Version(full_version="9.4")),
        summary=types.VmSummary(active=0, migrating=0, total=0),
        cluster=cluster_ref, port=54321, protocol=types.HostProtocol.STOMP), "hosts")
    store.hosts.put(host)
    return host
