"""The PoweringOff phase: the NoSchedule taint, then one hard stop (within the bound on concurrent power
operations), and nothing more until the engine reports the VM off; `unknown` is never off, and a Node Ready again
before the stop is left alone (docs/fencing.md#one-cycle)."""

from __future__ import annotations

from typing import Callable

from api.meta import ConditionSeverity, false_condition, get_condition, true_condition
from api.remediation import REMEDIATION_TAINT_KEY, OvirtRemediation, RemediationPhase
from machine_controller.controllers.provider import Power, PowerState
from machine_controller.runtime.controller import Result
from machine_controller.runtime.kube import object_key

from .context import CONDITIONS, time_of
from .power_actions import PowerActions
from .targets import Target

# Phases in which a VM is off or about to be: each counts against the bound on concurrent power operations.
_POWER_PHASES = {RemediationPhase.POWERING_OFF, RemediationPhase.RELEASING_STORAGE, RemediationPhase.POWERING_ON}


class PoweringOff(PowerActions):
    def _powering_off(self, obj: dict, rem: OvirtRemediation, target: Target) -> Result | None:
        power = self._read_power(obj, rem, target)
        if power is None:
            return None
        # Only now, the VM read and proven the target's own: a Node that copied another's providerID is not touched.
        if target.node_name:
            self._taint(target.node_name, {"key": REMEDIATION_TAINT_KEY, "effect": "NoSchedule",
                                           "timeAdded": self._stamp()})
        if power.state == PowerState.UNKNOWN:
            return self._wait_unknown(obj, rem, power)
        if power.state == PowerState.OFF:
            self._events.normal(obj, "PowerOffConfirmed", f"oVirt reports the VM of node {target.node_name} down")
            self._write(obj, rem, phase=RemediationPhase.RELEASING_STORAGE, message="releasing the node's storage",
                        conditions=[true_condition(CONDITIONS.POWER_OFF_CONFIRMED)])
            return None
        requested = time_of(rem.status.power_off_requested)
        timeout = rem.spec.power_off_timeout_seconds
        # A stop recorded (maybe just before a restart, its answer lost) that the engine took is given the timeout
        # before another; one that never reached it is sent again once that is clear, as a first stop is.
        waited = None if requested is None else self._elapsed(requested)
        said: Callable[[bool], None] | None = None
        if waited is not None and waited >= timeout:
            def said(sent: bool) -> None:
                self._events.warning(obj, "PowerOffSlow", f"the VM is still {power.detail} {waited:.0f}s after the "
                                     "stop; " + ("sent it again" if sent else "oVirt is still carrying out a stop of "
                                                 "ours, so no other stop was sent"))
        elif waited is not None and self._stop_may_show(power, target, waited):
            return Result(requeue_after=self._timing.poll_s)
        elif waited is None and power.state == PowerState.STOPPING:
            self._write(obj, rem, power_off_requested=self._stamp(), message="the VM is powering down")
            return Result(requeue_after=self._timing.poll_s)
        else:
            # Re-check before the irreversible step: a Node that came back by itself is left alone.
            if self._node_is_ready(target.node_name):
                return self._end_healthy(obj, rem, target, RemediationPhase.SKIPPED if rem.status.retry_count <= 1
                                         else RemediationPhase.SUCCEEDED,
                                         f"node {target.node_name} is Ready again before the power-off")
            reconnecting = self._reconnecting(obj, rem, target)
            if reconnecting is not None:
                return reconnecting
            if waited is not None:  # its power slot and its cycle were taken when it was recorded
                def said(sent: bool) -> None:
                    # Either it never left (a controller killed before sending it) or it is held on its way: the
                    # start waits for the latter (docs/fencing.md#requests-whose-answer-was-lost).
                    self._events.warning(obj, "PowerOffLost", f"the VM is still {power.detail} {waited:.0f}s after "
                                         "the stop was recorded and oVirt shows no stop of ours: " + (
                                             "sent it again" if sent else "a stop of ours is under way at oVirt "
                                             "now, so none was sent"))
            else:
                busy = self._power_slots_taken(obj)
                if busy >= self._timing.max_concurrent_power:
                    self._write(obj, rem, message=f"waiting for a power slot ({busy} VMs are being power-cycled)")
                    return Result(requeue_after=self._timing.slot_recheck_s)
                self._metrics.cycles.labels(rem.metadata.namespace).inc()
        return self._send(obj, rem, target, "power_off_requested", target.power.power_off, "stop", "PowerOffRefused",
                          said=said, lands_by="power_off_may_land_until")

    def _stop_may_show(self, power: Power, target: Target, waited: float) -> bool:
        """Whether a stop recorded `waited` seconds ago may still be the engine's to carry out: it is too recent to
        show, the VM is powering down, or the engine has a stop of ours under way."""
        return (waited < self._timing.action_shows_s or power.state == PowerState.STOPPING
                or target.power.power_off_under_way(target.provider_id, target.vm_name))

    def _reconnecting(self, obj: dict, rem: OvirtRemediation, target: Target) -> Result | None:
        """Wait a while (requeue) for the Node of a VM that is back from `unknown` before powering it off: its
        host answers again and the VM ran all along. The wait is in the request's status (the condition's reason
        and time), so a restarted controller keeps it; None once the grace is over, or when the VM was not
        unknown."""
        confirmed = get_condition(rem.status.conditions, CONDITIONS.POWER_OFF_CONFIRMED)
        grace = self._timing.reconnect_grace_s
        if confirmed is None or confirmed.reason not in ("PowerStateUnknown", "HostAnswersAgain"):
            return None
        if confirmed.reason == "PowerStateUnknown":
            message = (f"the VM's host answers again and the VM is up: waiting up to {grace:.0f}s for node "
                       f"{target.node_name} to be Ready before powering it off")
            self._events.normal(obj, "HostAnswersAgain", message)
            self._write(obj, rem, message=message,
                        conditions=[false_condition(CONDITIONS.POWER_OFF_CONFIRMED, "HostAnswersAgain",
                                                    ConditionSeverity.INFO, message)])
            return Result(requeue_after=self._timing.poll_s)
        waited = self._elapsed(time_of(confirmed.last_transition_time) or self._clock())
        return Result(requeue_after=min(self._timing.poll_s, grace - waited)) if waited < grace else None

    def _power_slots_taken(self, obj: dict) -> int:
        me = object_key(obj)
        return sum(1 for r in self._remediations.list()
                   if object_key(r) != me and ((r.get("status") or {}).get("phase") in _POWER_PHASES)
                   and (r.get("status") or {}).get("powerOffRequested"))
