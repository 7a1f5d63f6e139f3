"""The oVirt disk layer shared by the volume provisioner, the FlexVolume driver and a later CSI driver.

Every request goes through `OvirtClient.call` (one pooled connection per call, faults classified, transient ones
retried briefly). Nothing here waits long or sleeps inside a borrowed connection: `wait_ok` polls with separate
calls, and callers that must not block (controllers) use `get` and requeue instead.

Identity: a disk made for a claim is named after the claim (`name_for_claim`, derived from the PVC's UID), so a
process killed between "create" and "record the id" finds the disk it made by that name before making another.
The engine accepts any byte count but block domains allocate in whole chunks; `round_size` rounds up to a MiB
multiple so the disk is never smaller than asked and the size reported back is the size the engine keeps.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import ovirtsdk4.types as types

from api.ids import is_ovirt_id
from machine_controller.ovirt import search
from machine_controller.ovirt.client import OvirtClient
from machine_controller.ovirt.errors import ConflictError, NotFoundError, OvirtError

MIB = 1024 * 1024
GIB = 1024 * MIB


# Sizes travel as int64 (the API's provisioned_size, CSI's capacity_bytes, a PV's capacity): the largest disk is the
# largest whole MiB int64 holds. The API server stores a claim of 8Ei as 2**63 - 1, which rounds up beyond it.
MAX_DISK_BYTES = (2**63 - 1) // MIB * MIB


class DiskSizeOutOfRange(ValueError):
    """A size that, rounded up to whole MiB, is beyond MAX_DISK_BYTES: no disk can have it."""


def round_size(size_bytes: int, unit: int = MIB) -> int:
    """The smallest multiple of `unit` (>= one unit) not below `size_bytes`; never beyond MAX_DISK_BYTES, so no
    caller can hand the engine or a CSI answer a size that int64 cannot hold (DiskSizeOutOfRange)."""
    size = max(unit, -(-int(size_bytes) // unit) * unit)
    if size > MAX_DISK_BYTES:
        raise DiskSizeOutOfRange(f"{size_bytes} bytes is larger than the largest disk size ({MAX_DISK_BYTES} bytes: "
                                 "int64 in whole MiB)")
    return size


def name_for_claim(claim_uid: str) -> str:
    """The disk name for a claim: the PV name Kubernetes provisioners use, so PV, claim and disk read alike."""
    return f"pvc-{claim_uid}"


# Which of the two provisioners made a disk is told by its description (docs/storage.md#coexistence): the CSI
# driver's start with this; the volume provisioner's read "PVC <namespace>/<name> (uid ...)". Both name their
# disks `pvc-<claim uid>`, so the description, not the name, keeps each from removing the other's disks.
CSI_DESCRIPTION_PREFIX = "csi.ovirt.org volume"


def made_by_csi(disk: types.Disk) -> bool:
    return (disk.description or "").startswith(CSI_DESCRIPTION_PREFIX)


class DiskLocked(OvirtError):
    """The disk exists but the engine still holds it locked (being created, extended or moved): act later."""


class DiskIllegal(OvirtError):
    """The engine reports the disk illegal: creating it failed on storage; it must be removed, not used."""


class DiskTooLarge(OvirtError):
    """The size exceeds the storage domain's whole capacity: no amount of freed space makes it fit."""


def domain_capacity(sd: types.StorageDomain) -> int | None:
    """Everything the domain holds, free or used (`available` + `used`), or None when the engine reports neither."""
    if sd.available is None and sd.used is None:
        return None
    return (sd.available or 0) + (sd.used or 0)


@dataclass(frozen=True)
class DiskRequest:
    name: str
    size_bytes: int
    storage_domain: str
    thin: bool = True
    description: str = ""


def _require_id(what: str, value: str) -> None:
    # An id goes into a URL path: one that is no engine UUID names nothing, and is answered so without asking
    # the engine (a space or a slash would make another request, or one the engine cannot parse).
    if not is_ovirt_id(value):
        raise NotFoundError(f"{what} {value!r} is no engine id (a UUID): it names nothing")


