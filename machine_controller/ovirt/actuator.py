"""The oVirt Machine actuator: a Machine's provider spec made into a VM, its status read back, and the VM
removed. It knows oVirt and the provider spec, nothing of phases (those are the Machine controller's).

No call waits for the engine. Provisioning and deletion are resumable step machines: each call looks at
where the VM is, does the next idempotent step(s) and says how long to wait before looking again. A VM left
half-built by an earlier attempt or a killed controller is therefore found (by its id once known, else by
its exact name: oVirt refuses a second VM of the same name) and finished, never duplicated and never left
stopped (docs/compatibility.md#go-provider-defects).

A VM is a Machine's only when it bears the Machine's name: an id is a hint that saves a search, never a proof
(docs/architecture.md#acting-only-on-what-is-ours).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, replace
from typing import Callable, Iterable

import ovirtsdk4.types as types
import structlog

from api import keys
from api.ids import NOT_AN_OVIRT_ID, is_ovirt_id, provider_id, vm_id_from_provider_id
from api.field_errors import FieldError, InvalidProviderSpec
from api.machine import Machine
from api.meta import NodeAddress
from api.provider_spec import PROVIDER_SPEC_PATH, OvirtMachineProviderSpec, OvirtMachineProviderStatus, VMType
from api.validation import load_provider_spec
from machine_controller.controllers.provider import (InstanceNotOwned, InstanceStatus, InvalidMachineConfiguration,
                                                     Progress)

from .addresses import machine_addresses, usable_ips
from .client import NotAnOvirtId, OvirtClient
from .engine_limits import check_memory, check_vm_name
from .cluster_inputs import USER_DATA_PATH
from .errors import (BadRequestError, ConflictError, MissingDependencyError, NotFoundError, OvirtError,
                     UnreadableRequestError)
from .spec_objects import SpecObjects
from .cluster_vm_lists import NotYet, ClusterVmLists
from .vm_spec import GIB, Resolved, build_vm, os_disk_bytes

log = structlog.get_logger(__name__)

# Auto-pinning (the autopincpuandnumanodes action with resize_and_pin) came with engine 4.4.5 (BZ 1941334).
AUTO_PINNING_MIN_ENGINE = (4, 4, 5)

_BOOTING = {types.VmStatus.WAIT_FOR_LAUNCH, types.VmStatus.POWERING_UP, types.VmStatus.REBOOT_IN_PROGRESS}
_RUNNING = {types.VmStatus.UP, types.VmStatus.MIGRATING}
_BOOTING_STATES = {s.value for s in _BOOTING}


@dataclass(frozen=True)
class Timing:
    """How long, at most, to wait before looking again at a VM in each kind of state. The first look comes after
    `first_poll_s` and the interval doubles while the VM stays in the same state, up to these caps: a fast engine is
    followed closely, a slow one is not flooded (the Go client polled at 1, 3, 7, 15... s, docs/compatibility.md#engine-faults-and-retries)."""

    first_poll_s: float = 0.25
    locked_s: float = 5.0
    booting_s: float = 10.0
    stopping_s: float = 5.0
    odd_state_s: float = 15.0


_ALIGN_SLACK_S = 0.01  # wake just after the shared instant, not just before it


class _PollBackoff:
    def __init__(self, first: float):
        self._first = first
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[str, int]] = {}
        # (verb, Machine key) -> (next look, answer): a Machine is never answered with what another was told.
        self._planned: dict[tuple[str, str], tuple[float, Progress]] = {}

    def next(self, vm_id: str, state: str, cap: float) -> float:
        with self._lock:
            prev = self._seen.get(vm_id)
            n = prev[1] + 1 if prev and prev[0] == state else 0
            self._seen[vm_id] = (state, n)
        interval = min(cap, self._first * 2 ** n)
        # Looks with the same interval fall on the same instants, so one list of the cluster's VMs answers all
        # the Machines that wake together (cluster_vm_lists.py).
        now = time.monotonic()
        return math.ceil((now + interval) / interval) * interval - now + _ALIGN_SLACK_S

    def plan(self, verb: str, key: str, progress: Progress) -> Progress:
        with self._lock:
            if progress.instance_id and not progress.done:
                self._planned[(verb, key)] = (time.monotonic() + progress.requeue_after, progress)
            else:
                self._planned.pop((verb, key), None)
        return progress

    def early(self, verb: str, key: str, vm_id: str | None) -> Progress | None:
        """What `verb` said to the Machine `key` at its last look, with the time left until the next one, when it
        comes back before it (its own writes wake it) still naming the same VM: nothing in the engine is awaited
        sooner, so nothing is asked."""
        with self._lock:
            planned = self._planned.get((verb, key))
        if planned is None or planned[1].instance_id != vm_id:
            return None
        left = planned[0] - time.monotonic()
        if left <= _ALIGN_SLACK_S:
            return None
        # The problem, if any, was reported at that look; saying it again would repeat its event.
        return replace(planned[1], requeue_after=left, problem=None)

    def forget(self, vm_id: str | None, key: str) -> None:
        with self._lock:
            self._seen.pop(vm_id or "", None)
        self.unplan(key)

    def unplan(self, key: str) -> None:
        """The Machine `key` is to look at the engine at its next pass, whenever that comes."""
        with self._lock:
            for verb in ("provision", "delete"):
                self._planned.pop((verb, key), None)


