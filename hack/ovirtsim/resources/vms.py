"""VMs: create from a template, get/list/search, update, remove, and the lifecycle actions
(docs/compatibility.md#creating-a-vm)."""

from __future__ import annotations

import copy
import datetime
import re
from typing import Any

from ovirtsdk4 import types

from hack.ovirtsim import guest, statemachine
from hack.ovirtsim.errors import Msg, bad_parameters, conflict, entity_not_found, incomplete
from hack.ovirtsim.resources import disks as disk_ops
from hack.ovirtsim.resources import vm_devices
from hack.ovirtsim.resources.common import (
    action_done,
    entity,
    listing,
    merge,
    ref,
    removed,
    require,
    resolve,
    shallow,
    sub_paths,
    vm_or_404,
    wants,
)
from hack.ovirtsim.router import ApiRequest, ApiResponse, EngineView, route
from hack.ovirtsim.scheduler import pick_host
from hack.ovirtsim.statemachine import VmAction, check
from hack.ovirtsim.store import Store, VmRuntime, href, new_id

# VM fields a new VM takes from its template, then from the instance type, unless the request sets them (5.2).
INHERITED = ("memory", "cpu", "os", "type", "high_availability", "bios", "display", "stateless",
             "delete_protected", "custom_properties", "placement_policy", "io", "console", "soundcard_enabled",
             "usb", "time_zone", "cpu_shares", "migration", "serial_number", "virtio_scsi", "start_paused",
             "tpm_enabled", "cpu_pinning_policy", "initialization", "large_icon", "small_icon")
INSTANCE_TYPE_FIELDS = ("memory", "cpu", "high_availability", "io", "console",
                        "soundcard_enabled", "virtio_scsi", "migration")
# Sub-collections a client may embed in the body; the engine ignores them on the VM row.
EMBEDDED = ("disk_attachments", "nics", "tags", "graphics_consoles", "reported_devices", "cdroms",
            "permissions", "snapshots", "statistics", "katello_errata", "host_devices", "applications")
# `PredefinedVMProperties` of the engine and their value syntax (`0000_config.sql`).
CUSTOM_PROPERTIES = {"hugepages": r"^[0-9]+$", "sap_agent": r"^(true|false)$", "viodiskcache":
                     r"^(none|writeback|writethrough)$", "sndbuf": r"^[0-9]+$", "vhost": r".*",
                     "mdev_type": r".*", "scsi_hostdev": r".*", "ifacemacspoof": r"^(true|false)$"}
_NAME = re.compile(r"^[\w.-]+$", re.UNICODE)
MAX_VM_NAME_LENGTH = 64  # `MaxVmNameLength` (0000_config.sql)
# `VM64BitMaxMemorySizeInMB` by cluster level: (up to level, MB).
_PLATFORM_MEMORY_MB = (((4, 5), 6 * 1024 * 1024), ((4, 7), 16 * 1024 * 1024), ((99, 99), 64 * 1024 * 1024))
_FIXED_STATUS = frozenset({"_status", "_host", "_start_time", "_stop_time", "_creation_time", "_template",
                           "_original_template", "_cluster", "_id", "_href", "_fqdn", "_guest_operating_system"})


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def vm_fields(store: Store) -> dict:
    def cluster_name(vm: types.Vm) -> str | None:
        c = store.clusters.get(vm.cluster.id) if vm.cluster else None
        return c.name if c else None

    def host_name(vm: types.Vm) -> str | None:
        h_id = store.vm_runtime(vm.id).host_id
        h = store.hosts.get(h_id) if h_id else None
        return h.name if h else None

    def tags(vm: types.Vm) -> list[str]:
        return [t.name for t in (store.tags.get(tid) for tid in store.runtime.vm_tags.get(vm.id, [])) if t]

    def ips(vm: types.Vm) -> list[str]:
        return [ip.address for d in guest.reported_devices(store, vm) for ip in d.ips]

    def template_name(vm: types.Vm) -> str | None:
        t = store.templates.get(vm.template.id) if vm.template else None
        return t.name if t else None

    def datacenter(vm: types.Vm) -> str | None:
        c = store.clusters.get(vm.cluster.id) if vm.cluster else None
        dc = store.data_centers.get(c.data_center.id) if c and c.data_center else None
        return dc.name if dc else None

    return {
        "name": lambda v: v.name, "id": lambda v: v.id, "status": lambda v: v.status,
        "description": lambda v: v.description, "comment": lambda v: v.comment,
        "cluster": cluster_name, "host": host_name, "on_host": host_name, "tag": tags, "ip": ips,
        "template": template_name, "datacenter": datacenter, "fqdn": lambda v: v.fqdn,
        "type": lambda v: v.type, "os": lambda v: v.os.type if v.os else None,
        "memory": lambda v: (v.memory or 0) // (1024 * 1024),
    }


