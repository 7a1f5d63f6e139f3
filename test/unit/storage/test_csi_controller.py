"""ovirt-csi-driver's Controller and Identity services over gRPC against the simulator: the status code of every
refusal, nothing created by bad input, the capacity range, idempotency by name, attachments by VM id, and the
disks of the FlexVolume provisioner left alone (docs/storage.md#csi-error-codes)."""

from __future__ import annotations

import uuid

import grpc
import pytest

from hack.csi_host import CsiClient, make_vm, running_driver
from hack.ovirtsim.testing import running_simulator
from machine_controller.ovirt.client import OvirtClient
from machine_controller.ovirt.connection import ConnectionPool
from machine_controller.ovirt.credentials import OvirtCredentials
from machine_controller.storage.disks import GIB, MIB, DiskRequest, Disks

OK = grpc.StatusCode.OK


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("csi")
    with running_simulator(root / "sim") as sim:
        vms = [make_vm(sim), make_vm(sim)]
        with running_driver(root / "driver", sim, services="controller") as endpoint:
            client = CsiClient(endpoint)
            pool = ConnectionPool(size=1)
            pool.set_credentials(OvirtCredentials(url=sim.url, username=sim.username, password=sim.password,
                                                  ca_file=sim.ca_file))
            yield {"csi": client, "sim": sim, "vms": vms, "disks": Disks(OvirtClient(pool))}
            client.close()
            pool.close()


def code(call, *args, **kwargs) -> grpc.StatusCode:
    try:
        call(*args, **kwargs)
    except grpc.RpcError as e:
        return e.code()
    return OK


def name() -> str:
    return f"pvc-{uuid.uuid4()}"


def test_identity(env):
    csi = env["csi"]
    pb = csi.pb
    info = csi.identity.GetPluginInfo(pb.GetPluginInfoRequest())
    assert info.name == "csi.ovirt.org" and info.vendor_version
    caps = csi.identity.GetPluginCapabilities(pb.GetPluginCapabilitiesRequest()).capabilities
    assert pb.PluginCapability.Service.CONTROLLER_SERVICE in [c.service.type for c in caps]
    assert csi.identity.Probe(pb.ProbeRequest()).ready.value is True


def test_create_refuses_bad_input_and_creates_nothing(env):
    csi, disks = env["csi"], env["disks"]
    pb = csi.pb
    n = name()
    bad = {
        "no name": dict(name=""),
        "no capabilities": dict(caps=[]),
        "multi-node access": dict(caps=[csi.mount_cap("MULTI_NODE_MULTI_WRITER")]),
        "unknown fs": dict(caps=[csi.mount_cap(fs_type="btrfs")]),
        "no storage domain": dict(parameters={}),
        "unknown storage domain": dict(parameters={"storageDomainName": "nowhere"}),
        "thinProvisioning not a boolean": dict(parameters={"storageDomainName": "nfs-data", "thinProvisioning": "y"}),
        "unknown parameter": dict(parameters={"storageDomainName": "nfs-data", "color": "blue"}),
        # The FlexVolume classes' keys are no keys of this driver (docs/storage.md's list).
        "fsType, accepted and ignored before": dict(parameters={"storageDomainName": "nfs-data", "fsType": "xfs"}),
        "the legacy domain key": dict(parameters={"ovirtStorageDomain": "nfs-data"}),
        "a class's filesystem the capability contradicts": dict(
            parameters={"storageDomainName": "nfs-data", "csi.storage.k8s.io/fstype": "xfs"}),
        "an unsupported class filesystem": dict(caps=[csi.mount_cap(fs_type="btrfs")], parameters={
            "storageDomainName": "nfs-data", "csi.storage.k8s.io/fstype": "btrfs"}),
        "required above limit": dict(required=2 * GIB, limit=GIB),
    }
    for what, kwargs in bad.items():
        args = {"name": n, **kwargs}
        assert code(csi.create, args.pop("name"), **args) == grpc.StatusCode.INVALID_ARGUMENT, what
    # limit_bytes below the MiB-rounded size: out of range, as the spec names it.
    assert code(csi.create, n, required=GIB + 1, limit=GIB + 2) == grpc.StatusCode.OUT_OF_RANGE
    src = pb.VolumeContentSource(volume=pb.VolumeContentSource.VolumeSource(volume_id=str(uuid.uuid4())))
    assert code(csi.controller.CreateVolume, pb.CreateVolumeRequest(
        name=n, volume_capabilities=[csi.mount_cap()], parameters={"storageDomainName": "nfs-data"},
        volume_content_source=src)) == grpc.StatusCode.INVALID_ARGUMENT
    assert disks.find_by_name(n) is None
    # The class's filesystem, as the capability carries it: made.
    vol = csi.create(n, caps=[csi.mount_cap(fs_type="xfs")],
                     parameters={"storageDomainName": "nfs-data", "csi.storage.k8s.io/fstype": "xfs"})
    csi.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=vol.volume_id))