def vm_id_of(machine: Machine) -> str | None:
    """The VM id the Machine already knows, from the VmId annotation, the id its status recorded while it was
    provisioned (`status.providerStatus.instanceId`), or the providerID; a value that is no engine id names
    nothing (api/ids.py)."""
    annotated = machine.metadata.annotations.get(keys.ANNOTATION_VM_ID)
    if is_ovirt_id(annotated):
        return annotated
    recorded = _status_vm_id(machine)
    if recorded:
        return recorded
    return vm_id_from_provider_id(machine.spec.provider_id)


def _status_vm_id(machine: Machine) -> str | None:
    recorded = (machine.status.provider_status or {}).get("instanceId")
    return recorded if isinstance(recorded, str) and is_ovirt_id(recorded) else None


class OvirtActuator:
    def __init__(
        self,
        client: OvirtClient,
        user_data: Callable[[str, str], str],
        excluded_ips: Callable[[], set[str]] = set,
        timing: Timing = Timing(),
        lookups: SpecObjects | None = None,
        snapshots: ClusterVmLists | None = None,
    ):
        """`user_data(namespace, secret_name)` returns the Ignition text (raising MissingDependencyError when the
        secret or its `userData` key is absent); `excluded_ips()` the API and ingress VIPs."""
        self.client = client
        self._user_data = user_data
        self._excluded_ips = excluded_ips
        self._timing = timing
        self._polls = _PollBackoff(timing.first_poll_s)
        self._lookups = lookups or SpecObjects(client)
        self.snapshots = snapshots or ClusterVmLists(client)
        self._acted: dict[str, float] = {}  # VM id -> when we last changed it (a list must be newer to judge it)
        self._os_disk_ok: set[str] = set()  # VMs whose OS disk was seen at its size, unlocked
        self._configured: set[str] = set()  # VMs whose NICs, tag and affinity groups were set
        self._removed: set[str] = set()  # VMs whose removal the engine accepted
        # Machine (namespace/name) -> when its deletion was first looked at: a stop is decided on a list of VMs
        # taken after that, never on one from before (a host lost just before the deletion leaves its VM `unknown`
        # at the engine while an older list still says `up`).
        self._deleting_since: dict[str, float] = {}
        self._no_ip: dict[str, float] = {}  # running VMs seen without an address -> when
        # Machine (namespace/name) -> the VM created for it, until the Machine's cached copy shows the id: a look
        # soon after the create may read a cache without that write yet, and would otherwise create again (a
        # 409 for the name, then an adoption).
        self._created: dict[str, str] = {}

    def wake_with(self, wake: Callable[[str], None]) -> None:
        """`wake(key)` makes the Machine `key` look again now (the Machine controller's work queue): a Machine
        waiting for a list of its cluster's VMs is woken when one that does for it comes (cluster_vm_lists.py)."""
        def woken(keys: Iterable[str]) -> None:
            for key in keys:
                self._polls.unplan(key)  # else its pass would be told what it was told before the list came
                wake(key)
        self.snapshots.wake_with(woken)

    # --- spec ---------------------------------------------------------------------------------------------------
    def spec_of(self, machine: Machine) -> OvirtMachineProviderSpec:
        try:
            spec = load_provider_spec(machine.spec.provider_spec.value)
        except InvalidProviderSpec as e:
            raise InvalidMachineConfiguration(str(e)) from None
        if spec.auto_pinning_enabled:
            version = self.client.product_version()
            if version < AUTO_PINNING_MIN_ENGINE:
                need = ".".join(map(str, AUTO_PINNING_MIN_ENGINE))
                raise InvalidMachineConfiguration(
                    f"spec.providerSpec.value.auto_pinning_policy: Forbidden: auto pinning needs oVirt engine "
                    f"{need} or newer, the engine is {'.'.join(map(str, version))}")
        return spec

    # --- lookup -------------------------------------------------------------------------------------------------
    def find_vm(self, machine: Machine, may_defer: bool = False, creating: bool = False,
                fresh_after: float = 0.0) -> types.Vm | None:
        """The Machine's VM: the VM of the Machine's name, which the engine keeps unique. A known id (the VmId
        annotation, the providerID, the VM just created) saves the search, but the VM it finds is the Machine's
        only when it bears the Machine's name: else InstanceNotOwned is raised, and that VM is neither adopted,
        reported, stopped nor removed (a manifest copied from another Machine carries its ids; a VM renamed in
        the engine is no longer the Machine's). From the
        shared list of its cluster when the spec names one the engine has, else asked on its own. With
        `may_defer`, raises NotYet when the VM must wait for the cluster's next list (cluster_vm_lists.py). With
        `creating` (the look before a create), an older list may say that no VM has the Machine's name: the
        engine refuses a second one, and `_create` adopts the VM it then finds. Never when deleting: a stale
        "absent" there would leave the VM behind. `fresh_after`: a VM found in a list comes from one started after
        that moment (the snapshots' clock)."""
        cluster = self._cluster_of(machine)
        if cluster is None:
            return self._find_directly(machine)
        known = self._known_id(machine)
        if known:
            vm = self.snapshots.by_id(cluster.name, known, max(self._acted.get(known, 0.0), fresh_after), may_defer,
                                      waiter=machine.key)
            if vm is None and known not in self._removed:  # absent from a list newer than our removal: gone
                vm = self.client.vm(known)  # not in that cluster's list: moved, or gone (asked once to be sure)
            if vm is not None:
                return _owned(machine, vm)
        named = [v for v in self.snapshots.by_name(cluster.name, machine.metadata.name, fresh_after,
                                                   absent_may_be_stale=creating and not known) if v.id]
        if len(named) > 1:
            raise OvirtError(f"{len(named)} VMs are named {machine.metadata.name!r}; refusing to guess which one "
                             "is the Machine's")
        # A VM of that name in another cluster is found when the engine refuses to create a second one.
        return named[0] if named else None

    def _find_directly(self, machine: Machine) -> types.Vm | None:
        known = self._known_id(machine)
        if known:
            vm = self.client.vm(known)
            if vm is not None:
                return _owned(machine, vm)
        return self.client.vm_by_name(machine.metadata.name)

    def _cluster_of(self, machine: Machine) -> types.Cluster | None:
        """The cluster whose list of VMs may serve the Machine's looks, or None: the VM is then asked for on its
        own, by its recorded id or its name, which need nothing of the spec. So an invalid spec never reaches the
        engine, and a Machine is deleted whatever its spec says (docs/architecture.md#acting-only-on-what-is-ours)."""
        try:
            spec = load_provider_spec(machine.spec.provider_spec.value)
        except InvalidProviderSpec:
            return None
        try:
            cluster = self._lookups.cluster(spec.cluster_id)
        except NotAnOvirtId:
            return None
        return cluster if cluster is not None and cluster.name else None

    def _known_id(self, machine: Machine) -> str | None:
        recorded = vm_id_of(machine)
        if recorded:
            self._created.pop(machine.key, None)
            return recorded
        return self._created.get(machine.key)

    def _acted_on(self, vm_id: str) -> None:
        self._acted[vm_id] = self.snapshots.now()

    def _forget(self, vm_id: str | None, key: str) -> None:
        self._polls.forget(vm_id, key)
        self._acted.pop(vm_id or "", None)
        self._os_disk_ok.discard(vm_id or "")
        self._configured.discard(vm_id or "")
        self._removed.discard(vm_id or "")
        self._deleting_since.pop(key, None)
        self._no_ip.pop(vm_id or "", None)

    def exists(self, machine: Machine) -> bool:
        return self.find_vm(machine) is not None

    # --- provisioning -------------------------------------------------------------------------------------------
    def provision(self, machine: Machine) -> Progress:
        spec = self.spec_of(machine)
        early = self._polls.early("provision", machine.key, self._known_id(machine))
        if early is not None:
            return early
        try:
            progress = self._provision(machine, spec)
        except NotYet as e:
            progress = _next_list(machine, e, self._known_id(machine))
        except NotAnOvirtId as e:
            # The client's last guard met an id the validation let through: the Machine is told which field.
            fields = [f"{PROVIDER_SPEC_PATH}.{field}" for field, value in spec.ids() if value == e.value]
            if not fields:
                raise  # not the spec's: the engine gave it, and the Machine cannot change it
            raise InvalidMachineConfiguration("; ".join(
                str(FieldError(f, f'Invalid value: "{e.value}": {NOT_AN_OVIRT_ID}')) for f in fields)) from None
        except (NotFoundError, BadRequestError):
            # Something we kept (a template, a group) may be gone or recreated: look everything up again.
            self._lookups.forget()
            raise
        return self._polls.plan("provision", machine.key, _to_record(machine, progress))

    def _provision(self, machine: Machine, spec: OvirtMachineProviderSpec) -> Progress:
        vm = self.find_vm(machine, may_defer=True, creating=True)
        if vm is None:
            vm = self._create(machine, spec)
            return self._wait(machine, vm, self._timing.locked_s, "the new VM's disks to be copied")
        status = vm.status
        if status == types.VmStatus.IMAGE_LOCKED:
            return self._wait(machine, vm, self._timing.locked_s, "the VM's disks to be unlocked")
        if status == types.VmStatus.DOWN:
            pending = self._configure(machine, spec, vm)
            if pending:
                return pending
            try:
                self.client.start_vm(vm.id, correlation_id=_correlation(machine, "start"))
                self._acted_on(vm.id)
            except ConflictError as e:
                # The VM exists but the engine will not run it now (no host satisfies its scheduling
                # constraints, a locked image...): the Machine says so, and the start is tried again.
                return self._wait(machine, vm, self._timing.locked_s, f"the engine to accept start ({e})",
                                  problem=f"VM {vm.name} exists but the engine refuses to start it: {e}")
            log.info("started VM", vm_id=vm.id)
            return self._wait(machine, vm, self._timing.booting_s, "the VM to boot", state="wait_for_launch")
        if status in _BOOTING:
            return self._wait(machine, vm, self._timing.booting_s, f"the VM to boot (it is {status.value})")
        if status in _RUNNING:
            self._polls.forget(vm.id, machine.key)
            self._os_disk_ok.discard(vm.id)
            self._configured.discard(vm.id)
            return Progress(done=True, instance_id=vm.id, instance_state=status.value)
        if status == types.VmStatus.POWERING_DOWN:
            return self._wait(machine, vm, self._timing.stopping_s, "the VM to finish powering down before starting it")
        return self._wait(machine, vm, self._timing.odd_state_s,
                          f"the VM to leave state {status.value if status else '?'}")

    def _wait(self, machine: Machine, vm: types.Vm, cap: float, what: str, state: str | None = None,
              problem: str | None = None) -> Progress:
        st = state or (vm.status.value if vm.status else None)
        # The interval doubles while the VM stays in one state; a boot that moves from wait_for_launch to
        # powering_up is one wait, and so is image_locked whoever saw it first.
        after = self._polls.next(vm.id, "booting" if st in _BOOTING_STATES else f"{st}", cap)
        # The next look needs a list of the VM's cluster started after our last action (and, deleting, after the
        # deletion began) that came after that interval: the Machine is woken by the first such list, and not
        # looked at in between (cluster_vm_lists.py); without a wake, or a cluster to list, it comes back itself.
        cluster = self._cluster_of(machine)
        fresh_after = max(self._acted.get(vm.id, 0.0), self._deleting_since.get(machine.key, 0.0))
        woken_in = None if cluster is None else self.snapshots.wake_by_list(
            cluster.name, machine.key, fresh_after, self.snapshots.now() + after)
        return Progress(done=False, requeue_after=after if woken_in is None else woken_in, waiting_for=what,
                        instance_id=vm.id, instance_state=st, problem=problem)

    def _create(self, machine: Machine, spec: OvirtMachineProviderSpec) -> types.Vm:
        name = machine.metadata.name
        check_vm_name(name)
        # Check everything the VM will need before creating it, so a missing dependency leaves no VM behind.
        cluster = self._lookups.cluster(spec.cluster_id)
        if cluster is None:
            raise MissingDependencyError(f"oVirt cluster {spec.cluster_id} not found")
        check_memory(spec, cluster)
        template = self._lookups.template(spec.template_name, spec.cluster_id)
        if template is None:
            raise MissingDependencyError(f"oVirt template {spec.template_name!r} not found")
        self._check_dependencies(machine, spec)
        ignition = self._user_data(machine.metadata.namespace, spec.user_data_secret.name)
        template_disks = self._lookups.template_disks(template.id)
        _check_os_disk_size(spec, template_disks)
        disk_ids: tuple[str, ...] = ()
        if spec.sparse is not None or spec.format or spec.storage_domain_id:
            disk_ids = tuple(a.disk.id for a in template_disks)
        hosts: tuple[str, ...] = ()
        if spec.auto_pinning_enabled:
            hosts = tuple(h.id for h in self.client.hosts_in_cluster(spec.cluster_id))
        vm = build_vm(name, spec, ignition, Resolved(template.id, disk_ids, hosts))
        try:
            created = self.client.create_vm(vm, clone=spec.effective_clone,
                                            correlation_id=_correlation(machine, "create"))
        except UnreadableRequestError as e:
            # The name is checked above and the rest of the request is made of checked values and ids: what the
            # engine cannot read is the user data, and reading it again will not change that.
            raise InvalidMachineConfiguration(
                f"{USER_DATA_PATH}: Invalid value: {spec.user_data_secret.name!r}: the engine refused the VM's user "
                f"data: {e}") from None
        except ConflictError:
            # The name is taken: an earlier attempt whose answer we lost created it. It is ours.
            existing = self.client.vm_by_name(name)
            if existing is None:
                raise
            self._created[machine.key] = existing.id
            return existing
        self._created[machine.key] = created.id
        self._acted_on(created.id)
        log.info("created VM", vm_id=created.id, template=spec.template_name)
        return created

    def _check_dependencies(self, machine: Machine, spec: OvirtMachineProviderSpec) -> None:
        for nic in spec.network_interfaces:
            if not self._lookups.vnic_profile_exists(nic.vnic_profile_id):
                raise MissingDependencyError(f"oVirt vNIC profile {nic.vnic_profile_id} not found")
        for group in spec.affinity_groups_names:
            if self._lookups.affinity_group(spec.cluster_id, group) is None:
                raise MissingDependencyError(
                    f"oVirt affinity group {group!r} not found in cluster {spec.cluster_id}")
        tag = machine.cluster_id
        if tag and not self._lookups.tag_exists(tag):
            raise MissingDependencyError(f"oVirt tag {tag!r} (the cluster's infra ID) not found")

    def _configure(self, machine: Machine, spec: OvirtMachineProviderSpec, vm: types.Vm) -> Progress | None:
        """Bring a stopped VM to the spec, step by idempotent step (docs/compatibility.md#creating-a-vm). Returns what is
        awaited, or None when the VM is ready to start."""
        # The steps that do not wait go first, and are done once per VM in this process (a restarted controller
        # checks them again: each is idempotent); the OS disk, which may have to be waited for, comes last.
        if vm.id not in self._configured:
            if spec.type == VMType.HIGH_PERFORMANCE:
                for console in self.client.graphics_consoles(vm.id):
                    self.client.remove_graphics_console(vm.id, console.id)  # headless (OCPRHV-786)
            self._reconcile_nics(spec, vm)
            tag = machine.cluster_id
            # A VM from its cluster's list carries its tags; one asked for on its own does not.
            tags = [t.name for t in vm.tags] if vm.tags is not None else self.client.vm_tags(vm.id)
            if tag and tag not in tags:
                self.client.add_vm_tag(vm.id, tag)
            for name in spec.affinity_groups_names:
                group = self._lookups.affinity_group(spec.cluster_id, name)
                if group is None:
                    raise MissingDependencyError(
                        f"oVirt affinity group {name!r} not found in cluster {spec.cluster_id}")
                self.client.add_vm_to_affinity_group(spec.cluster_id, group.id, vm.id)  # idempotent
            self._configured.add(vm.id)
        pending = self._grow_os_disk(machine, spec, vm)
        if pending:
            return pending
        if spec.auto_pinning_enabled:
            # Re-pinning a stopped VM yields the same pinning: safe to repeat when a start is retried.
            self.client.auto_pin(vm.id)
        return None

    def _grow_os_disk(self, machine: Machine, spec: OvirtMachineProviderSpec, vm: types.Vm) -> Progress | None:
        if vm.id in self._os_disk_ok:
            return None
        # A VM from its cluster's list carries its disks (newer than our last resize); else they are asked for.
        attachments = vm.disk_attachments if vm.disk_attachments is not None \
            else self.client.vm_disk_attachments(vm.id)
        boot = [a for a in attachments if a.bootable]
        if not boot or boot[0].disk is None:
            raise InvalidMachineConfiguration(f"template {spec.template_name!r} has no bootable disk")
        disk = boot[0].disk
        if disk.status == types.DiskStatus.LOCKED:
            return self._wait(machine, vm, self._timing.locked_s, "the OS disk to be unlocked")
        wanted = os_disk_bytes(spec)
        if (disk.provisioned_size or 0) < wanted:  # grown, never shrunk (docs/compatibility.md)
            self.client.resize_disk(disk.id, wanted, correlation_id=_correlation(machine, "resize"))
            self._acted_on(vm.id)
            return self._wait(machine, vm, self._timing.locked_s, "the OS disk to be unlocked")
        self._os_disk_ok.add(vm.id)
        return None

    def _reconcile_nics(self, spec: OvirtMachineProviderSpec, vm: types.Vm) -> None:
        if not spec.network_interfaces:
            return  # the template's NICs are kept (docs/compatibility.md#provider-spec)
        wanted = {f"nic{i + 1}": n.vnic_profile_id for i, n in enumerate(spec.network_interfaces)}
        current = self.client.nics(vm.id)
        for nic in current:
            profile = nic.vnic_profile.id if nic.vnic_profile else None
            if wanted.get(nic.name) != profile:
                self.client.remove_nic(vm.id, nic.id)
        kept = {n.name for n in current if wanted.get(n.name) == (n.vnic_profile.id if n.vnic_profile else None)}
        for name, profile in wanted.items():
            if name not in kept:
                self.client.add_nic(vm.id, name, profile)

    # --- status -------------------------------------------------------------------------------------------------
    def status(self, machine: Machine, fresh: bool = False, vm: types.Vm | None = None) -> InstanceStatus | None:
        vm = vm or self.find_vm(machine, fresh_after=self.snapshots.now() if fresh else 0.0)
        if vm is None:
            return None
        cluster = self._cluster_of(machine)
        if vm.status in _RUNNING and vm.id in self._no_ip and machine.status.node_ref and cluster is not None:
            # The Machine has its Node, so the guest has an address, but that VM had none at our last look: a
            # list not newer than that look cannot show it.
            vm = self.snapshots.by_id(cluster.name, vm.id, self._no_ip[vm.id]) or vm
        state = vm.status.value if vm.status else "unknown"
        addresses: list[NodeAddress] | None = None
        ips: list[str] = []
        if vm.status in _RUNNING:
            # A VM from a cluster's list carries its reported devices; one asked for on its own does not.
            devices = vm.reported_devices if vm.reported_devices is not None else self.client.reported_devices(vm.id)
            ips = usable_ips(devices, self._excluded_ips())
            addresses = machine_addresses(vm.name, ips)
            if ips:
                self._no_ip.pop(vm.id, None)
            else:
                self._no_ip[vm.id] = self.snapshots.now()
        return InstanceStatus(
            instance_id=vm.id, state=state, provider_id=provider_id(vm.id), addresses=addresses, has_ip=bool(ips),
            provider_status=OvirtMachineProviderStatus(instance_id=vm.id, instance_state=state).to_dict(),
        )

    # --- deletion -----------------------------------------------------------------------------------------------
    def delete(self, machine: Machine) -> Progress:
        """Stop, detach every non-bootable disk (so PV disks survive, BZ 2024328), remove; resumable."""
        early = self._polls.early("delete", machine.key, self._known_id(machine))
        if early is not None:
            return early
        try:
            return self._polls.plan("delete", machine.key, self._delete(machine))
        except NotYet as e:
            return self._polls.plan("delete", machine.key, _next_list(machine, e, self._known_id(machine)))

    def _delete(self, machine: Machine) -> Progress:
        known = self._known_id(machine)
        since = self._deleting_since.setdefault(machine.key, self.snapshots.now())
        vm = self.find_vm(machine, may_defer=True, fresh_after=since)
        if vm is None:
            return self._gone(machine, known)  # a VM of another name would have been refused by find_vm
        status = vm.status
        if status == types.VmStatus.UNKNOWN:
            # The engine has lost the VM's host: a stop cannot be carried out or confirmed, and the VM may still
            # run and write to its disks. Nothing is sent until the engine sees it again (or fences the host); the
            # Machine says so and is looked at again with its queue's backoff
            # (docs/fencing.md#why-the-deletion-path-is-fence-safe-too).
            return Progress(done=False, instance_id=vm.id, instance_state=status.value,
                            waiting_for="the engine to see the VM again",
                            problem=f"VM {vm.name} ({vm.id}) is unknown to the engine (its host does not answer): "
                                    "it cannot be confirmed down, so it is neither stopped nor removed until the "
                                    "engine reports it again")
        if status == types.VmStatus.DOWN:
            for att in self.client.disk_attachments(vm.id):
                if not att.bootable:
                    self.client.detach_disk(vm.id, att.id)
                    log.info("detached disk before removing the VM", disk_id=att.disk.id if att.disk else att.id)
            try:
                self.client.remove_vm(vm.id)
                self._acted_on(vm.id)
                self._removed.add(vm.id)
            except ConflictError as e:
                return self._wait(machine, vm, self._timing.locked_s, f"the engine to accept removal ({e})")
            log.info("removed VM", vm_id=vm.id)
            # The engine drops the VM's row before it answers the removal (its disks go later, in a storage task):
            # asked for that id at once, it says 404, and the Machine is done in this pass instead of waiting for
            # a list of the cluster taken after the removal (seconds at a thousand VMs: hack/bench/machines.py). The
            # removal is done either way: a failed ask leaves it to that list.
            try:
                if self.client.vm(vm.id) is None:
                    return self._gone(machine, vm.id)
            except OvirtError as e:
                log.info("could not ask for the removed VM; a list will say it is gone", vm_id=vm.id, error=str(e))
            return self._wait(machine, vm, self._timing.stopping_s, "the VM to be gone", state="removed")
        if status in (types.VmStatus.IMAGE_LOCKED, types.VmStatus.POWERING_DOWN):
            return self._wait(machine, vm, self._timing.stopping_s, f"the VM to settle (it is {status.value})")
        try:
            self.client.stop_vm(vm.id, correlation_id=_correlation(machine, "stop"))
            self._acted_on(vm.id)
        except ConflictError as e:
            return self._wait(machine, vm, self._timing.stopping_s, f"the engine to accept stop ({e})")
        return self._wait(machine, vm, self._timing.stopping_s, "the VM to stop")

    def _gone(self, machine: Machine, vm_id: str | None) -> Progress:
        """The Machine's VM is proven gone: by the engine's 404 for its id, or by its absence from a list taken
        after the deletion began."""
        self._forget(vm_id, machine.key)
        self._created.pop(machine.key, None)
        return Progress(done=True)