def present(engine: EngineView, vm: types.Vm, paths: list[str] | None = None) -> types.Vm:
    """The VM as rendered: guest-agent fields and followed sub-collections on a copy of the row."""
    store = engine.store
    view = shallow(vm)
    guest.decorate(store, view)
    paths = paths or []
    if wants(paths, "disk_attachments"):
        view.disk_attachments = vm_devices.attachments_view(store, vm, sub_paths(paths, "disk_attachments"))
    if wants(paths, "nics"):
        view.nics = store.vm_nics.children(vm.id)
    if wants(paths, "reported_devices"):
        view.reported_devices = guest.reported_devices(store, vm)
    if wants(paths, "tags"):
        view.tags = vm_devices.tags_of(store, vm)
    if wants(paths, "graphics_consoles"):
        view.graphics_consoles = store.vm_consoles.children(vm.id)
    return view


def vm_for_action(engine: EngineView, req: ApiRequest, verb: str) -> types.Vm:
    """An action on an unknown VM reaches the backend: 400 `[Cannot run VM. VM is not found.]`
    (docs/compatibility.md#engine-faults-and-retries)."""
    vm = engine.store.vms.get(req.params["vm"])
    if vm is None:
        raise bad_parameters(f"Cannot {verb} VM. VM is not found.")
    return vm


@route("GET", "/vms")
def list_vms(engine: EngineView, req: ApiRequest) -> ApiResponse:
    return listing(engine, req, engine.store.vms.all(), "vms", vm_fields(engine.store),
                   present=lambda vm, paths: present(engine, vm, paths))


@route("GET", "/vms/{vm}")
def get_vm(engine: EngineView, req: ApiRequest) -> ApiResponse:
    return entity(vm_or_404(engine, req), req, present=lambda vm, paths: present(engine, vm, paths))


def _validate_name(name: str, action: str) -> None:
    """Bean validation of the name's characters, then `VmCommand.isVmNameValidLength`
    (docs/compatibility.md#engine-limits)."""
    if not _NAME.match(name):
        raise bad_parameters(Msg.name_invalid(action, "VM"))
    if len(name) > MAX_VM_NAME_LENGTH:
        raise bad_parameters(Msg.name_too_long(action, "VM"))


def platform_memory_limit_mb(cluster: types.Cluster | None) -> int:
    """`VM64BitMaxMemorySizeInMB` of the cluster's compatibility level (docs/compatibility.md#engine-limits)."""
    version = cluster.version if cluster is not None else None
    level = (version.major or 4, version.minor or 0) if version is not None else (4, 8)
    for upto, limit in _PLATFORM_MEMORY_MB:
        if level <= upto:
            return limit
    return _PLATFORM_MEMORY_MB[-1][1]


