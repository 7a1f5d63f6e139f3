"""The oVirt calls the controllers make, each one short, classified and retried.

Every method borrows a connection from the pool for the duration of one call (never across a wait), turns
SDK exceptions into the classes of `errors`, and retries transient ones a few times with a short capped
backoff (tenacity). Longer waits are not made here: a caller that must wait for a VM state requeues itself.
"""

from __future__ import annotations

import sys
import time
from typing import Callable, Iterator, TypeVar

import ovirtsdk4 as sdk
import ovirtsdk4.types as types
import structlog
import tenacity

from api.ids import NOT_AN_OVIRT_ID, is_ovirt_id

from .connection import ConnectionPool, NoCredentials
from .errors import BadRequestError, ConflictError, NotFoundError, OvirtError, TransientError, classify
from .request_metrics import RequestMetrics
from .search import equals
from .streaming_get import Reader, get_streamed

T = TypeVar("T")
# AddVmToAffinityGroupCommand's refusal of a VM that is already a member (DUPLICATE_ENTITY_IN_AFFINITY_GROUP).
_DUPLICATE_MEMBER = "Duplicate VM"
log = structlog.get_logger(__name__)


class NotAnOvirtId(BadRequestError):
    """An id that is no engine UUID was to go into a request: refused before anything is sent, and not retried
    (docs/architecture.md#acting-only-on-what-is-ours). The ids of a Machine's spec are checked where they enter
    (api/validation.py); this is the last guard, so `value` and `what` let a caller that knows where the value came
    from name its field."""

    def __init__(self, value: str, what: str):
        super().__init__(f"the {what} id {value!r} {NOT_AN_OVIRT_ID}: it is not sent to the engine")
        self.value = value
        self.what = what


def _id(value: str, what: str) -> None:
    """NotAnOvirtId unless `value` is an engine id: called by each method before its request is built."""
    if not is_ovirt_id(value):
        raise NotAnOvirtId(value, what)


def _ids_of_new_vm(vm: types.Vm) -> Iterator[tuple[str, str | None]]:
    """(what, id) of each object a VM to be created names by id (vm_spec.py `build_vm`)."""
    yield "cluster", vm.cluster.id if vm.cluster else None
    yield "template", vm.template.id if vm.template else None
    if vm.instance_type is not None:
        yield "instance type", vm.instance_type.id
    for host in (vm.placement_policy.hosts or []) if vm.placement_policy else []:
        yield "host", host.id
    for attachment in vm.disk_attachments or []:
        if attachment.disk is not None:
            yield "template disk", attachment.disk.id
            for domain in attachment.disk.storage_domains or []:
                yield "storage domain", domain.id


