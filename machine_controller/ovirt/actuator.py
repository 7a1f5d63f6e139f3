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
import time
from dataclasses import dataclass, replace
from typing import Callable, Iterable

import ovirtsdk4.types as types
import structlog

from api import keys
from api.field_errors import FieldError, InvalidProviderSpec
from api.ids import NOT_AN_OVIRT_ID, is_ovirt_id, provider_id, vm_id_from_provider_id
from api.machine import Machine
from api.meta import NodeAddress
from api.provider_spec import PROVIDER_SPEC_PATH, OvirtMachineProviderSpec, OvirtMachineProviderStatus
from api.validation import load_provider_spec
from machine_controller.controllers.provider import (
    ActuatorError,
    InstanceNotOwned,
    InstanceStatus,
    InvalidMachineConfiguration,
    Progress,
)

from .addresses import machine_addresses, usable_ips
from .client import NotAnOvirtId, OvirtClient
from .cluster_inputs import USER_DATA_PATH
from .cluster_vm_lists import ClusterVmLists, NotYet
from .engine_limits import check_memory, check_vm_name
from .errors import (
    BadRequestError,
    ConflictError,
    MissingDependencyError,
    NotFoundError,
    OvirtError,
    UnreadableRequestError,
)
from .owner_mark import OwnerMarks, V, VmOfAnother, said_by
from .spec_objects import SpecObjects
from .tracker import ALIGN_SLACK_S, Tracker
from .vm_configuration import VmConfiguration, check_os_disk_size, correlation
from .vm_spec import Resolved, build_vm

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
    followed closely, a slow one is not flooded (the Go client polled at 1, 3, 7, 15... s,
    docs/compatibility.md#engine-faults-and-retries)."""

    first_poll_s: float = 0.25
    locked_s: float = 5.0
    booting_s: float = 10.0
    stopping_s: float = 5.0
    odd_state_s: float = 15.0


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
        spec_objects: SpecObjects | None = None,
        vm_lists: ClusterVmLists | None = None,
        user_data_path: str = USER_DATA_PATH,
        owner_marks: OwnerMarks | None = None,
    ):
        """`user_data(namespace, secret_name)` returns the Ignition text (raising MissingDependencyError when the
        secret or its `userData` key is absent); `excluded_ips()` the API and ingress VIPs. `user_data_path`: the
        field naming the user data's Secret, in a refusal of its text (Cluster API's front end names the Machine's
        bootstrap data Secret). `owner_marks`: each VM created carries its owner's mark, and a VM is the Machine's only
        when it bears the Machine's mark as well as its name (owner_mark.py: Cluster API's front end, whose names are
        unique per namespace only); without, the name alone proves it (the Machine API's VMs bear no mark)."""
        self.client = client
        self._marks = owner_marks
        self._user_data = user_data
        self._user_data_path = user_data_path
        self._excluded_ips = excluded_ips
        self._timing = timing
        self._spec_objects = spec_objects or SpecObjects(client)
        self.vm_lists = vm_lists or ClusterVmLists(client)
        # Everything remembered of a Machine and its VM between passes, and when it goes (tracker.py).
        self.tracker = Tracker(self.vm_lists.now)
        self._configuration = VmConfiguration(client, self._spec_objects, self.tracker)

    def wake_with(self, wake: Callable[[str], None]) -> None:
        """`wake(key)` makes the Machine `key` look again now (the Machine controller's work queue): a Machine
        waiting for a list of its cluster's VMs is woken when one that does for it comes (cluster_vm_lists.py)."""
        def woken(keys: Iterable[str]) -> None:
            for key in keys:
                self.tracker.unplan(key)  # else its pass would be told what it was told before the list came
                wake(key)
        self.vm_lists.wake_with(woken)

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
        that moment (the VM lists' clock)."""
        cluster = self._cluster_of(machine)
        if cluster is None:
            return self._find_directly(machine)
        known = self._known_id(machine)
        if known:
            vm = self.vm_lists.by_id(cluster.name, known, max(self.tracker.acted_at(known), fresh_after), may_defer,
                                     waiter=machine.key)
            # Absent from a list newer than the removal we sent: gone.
            if vm is None and not self.tracker.removed(machine.key, known):
                vm = self.client.vm(known)  # not in that cluster's list: moved, or gone (asked once to be sure)
            if vm is not None:
                return self._owned(machine, vm)
        named = [v for v in self.vm_lists.by_name(cluster.name, machine.metadata.name, fresh_after,
                                                  absent_may_be_stale=creating and not known) if v.id]
        if len(named) > 1:
            raise OvirtError(f"{len(named)} VMs are named {machine.metadata.name!r}; refusing to guess which one "
                             "is the Machine's")
        # A VM of that name in another cluster is found when the engine refuses to create a second one.
        return self._named(machine, named[0]) if named else None

    def _find_directly(self, machine: Machine) -> types.Vm | None:
        known = self._known_id(machine)
        if known:
            vm = self.client.vm(known)
            if vm is not None:
                return self._owned(machine, vm)
        vm = self.client.vm_by_name(machine.metadata.name)
        return self._named(machine, vm) if vm is not None else None

    def _owned(self, machine: Machine, vm: types.Vm) -> types.Vm:
        """`vm`, found by an id the Machine knows, when it bears the Machine's name (and, with owner marks, its
        mark); else InstanceNotOwned."""
        _owned(machine, vm)
        if self._marks is not None and not self._adopted(machine, vm) and not self._marks.is_marked_for(machine, vm):
            raise _not_owned(machine, vm, f"bears the name {vm.name!r} but {said_by(vm)}")
        return vm

    def _named(self, machine: Machine, vm: V) -> V:
        """`vm`, which bears the Machine's name: the Machine's, unless owner marks are required and it does not
        bear the Machine's (VmOfAnother, and nothing is done to it)."""
        if self._marks is None or self._adopted(machine, vm):
            return vm
        return self._marks.check(machine, vm)

    def _adopted(self, machine: Machine, vm: V) -> bool:
        """A Machine API VM the object was converted from (OwnerMarks.adoptable) gets the object's mark, written
        before anything else is sent to it; True once it bears it. A list taken before the write still shows the VM
        unmarked, and the same mark is written again (the same comment: no harm) until a newer list comes."""
        assert self._marks is not None
        if not self._marks.adoptable(machine, vm) or vm.id is None:
            return False
        self.client.set_vm_comment(vm.id, self._marks.mark(machine))
        log.info("adopted the Machine API VM the object was converted from: its owner mark written", vm_id=vm.id)
        return True

    def _cluster_of(self, machine: Machine) -> types.Cluster | None:
        """The cluster whose list of VMs may serve the Machine's looks, or None: the VM is then asked for on its
        own, by its recorded id or its name, which need nothing of the spec. So an invalid spec never reaches the
        engine, and a Machine is deleted whatever its spec says (docs/architecture.md#acting-only-on-what-is-ours)."""
        try:
            spec = load_provider_spec(machine.spec.provider_spec.value)
        except InvalidProviderSpec:
            return None
        try:
            cluster = self._spec_objects.cluster(spec.cluster_id)
        except NotAnOvirtId:
            return None
        return cluster if cluster is not None and cluster.name else None

    def _known_id(self, machine: Machine) -> str | None:
        return self.tracker.vm_id_for(machine.key, vm_id_of(machine))

    def exists(self, machine: Machine) -> bool:
        return self.find_vm(machine) is not None

    # --- provisioning -------------------------------------------------------------------------------------------
    def provision(self, machine: Machine) -> Progress:
        spec = self.spec_of(machine)
        early = self.tracker.early("provision", machine.key, self._known_id(machine))
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
            self._spec_objects.forget()
            raise
        return self.tracker.plan("provision", machine.key, _to_record(machine, progress))

    def _provision(self, machine: Machine, spec: OvirtMachineProviderSpec) -> Progress:
        vm = self.find_vm(machine, may_defer=True, creating=True)
        if vm is None:
            vm = self._create(machine, spec)
            return self._wait(machine, vm, self._timing.locked_s, "the new VM's disks to be copied")
        status = vm.status
        if status == types.VmStatus.IMAGE_LOCKED:
            return self._wait(machine, vm, self._timing.locked_s, "the VM's disks to be unlocked")
        if status == types.VmStatus.DOWN:
            pending = self._configuration.configure(machine, spec, vm)
            if pending:
                return self._wait(machine, vm, self._timing.locked_s, pending)
            try:
                self.client.start_vm(vm.id, correlation_id=correlation(machine, "start"))
                self.tracker.acted_on(machine.key, vm.id)
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
            self.tracker.provisioned(machine.key, vm.id)
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
        after = self._next_look(machine, vm.id, "booting" if st in _BOOTING_STATES else f"{st}", cap)
        # The next look needs a list of the VM's cluster started after our last action (and, deleting, after the
        # deletion began) that came after that interval: the Machine is woken by the first such list, and not
        # looked at in between (cluster_vm_lists.py); without a wake, or a cluster to list, it comes back itself.
        cluster = self._cluster_of(machine)
        fresh_after = max(self.tracker.acted_at(vm.id), self.tracker.deleting_since(machine.key))
        woken_in = None if cluster is None else self.vm_lists.wake_by_list(
            cluster.name, machine.key, fresh_after, self.vm_lists.now() + after)
        return Progress(done=False, requeue_after=after if woken_in is None else woken_in, waiting_for=what,
                        instance_id=vm.id, instance_state=st, problem=problem)

    def _next_look(self, machine: Machine, vm_id: str, state: str, cap: float) -> float:
        """In how long to look again at a VM found in `state`: `first_poll_s`, doubled at each look that finds it
        still there, up to `cap`."""
        n = self.tracker.looks_in_state(machine.key, vm_id, state)
        interval = min(cap, self._timing.first_poll_s * 2 ** n)
        # Looks with the same interval fall on the same instants, so one list of the cluster's VMs answers all
        # the Machines that wake together (cluster_vm_lists.py).
        now = time.monotonic()
        return math.ceil((now + interval) / interval) * interval - now + ALIGN_SLACK_S

    def _create(self, machine: Machine, spec: OvirtMachineProviderSpec) -> types.Vm:
        name = machine.metadata.name
        check_vm_name(name)
        secret = spec.user_data_secret
        if secret is None:  # the spec's validation requires it (api/validation.py)
            raise InvalidMachineConfiguration(f"{self._user_data_path}: Required value")
        # Check everything the VM will need before creating it, so a missing dependency leaves no VM behind.
        cluster = self._spec_objects.cluster(spec.cluster_id)
        if cluster is None:
            raise MissingDependencyError(f"oVirt cluster {spec.cluster_id} not found")
        check_memory(spec, cluster)
        template = self._spec_objects.template(spec.template_name, spec.cluster_id)
        if template is None:
            raise MissingDependencyError(f"oVirt template {spec.template_name!r} not found")
        self._configuration.check_dependencies(machine, spec)
        ignition = self._user_data(machine.metadata.namespace, secret.name)
        template_disks = self._spec_objects.template_disks(template.id)
        check_os_disk_size(spec, template_disks)
        disk_ids: tuple[str, ...] = ()
        if spec.sparse is not None or spec.format or spec.storage_domain_id:
            disk_ids = tuple(a.disk.id for a in template_disks)
        hosts: tuple[str, ...] = ()
        if spec.auto_pinning_enabled:
            hosts = tuple(h.id for h in self.client.hosts_in_cluster(spec.cluster_id))
        vm = build_vm(name, spec, ignition, Resolved(template.id, disk_ids, hosts))
        if self._marks is not None:
            vm.comment = self._marks.mark(machine)
        try:
            created = self.client.create_vm(vm, clone=spec.effective_clone,
                                            correlation_id=correlation(machine, "create"))
        except UnreadableRequestError as e:
            # The name is checked above and the rest of the request is made of checked values and ids: what the
            # engine cannot read is the user data, and reading it again will not change that.
            raise InvalidMachineConfiguration(
                f"{self._user_data_path}: Invalid value: {secret.name!r}: the engine refused the VM's "
                f"user data: {e}") from None
        except ConflictError:
            # The name is taken: an earlier attempt whose answer we lost created it, and it is ours (with owner
            # marks, only when it bears ours: else another's VM of that name was there first).
            existing = self.client.vm_by_name(name)
            if existing is None:
                raise
            existing = self._named(machine, existing)
            self.tracker.created(machine.key, existing.id)
            return existing
        self.tracker.created(machine.key, created.id)
        self.tracker.acted_on(machine.key, created.id)
        log.info("created VM", vm_id=created.id, template=spec.template_name)
        return created

    # --- status -------------------------------------------------------------------------------------------------
    def status(self, machine: Machine, fresh: bool = False, vm: types.Vm | None = None) -> InstanceStatus | None:
        vm = vm or self.find_vm(machine, fresh_after=self.vm_lists.now() if fresh else 0.0)
        if vm is None:
            return None
        vm_id = vm.id
        if vm_id is None:
            raise ActuatorError(f"the engine described VM {vm.name!r} without its id")
        cluster = self._cluster_of(machine)
        without_ip_since = self.tracker.without_ip_since(vm_id)
        if vm.status in _RUNNING and without_ip_since is not None and machine.status.node_ref and cluster is not None:
            # The Machine has its Node, so the guest has an address, but that VM had none at our last look: a
            # list not newer than that look cannot show it.
            vm = self.vm_lists.by_id(cluster.name, vm_id, without_ip_since) or vm
        state = vm.status.value if vm.status else "unknown"
        addresses: list[NodeAddress] | None = None
        ips: list[str] = []
        if vm.status in _RUNNING:
            # A VM from a cluster's list carries its reported devices; one asked for on its own does not.
            devices = vm.reported_devices if vm.reported_devices is not None else self.client.reported_devices(vm_id)
            ips = usable_ips(devices, self._excluded_ips())
            addresses = machine_addresses(vm.name or machine.metadata.name, ips)  # the same: the VM is the Machine's
            if ips:
                self.tracker.seen_with_ip(vm_id)
            else:
                self.tracker.seen_without_ip(machine.key, vm_id)
        return InstanceStatus(
            instance_id=vm_id, state=state, provider_id=provider_id(vm_id), addresses=addresses, has_ip=bool(ips),
            provider_status=OvirtMachineProviderStatus(instance_id=vm_id, instance_state=state).to_dict(),
        )

    # --- deletion -----------------------------------------------------------------------------------------------
    def delete(self, machine: Machine) -> Progress:
        """Stop, detach every non-bootable disk (so PV disks survive, BZ 2024328), remove; resumable."""
        early = self.tracker.early("delete", machine.key, self._known_id(machine))
        if early is not None:
            return early
        try:
            return self.tracker.plan("delete", machine.key, self._delete(machine))
        except NotYet as e:
            return self.tracker.plan("delete", machine.key, _next_list(machine, e, self._known_id(machine)))

    def _delete(self, machine: Machine) -> Progress:
        since = self.tracker.deletion_began(machine.key)
        try:
            vm = self.find_vm(machine, may_defer=True, fresh_after=since)
        except VmOfAnother as e:
            # The only VM that may be the Machine's is the one of its name, and that one is proven another's.
            log.info("the VM of the Machine's name is another's: nothing of it is touched", error=str(e))
            return self._gone(machine)
        if vm is None:
            return self._gone(machine)  # a VM of another name would have been refused by find_vm
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
                self.tracker.acted_on(machine.key, vm.id)
                self.tracker.removal_accepted(machine.key, vm.id)
            except ConflictError as e:
                return self._wait(machine, vm, self._timing.locked_s, f"the engine to accept removal ({e})")
            log.info("removed VM", vm_id=vm.id)
            # The engine drops the VM's row before it answers the removal (its disks go later, in a storage task):
            # asked for that id at once, it says 404, and the Machine is done in this pass instead of waiting for
            # a list of the cluster taken after the removal (seconds at a thousand VMs: hack/bench/machines.py). The
            # removal is done either way: a failed ask leaves it to that list.
            try:
                if self.client.vm(vm.id) is None:
                    return self._gone(machine)
            except OvirtError as e:
                log.info("could not ask for the removed VM; a list will say it is gone", vm_id=vm.id, error=str(e))
            return self._wait(machine, vm, self._timing.stopping_s, "the VM to be gone", state="removed")
        if status in (types.VmStatus.IMAGE_LOCKED, types.VmStatus.POWERING_DOWN):
            return self._wait(machine, vm, self._timing.stopping_s, f"the VM to settle (it is {status.value})")
        try:
            self.client.stop_vm(vm.id, correlation_id=correlation(machine, "stop"))
            self.tracker.acted_on(machine.key, vm.id)
        except ConflictError as e:
            return self._wait(machine, vm, self._timing.stopping_s, f"the engine to accept stop ({e})")
        return self._wait(machine, vm, self._timing.stopping_s, "the VM to stop")

    def forget(self, key: str) -> None:
        self.tracker.forget(key)

    def _gone(self, machine: Machine) -> Progress:
        """The Machine's VM is proven gone: by the engine's 404 for its id, or by its absence from a list taken
        after the deletion began."""
        self.tracker.forget(machine.key)
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
    raise _not_owned(machine, vm, f"is named {vm.name!r}, not {name!r}")


def _not_owned(machine: Machine, vm: types.Vm, why: str) -> InstanceNotOwned:
    fields = [f for f, value in ((f"metadata.annotations[{keys.ANNOTATION_VM_ID}]",
                                  machine.metadata.annotations.get(keys.ANNOTATION_VM_ID)),
                                 ("status.providerStatus.instanceId", _status_vm_id(machine)),
                                 ("spec.providerID", vm_id_from_provider_id(machine.spec.provider_id)))
              if value == vm.id]
    return InstanceNotOwned(
        f"{' and '.join(fields) or 'the id recorded for it'} names VM {vm.id}, which {why}: a VM is a Machine's only "
        "when it bears the Machine's name (and mark, where marks are required), so that VM is left alone",
        vm.id, provider_id(vm.id))


def _next_list(machine: Machine, e: NotYet, vm_id: str | None) -> Progress:
    # The Machine's last action is newer than the cluster's recent list: looked at again with the next one (woken
    # when it comes, when the controller wakes Machines).
    return Progress(done=False, requeue_after=e.after_s + ALIGN_SLACK_S, waiting_for="the next list of the VMs",
                    instance_id=vm_id,
                    instance_state=machine.metadata.annotations.get(keys.ANNOTATION_INSTANCE_STATE)
                    or (machine.status.provider_status or {}).get("instanceState"))
