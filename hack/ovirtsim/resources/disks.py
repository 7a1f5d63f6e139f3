"""Disks: floating disks (`/disks`), and the disk bookkeeping VMs share (creation, space, removal)
(docs/compatibility.md#disks).

Storage accounting: a disk occupies its `actual_size` on its storage domain (preallocated: the provisioned size;
sparse: what has been written, starting small). A new disk that does not fit in the domain's free space is refused
with the engine's low-space message (error type CONFLICT, inferred).
"""

from __future__ import annotations

from dataclasses import dataclass

from ovirtsdk4 import types

from hack.ovirtsim.errors import ApiError, Msg, bad_parameters, conflict
from hack.ovirtsim.resources.common import entity, get_or_404, listing, ref, removed, require, resolve
from hack.ovirtsim.router import ApiRequest, ApiResponse, EngineView, route
from hack.ovirtsim.statemachine import VmAction, check
from hack.ovirtsim.store import Store, href, new_id

MiB = 1024 ** 2
GiB = 1024 ** 3
SPARSE_INITIAL = 200 * MiB  # what a fresh sparse/overlay image occupies before the guest writes (inferred)
BLOCK_STORAGE = {types.StorageType.ISCSI, types.StorageType.FCP}


def disk_fields(store: Store) -> dict:
    def domain_names(d: types.Disk) -> list[str]:
        return [sd.name for sd in (store.storage_domains.get(r.id) for r in (d.storage_domains or [])) if sd]

    return {
        "name": lambda d: d.alias or d.name,
        "alias": lambda d: d.alias or d.name,
        "id": lambda d: d.id,
        "status": lambda d: d.status,
        "provisioned_size": lambda d: d.provisioned_size,
        "format": lambda d: d.format,
        "storage": domain_names,
        "storage.name": domain_names,
    }


# -- storage space -----------------------------------------------------------------------------------------
def free_bytes(store: Store, sd: types.StorageDomain) -> int:
    return sd.available or 0


def occupy(store: Store, sd_id: str, size: int) -> None:
    """Change a domain's used space by `size` bytes (negative to free)."""
    sd = store.storage_domains.get(sd_id)
    if sd is None:
        return
    capacity = store.runtime.storage[sd_id].capacity
    sd.used = max(0, min(capacity, (sd.used or 0) + size))
    sd.committed = sd.used
    sd.available = capacity - sd.used


@dataclass
class DiskPlan:
    """A disk about to be created, validated before anything is changed."""

    sd: types.StorageDomain
    alias: str
    provisioned: int
    actual: int
    format: types.DiskFormat
    sparse: bool
    spec: types.Disk | None


def plan_disk(store: Store, spec: types.Disk, sd: types.StorageDomain, action: str, kind: str,
              provisioned: int, fmt: types.DiskFormat, sparse: bool, actual: int | None, alias: str) -> DiskPlan:
    if fmt is types.DiskFormat.RAW and sparse and sd.storage is not None and sd.storage.type in BLOCK_STORAGE:
        raise bad_parameters(Msg.raw_sparse_on_block(action, kind))
    actual_size = actual if actual is not None else (min(provisioned, SPARSE_INITIAL) if sparse else provisioned)
    return DiskPlan(sd, alias, provisioned, actual_size, fmt, sparse, spec)


def check_space(store: Store, plans: list[DiskPlan], action: str, kind: str) -> None:
    need: dict[str, int] = {}
    for p in plans:
        need[p.sd.id] = need.get(p.sd.id, 0) + p.actual
    for sd_id, size in need.items():
        sd = store.storage_domains.get(sd_id)
        if free_bytes(store, sd) < size:
            raise conflict(Msg.low_space(action, kind, sd.name))


def create_disk(engine: EngineView, plan: DiskPlan, lock_for: float, extra: types.Disk | None = None) -> types.Disk:
    """Create the disk `locked`; it becomes `ok` after `lock_for` seconds (docs/compatibility.md#disks)."""
    store = engine.store
    spec = plan.spec or types.Disk()
    disk = types.Disk(
        id=new_id(), name=plan.alias, alias=plan.alias, description=spec.description,
        provisioned_size=plan.provisioned, actual_size=plan.actual, total_size=plan.actual, format=plan.format,
        sparse=plan.sparse, status=types.DiskStatus.LOCKED if lock_for > 0 else types.DiskStatus.OK,
        storage_type=types.DiskStorageType.IMAGE, content_type=spec.content_type or types.DiskContentType.DATA,
        shareable=bool(spec.shareable), wipe_after_delete=bool(spec.wipe_after_delete), propagate_errors=False,
        qcow_version=types.QcowVersion.QCOW2_V3 if plan.format is types.DiskFormat.COW else None,
        image_id=new_id(), backup=spec.backup, storage_domains=[ref(plan.sd)])
    disk.href = href("disks", disk.id)
    store.disks.put(disk)
    occupy(store, plan.sd.id, plan.actual)
    if lock_for > 0:
        store.schedule(lock_for, "disk", disk.id, types.DiskStatus.OK.value)
    return disk


def purge(engine: EngineView, disk_id: str) -> None:
    """The disk's image is deleted: the row goes and its space is freed."""
    store = engine.store
    disk = store.disks.remove(disk_id)
    if disk is not None:
        for sd in disk.storage_domains or []:
            occupy(store, sd.id, -(disk.actual_size or 0))