class OvirtClient:
    def __init__(self, pool: ConnectionPool, attempts: int = 3, max_wait_s: float = 2.0,
                 metrics: RequestMetrics | None = None):
        self.pool = pool
        self._metrics = metrics

        def retrying(worth: Callable[[BaseException], bool]) -> tenacity.Retrying:
            return tenacity.Retrying(retry=tenacity.retry_if_exception(worth),
                                     stop=tenacity.stop_after_attempt(attempts),
                                     wait=tenacity.wait_exponential(multiplier=0.2, max=max_wait_s), reraise=True)
        self._retrying = retrying(lambda e: isinstance(e, TransientError) and not isinstance(e, NoCredentials))
        # A create refused with 409 is refused for its name, which a retry does not change: the caller adopts the
        # VM that holds it (actuator.py `_create`).
        self._retrying_create = retrying(lambda e: isinstance(e, TransientError) and not isinstance(
            e, (NoCredentials, ConflictError)))
        # A power action is sent once. A lost answer (a timeout, a dropped connection) does not say whether the
        # engine took it, and a stop sent again blindly may land after the VM was started again; a 409 is the
        # engine's answer, which a retry a moment later only repeats. The caller looks at the VM and at the
        # action's job before sending another (docs/fencing.md#power-actions-are-sent-once).
        self._once = tenacity.Retrying(stop=tenacity.stop_after_attempt(1), reraise=True)

    # --- the one way to talk to the engine ---------------------------------------------------------------------
    def call(self, what: str, fn: Callable[[sdk.services.SystemService], T]) -> T:
        return self._call(what, lambda conn: fn(conn.system_service()))

    def _call(self, what: str, fn: Callable[[sdk.Connection], T], retrying: tenacity.Retrying | None = None) -> T:
        metrics = self._metrics
        # The metrics' operation label: the method that asked, a name from the code (request_metrics.py says why).
        frame = sys._getframe(1)
        while frame.f_code.co_name in ("call", "_vm_call") and frame.f_back is not None:
            frame = frame.f_back
        operation = frame.f_code.co_name

        def once() -> T:
            with self.pool.connection() as conn:
                start = time.monotonic()
                try:
                    result = fn(conn)
                except Exception as e:
                    err = classify(e, what)
                    if metrics is not None:
                        metrics.observe(operation, err, time.monotonic() - start)
                    raise err from e
                if metrics is not None:
                    metrics.observe(operation, None, time.monotonic() - start)
                return result
        return (retrying or self._retrying)(once)

    def ping(self) -> None:
        """One request to the API root: used by the health check."""
        self.call("test connection", lambda s: s.get())

    def product_version(self) -> tuple[int, int, int]:
        api = self.call("get API root", lambda s: s.get())
        v = api.product_info.version
        return (v.major or 0, v.minor or 0, v.build or 0)

    # --- lookups -----------------------------------------------------------------------------------------------
    def vm(self, vm_id: str) -> types.Vm | None:
        try:
            return self._vm_call(f"get VM {vm_id}", vm_id, lambda vm: vm.get())
        except NotFoundError:
            return None

    def cluster_vms(self, cluster_name: str, new_reader: Callable[[], Reader[list[T]]]) -> list[T]:
        """Every VM of the cluster, each with its reported devices (the guest's addresses), tags and disks inlined,
        made into what a reader from `new_reader` makes of the answer's XML, fed to it as it arrives (vm_list_reader.py:
        the SDK's reader would build a full VM of tens of KiB for each, in Python, which at a thousand VMs was the
        controller's largest cost; streaming_get.py: the SDK would hold the answer twice, whole)."""
        query = {"search": equals("cluster", cluster_name, "cluster name"),
                 "follow": "reported_devices,tags,disk_attachments.disk"}

        def fetch(conn: sdk.Connection) -> list[T]:
            return get_streamed(conn, "/vms", query, new_reader(), conn.system_service().vms_service()._check_fault)
        return self._call(f"list VMs of cluster {cluster_name}", fetch)

    def vm_disk_attachments(self, vm_id: str) -> list[types.DiskAttachment]:
        """The VM's disk attachments with each disk inlined: sizes and states in one request."""
        return self._vm_call("list VM disks", vm_id, lambda vm: vm.disk_attachments_service().list(follow="disk"))

    def vm_by_name(self, name: str) -> types.Vm | None:
        # The search matches patterns and is case-insensitive; identity is the exact name.
        query = equals("name", name, "VM name")
        vms = self.call(f"search VM {name}", lambda s: s.vms_service().list(search=query))
        exact = [v for v in vms if v.name == name]
        if len(exact) > 1:
            raise OvirtError(f"{len(exact)} VMs are named {name!r}; refusing to guess which one is the Machine's")
        return exact[0] if exact else None

    def template_by_name(self, name: str, cluster_id: str) -> types.Template | None:
        query = equals("name", name, "template name")
        tpls = self.call(f"search template {name}", lambda s: s.templates_service().list(search=query))
        exact = [t for t in tpls if t.name == name]
        # Templates of the same name may live in several data centers; prefer the one of the VM's cluster.
        in_cluster = [t for t in exact if t.cluster is not None and t.cluster.id == cluster_id]
        pool = in_cluster or exact
        # Template versions share the name: the newest version is what a user expects to boot.
        pool.sort(key=lambda t: (t.version.version_number if t.version else 0) or 0, reverse=True)
        return pool[0] if pool else None

    def cluster(self, cluster_id: str) -> types.Cluster | None:
        _id(cluster_id, "cluster")
        try:
            return self.call(f"get cluster {cluster_id}",
                             lambda s: s.clusters_service().cluster_service(cluster_id).get())
        except NotFoundError:
            return None

    def template_disk_attachments(self, template_id: str) -> list[types.DiskAttachment]:
        """With each disk inlined (`follow=disk`): its size and format come in the same request."""
        _id(template_id, "template")
        return self.call("list template disks", lambda s: s.templates_service().template_service(template_id)
                         .disk_attachments_service().list(follow="disk"))

    def hosts_in_cluster(self, cluster_id: str) -> list[types.Host]:
        hosts = self.call("list hosts", lambda s: s.hosts_service().list())
        return [h for h in hosts if h.cluster is not None and h.cluster.id == cluster_id]

    def vnic_profile_exists(self, profile_id: str) -> bool:
        _id(profile_id, "vNIC profile")
        try:
            self.call(f"get vNIC profile {profile_id}",
                      lambda s: s.vnic_profiles_service().profile_service(profile_id).get())
            return True
        except NotFoundError:
            return False

    def affinity_group(self, cluster_id: str, name: str) -> types.AffinityGroup | None:
        _id(cluster_id, "cluster")
        groups = self.call("list affinity groups", lambda s: s.clusters_service().cluster_service(cluster_id)
                           .affinity_groups_service().list())
        exact = [g for g in groups if g.name == name]
        if len(exact) > 1:
            raise OvirtError(f"{len(exact)} affinity groups are named {name!r} in cluster {cluster_id}")
        return exact[0] if exact else None

    def tag_exists(self, name: str) -> bool:
        tags = self.call("list tags", lambda s: s.tags_service().list())
        return any(t.name == name for t in tags)

    # --- VM changes --------------------------------------------------------------------------------------------
    def create_vm(self, vm: types.Vm, clone: bool, correlation_id: str) -> types.Vm:
        for what, value in _ids_of_new_vm(vm):
            _id(value or "", what)
        return self._call(f"create VM {vm.name}", lambda conn: conn.system_service().vms_service().add(
            vm, clone=clone, clone_permissions=False, query={"correlation_id": correlation_id}), self._retrying_create)

    def _vm_call(self, what: str, vm_id: str, fn: Callable[[sdk.services.VmService], T],
                 retrying: tenacity.Retrying | None = None) -> T:
        """`fn` on the VM's service; the id is checked before a connection is taken."""
        _id(vm_id, "VM")
        if retrying is None:
            return self.call(what, lambda s: fn(s.vms_service().vm_service(vm_id)))
        return self._call(what, lambda conn: fn(conn.system_service().vms_service().vm_service(vm_id)), retrying)

    def set_vm_comment(self, vm_id: str, comment: str) -> None:
        """The VM's comment (its owner mark, owner_mark.py): a change the engine makes to a running VM at once."""
        self._vm_call("set VM comment", vm_id, lambda vm: vm.update(types.Vm(comment=comment)))

    def disk_attachments(self, vm_id: str) -> list[types.DiskAttachment]:
        return self._vm_call("list VM disks", vm_id, lambda vm: vm.disk_attachments_service().list())

    def disk(self, disk_id: str) -> types.Disk:
        _id(disk_id, "disk")
        return self.call(f"get disk {disk_id}", lambda s: s.disks_service().disk_service(disk_id).get())

    def resize_disk(self, disk_id: str, size_bytes: int, correlation_id: str) -> None:
        _id(disk_id, "disk")
        self.call(f"resize disk {disk_id}", lambda s: s.disks_service().disk_service(disk_id).update(
            types.Disk(provisioned_size=size_bytes), query={"correlation_id": correlation_id}))

    # The ids of a VM's own attachments, NICs and consoles come from the engine's answers (a console's is not even
    # a UUID: oVirt writes its protocol's name in hex): only the VM's id is checked.
    def detach_disk(self, vm_id: str, attachment_id: str) -> None:
        self._vm_call(f"detach disk {attachment_id}", vm_id, lambda vm: vm.disk_attachments_service()
                      .attachment_service(attachment_id).remove(detach_only=True))

    def nics(self, vm_id: str) -> list[types.Nic]:
        return self._vm_call("list NICs", vm_id, lambda vm: vm.nics_service().list())

    def remove_nic(self, vm_id: str, nic_id: str) -> None:
        self._vm_call(f"remove NIC {nic_id}", vm_id, lambda vm: vm.nics_service().nic_service(nic_id).remove())

    def add_nic(self, vm_id: str, name: str, vnic_profile_id: str) -> None:
        _id(vnic_profile_id, "vNIC profile")
        self._vm_call(f"add NIC {name}", vm_id, lambda vm: vm.nics_service().add(
            types.Nic(name=name, vnic_profile=types.VnicProfile(id=vnic_profile_id))))

    def graphics_consoles(self, vm_id: str) -> list[types.GraphicsConsole]:
        return self._vm_call("list graphics consoles", vm_id, lambda vm: vm.graphics_consoles_service().list())

    def remove_graphics_console(self, vm_id: str, console_id: str) -> None:
        self._vm_call("remove graphics console", vm_id, lambda vm: vm.graphics_consoles_service()
                      .console_service(console_id).remove())

    def vm_tags(self, vm_id: str) -> list[str]:
        return [t.name for t in self._vm_call("list VM tags", vm_id, lambda vm: vm.tags_service().list())]

    def add_vm_tag(self, vm_id: str, name: str) -> None:
        self._vm_call(f"tag VM with {name}", vm_id, lambda vm: vm.tags_service().add(types.Tag(name=name)))

    def add_vm_to_affinity_group(self, cluster_id: str, group_id: str, vm_id: str) -> None:
        """Idempotent: a VM already in the group is the engine's 400 `Duplicate VM`, taken as done; so membership
        is never listed first (a group of a thousand workers would cost a thousand-VM list per VM)."""
        for value, what in ((cluster_id, "cluster"), (group_id, "affinity group"), (vm_id, "VM")):
            _id(value, what)

        def add(s: sdk.services.SystemService) -> None:
            svc = s.clusters_service().cluster_service(cluster_id).affinity_groups_service() \
                .group_service(group_id).vms_service()
            try:
                svc.add(types.Vm(id=vm_id))
            except sdk.Error as e:
                if getattr(e, "code", None) == 400 and _DUPLICATE_MEMBER in str(e):
                    return  # already a member (docs/compatibility.md#affinity-groups)
                # Engines answer this POST with <action> instead of <vm> (BZ 1931932,
                # docs/compatibility.md#creating-a-vm): the VM was added all the same.
                if "got Action" not in str(e) and "Action" not in str(e).split("but got")[-1]:
                    raise
        self.call("add VM to affinity group", add)

    def auto_pin(self, vm_id: str) -> None:
        self._vm_call("auto-pin CPU and NUMA", vm_id,
                      lambda vm: vm.auto_pin_cpu_and_numa_nodes(optimize_cpu_settings=True))

    def start_vm(self, vm_id: str, correlation_id: str) -> None:
        """Sent once, never retried here (see `_once`)."""
        self._vm_call("start VM", vm_id, lambda vm: vm.start(query={"correlation_id": correlation_id}), self._once)

    def stop_vm(self, vm_id: str, correlation_id: str) -> None:
        """A hard stop, sent once, never retried here (see `_once`)."""
        self._vm_call("stop VM", vm_id, lambda vm: vm.stop(force=True, query={"correlation_id": correlation_id}),
                      self._once)

    def jobs(self, correlation_id: str) -> list[types.Job]:
        """The engine's jobs of the requests sent with this correlation id (docs/compatibility.md#correlation-ids)."""
        query = equals("correlation_id", correlation_id, "correlation id")
        return self.call(f"list jobs of {correlation_id}", lambda s: s.jobs_service().list(search=query))

    def remove_vm(self, vm_id: str) -> None:
        try:
            self._vm_call("remove VM", vm_id, lambda vm: vm.remove())
        except NotFoundError:
            pass

    def reported_devices(self, vm_id: str) -> list[types.ReportedDevice]:
        return self._vm_call("list reported devices", vm_id, lambda vm: vm.reported_devices_service().list())