def test_names_that_are_patterns_or_quotes_are_refused_names_with_spaces_quoted(env):
    """A volume named `*` (a wildcard even quoted), or holding a quote, backslash or newline, is
    INVALID_ARGUMENT and makes no disk; a name with spaces is one quoted literal, found again on retry."""
    csi, disks = env["csi"], env["disks"]
    pb = csi.pb

    def all_names() -> list[str]:
        return [d.name for d in disks.client.call("list", lambda s: s.disks_service().list())]

    for bad in ("*", "pvc-*", 'pvc-"quoted"', "pvc\\x", "pvc\nx"):
        assert code(csi.create, bad) == grpc.StatusCode.INVALID_ARGUMENT, bad
        assert bad not in all_names(), bad
        assert code(csi.create, name(), parameters={"storageDomainName": bad}) == \
            grpc.StatusCode.INVALID_ARGUMENT, bad
        assert code(csi.controller.GetCapacity, pb.GetCapacityRequest(parameters={"storageDomainName": bad})) == \
            grpc.StatusCode.INVALID_ARGUMENT, bad
    spaced = f"my volume {uuid.uuid4().hex[:8]}"
    vol = csi.create(spaced)
    assert csi.create(spaced).volume_id == vol.volume_id
    assert all_names().count(spaced) == 1
    # Ids with spaces or slashes name nothing: answered at once, never an HTTP parse error retried.
    for bad_id in ("a b", "../disks", "*"):
        assert code(csi.controller.ControllerPublishVolume, pb.ControllerPublishVolumeRequest(
            volume_id=bad_id, node_id=env["vms"][0], volume_capability=csi.mount_cap())) == grpc.StatusCode.NOT_FOUND
        assert code(csi.controller.ControllerPublishVolume, pb.ControllerPublishVolumeRequest(
            volume_id=vol.volume_id, node_id=bad_id, volume_capability=csi.mount_cap())) == grpc.StatusCode.NOT_FOUND
        assert code(csi.controller.ControllerExpandVolume, pb.ControllerExpandVolumeRequest(
            volume_id=bad_id, capacity_range=pb.CapacityRange(required_bytes=GIB))) == grpc.StatusCode.NOT_FOUND
        assert code(csi.controller.DeleteVolume, pb.DeleteVolumeRequest(volume_id=bad_id)) == OK
    csi.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=vol.volume_id))
    assert spaced not in all_names()


def test_a_size_beyond_int64_in_whole_mib_is_out_of_range(env):
    """int64's largest value rounds up to whole MiB beyond int64; refused, nothing made."""
    csi, disks = env["csi"], env["disks"]
    n = name()
    assert code(csi.create, n, required=2**63 - 1) == grpc.StatusCode.OUT_OF_RANGE
    assert disks.find_by_name(n) is None


def test_a_size_the_storage_domain_can_never_hold_is_out_of_range(env):
    """More than the domain's available + used bytes is OUT_OF_RANGE (thin or not), nothing made."""
    csi, disks = env["csi"], env["disks"]
    sd = disks.storage_domain("nfs-data")
    total = sd.available + sd.used
    n = name()
    assert code(csi.create, n, required=total + GIB) == grpc.StatusCode.OUT_OF_RANGE
    assert disks.find_by_name(n) is None
    vol = csi.create(n, required=GIB)  # the same name, a size that fits: made
    csi.controller.DeleteVolume(csi.pb.DeleteVolumeRequest(volume_id=vol.volume_id))