def _validate_memory(vm: types.Vm, action: str, cluster: types.Cluster | None) -> None:
    """Guaranteed within memory, then `VmHandler.validateMaxMemorySize`: memory within the maximum (a CONFLICT),
    the maximum within the platform limit of the cluster level (a CONSTRAINT_VIOLATION)."""
    mp = vm.memory_policy
    if vm.memory is not None and mp is not None and mp.guaranteed is not None and mp.guaranteed > vm.memory:
        raise bad_parameters(Msg.GUARANTEED_ABOVE_MEMORY.format(action=action))
    if vm.memory is not None and mp is not None and mp.max is not None and mp.max < vm.memory:
        raise conflict(Msg.memory_above_max(action, vm.memory // 2**20, mp.max // 2**20))
    limit = platform_memory_limit_mb(cluster)
    if mp is not None and mp.max is not None and mp.max // 2**20 > limit:
        raise bad_parameters(Msg.max_memory_above_platform(action, mp.max // 2**20, limit))


def _validate_custom_properties(vm: types.Vm, action: str) -> None:
    bad = []
    for prop in vm.custom_properties or []:
        syntax = CUSTOM_PROPERTIES.get(prop.name or "")
        if syntax is None or not re.match(syntax, prop.value or ""):
            bad.append(prop.name or "")
    if bad:
        raise bad_parameters(Msg.custom_property_invalid(action, bad))


def _resolve_placement(store: Store, vm: types.Vm) -> None:
    if vm.placement_policy is None or not vm.placement_policy.hosts:
        return
    hosts = []
    for h in vm.placement_policy.hosts:
        host = resolve(store, "hosts", "Host", h)
        hosts.append(ref(host))
    vm.placement_policy.hosts = hosts


def _inherit(vm: types.Vm, template: types.Template, instance_type: types.InstanceType | None) -> None:
    memory_given = vm.memory is not None or (instance_type is not None and instance_type.memory is not None)
    for attr in INHERITED:
        if getattr(vm, attr) is not None:
            continue
        value = None
        if instance_type is not None and attr in INSTANCE_TYPE_FIELDS:
            value = getattr(instance_type, attr)
        if value is None:
            value = getattr(template, attr, None)
        if value is not None:
            setattr(vm, attr, copy.deepcopy(value))
    if vm.cpu is not None and vm.cpu.topology is None:
        base = instance_type.cpu if instance_type is not None and instance_type.cpu else template.cpu
        if base is not None and base.topology is not None:
            vm.cpu.topology = copy.deepcopy(base.topology)
    # Memory policy (`VmCommonUtils.getMaxMemorySizeDefault`: max 4x memory; guaranteed from the over-commit,
    # 100% here): derived from the VM's own memory unless the request set a policy.
    if vm.memory_policy is None and memory_given:
        vm.memory_policy = types.MemoryPolicy()
    elif vm.memory_policy is None:
        vm.memory_policy = copy.deepcopy(template.memory_policy)
    if vm.memory is not None and vm.memory_policy is not None:
        if vm.memory_policy.max is None:
            vm.memory_policy.max = 4 * vm.memory
        if vm.memory_policy.guaranteed is None:
            vm.memory_policy.guaranteed = vm.memory


@route("POST", "/vms")
def add_vm(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store, t = engine.store, engine.timings
    vm: types.Vm = req.parse(types.Vm)
    require(vm.name, "Vm", "name")
    if vm.cluster is None or not (vm.cluster.id or vm.cluster.name):
        raise incomplete("Vm", "cluster.id|name", "add")
    if vm.template is None or not (vm.template.id or vm.template.name):
        raise incomplete("Vm", "template.id|name", "add")
    cluster = resolve(store, "clusters", "Cluster", vm.cluster)
    template = resolve(store, "templates", "Template", vm.template)
    instance_type = resolve(store, "instance_types", "InstanceType", vm.instance_type)
    _validate_name(vm.name, "add")
    if store.find_by_name("vms", vm.name) is not None:
        raise conflict(Msg.VM_NAME_IN_USE)
    if template.status is not types.TemplateStatus.OK:
        raise conflict(f"Cannot add VM. Template {template.name} is locked. Please try again in a few minutes.")
    pinning_query = req.query.get("auto_pinning_policy")
    if pinning_query in ("existing", "adjust") and vm.auto_pinning_policy is None and vm.cpu_pinning_policy is None \
            and vm.cpu is not None and (vm.cpu.topology is not None or vm.cpu.cpu_tune is not None):
        raise conflict(Msg.CPU_UPDATE_NOT_PERMITTED)
    _inherit(vm, template, instance_type)
    _validate_memory(vm, "add", cluster)
    _validate_custom_properties(vm, "add")
    _resolve_placement(store, vm)

    clone = req.flag("clone", False)
    plans = _plan_disks(store, vm, template, clone)
    disk_ops.check_space(store, [p for p, _ in plans], "add", "VM")

    # Everything is valid: create.
    for attr in EMBEDDED:
        setattr(vm, attr, None)
    vm.id = new_id()
    vm.href = href("vms", vm.id)
    vm.cluster = ref(cluster)
    vm.template = ref(template)
    vm.original_template = ref(template)
    vm.instance_type = ref(instance_type) if instance_type is not None else None
    vm.creation_time = utcnow()
    vm.origin = "ovirt"
    vm.stateless = bool(vm.stateless)
    vm.delete_protected = bool(vm.delete_protected)
    vm.next_run_configuration_exists = False
    vm.run_once = False
    vm.has_illegal_images = False
    vm.host = None
    store.vms.put(vm)
    rt = store.vm_runtime(vm.id)
    rt.thin = not clone and template.id != "00000000-0000-0000-0000-000000000000"

    for plan, template_da in plans:
        disk = disk_ops.create_disk(engine, plan, t.vm_create)
        _attach(store, vm, disk, template_da)
    _copy_template_devices(store, vm, template)

    if plans:
        statemachine.begin_create(store, vm, t)
        engine.add_job(req, f"Creating VM {vm.name} from Template {template.name} in Cluster {cluster.name}",
                       t.vm_create)
        return entity(present(engine, vm), status=202, location=True)
    vm.status = types.VmStatus.DOWN
    engine.add_job(req, f"Creating VM {vm.name} from Template {template.name} in Cluster {cluster.name}")
    return entity(present(engine, vm), status=201, location=True)


def _plan_disks(store: Store, vm: types.Vm, template: types.Template, clone: bool) -> list[tuple[Any, Any]]:
    """One disk per template disk, with the per-disk format/sparse/storage domain the request asked for (5.2)."""
    requested = {da.disk.id: da.disk for da in (vm.disk_attachments or []) if da.disk is not None and da.disk.id}
    template_das = store.template_disk_attachments.children(template.id)
    known = {da.id for da in template_das}
    for disk_id in requested:
        if disk_id not in known:
            raise entity_not_found("Disk", f"id={disk_id}")
    plans = []
    for n, tda in enumerate(template_das, start=1):
        tdisk = store.disks.get(tda.id)
        spec = requested.get(tda.id) or types.Disk()
        sd_ref = (spec.storage_domains or [None])[0] or tdisk.storage_domains[0]
        sd = resolve(store, "storage_domains", "StorageDomain", sd_ref)
        fmt = spec.format or (tdisk.format if clone else types.DiskFormat.COW)
        sparse = spec.sparse if spec.sparse is not None else (tdisk.sparse if clone else True)
        actual = None
        if sparse:
            actual = tdisk.actual_size if clone else disk_ops.SPARSE_INITIAL
        alias = spec.alias or (f"{vm.name}_Disk{n}")
        plans.append((disk_ops.plan_disk(store, spec, sd, "add", "VM", tdisk.provisioned_size, fmt, sparse, actual,
                                         alias), tda))
    return plans


def _attach(store: Store, vm: types.Vm, disk: types.Disk, like: types.DiskAttachment) -> types.DiskAttachment:
    da = types.DiskAttachment(id=disk.id, active=like.active if like.active is not None else True,
                              bootable=bool(like.bootable), interface=like.interface or types.DiskInterface.VIRTIO_SCSI,
                              pass_discard=bool(like.pass_discard), read_only=bool(like.read_only),
                              uses_scsi_reservation=bool(like.uses_scsi_reservation),
                              disk=ref(disk), vm=ref(vm))
    da.href = href("vms", vm.id, "diskattachments", disk.id)
    store.vm_disk_attachments.put(da)
    return da


def _copy_template_devices(store: Store, vm: types.Vm, template: types.Template) -> None:
    """The new VM gets the template's NICs (new MACs) and graphics consoles; NICs in the request are ignored."""
    for tnic in store.template_nics.children(template.id):
        vm_devices.add_nic_row(store, vm, types.Nic(name=tnic.name, interface=tnic.interface, linked=tnic.linked,
                                                    plugged=tnic.plugged, vnic_profile=copy.copy(tnic.vnic_profile)))
    for tgc in store.template_consoles.children(template.id):
        gc = types.GraphicsConsole(id=tgc.id, protocol=tgc.protocol, vm=ref(vm))
        gc.href = href("vms", vm.id, "graphicsconsoles", gc.id)
        store.vm_consoles.put(gc)


@route("PUT", "/vms/{vm}")
def update_vm(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    vm = vm_or_404(engine, req)
    patch: types.Vm = req.parse(types.Vm)
    check(VmAction.EDIT, vm.status)
    if patch.name is not None and patch.name != vm.name:
        _validate_name(patch.name, "edit")
        if store.find_by_name("vms", patch.name) is not None:
            raise conflict(Msg.VM_NAME_IN_USE.replace("Cannot add VM", "Cannot edit VM"))
    trial = shallow(vm)
    merge(trial, patch, skip=_FIXED_STATUS | {f"_{a}" for a in EMBEDDED})
    _validate_memory(trial, "edit", store.clusters.get(vm.cluster.id) if vm.cluster else None)
    _validate_custom_properties(trial, "edit")
    _resolve_placement(store, trial)
    vm.__dict__.update(trial.__dict__)
    if req.flag("next_run") and vm.status is not types.VmStatus.DOWN:
        vm.next_run_configuration_exists = True
    return entity(present(engine, vm))


@route("DELETE", "/vms/{vm}")
def remove_vm(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    vm = vm_or_404(engine, req)
    force = req.flag("force")
    detach_only = req.flag("detach_only")
    check(VmAction.REMOVE, vm.status, force)
    if vm.delete_protected:
        raise conflict(Msg.VM_DELETE_PROTECTED)
    attachments = store.vm_disk_attachments.children(vm.id)
    locked = [store.disks.get(da.id) for da in attachments]
    locked_aliases = [d.alias for d in locked if d is not None and d.status is types.DiskStatus.LOCKED]
    if locked_aliases and not force:
        raise conflict(Msg.disks_locked("remove", "VM", locked_aliases))
    rt = store.vm_runtime(vm.id)
    if detach_only and rt.thin:
        raise conflict(Msg.VM_REMOVE_DETACH_THIN)
    for da in store.vm_disk_attachments.drop_parent(vm.id):
        disk = store.disks.get(da.id)
        if disk is None or detach_only:
            continue
        if store.vm_disk_attachments.with_id(da.id):
            continue  # a shareable disk still attached elsewhere
        # The VM row goes at once; its images are deleted by a storage task (6.2, "disks go locked").
        disk.status = types.DiskStatus.LOCKED
        store.schedule(engine.timings.disk_remove, "disk_delete", disk.id)
    for nic in store.vm_nics.drop_parent(vm.id):
        store.runtime.nic_ips.pop(nic.id, None)
    store.vm_consoles.drop_parent(vm.id)
    store.runtime.vm_tags.pop(vm.id, None)
    for group in store.affinity_groups.all():
        if group.vms:
            kept = [m for m in group.vms if m.id != vm.id]  # one pass: a benchmark's group holds a thousand VMs
            if len(kept) != len(group.vms):
                group.vms = kept
    store.vms.remove(vm.id)
    store.runtime.vms.pop(vm.id, None)
    engine.add_job(req, f"Removing VM {vm.name} from system")
    return removed()


# -- actions -----------------------------------------------------------------------------------------------
def _check_disks_unlocked(store: Store, vm: types.Vm, verb: str) -> None:
    locked = [d.alias for d in (store.disks.get(da.id) for da in store.vm_disk_attachments.children(vm.id))
              if d is not None and d.status is types.DiskStatus.LOCKED]
    if locked:
        raise conflict(Msg.disks_locked(verb, "VM", locked))


@route("POST", "/vms/{vm}/start", action=True)
def start_vm(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store, t = engine.store, engine.timings
    vm = vm_for_action(engine, req, "run")
    action: types.Action = req.action
    check(VmAction.START, vm.status)
    _check_disks_unlocked(store, vm, "run")
    rt: VmRuntime = store.vm_runtime(vm.id)
    guest.decide_init(vm, action, rt)  # 409 on conflicting initialization flags, before anything changes
    if vm.status is types.VmStatus.PAUSED:
        host = store.hosts.get(rt.host_id) if rt.host_id else pick_host(store, vm)
    else:
        if not any(da.bootable and da.active is not False for da in store.vm_disk_attachments.children(vm.id)):
            raise conflict(Msg.NO_BOOTABLE_DISK)
        host = pick_host(store, vm)
    agent = guest.boot(vm, action, rt) if vm.status is not types.VmStatus.PAUSED else rt.has_agent
    statemachine.begin_start(store, vm, host, t, agent)
    job = engine.add_job(req, f"Launching VM {vm.name}", t.wait_for_launch)
    return action_done(job, action)


def _stop(engine: EngineView, req: ApiRequest, action: VmAction, graceful: bool) -> ApiResponse:
    vm = vm_for_action(engine, req, action.value)
    check(action, vm.status)
    statemachine.begin_stop(engine.store, vm, engine.timings, graceful)
    verb = "Shutting down" if graceful else "Stopping"
    job = engine.add_job(req, f"{verb} VM {vm.name}",
                         engine.timings.powering_down_shutdown if graceful else engine.timings.powering_down_stop)
    return action_done(job, req.action)


@route("POST", "/vms/{vm}/stop", action=True)
def stop_vm(engine: EngineView, req: ApiRequest) -> ApiResponse:
    return _stop(engine, req, VmAction.STOP, graceful=False)


@route("POST", "/vms/{vm}/shutdown", action=True)
def shutdown_vm(engine: EngineView, req: ApiRequest) -> ApiResponse:
    return _stop(engine, req, VmAction.SHUTDOWN, graceful=True)


@route("POST", "/vms/{vm}/reboot", action=True)
def reboot_vm(engine: EngineView, req: ApiRequest) -> ApiResponse:
    vm = vm_for_action(engine, req, "reboot")
    check(VmAction.REBOOT, vm.status)
    statemachine.begin_reboot(engine.store, vm, engine.timings)
    job = engine.add_job(req, f"Rebooting VM {vm.name}", engine.timings.reboot)
    return action_done(job, req.action)


@route("POST", "/vms/{vm}/reset", action=True)
def reset_vm(engine: EngineView, req: ApiRequest) -> ApiResponse:
    return reboot_vm(engine, req)


@route("POST", "/vms/{vm}/autopincpuandnumanodes", action=True)
def auto_pin(engine: EngineView, req: ApiRequest) -> ApiResponse:
    """Deprecated action the OpenShift actuator calls after create (docs/compatibility.md#creating-a-vm): with
    `optimize_cpu_settings` the VM is resized to its dedicated host's topology leaving one core per socket to the host
    (resize_and_pin_numa, inferred), otherwise the existing topology is pinned."""
    store = engine.store
    vm = vm_for_action(engine, req, "edit")
    check(VmAction.EDIT, vm.status)
    hosts = vm.placement_policy.hosts if vm.placement_policy is not None else None
    if not hosts:
        raise conflict(Msg.AUTO_PIN_NO_HOST)
    host = store.hosts.get(hosts[0].id)
    if req.action.optimize_cpu_settings:
        topo = host.cpu.topology
        vm.cpu = vm.cpu or types.Cpu()
        vm.cpu.topology = types.CpuTopology(sockets=topo.sockets, cores=max(1, (topo.cores or 1) - 1),
                                            threads=topo.threads)
        vm.cpu_pinning_policy = types.CpuPinningPolicy.RESIZE_AND_PIN_NUMA
    else:
        vm.cpu_pinning_policy = types.CpuPinningPolicy.MANUAL
    job = engine.add_job(req, f"Updating VM {vm.name}")
    return action_done(job, req.action)
