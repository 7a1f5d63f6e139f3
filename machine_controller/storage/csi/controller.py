"""The CSI Controller service: oVirt disks made, attached, grown and removed through the shared disk layer.

Identity of a volume: the CSI name becomes the disk's name (external-provisioner sends `pvc-<claim uid>`, the name
the volume provisioner gives its disks too), so a retried CreateVolume finds the disk it already made, and calls of
two controller processes at once end with one disk (`crossprocess.py`); the volume id is the disk id. The node id
is the node's VM id (docs/storage.md#csi-driver).
CreateVolume answers only once the engine reports the disk `ok`, within the caller's deadline: past it the call
is ABORTED and the sidecar's retry finds the disk by name and waits again.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator

import grpc

from api.ids import is_ovirt_id
from machine_controller.ovirt.errors import ConflictError, NotFoundError

from ..disks import DiskIllegal, DiskRequest, Disks, made_by_csi
from ..disks import status_of as disk_status
from .crossprocess import OneDiskPerName, check_published, delete_unattached, description_for
from .errors import CsiError, invalid, not_found, require, rpc
from .volumes import check_capabilities, check_parameters, fits, is_block, size_for, unsupported

# Never wait for a disk past this, whatever deadline the caller gave (a sidecar without --timeout gives none).
MAX_WAIT_S = 60.0
POLL_S = 0.25
MAX_POLL_S = 1.0  # a 10 s disk lock (a real engine's) then costs ~12 polls, not 40


class InFlight:
    """One operation per volume at a time; a second concurrent one is ABORTED, as the CSI spec asks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy: set[str] = set()

    @contextmanager
    def hold(self, key: str) -> Iterator[None]:
        with self._lock:
            if key in self._busy:
                raise CsiError(grpc.StatusCode.ABORTED, f"an operation on {key} is already in progress")
            self._busy.add(key)
        try:
            yield
        finally:
            with self._lock:
                self._busy.discard(key)


def _wait_budget(context: grpc.ServicerContext) -> float:
    remaining = context.time_remaining()
    # Leave a second to answer before the caller gives up on us.
    return MAX_WAIT_S if remaining is None else max(0.0, min(MAX_WAIT_S, remaining - 1.0))