def attached_vms(store: Store, disk_id: str) -> list[types.Vm]:
    return [store.vms.get(vm_id) for vm_id in _attachment_parents(store, disk_id)]


def _attachment_parents(store: Store, disk_id: str) -> list[str]:
    return [da.vm.id for da in store.vm_disk_attachments.with_id(disk_id)]


def extend(engine: EngineView, disk: types.Disk, new_size: int) -> None:
    """Grow a disk (docs/compatibility.md#disks): locked while ExtendImageSize runs; shrinking is a 400."""
    store = engine.store
    if disk.status is types.DiskStatus.LOCKED:
        raise conflict(Msg.disks_locked("extend", "Virtual Disk", [disk.alias or disk.id]))
    if new_size < (disk.provisioned_size or 0):
        raise bad_parameters(Msg.DISK_SIZE_TOO_SMALL)
    for vm in attached_vms(store, disk.id):
        check(VmAction.EXTEND_DISK, vm.status)
    if new_size == disk.provisioned_size:
        return
    growth = 0 if disk.sparse else new_size - (disk.provisioned_size or 0)
    sd_id = disk.storage_domains[0].id if disk.storage_domains else None
    if growth and sd_id:
        sd = store.storage_domains.get(sd_id)
        if free_bytes(store, sd) < growth:
            raise conflict(Msg.low_space("extend", "Virtual Disk", sd.name))
        occupy(store, sd_id, growth)
        disk.actual_size = disk.total_size = (disk.actual_size or 0) + growth
    disk.provisioned_size = new_size
    disk.status = types.DiskStatus.LOCKED
    store.schedule(engine.timings.disk_extend, "disk", disk.id, types.DiskStatus.OK.value)


def new_floating_disk(engine: EngineView, req: ApiRequest, spec: types.Disk, action: str = "add") -> types.Disk:
    """`POST /disks`, and the disk part of create-and-attach: mandatory format, size and storage domain."""
    store = engine.store
    require(spec.format, "Disk", "format", action)
    if spec.provisioned_size is None:
        raise ApiError(400, "Incomplete parameters", f"Disk [provisionedSize] required for {action}")
    if spec.provisioned_size <= 0:
        raise bad_parameters(f"Cannot {action} Virtual Disk. Disk size must be a positive number.")
    domains = spec.storage_domains or ([spec.storage_domain] if spec.storage_domain else [])
    if not domains:
        raise ApiError(400, "Incomplete parameters",
                       f"Disk [storageDomains.storageDomain.id|name] required for {action}")
    sd = resolve(store, "storage_domains", "StorageDomain", domains[0])
    sparse = spec.sparse if spec.sparse is not None else spec.format is types.DiskFormat.COW
    plan = plan_disk(store, spec, sd, action, "Virtual Disk", spec.provisioned_size, spec.format, sparse, None,
                     spec.alias or spec.name or f"disk-{new_id()[:8]}")
    check_space(store, [plan], action, "Virtual Disk")
    disk = create_disk(engine, plan, engine.timings.disk_create)
    engine.add_job(req, f"Adding Disk {disk.alias}", engine.timings.disk_create)
    return disk


# -- /disks ------------------------------------------------------------------------------------------------
@route("GET", "/disks")
def list_disks(engine: EngineView, req: ApiRequest) -> ApiResponse:
    return listing(engine, req, engine.store.disks.all(), "disks", disk_fields(engine.store))


@route("POST", "/disks")
def add_disk(engine: EngineView, req: ApiRequest) -> ApiResponse:
    disk = new_floating_disk(engine, req, req.parse(types.Disk))
    return entity(disk, status=202, location=True)


@route("GET", "/disks/{disk}")
def get_disk(engine: EngineView, req: ApiRequest) -> ApiResponse:
    return entity(get_or_404(engine.store.disks, req.params["disk"]), req)


@route("PUT", "/disks/{disk}")
def update_disk(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    disk = get_or_404(store.disks, req.params["disk"])
    patch = req.parse(types.Disk)
    if patch.provisioned_size is not None:
        extend(engine, disk, patch.provisioned_size)
        engine.add_job(req, f"Extending Disk {disk.alias}", engine.timings.disk_extend)
    for attr in ("alias", "name", "description", "shareable", "wipe_after_delete", "propagate_errors"):
        value = getattr(patch, attr)
        if value is not None:
            setattr(disk, attr, value)
    if patch.alias and not patch.name:
        disk.name = patch.alias
    return entity(disk)


@route("DELETE", "/disks/{disk}")
def remove_disk(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    disk = get_or_404(store.disks, req.params["disk"])
    if disk.status is types.DiskStatus.LOCKED:
        raise conflict(Msg.disks_locked("remove", "Virtual Disk", [disk.alias or disk.id]))
    for da in store.vm_disk_attachments.with_id(disk.id):
        vm = store.vms.get(da.vm.id)
        if vm is not None and vm.status is not types.VmStatus.DOWN and da.active:
            raise conflict(Msg.disk_attached_to_running_vm("remove"))
    for da in store.vm_disk_attachments.with_id(disk.id):
        store.vm_disk_attachments.remove(da.id, da.vm.id)
    purge(engine, disk.id)
    engine.add_job(req, f"Removing Disk {disk.alias}")
    return removed()
