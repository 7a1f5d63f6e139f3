"""The volume provisioner: PVCs of a StorageClass whose provisioner is `ovirt-volume-provisioner` become oVirt
disks and PVs with a `flexVolume` source for `ovirt/ovirt-flexvolume-driver` (docs/compatibility.md#storage).

Keys: `pvc:<namespace>/<name>` provisions, `pv:<name>` releases. The PV name and the disk name are both
`pvc-<claim uid>`, so a provisioner killed at any point finds what it already made (the disk by name, the PV by
name) and never makes a second disk. The PV is created only once the engine reports the disk `ok`, so there is
never a PV for a disk that failed or is still locked. kube-controller-manager binds the PV to its claim (the
PV carries the claimRef with the claim's UID) and marks it Released when the claim goes; a Released PV with
reclaim policy Delete has its disk detached from every VM, removed, then the PV deleted; Retain keeps both.
"""

from __future__ import annotations

from typing import NoReturn

from api.quantity import InvalidQuantity, parse_bytes
from machine_controller.ovirt import search
from machine_controller.ovirt.errors import NotFoundError, OvirtError
from machine_controller.runtime.controller import Result, TerminalError
from machine_controller.runtime.events import EventRecorder
from machine_controller.runtime.informer import Store
from machine_controller.runtime.kube import ErrorKind, Resource, Rest, classify, is_not_found

from .disks import (
    GIB,
    MAX_DISK_BYTES,
    DiskLocked,
    DiskRequest,
    Disks,
    DiskSizeOutOfRange,
    DiskTooLarge,
    made_by_csi,
    name_for_claim,
    round_size,
    status_of,
)
from .flexvolume import DRIVER, FS_TYPES, VOLUME_ID
from .metrics import StorageMetrics

PROVISIONER = "ovirt-volume-provisioner"
PVCS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
PVS = Resource("", "v1", "persistentvolumes", "PersistentVolume", namespaced=False)
STORAGE_CLASSES = Resource("storage.k8s.io", "v1", "storageclasses", "StorageClass", namespaced=False)
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
SUPPORTED_MODES = ("ReadWriteOnce", "ReadWriteOncePod")
POLL_S = 1.0
RETRY_S = 15.0
TOO_LARGE_RETRY_S = 300.0  # a storage domain grows only when an admin extends it

def parse_params(params: dict[str, str]) -> tuple[str, bool, str]:
    """(storage domain, thin, fs type) from StorageClass parameters; the historical and the CSI-era names."""
    p = {k: str(v) for k, v in (params or {}).items()}
    domain = p.get("storageDomainName") or p.get("ovirtStorageDomain") or ""
    if not domain:
        raise ValueError("parameter storageDomainName (or ovirtStorageDomain) is required")
    try:
        search.check(domain, "storage domain name")
    except search.UnsearchableValue as e:
        raise ValueError(f"parameter storageDomainName: {e}") from None
    thin_raw = p.get("thinProvisioning", "true").strip().lower()
    if thin_raw not in ("true", "false"):
        raise ValueError(f"parameter thinProvisioning must be true or false, got {p['thinProvisioning']!r}")
    fs = (p.get("fsType") or p.get("csi.storage.k8s.io/fstype") or "ext4").strip().lower()
    if fs not in FS_TYPES:
        raise ValueError(f"parameter fsType {fs!r} is not supported (use one of {', '.join(FS_TYPES)})")
    known = {"storageDomainName", "ovirtStorageDomain", "thinProvisioning", "fsType", "csi.storage.k8s.io/fstype"}
    unknown = sorted(set(p) - known)
    if unknown:
        raise ValueError(f"unknown parameters: {', '.join(unknown)}")
    return domain, thin_raw == "true", fs


def description_for(claim_key: str, claim_uid: str) -> str:
    """The mark of this provisioner's disks (docs/storage.md#coexistence): the claim it was made for."""
    return f"PVC {claim_key} (uid {claim_uid})"


def made_for(disk, pv: dict) -> bool:
    """Whether this provisioner made `disk` for the claim of `pv`: the disk bears the PV's name, which is
    `pvc-<claim uid>`, and the description it wrote for that claim. A PV written by hand (or copied) that names
    another disk, a VM's or another claim's, proves nothing and gets nothing removed."""
    name, ref = (pv.get("metadata") or {}).get("name"), (pv.get("spec") or {}).get("claimRef") or {}
    uid = ref.get("uid") or ""
    return bool(uid) and name == name_for_claim(uid) and (disk.name or disk.alias) == name and \
        disk.description == description_for(f"{ref.get('namespace')}/{ref.get('name')}", uid)


