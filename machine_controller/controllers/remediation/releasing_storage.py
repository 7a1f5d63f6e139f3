"""The ReleasingStorage phase: with the VM confirmed off, the Node's storage is released (the out-of-service
taint, or its pods force-deleted) and waited for, and a stop of ours whose answer was lost is given time to land
before the start (docs/fencing.md#one-cycle, docs/fencing.md#requests-whose-answer-was-lost)."""

from __future__ import annotations

from api.meta import ConditionSeverity, false_condition, format_time
from api.remediation import OvirtRemediation, RemediationPhase, StorageRelease
from machine_controller.controllers.machine.drain import MIRROR_POD_ANNOTATION
from machine_controller.controllers.nodes.storage import force_delete_pods, held_by, out_of_service_taint
from machine_controller.controllers.provider import PowerState
from machine_controller.runtime.controller import Result

from .context import CONDITIONS, time_of
from .power_actions import PowerActions
from .targets import Target


class ReleasingStorage(PowerActions):
    def _releasing_storage(self, obj: dict, rem: OvirtRemediation, target: Target) -> Result | None:
        power = self._read_power(obj, rem, target)
        if power is None:
            return None
        if power.state != PowerState.OFF:
            # Someone started the VM: what it holds can no longer be released safely. Fence it again.
            self._events.warning(obj, "VMRunningAgain", f"the VM is {power.detail} before its storage was released")
            self._write(obj, rem, phase=RemediationPhase.POWERING_OFF, power_off_requested="",
                        conditions=[false_condition(CONDITIONS.POWER_OFF_CONFIRMED, "VMRunningAgain",
                                                    ConditionSeverity.WARNING, f"the VM is {power.detail}")])
            return None
        node = self._nodes.get(target.node_name) if target.node_name else None
        released = time_of(rem.status.storage_released)
        if node is not None and released is None:
            if rem.spec.remediation_strategy == StorageRelease.RESOURCE_DELETION:
                force_delete_pods(self._rest, target.node_name)
            else:
                self._taint(target.node_name, out_of_service_taint(self._stamp()))
            self._write(obj, rem, storage_released=self._stamp(),
                        message="waiting for the node's pods with volumes and its volume attachments to go")
            return Result(requeue_after=self._timing.poll_s)
        if node is not None and released is not None:  # a Node's release has begun just above
            left = held_by(self._rest, target.node_name, MIRROR_POD_ANNOTATION)
            if left and self._elapsed(released) < self._timing.storage_release_timeout_s:
                self._write(obj, rem, message=f"waiting for {left} to go")
                return Result(requeue_after=self._timing.poll_s)
            if left:
                self._events.warning(obj, "StorageReleaseSlow",
                                     f"{left} still there {self._timing.storage_release_timeout_s:.0f}s after the "
                                     "storage release; the VM is off, so it is powered on all the same")
        lands_by = time_of(rem.status.power_off_may_land_until)
        if lands_by is not None and self._clock() < lands_by:
            # A stop of ours whose answer was lost could still land and kill the repaired VM: the start waits
            # until it no longer can (docs/fencing.md#requests-whose-answer-was-lost).
            self._write(obj, rem, message="the VM is off; a stop of ours whose answer was lost may still reach "
                                          f"oVirt until {format_time(lands_by)}: the VM is started after that")
            return Result(requeue_after=min(self._timing.poll_s, (lands_by - self._clock()).total_seconds()))
        self._write(obj, rem, phase=RemediationPhase.POWERING_ON, powering_on_since=self._stamp(),
                    message="powering the VM on")
        return None