def _to_record(machine: Machine, progress: Progress) -> Progress:
    """`progress` with the providerStatus the Machine is to record when it does not record that VM yet (its id
    the first time it is known, written by the controller with the phase Provisioning in one status write), or
    when the VM's state is news (a refused start). A state the VM only passes through on its way up is not
    written: the id is what later looks need (docs/architecture.md#from-a-machine-to-a-vm-and-back)."""
    if progress.done or not progress.instance_id:
        return progress
    if vm_id_of(machine) == progress.instance_id and not progress.problem:
        return progress
    return replace(progress, provider_status=OvirtMachineProviderStatus(
        instance_id=progress.instance_id, instance_state=progress.instance_state).to_dict())


def _owned(machine: Machine, vm: types.Vm) -> types.Vm:
    """`vm`, found by an id the Machine knows, when it bears the Machine's name; else InstanceNotOwned naming the
    fields that pointed at it."""
    name = machine.metadata.name
    if vm.name == name:
        return vm
    fields = [f for f, value in ((f"metadata.annotations[{keys.ANNOTATION_VM_ID}]",
                                  machine.metadata.annotations.get(keys.ANNOTATION_VM_ID)),
                                 ("status.providerStatus.instanceId", _status_vm_id(machine)),
                                 ("spec.providerID", vm_id_from_provider_id(machine.spec.provider_id)))
              if value == vm.id]
    raise InstanceNotOwned(
        f"{' and '.join(fields) or 'the id recorded for it'} names VM {vm.id}, which is named {vm.name!r}, not "
        f"{name!r}: a VM is a Machine's only when it bears the Machine's name, so that VM is left alone",
        vm.id, provider_id(vm.id))