def test_capacity_range_and_idempotency_by_name(env):
    csi, disks = env["csi"], env["disks"]
    n = name()
    vol = csi.create(n, required=GIB + 1)
    assert vol.capacity_bytes == GIB + MIB  # rounded up to whole MiB, as the engine allocates
    disk = disks.get(vol.volume_id)
    assert disk.name == n and disk.provisioned_size == GIB + MIB and disk.status.value == "ok"
    again = csi.create(n, required=GIB + 1)
    assert again.volume_id == vol.volume_id
    assert code(csi.create, n, required=2 * GIB) == grpc.StatusCode.ALREADY_EXISTS
    assert len([d for d in disks.client.call("list", lambda s: s.disks_service().list()) if d.name == n]) == 1
    # No required size: the default, capped by limit_bytes.
    small = csi.create(name(), required=0, limit=100 * MIB)
    assert small.capacity_bytes == 100 * MIB
    # Thick on the NFS domain: raw and preallocated.
    thick = disks.get(csi.create(name(), parameters={"storageDomainName": "nfs-data",
                                                      "thinProvisioning": "false"}).volume_id)
    assert thick.sparse is False and thick.format.value == "raw"
    pb = csi.pb
    for v in (vol, small):
        csi.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=v.volume_id))
    csi.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=thick.id))
    assert disks.get(vol.volume_id) is None


def test_delete_unknown_is_success_and_foreign_disks_are_kept(env):
    csi, disks = env["csi"], env["disks"]
    pb = csi.pb
    assert code(csi.controller.DeleteVolume, pb.DeleteVolumeRequest()) == grpc.StatusCode.INVALID_ARGUMENT
    assert code(csi.controller.DeleteVolume, pb.DeleteVolumeRequest(volume_id=str(uuid.uuid4()))) == OK
    assert code(csi.controller.DeleteVolume, pb.DeleteVolumeRequest(volume_id="not-a-disk-id")) == OK
    # A disk of the FlexVolume provisioner (its description, not ours): never removed by this driver.
    flex = disks.create(DiskRequest(name=name(), size_bytes=GIB, storage_domain="nfs-data",
                                    description="PVC ns/claim (uid 1)"))
    disks.wait_ok(flex.id, timeout_s=30, interval_s=0.2)
    assert code(csi.controller.DeleteVolume, pb.DeleteVolumeRequest(volume_id=flex.id)) == \
        grpc.StatusCode.FAILED_PRECONDITION
    assert disks.get(flex.id) is not None
    # Nor can the CSI driver's CreateVolume adopt it by its name.
    assert code(csi.create, flex.name) == grpc.StatusCode.ALREADY_EXISTS
    disks.remove(flex.id)


def test_publish_attaches_to_the_node_vm_and_unpublish_detaches(env):
    csi, disks = env["csi"], env["disks"]
    pb = csi.pb
    vm, other = env["vms"]
    vol = csi.create(name())
    cap = csi.mount_cap()

    def publish(node_id=vm, volume_id=vol.volume_id, readonly=False, capability=cap):
        return code(csi.controller.ControllerPublishVolume, pb.ControllerPublishVolumeRequest(
            volume_id=volume_id, node_id=node_id, volume_capability=capability, readonly=readonly))

    assert publish(volume_id="") == grpc.StatusCode.INVALID_ARGUMENT
    assert publish(node_id="") == grpc.StatusCode.INVALID_ARGUMENT
    assert publish(capability=None) == grpc.StatusCode.INVALID_ARGUMENT
    assert publish(volume_id=str(uuid.uuid4())) == grpc.StatusCode.NOT_FOUND
    assert publish(node_id=str(uuid.uuid4())) == grpc.StatusCode.NOT_FOUND
    assert publish(node_id="worker-0") == grpc.StatusCode.NOT_FOUND
    assert publish() == OK
    assert publish() == OK  # idempotent
    att = disks.attachment(vm, vol.volume_id)
    assert att is not None and att.active and att.interface.value == "virtio_scsi"
    assert publish(readonly=True) == grpc.StatusCode.ALREADY_EXISTS  # incompatible with the attachment made
    assert publish(node_id=other) == grpc.StatusCode.FAILED_PRECONDITION  # one VM at a time
    # Attached: not deletable.
    assert code(csi.controller.DeleteVolume, pb.DeleteVolumeRequest(volume_id=vol.volume_id)) == \
        grpc.StatusCode.FAILED_PRECONDITION
    unpublish = csi.controller.ControllerUnpublishVolume
    assert code(unpublish, pb.ControllerUnpublishVolumeRequest(node_id=vm)) == grpc.StatusCode.INVALID_ARGUMENT
    assert code(unpublish, pb.ControllerUnpublishVolumeRequest(volume_id=vol.volume_id, node_id=vm)) == OK
    assert disks.attachment(vm, vol.volume_id) is None and disks.get(vol.volume_id) is not None
    assert code(unpublish, pb.ControllerUnpublishVolumeRequest(volume_id=vol.volume_id, node_id=vm)) == OK
    # Read-only publish makes a read-only attachment.
    assert publish(node_id=other, readonly=True) == OK
    assert disks.attachment(other, vol.volume_id).read_only is True
    assert code(unpublish, pb.ControllerUnpublishVolumeRequest(volume_id=vol.volume_id)) == OK  # from any VM
    assert disks.attachments_of_disk(vol.volume_id) == []
    csi.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=vol.volume_id))


