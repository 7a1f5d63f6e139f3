"""A VM's sub-collections: disk attachments, NICs, reported devices, tags, graphics consoles
(docs/compatibility.md#status)."""

from __future__ import annotations

import copy
import uuid

from ovirtsdk4 import types

from hack.ovirtsim import guest
from hack.ovirtsim.errors import ApiError, Msg, conflict, incomplete
from hack.ovirtsim.resources import disks as disk_ops
from hack.ovirtsim.resources.common import entity, get_or_404, listing, ref, removed, resolve, shallow, vm_or_404, wants
from hack.ovirtsim.router import ApiRequest, ApiResponse, EngineView, route
from hack.ovirtsim.statemachine import VmAction, check
from hack.ovirtsim.store import Store, href, new_id


# -- disk attachments --------------------------------------------------------------------------------------
def attachment_view(store: Store, vm: types.Vm, da: types.DiskAttachment,
                    with_disk: bool = False) -> types.DiskAttachment:
    """`logical_name` is only known while the guest agent reports (docs/compatibility.md#disks)."""
    view = shallow(da)
    if guest.agent_reporting(vm, store.vm_runtime(vm.id)):
        for dev in guest.block_devices(store, vm):
            if dev.disk_id == da.id:
                view.logical_name = dev.path
    if with_disk:
        disk = store.disks.get(da.id)
        if disk is not None:
            view.disk = disk
    return view


def attachments_view(store: Store, vm: types.Vm, paths: list[str]) -> list[types.DiskAttachment]:
    return [attachment_view(store, vm, da, wants(paths, "disk")) for da in store.vm_disk_attachments.children(vm.id)]