def status_of(disk: types.Disk) -> str:
    return disk.status.value if disk.status is not None else "ok"


class Disks:
    def __init__(self, client: OvirtClient):
        self.client = client

    # --- lookups -----------------------------------------------------------------------------------------------
    def get(self, disk_id: str) -> types.Disk | None:
        if not is_ovirt_id(disk_id):
            return None
        try:
            return self.client.call(f"get disk {disk_id}",
                                    lambda s: s.disks_service().disk_service(disk_id).get())
        except NotFoundError:
            return None

    def named(self, name: str) -> list[types.Disk]:
        """Every disk of exactly this name, asked fresh (the search matches patterns and ignores case)."""
        query = search.equals("name", name, "disk name")
        found = self.client.call(f"search disk {name}", lambda s: s.disks_service().list(search=query))
        return [d for d in found if (d.name or d.alias) == name]

    def find_by_name(self, name: str) -> types.Disk | None:
        # Two disks of one claim's name would mean something else made one; refuse to guess.
        exact = self.named(name)
        if len(exact) > 1:
            raise OvirtError(f"{len(exact)} disks are named {name!r}; refusing to guess which one is the volume")
        return exact[0] if exact else None

    def storage_domain(self, name: str) -> types.StorageDomain | None:
        query = search.equals("name", name, "storage domain name")
        sds = self.client.call(f"search storage domain {name}",
                               lambda s: s.storage_domains_service().list(search=query))
        exact = [d for d in sds if d.name == name]
        return exact[0] if exact else None

    # --- changes -----------------------------------------------------------------------------------------------
    def create(self, req: DiskRequest, correlation_id: str = "") -> types.Disk:
        """One floating disk. Callers look it up by name first (`find_by_name`): this never checks."""
        sd = self.storage_domain(req.storage_domain)
        if sd is None:
            raise NotFoundError(f"storage domain {req.storage_domain!r} not found")
        size = round_size(req.size_bytes)
        capacity = domain_capacity(sd)
        # A disk larger than the whole domain can never be written full, even thin: refused, never made.
        if capacity is not None and size > capacity:
            raise DiskTooLarge(f"{size} bytes is more than storage domain {sd.name} can ever hold "
                               f"({capacity} bytes in all, available and used)")
        block = sd.storage is not None and sd.storage.type in (
            types.StorageType.ISCSI, types.StorageType.FCP)
        # Thin on block storage must be QCOW (the engine refuses raw+sparse there); preallocated is always raw.
        fmt = types.DiskFormat.COW if (req.thin and block) else types.DiskFormat.RAW
        disk = types.Disk(name=req.name, alias=req.name, description=req.description or None,
                          provisioned_size=size, format=fmt, sparse=req.thin,
                          storage_domains=[types.StorageDomain(id=sd.id)])
        query = {"correlation_id": correlation_id} if correlation_id else None
        return self.client.call(f"create disk {req.name}",
                                lambda s: s.disks_service().add(disk, query=query))

    def remove(self, disk_id: str) -> bool:
        """Remove the disk; False when it was already gone. A locked disk raises DiskLocked (retry later)."""
        disk = self.get(disk_id)
        if disk is None:
            return False
        if status_of(disk) == "locked":
            raise DiskLocked(f"disk {disk_id} is locked by the engine; not removing it now")
        try:
            self.client.call(f"remove disk {disk_id}",
                             lambda s: s.disks_service().disk_service(disk_id).remove())
        except NotFoundError:
            return False
        return True

    def set_description(self, disk_id: str, description: str) -> types.Disk:
        _require_id("disk id", disk_id)
        return self.client.call(f"describe disk {disk_id}", lambda s: s.disks_service().disk_service(disk_id)
                                .update(types.Disk(description=description)))

    def resize(self, disk_id: str, size_bytes: int) -> types.Disk:
        """Grow the disk to `round_size(size_bytes)` (the engine refuses to shrink; it locks the disk while it
        extends, so callers wait for `ok` before relying on the new size). Never acts on a locked disk."""
        disk = self.get(disk_id)
        if disk is None:
            raise NotFoundError(f"disk {disk_id} not found")
        if status_of(disk) != "ok":
            raise DiskLocked(f"disk {disk_id} is {status_of(disk)}; not extending it now")
        size = round_size(size_bytes)
        if (disk.provisioned_size or 0) >= size:
            return disk
        return self.client.call(f"extend disk {disk_id}", lambda s: s.disks_service().disk_service(disk_id)
                                .update(types.Disk(provisioned_size=size)))

    def attachments_of_disk(self, disk_id: str) -> list[str]:
        """Ids of the VMs the disk is attached to (every VM with its attachments inlined; one request)."""
        vms = self.client.call(f"VMs of disk {disk_id}",
                               lambda s: s.vms_service().list(follow="disk_attachments"))
        return [vm.id for vm in vms if any(a.id == disk_id for a in (vm.disk_attachments or []))]

    def attachment(self, vm_id: str, disk_id: str) -> types.DiskAttachment | None:
        # The attachment's id is the disk's id.
        if not (is_ovirt_id(vm_id) and is_ovirt_id(disk_id)):
            return None
        try:
            return self.client.call(f"get attachment of disk {disk_id} to VM {vm_id}", lambda s: s.vms_service()
                                    .vm_service(vm_id).disk_attachments_service().attachment_service(disk_id).get())
        except NotFoundError:
            return None

    def attach(self, vm_id: str, disk_id: str, read_only: bool = False) -> types.DiskAttachment:
        """Attach (idempotent: an existing attachment to this VM is returned). Never acts on a locked disk."""
        _require_id("VM id", vm_id)
        _require_id("disk id", disk_id)
        found = self.attachment(vm_id, disk_id)
        if found is not None:
            return found
        disk = self.get(disk_id)
        if disk is None:
            raise NotFoundError(f"disk {disk_id} not found")
        if status_of(disk) != "ok":
            raise DiskLocked(f"disk {disk_id} is {status_of(disk)}; not attaching it now")
        att = types.DiskAttachment(disk=types.Disk(id=disk_id), active=True, bootable=False, read_only=read_only,
                                   interface=types.DiskInterface.VIRTIO_SCSI)
        try:
            return self.client.call(f"attach disk {disk_id} to VM {vm_id}", lambda s: s.vms_service()
                                    .vm_service(vm_id).disk_attachments_service().add(att))
        except ConflictError:
            # Raced with another attach of the same disk to the same VM: that one counts.
            found = self.attachment(vm_id, disk_id)
            if found is None:
                raise
            return found

    def detach(self, vm_id: str, disk_id: str) -> bool:
        """Detach, keeping the disk. False when it was not attached (or the VM is gone): not an error."""
        if not (is_ovirt_id(vm_id) and is_ovirt_id(disk_id)):
            return False
        try:
            self.client.call(f"detach disk {disk_id} from VM {vm_id}", lambda s: s.vms_service()
                             .vm_service(vm_id).disk_attachments_service().attachment_service(disk_id)
                             .remove(detach_only=True))
        except NotFoundError:
            return False
        return True

    def wait_ok(self, disk_id: str, timeout_s: float = 300.0, interval_s: float = 1.0,
                max_interval_s: float | None = None) -> types.Disk:
        """Poll until the engine reports the disk `ok` (for processes that may block, like the FlexVolume driver).
        With `max_interval_s`, the interval doubles up to it: a short lock is seen soon, a long one costs few polls."""
        deadline = time.monotonic() + timeout_s
        while True:
            disk = self.get(disk_id)
            if disk is None:
                raise NotFoundError(f"disk {disk_id} not found")
            st = status_of(disk)
            if st == "ok":
                return disk
            if st == "illegal":
                raise DiskIllegal(f"disk {disk_id} is illegal")
            if time.monotonic() >= deadline:
                raise DiskLocked(f"disk {disk_id} still {st} after {timeout_s:.0f} s")
            time.sleep(interval_s)
            if max_interval_s is not None:
                interval_s = min(max_interval_s, interval_s * 2)