def controller_servicer(pb: Any, pb_grpc: Any, disks: Disks) -> Any:
    caps = pb.ControllerServiceCapability.RPC.Type

    class Controller(pb_grpc.ControllerServicer):
        def __init__(self) -> None:
            self.disks = disks
            self.inflight = InFlight()

        @rpc
        def ControllerGetCapabilities(self, request, context):
            return pb.ControllerGetCapabilitiesResponse(capabilities=[
                pb.ControllerServiceCapability(rpc=pb.ControllerServiceCapability.RPC(type=t))
                for t in (caps.CREATE_DELETE_VOLUME, caps.PUBLISH_UNPUBLISH_VOLUME, caps.EXPAND_VOLUME,
                          caps.GET_CAPACITY, caps.PUBLISH_READONLY)])

        # --- volumes --------------------------------------------------------------------------------------------
        @rpc
        def CreateVolume(self, request, context):
            require(request, "name")
            check_capabilities(pb, request.volume_capabilities)
            if request.HasField("volume_content_source"):
                raise invalid("volumes from snapshots or clones are not supported by this driver")
            size = size_for(request.capacity_range if request.HasField("capacity_range") else None)
            params = check_parameters(pb, dict(request.parameters), request.volume_capabilities)
            with self.inflight.hold(request.name):
                disk = OneDiskPerName(self.disks, lambda d: self._ok(d, context), POLL_S).get(
                    request.name, lambda: self._create(request.name, size, params), _wait_budget(context))
                if not fits(disk.provisioned_size or 0, request.capacity_range):
                    raise CsiError(grpc.StatusCode.ALREADY_EXISTS,
                                   f"volume {request.name!r} exists with {disk.provisioned_size} bytes, "
                                   "outside the requested capacity range")
                return pb.CreateVolumeResponse(volume=pb.Volume(volume_id=disk.id,
                                                                capacity_bytes=disk.provisioned_size or size))

        def _create(self, name, size, params):
            try:
                return self.disks.create(DiskRequest(name=name, size_bytes=size, storage_domain=params.storage_domain,
                                                     thin=params.thin, description=description_for(name)))
            except NotFoundError:
                # The only lookup before the POST is the class's storage domain: a parameter naming nothing.
                raise invalid(f"storage domain {params.storage_domain!r} (parameter storageDomainName) "
                              "not found") from None

        def _ok(self, disk, context):
            if disk_status(disk) == "ok":
                return disk
            try:
                return self.disks.wait_ok(disk.id, timeout_s=_wait_budget(context), interval_s=POLL_S,
                                         max_interval_s=MAX_POLL_S)
            except DiskIllegal:
                # The engine failed to make it: remove it so that the retry makes a fresh one.
                self.disks.remove(disk.id)
                raise

        @rpc
        def DeleteVolume(self, request, context):
            require(request, "volume_id")
            if not is_ovirt_id(request.volume_id):
                return pb.DeleteVolumeResponse()
            with self.inflight.hold(request.volume_id):
                disk = self.disks.get(request.volume_id)
                if disk is None:
                    return pb.DeleteVolumeResponse()
                if not made_by_csi(disk):
                    raise CsiError(grpc.StatusCode.FAILED_PRECONDITION,
                                   f"disk {disk.id} ({disk.name}) was not made by this driver: not removing it")
                delete_unattached(self.disks, disk)
                return pb.DeleteVolumeResponse()

        # --- attachments ----------------------------------------------------------------------------------------
        @rpc
        def ControllerPublishVolume(self, request, context):
            require(request, "volume_id", "node_id", "volume_capability")
            why = unsupported(pb, request.volume_capability)
            if why:
                raise invalid(why)
            if not is_ovirt_id(request.volume_id):
                raise not_found(f"volume {request.volume_id} does not exist")
            if not is_ovirt_id(request.node_id):
                raise not_found(f"node {request.node_id} is no VM of the engine")
            with self.inflight.hold(request.volume_id):
                try:
                    att = self.disks.attach(request.node_id, request.volume_id, read_only=request.readonly)
                except ConflictError:
                    others = [v for v in self.disks.attachments_of_disk(request.volume_id) if v != request.node_id]
                    if others:
                        raise CsiError(grpc.StatusCode.FAILED_PRECONDITION,
                                       f"volume {request.volume_id} is attached to VM {', '.join(others)}; "
                                       "an oVirt disk is attached to one VM at a time") from None
                    raise
                if bool(att.read_only) != bool(request.readonly):
                    raise CsiError(grpc.StatusCode.ALREADY_EXISTS,
                                   f"volume {request.volume_id} is attached to {request.node_id} "
                                   f"{'read-only' if att.read_only else 'read-write'} already")
                check_published(self.disks, request.volume_id)
                return pb.ControllerPublishVolumeResponse()

        @rpc
        def ControllerUnpublishVolume(self, request, context):
            require(request, "volume_id")
            if not is_ovirt_id(request.volume_id):
                return pb.ControllerUnpublishVolumeResponse()
            with self.inflight.hold(request.volume_id):
                if request.node_id:
                    if is_ovirt_id(request.node_id):
                        self.disks.detach(request.node_id, request.volume_id)
                else:  # no node: detach it from wherever it is
                    for vm_id in self.disks.attachments_of_disk(request.volume_id):
                        self.disks.detach(vm_id, request.volume_id)
                return pb.ControllerUnpublishVolumeResponse()

        # --- checks, growth, space ------------------------------------------------------------------------------
        @rpc
        def ValidateVolumeCapabilities(self, request, context):
            require(request, "volume_id")
            if not request.volume_capabilities:
                raise invalid("volume_capabilities are required")
            disk = self.disks.get(request.volume_id) if is_ovirt_id(request.volume_id) else None
            if disk is None:
                raise not_found(f"volume {request.volume_id} does not exist")
            why = next((w for w in (unsupported(pb, c) for c in request.volume_capabilities) if w), "")
            if why:
                return pb.ValidateVolumeCapabilitiesResponse(message=why)
            if request.parameters:
                check_parameters(pb, dict(request.parameters), request.volume_capabilities)
            return pb.ValidateVolumeCapabilitiesResponse(confirmed=pb.ValidateVolumeCapabilitiesResponse.Confirmed(
                volume_context=request.volume_context, volume_capabilities=request.volume_capabilities,
                parameters=request.parameters))

        @rpc
        def ControllerExpandVolume(self, request, context):
            require(request, "volume_id", "capacity_range")
            size = size_for(request.capacity_range)
            if not is_ovirt_id(request.volume_id):
                raise not_found(f"volume {request.volume_id} does not exist")
            with self.inflight.hold(request.volume_id):
                disk = self.disks.resize(request.volume_id, size)
                disk = self._ok(disk, context)
                block = request.HasField("volume_capability") and is_block(request.volume_capability)
                return pb.ControllerExpandVolumeResponse(capacity_bytes=disk.provisioned_size or size,
                                                         node_expansion_required=not block)

        @rpc
        def GetCapacity(self, request, context):
            domain = dict(request.parameters).get("storageDomainName", "")
            if domain:
                sd = self.disks.storage_domain(domain)
                if sd is None:
                    raise not_found(f"storage domain {domain!r} not found")
                domains = [sd]
            else:  # no class: what any data domain could still take
                domains = [d for d in self.disks.client.call("list storage domains",
                                                             lambda s: s.storage_domains_service().list())
                           if d.type is None or d.type.value == "data"]
            return pb.GetCapacityResponse(available_capacity=sum(d.available or 0 for d in domains))

    return Controller()