@route("GET", "/vms/{vm}/diskattachments")
def list_attachments(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    vm = vm_or_404(engine, req)
    return listing(engine, req, store.vm_disk_attachments.children(vm.id), "disk_attachments",
                   present=lambda da, paths: attachment_view(store, vm, da, wants(paths, "disk")))


@route("GET", "/vms/{vm}/diskattachments/{disk}")
def get_attachment(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    vm = vm_or_404(engine, req)
    da = get_or_404(store.vm_disk_attachments, req.params["disk"], vm.id)
    return entity(da, req, present=lambda row, paths: attachment_view(store, vm, row, wants(paths, "disk")))


@route("POST", "/vms/{vm}/diskattachments")
def add_attachment(engine: EngineView, req: ApiRequest) -> ApiResponse:
    """Attach an existing disk (201) or create one and attach it (202, disk `locked` until created)."""
    store = engine.store
    vm = vm_or_404(engine, req)
    da: types.DiskAttachment = req.parse(types.DiskAttachment)
    if da.disk is None:
        raise incomplete("DiskAttachment", "disk", "add")
    if da.interface is None:
        raise incomplete("DiskAttachment", "interface", "add")
    check(VmAction.HOTPLUG, vm.status)
    created = False
    if da.disk.id:
        disk = resolve(store, "disks", "Disk", types.Disk(id=da.disk.id))
        if store.vm_disk_attachments.get(disk.id, vm.id) is not None:
            raise conflict(Msg.disk_already_attached("attach"))
        if not disk.shareable and store.vm_disk_attachments.with_id(disk.id):
            raise conflict(Msg.disk_already_attached("attach"))
        if disk.status is types.DiskStatus.LOCKED:
            raise conflict(Msg.disks_locked("attach", "Virtual Disk", [disk.alias or disk.id]))
    else:
        disk = disk_ops.new_floating_disk(engine, req, da.disk)
        created = True
    row = types.DiskAttachment(id=disk.id, active=da.active if da.active is not None else True,
                               bootable=bool(da.bootable), interface=da.interface,
                               pass_discard=bool(da.pass_discard), read_only=bool(da.read_only),
                               uses_scsi_reservation=bool(da.uses_scsi_reservation),
                               logical_name=None, disk=ref(disk), vm=ref(vm))
    row.href = href("vms", vm.id, "diskattachments", disk.id)
    store.vm_disk_attachments.put(row)
    if not created:
        engine.add_job(req, f"Attaching Disk {disk.alias} to VM {vm.name}")
    return entity(attachment_view(store, vm, row), status=202 if created else 201, location=True)


@route("PUT", "/vms/{vm}/diskattachments/{disk}")
def update_attachment(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    vm = vm_or_404(engine, req)
    row = get_or_404(store.vm_disk_attachments, req.params["disk"], vm.id)
    patch: types.DiskAttachment = req.parse(types.DiskAttachment)
    if patch.disk is not None and patch.disk.provisioned_size is not None:
        disk_ops.extend(engine, store.disks.get(row.id), patch.disk.provisioned_size)
        engine.add_job(req, f"Extending Disk {row.id}", engine.timings.disk_extend)
    for attr in ("active", "bootable", "interface", "pass_discard", "read_only"):
        value = getattr(patch, attr)
        if value is not None:
            setattr(row, attr, value)
    return entity(attachment_view(store, vm, row))


@route("DELETE", "/vms/{vm}/diskattachments/{disk}")
def remove_attachment(engine: EngineView, req: ApiRequest) -> ApiResponse:
    """Default `detach_only=true`: the disk stays as a floating disk (docs/compatibility.md#disks)."""
    store = engine.store
    vm = vm_or_404(engine, req)
    row = get_or_404(store.vm_disk_attachments, req.params["disk"], vm.id)
    check(VmAction.HOTPLUG, vm.status)
    disk = store.disks.get(row.id)
    if disk is not None and disk.status is types.DiskStatus.LOCKED:
        raise conflict(Msg.disks_locked("detach", "Virtual Disk", [disk.alias or disk.id]))
    store.vm_disk_attachments.remove(row.id, vm.id)
    if not req.flag("detach_only", True) and disk is not None:
        disk_ops.purge(engine, disk.id)
    engine.add_job(req, f"Detaching Disk {row.id} from VM {vm.name}")
    return removed()


# -- NICs --------------------------------------------------------------------------------------------------
def add_nic_row(store: Store, vm: types.Vm, nic: types.Nic) -> types.Nic:
    row = types.Nic(id=new_id(), name=nic.name, description=nic.description,
                    interface=nic.interface or types.NicInterface.VIRTIO,
                    linked=nic.linked if nic.linked is not None else True,
                    plugged=nic.plugged if nic.plugged is not None else True,
                    mac=types.Mac(address=nic.mac.address if nic.mac and nic.mac.address else store.next_mac()),
                    vnic_profile=copy.copy(nic.vnic_profile), vm=ref(vm))
    row.href = href("vms", vm.id, "nics", row.id)
    store.vm_nics.put(row)
    store.runtime.nic_ips[row.id] = store.next_ip()
    return row


@route("GET", "/vms/{vm}/nics")
def list_nics(engine: EngineView, req: ApiRequest) -> ApiResponse:
    vm = vm_or_404(engine, req)
    store = engine.store

    def follow(nic: types.Nic, paths: list[str]) -> types.Nic:
        view = shallow(nic)
        if wants(paths, "reported_devices"):
            view.reported_devices = guest.reported_devices(store, vm, nic.id)
        return view

    return listing(engine, req, store.vm_nics.children(vm.id), "nics", present=follow)


@route("GET", "/vms/{vm}/nics/{nic}")
def get_nic(engine: EngineView, req: ApiRequest) -> ApiResponse:
    vm = vm_or_404(engine, req)
    return entity(get_or_404(engine.store.vm_nics, req.params["nic"], vm.id))


@route("POST", "/vms/{vm}/nics")
def add_nic(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    vm = vm_or_404(engine, req)
    nic: types.Nic = req.parse(types.Nic)
    if not nic.name:
        raise incomplete("Nic", "name", "add")
    check(VmAction.HOTPLUG, vm.status)
    if any(n.name == nic.name for n in store.vm_nics.children(vm.id)):
        raise conflict(Msg.nic_name_in_use("add"))
    if nic.vnic_profile is not None and (nic.vnic_profile.id or nic.vnic_profile.name):
        nic.vnic_profile = ref(resolve(store, "vnic_profiles", "VnicProfile", nic.vnic_profile))
    row = add_nic_row(store, vm, nic)
    engine.add_job(req, f"Adding Interface {row.name} to VM {vm.name}")
    return entity(row, status=201, location=True)


@route("PUT", "/vms/{vm}/nics/{nic}")
def update_nic(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    vm = vm_or_404(engine, req)
    row = get_or_404(store.vm_nics, req.params["nic"], vm.id)
    patch: types.Nic = req.parse(types.Nic)
    if patch.vnic_profile is not None and (patch.vnic_profile.id or patch.vnic_profile.name):
        row.vnic_profile = ref(resolve(store, "vnic_profiles", "VnicProfile", patch.vnic_profile))
    for attr in ("name", "interface", "linked", "plugged", "description"):
        value = getattr(patch, attr)
        if value is not None:
            setattr(row, attr, value)
    return entity(row)


@route("DELETE", "/vms/{vm}/nics/{nic}")
def remove_nic(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    vm = vm_or_404(engine, req)
    row = get_or_404(store.vm_nics, req.params["nic"], vm.id)
    if vm.status is not types.VmStatus.DOWN and row.plugged:
        raise conflict(Msg.nic_active("remove"))
    store.vm_nics.remove(row.id, vm.id)
    store.runtime.nic_ips.pop(row.id, None)
    engine.add_job(req, f"Removing Interface {row.name} from VM {vm.name}")
    return removed()


@route("GET", "/vms/{vm}/nics/{nic}/reporteddevices")
def nic_reported_devices(engine: EngineView, req: ApiRequest) -> ApiResponse:
    vm = vm_or_404(engine, req)
    get_or_404(engine.store.vm_nics, req.params["nic"], vm.id)
    return listing(engine, req, guest.reported_devices(engine.store, vm, req.params["nic"]), "reported_devices")


@route("GET", "/vms/{vm}/reporteddevices")
def vm_reported_devices(engine: EngineView, req: ApiRequest) -> ApiResponse:
    vm = vm_or_404(engine, req)
    return listing(engine, req, guest.reported_devices(engine.store, vm), "reported_devices")


# -- tags --------------------------------------------------------------------------------------------------
def tags_of(store: Store, vm: types.Vm) -> list[types.Tag]:
    out = []
    for tag_id in store.runtime.vm_tags.get(vm.id, []):
        tag = store.tags.get(tag_id)
        if tag is not None:
            view = shallow(tag)
            view.vm = ref(vm)
            view.href = href("vms", vm.id, "tags", tag.id)
            out.append(view)
    return out


@route("GET", "/vms/{vm}/tags")
def list_vm_tags(engine: EngineView, req: ApiRequest) -> ApiResponse:
    vm = vm_or_404(engine, req)
    return listing(engine, req, tags_of(engine.store, vm), "tags")


@route("POST", "/vms/{vm}/tags")
def add_vm_tag(engine: EngineView, req: ApiRequest) -> ApiResponse:
    """Assign by id or name; the tag must exist (the installer creates it, docs/compatibility.md#creating-a-vm)."""
    store = engine.store
    vm = vm_or_404(engine, req)
    given: types.Tag = req.parse(types.Tag)
    if not (given.id or given.name):
        raise incomplete("Tag", "id|name", "add")
    tag = resolve(store, "tags", "Tag", given)
    assigned = store.runtime.vm_tags.setdefault(vm.id, [])
    if tag.id not in assigned:
        assigned.append(tag.id)
    view = next(t for t in tags_of(store, vm) if t.id == tag.id)
    return entity(view, status=201, location=True)


@route("GET", "/vms/{vm}/tags/{tag}")
def get_vm_tag(engine: EngineView, req: ApiRequest) -> ApiResponse:
    vm = vm_or_404(engine, req)
    for tag in tags_of(engine.store, vm):
        if tag.id == req.params["tag"]:
            return entity(tag)
    raise ApiError(404)


@route("DELETE", "/vms/{vm}/tags/{tag}")
def remove_vm_tag(engine: EngineView, req: ApiRequest) -> ApiResponse:
    vm = vm_or_404(engine, req)
    assigned = engine.store.runtime.vm_tags.get(vm.id, [])
    if req.params["tag"] not in assigned:
        raise ApiError(404)
    assigned.remove(req.params["tag"])
    return removed()


# -- graphics consoles -------------------------------------------------------------------------------------
@route("GET", "/vms/{vm}/graphicsconsoles")
def list_consoles(engine: EngineView, req: ApiRequest) -> ApiResponse:
    vm = vm_or_404(engine, req)
    return listing(engine, req, engine.store.vm_consoles.children(vm.id), "graphics_consoles")


@route("GET", "/vms/{vm}/graphicsconsoles/{console}")
def get_console(engine: EngineView, req: ApiRequest) -> ApiResponse:
    vm = vm_or_404(engine, req)
    return entity(get_or_404(engine.store.vm_consoles, req.params["console"], vm.id))


@route("DELETE", "/vms/{vm}/graphicsconsoles/{console}")
def remove_console(engine: EngineView, req: ApiRequest) -> ApiResponse:
    """CAPO removes the consoles of high_performance VMs while they are down
    (docs/compatibility.md#listing-and-search)."""
    vm = vm_or_404(engine, req)
    get_or_404(engine.store.vm_consoles, req.params["console"], vm.id)
    check(VmAction.EDIT, vm.status)
    engine.store.vm_consoles.remove(req.params["console"], vm.id)
    return removed()


# -- device lists the simulator does not model: what a fresh engine VM has ----------------------------------
# Clients (ansible's ovirt_vm) list these while reconciling a VM; an unknown sub-collection would be a 404.
_EMPTY_LISTS = {"numanodes": "vm_numa_nodes", "watchdogs": "watchdogs", "hostdevices": "host_devices",
                "permissions": "permissions", "applications": "applications", "sessions": "sessions",
                "statistics": "statistics", "floppies": "floppies", "affinitylabels": "affinity_labels",
                "katelloerrata": "katello_errata", "mediateddevices": "mediated_devices"}


def _empty_list_route(segment: str, root: str) -> None:
    @route("GET", f"/vms/{{vm}}/{segment}")
    def handler(engine: EngineView, req: ApiRequest) -> ApiResponse:
        vm_or_404(engine, req)
        return listing(engine, req, [], root)


for _segment, _root in _EMPTY_LISTS.items():
    _empty_list_route(_segment, _root)


@route("GET", "/vms/{vm}/cdroms")
def list_cdroms(engine: EngineView, req: ApiRequest) -> ApiResponse:
    """Every VM has one empty CD-ROM drive (device id all zeros on the engine)."""
    vm = vm_or_404(engine, req)
    cdrom = types.Cdrom(id="00000000-0000-0000-0000-000000000000", vm=ref(vm))
    cdrom.href = href("vms", vm.id, "cdroms", cdrom.id)
    return listing(engine, req, [cdrom], "cdroms")


@route("GET", "/vms/{vm}/snapshots")
def list_snapshots(engine: EngineView, req: ApiRequest) -> ApiResponse:
    """The `Active VM` snapshot every VM has."""
    vm = vm_or_404(engine, req)
    snap = types.Snapshot(id=str(uuid.uuid5(uuid.NAMESPACE_URL, vm.id + "/active")), description="Active VM",
                          snapshot_type=types.SnapshotType.ACTIVE, snapshot_status=types.SnapshotStatus.OK,
                          date=vm.creation_time, persist_memorystate=False, vm=ref(vm))
    snap.href = href("vms", vm.id, "snapshots", snap.id)
    return listing(engine, req, [snap], "snapshots")