def test_validate_expand_and_capacity(env):
    csi, disks, sim = env["csi"], env["disks"], env["sim"]
    pb = csi.pb
    vol = csi.create(name())
    validate = csi.controller.ValidateVolumeCapabilities
    assert code(validate, pb.ValidateVolumeCapabilitiesRequest(volume_id=vol.volume_id)) == \
        grpc.StatusCode.INVALID_ARGUMENT
    assert code(validate, pb.ValidateVolumeCapabilitiesRequest(volume_id=str(uuid.uuid4()),
                                                               volume_capabilities=[csi.mount_cap()])) == \
        grpc.StatusCode.NOT_FOUND
    ok = validate(pb.ValidateVolumeCapabilitiesRequest(volume_id=vol.volume_id,
                                                       volume_capabilities=[csi.block_cap()]))
    assert len(ok.confirmed.volume_capabilities) == 1
    refused = validate(pb.ValidateVolumeCapabilitiesRequest(
        volume_id=vol.volume_id, volume_capabilities=[csi.mount_cap("MULTI_NODE_READER_ONLY")]))
    assert not refused.HasField("confirmed") and "one VM" in refused.message

    expand = csi.controller.ControllerExpandVolume
    assert code(expand, pb.ControllerExpandVolumeRequest(volume_id=vol.volume_id)) == grpc.StatusCode.INVALID_ARGUMENT
    assert code(expand, pb.ControllerExpandVolumeRequest(
        volume_id=str(uuid.uuid4()), capacity_range=pb.CapacityRange(required_bytes=2 * GIB))) == \
        grpc.StatusCode.NOT_FOUND
    grown = expand(pb.ControllerExpandVolumeRequest(volume_id=vol.volume_id,
                                                    capacity_range=pb.CapacityRange(required_bytes=2 * GIB),
                                                    volume_capability=csi.mount_cap()), timeout=30)
    assert grown.capacity_bytes == 2 * GIB and grown.node_expansion_required is True
    assert disks.get(vol.volume_id).provisioned_size == 2 * GIB
    block = expand(pb.ControllerExpandVolumeRequest(volume_id=vol.volume_id,
                                                    capacity_range=pb.CapacityRange(required_bytes=3 * GIB),
                                                    volume_capability=csi.block_cap()), timeout=30)
    assert block.capacity_bytes == 3 * GIB and block.node_expansion_required is False
    csi.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=vol.volume_id))

    def available(domain: str) -> int:
        return csi.controller.GetCapacity(pb.GetCapacityRequest(
            parameters={"storageDomainName": domain})).available_capacity

    sd = disks.storage_domain("iscsi-data")
    assert available("iscsi-data") == sd.available > 0
    assert code(csi.controller.GetCapacity, pb.GetCapacityRequest(parameters={"storageDomainName": "nowhere"})) == \
        grpc.StatusCode.NOT_FOUND
    sim.control.fill_storage_domain("iscsi-data", free_bytes=GIB)
    assert available("iscsi-data") == GIB
    # A full domain refuses a thick disk: retried (UNAVAILABLE), and nothing is left behind.
    n = name()
    assert code(csi.create, n, required=4 * GIB, parameters={"storageDomainName": "iscsi-data",
                                                             "thinProvisioning": "false"}) == \
        grpc.StatusCode.UNAVAILABLE
    assert disks.find_by_name(n) is None


def test_probe_reports_an_unreachable_engine(env):
    csi, sim = env["csi"], env["sim"]
    # The engine answers nothing for a while (every attempt of the client's retries is dropped).
    sim.control.drop_connection("/ovirt-engine/api", method="GET", count=None)
    try:
        assert code(csi.identity.Probe, csi.pb.ProbeRequest(), timeout=30) == grpc.StatusCode.UNAVAILABLE
    finally:
        sim.control.clear_faults()
    assert csi.identity.Probe(csi.pb.ProbeRequest()).ready.value is True