def _is_clone_or_snapshot(source: dict) -> bool:
    group, kind = source.get("apiGroup") or "", source.get("kind")
    return (group, kind) in (("", "PersistentVolumeClaim"), ("snapshot.storage.k8s.io", "VolumeSnapshot"))


class Provisioner:
    def __init__(self, rest: Rest, disks: Disks, pvcs: Store, pvs: Store, classes: Store, events: EventRecorder,
                 metrics: StorageMetrics) -> None:
        self.rest, self.disks, self.events, self.metrics = rest, disks, events, metrics
        self.pvcs, self.pvs, self.classes = pvcs, pvs, classes

    # --- mapping informer events to keys ---------------------------------------------------------------------
    @staticmethod
    def pvc_keys(obj: dict) -> list[str]:
        m = obj.get("metadata") or {}
        return [f"pvc:{m.get('namespace')}/{m.get('name')}"]

    @staticmethod
    def pv_keys(obj: dict) -> list[str]:
        return [f"pv:{(obj.get('metadata') or {}).get('name')}"]

    def reconcile(self, key: str) -> Result | None:
        kind, _, rest = key.partition(":")
        return self.provision(rest) if kind == "pvc" else self.release(rest)

    def _class_of(self, pvc: dict) -> dict | None:
        name = (pvc.get("spec") or {}).get("storageClassName")
        sc = self.classes.get(name) if name else None
        return sc if sc is not None and sc.get("provisioner") == PROVISIONER else None

    # --- provisioning ----------------------------------------------------------------------------------------
    def provision(self, key: str) -> Result | None:
        pvc = self.pvcs.get(key)
        if pvc is None or (pvc.get("spec") or {}).get("volumeName"):
            return None
        if (pvc.get("metadata") or {}).get("deletionTimestamp"):
            return None
        sc = self._class_of(pvc)
        if sc is None:
            return None
        uid = pvc["metadata"]["uid"]
        pv_name = name_for_claim(uid)
        if self.pvs.get(pv_name) is not None:
            return None  # made already; kube-controller-manager binds it
        spec = pvc.get("spec") or {}
        # Both are immutable on a claim, so refusing is final, as external-provisioner refuses them: a new empty
        # disk would neither be chosen by the labels asked for nor hold the data the claim names.
        if spec.get("selector"):
            self._fail(pvc, "UnsupportedSelector", "claim Selector is not supported: oVirt disks are made on "
                       "demand and carry no labels to select (make the claim without spec.selector)")
        source = spec.get("dataSourceRef") or spec.get("dataSource")
        if source:
            if not _is_clone_or_snapshot(source):
                # Another kind is a volume populator's: it provisions through a claim of its own, without a
                # data source, which this provisioner serves (external-provisioner leaves such claims alone too).
                return None
            self._fail(pvc, "UnsupportedDataSource",
                       f"claim data source {source.get('kind')} {source.get('name')!r} is not supported: "
                       f"{PROVISIONER} cannot clone a volume or restore a snapshot, and an empty disk would not hold "
                       "its data")
        modes = spec.get("accessModes") or ["ReadWriteOnce"]
        bad = [m for m in modes if m not in SUPPORTED_MODES]
        if bad:
            self._fail(pvc, "UnsupportedAccessMode",
                       f"an oVirt disk is attached to one VM at a time: access modes {', '.join(bad)} cannot be "
                       f"provided (use ReadWriteOnce)")
        if spec.get("volumeMode") == "Block":
            self._fail(pvc, "UnsupportedVolumeMode", "volumeMode Block is not supported by the FlexVolume driver")
        try:
            domain, thin, fs = parse_params(sc.get("parameters") or {})
        except ValueError as e:
            self._fail(pvc, "InvalidStorageClass", f"StorageClass {sc['metadata']['name']}: {e}")
        request = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
        if not request:
            self._fail(pvc, "InvalidClaim", "the claim requests no storage size")
        try:
            size = parse_bytes(str(request), "spec.resources.requests.storage")
        except InvalidQuantity as e:
            self._fail(pvc, "InvalidClaim", str(e))
        try:
            round_size(size)
        except DiskSizeOutOfRange:
            self._fail(pvc, "InvalidClaim", f"spec.resources.requests.storage {request} is larger than the largest "
                       f"disk size ({MAX_DISK_BYTES} bytes: int64 in whole MiB)")

        disk = self.disks.find_by_name(pv_name)
        if disk is None:
            try:
                disk = self.disks.create(DiskRequest(name=pv_name, size_bytes=size, storage_domain=domain, thin=thin,
                                                     description=description_for(key, uid)), correlation_id=uid)
            except DiskTooLarge as e:
                # Only a larger domain would change this: said once, looked at again rarely.
                self.metrics.failed.labels("too-large").inc()
                self.events.warning(pvc, "ProvisioningFailed", f"claim {key} requests {request}: {e}")
                return Result(requeue_after=TOO_LARGE_RETRY_S)
            except NotFoundError as e:
                self.metrics.failed.labels("storage-domain").inc()
                self.events.warning(pvc, "ProvisioningFailed", str(e))
                return Result(requeue_after=RETRY_S)
            except OvirtError as e:
                # Out of space, quota, a locked domain, a dropped connection: nothing was made (or the disk
                # exists and the next pass finds it by name); say why and try again later.
                self.metrics.failed.labels("engine").inc()
                self.events.warning(pvc, "ProvisioningFailed", f"creating oVirt disk {pv_name}: {e}")
                return Result(requeue_after=RETRY_S)
            self.events.normal(pvc, "Provisioning", f"creating oVirt disk {pv_name} ({disk.id}) in {domain}")
        st = status_of(disk)
        if st == "locked":
            return Result(requeue_after=POLL_S)
        if st != "ok":
            # Illegal: the engine failed to make it. Remove it so the next pass makes a fresh one.
            self.events.warning(pvc, "ProvisioningFailed", f"oVirt disk {disk.id} is {st}; removing it to retry")
            self.metrics.failed.labels("disk-" + st).inc()
            try:
                self.disks.remove(disk.id)
            except DiskLocked:
                pass
            return Result(requeue_after=RETRY_S)
        pv = self._pv(pvc, sc, pv_name, disk, fs)
        try:
            self.rest.create(PVS, pv)
        except Exception as e:
            if classify(e) is not ErrorKind.ALREADY_EXISTS:
                raise
        self.metrics.provisioned.inc()
        self.events.normal(pvc, "ProvisioningSucceeded",
                           f"volume {pv_name}: oVirt disk {disk.id}, {disk.provisioned_size // GIB} GiB "
                           f"({disk.provisioned_size} bytes) in {domain}")
        return None

    def _fail(self, pvc: dict, reason: str, message: str) -> NoReturn:
        self.metrics.failed.labels(reason).inc()
        self.events.warning(pvc, "ProvisioningFailed", message)
        raise TerminalError(message)

    @staticmethod
    def _pv(pvc: dict, sc: dict, name: str, disk, fs: str) -> dict:
        m, spec = pvc["metadata"], pvc.get("spec") or {}
        return {
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {PROVISIONED_BY: PROVISIONER},
                         "labels": {"ovirt.org/disk-id": disk.id}},
            "spec": {
                "capacity": {"storage": str(disk.provisioned_size)},
                "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy") or "Delete",
                "storageClassName": sc["metadata"]["name"],
                "mountOptions": sc.get("mountOptions") or None,
                "volumeMode": "Filesystem",
                "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": m["namespace"],
                             "name": m["name"], "uid": m["uid"]},
                "flexVolume": {"driver": DRIVER, "fsType": fs, "options": {VOLUME_ID: disk.id}},
            },
        }

    # --- release ---------------------------------------------------------------------------------------------
    def release(self, name: str) -> Result | None:
        pv = self.pvs.get(name)
        if pv is None:
            return None
        meta, spec = pv.get("metadata") or {}, pv.get("spec") or {}
        if (meta.get("annotations") or {}).get(PROVISIONED_BY) != PROVISIONER:
            return None
        if (pv.get("status") or {}).get("phase") != "Released" or spec.get("persistentVolumeReclaimPolicy") != "Delete":
            return None
        disk_id = ((spec.get("flexVolume") or {}).get("options") or {}).get(VOLUME_ID)
        if disk_id:
            try:
                disk = self.disks.get(disk_id)
                if disk is not None and not made_for(disk, pv):
                    # The annotation says ours, the disk does not: never remove (nor detach) another's disk.
                    whose = ("belongs to the CSI driver (csi.ovirt.org)" if made_by_csi(disk) else
                             f"({disk.name!r}, described {disk.description or ''!r}) was not made by {PROVISIONER} "
                             "for this volume's claim")
                    self.events.warning(pv, "VolumeFailedDelete", f"oVirt disk {disk_id} {whose}; not removing it")
                    return None
                for vm_id in self.disks.attachments_of_disk(disk_id):
                    self.disks.detach(vm_id, disk_id)
                removed = self.disks.remove(disk_id)
            except DiskLocked:
                return Result(requeue_after=POLL_S)
            except OvirtError as e:
                self.metrics.failed.labels("delete").inc()
                self.events.warning(pv, "VolumeFailedDelete", f"removing oVirt disk {disk_id}: {e}")
                return Result(requeue_after=RETRY_S)
            if removed:
                self.metrics.deleted.inc()
        try:
            self.rest.delete(PVS, name)
        except Exception as e:
            if not is_not_found(e):
                raise
        return None