def _check_os_disk_size(spec: OvirtMachineProviderSpec, template_disks: list[types.DiskAttachment]) -> None:
    """An OS disk smaller than the template's is refused before any VM exists: the engine grows disks but never
    shrinks them, so the Machine could never get the size it asks for (docs/compatibility.md#disks)."""
    wanted = os_disk_bytes(spec)
    if not wanted:
        return
    boot = [a.disk for a in template_disks if a.bootable and a.disk is not None]
    current = boot[0].provisioned_size if boot and boot[0].provisioned_size else 0
    if wanted < current:
        raise InvalidMachineConfiguration(
            f"spec.providerSpec.value.os_disk.size_gb: Invalid value: {spec.os_disk.size_gb}: must be at least "
            f"the template's OS disk size, {_gib(current)} GiB (oVirt cannot shrink a disk)")


def _next_list(machine: Machine, e: NotYet, vm_id: str | None) -> Progress:
    # The Machine's last action is newer than the cluster's recent list: looked at again with the next one (woken
    # when it comes, when the controller wakes Machines).
    return Progress(done=False, requeue_after=e.after_s + _ALIGN_SLACK_S, waiting_for="the next list of the VMs",
                    instance_id=vm_id,
                    instance_state=machine.metadata.annotations.get(keys.ANNOTATION_INSTANCE_STATE)
                    or (machine.status.provider_status or {}).get("instanceState"))


def _gib(size: int) -> str:
    return f"{size / GIB:g}"


def _correlation(machine: Machine, step: str) -> str:
    # The engine tags the jobs of a request with it: an admin can find in the engine what a Machine did.
    return f"{machine.metadata.name}-{step}"[:50]
