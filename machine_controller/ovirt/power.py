"""oVirt's side of fencing (`controllers.actuator.PowerControl`): a VM's power state by its id, hard stop, start.

The VM found by the providerID's id is the target's only when it bears the target's name, which the engine keeps
unique: another is neither read as the target's power nor sent anything
(docs/architecture.md#acting-only-on-what-is-ours).

The engine's VM states map to what fencing may conclude (docs/fencing.md#the-safety-rules-the-code-keeps): only
`down` is off; `unknown` (the VM's host stopped answering) is never taken as off, since the VM may still run there.

A power action is sent once (docs/fencing.md#power-actions-are-sent-once): the client never repeats it, each one
carries a correlation id made of its verb and VM, and before one is sent the engine's jobs of that id are looked
at. A stop or start of ours the engine is still carrying out is not sent again, and no start is sent while a stop
of ours could still land after it.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Callable

import ovirtsdk4.types as types
import structlog

from api.machine import Machine
from machine_controller.controllers.provider import InstanceNotOwned, Power, PowerState

from .client import OvirtClient
from .errors import NotFoundError, TransientError
from .owner_mark import OwnerMarks, said_by
from .provider_ids import vm_id_named_by

log = structlog.get_logger(__name__)

_STATES = {
    types.VmStatus.DOWN: PowerState.OFF,
    types.VmStatus.POWERING_DOWN: PowerState.STOPPING,
    types.VmStatus.WAIT_FOR_LAUNCH: PowerState.STARTING,
    types.VmStatus.POWERING_UP: PowerState.STARTING,
    types.VmStatus.UNKNOWN: PowerState.UNKNOWN,
    # Everything else (up, paused, not_responding, migrating, reboot_in_progress, suspended, saving/restoring
    # state, image_locked) may still hold the disks: it is on until the engine says down.
}
_STOP, _START = "off", "on"
# A command waits on its host for a bounded time; a job still `started` long after is a leftover (an engine
# restart in the middle of a command can leave one), which must not hold fencing back for ever.
_JOB_RUNS_AT_MOST = dt.timedelta(minutes=10)


class ActionPending(TransientError):
    """A power action of ours is still running at the engine, and the one asked for now would race it: nothing
    was sent; the caller looks again later."""


def _correlation(verb: str, vm_id: str) -> str:
    # The engine keeps 36 characters of a correlation id (docs/fencing.md#power-actions-are-sent-once): the verb and
    # the VM id's 32 hex digits fit, so an admin finds every power action of a VM among the engine's jobs.
    return f"{verb}-{uuid.UUID(vm_id).hex}"


class OvirtPower:
    def __init__(self, client: OvirtClient, clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
                 owner_marks: OwnerMarks | None = None, namespace: str = ""):
        """With `owner_marks`, a VM is the target's only when it also bears the mark of the target of `namespace`
        (Cluster API's OvirtMachines: owner_mark.py says why their names alone prove nothing)."""
        self._client = client
        self._clock = clock
        self._marks = owner_marks
        self._namespace = namespace

    def power(self, provider_id: str, name: str) -> Power | None:
        vm = self._vm(provider_id, name)
        if vm is None:
            return None
        status = vm.status
        if status is None:
            return Power(PowerState.UNKNOWN, "unreported")
        return Power(_STATES.get(status, PowerState.ON), status.value)

    def power_off(self, provider_id: str, name: str) -> bool:
        vm_id = self._existing(provider_id, name)
        running = self._running_job(_STOP, vm_id)
        if running is not None:
            log.info("a stop of ours is still running at the engine: not sent again", vm_id=vm_id, job=running)
            return False
        self._client.stop_vm(vm_id, correlation_id=_correlation(_STOP, vm_id))
        return True

    def power_off_under_way(self, provider_id: str, name: str) -> bool:
        return self._running_job(_STOP, self._existing(provider_id, name)) is not None

    def stopped_by_late_power_off(self, provider_id: str, name: str) -> bool:
        """A stop job of ours that began after our last start job: both times are the engine's own clock, so no
        clock of this machine is compared with it. A stop the engine failed or aborted stopped nothing."""
        vm_id = self._existing(provider_id, name)
        stopped = self._last_job_start(_STOP, vm_id, ended_well=True)
        started = self._last_job_start(_START, vm_id)
        return stopped is not None and (started is None or stopped > started)

    def power_on(self, provider_id: str, name: str) -> bool:
        vm_id = self._existing(provider_id, name)
        stopping = self._running_job(_STOP, vm_id)
        if stopping is not None:
            raise ActionPending(f"a stop sent to VM {vm_id} is still running at the engine ({stopping}): a start "
                                "now could be undone by it when it lands; the VM is started once it has ended")
        running = self._running_job(_START, vm_id)
        if running is not None:
            log.info("a start of ours is still running at the engine: not sent again", vm_id=vm_id, job=running)
            return False
        self._client.start_vm(vm_id, correlation_id=_correlation(_START, vm_id))
        return True

    # --- helpers ------------------------------------------------------------------------------------------------
    def _vm(self, provider_id: str, name: str) -> types.Vm | None:
        """The VM of the providerID, when it exists and bears `name`; InstanceNotOwned when it bears another."""
        vm_id = vm_id_named_by(provider_id, name)
        vm = self._client.vm(vm_id)
        if vm is not None and vm.name != name:
            raise InstanceNotOwned(
                f"{provider_id} names VM {vm_id}, which is named {vm.name!r}, not {name!r}: a VM is the target's "
                "only when it bears its name, so that VM is neither read nor sent anything", vm_id, provider_id)
        if vm is not None and self._marks is not None:
            owner = Machine.from_dict({"metadata": {"name": name, "namespace": self._namespace}})
            if not self._marks.is_marked_for(owner, vm):
                raise InstanceNotOwned(
                    f"{provider_id} names VM {vm_id} ({name}), which {said_by(vm)}: it is not {self._marks.kind} "
                    f"{self._namespace}/{name}'s, so it is neither read nor sent anything", vm_id, provider_id)
        return vm

    def _existing(self, provider_id: str, name: str) -> str:
        vm = self._vm(provider_id, name)
        if vm is None:
            raise NotFoundError(f"the VM of {provider_id} no longer exists")
        return vm.id

    def _running_job(self, verb: str, vm_id: str) -> str | None:
        """A job of this verb's action on the VM that the engine is still carrying out, described for a log line."""
        cutoff = self._clock() - _JOB_RUNS_AT_MOST
        for job in self._client.jobs(_correlation(verb, vm_id)):
            started = _start_time(job)
            if job.status == types.JobStatus.STARTED and (started is None or started >= cutoff):
                return f"job {job.id} {job.description!r}, started {started}"
        return None

    def _last_job_start(self, verb: str, vm_id: str, ended_well: bool = False) -> dt.datetime | None:
        """When the latest job of this verb's action on the VM began (the engine's clock), if it lists one."""
        failed = (types.JobStatus.FAILED, types.JobStatus.ABORTED) if ended_well else ()
        times = [_start_time(job) for job in self._client.jobs(_correlation(verb, vm_id)) if job.status not in failed]
        return max((t for t in times if t is not None), default=None)


def _start_time(job: types.Job) -> dt.datetime | None:
    started = job.start_time
    if started is not None and started.tzinfo is None:
        started = started.replace(tzinfo=dt.UTC)  # a time that names no zone is read as UTC
    return started
