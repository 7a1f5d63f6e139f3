"""The PoweringOn and WaitingForNode phases: one start, then the Node Ready again since the start ends the
cycle well; a cycle that does not within timeoutSeconds is followed by another after the cooldown, or escalated
(docs/fencing.md#one-cycle)."""

from __future__ import annotations

import datetime as dt

from api.meta import ConditionSeverity, false_condition, true_condition
from api.remediation import OvirtRemediation, RemediationPhase
from machine_controller.controllers.provider import Power, PowerState
from machine_controller.runtime.controller import Result

from .context import CONDITIONS, time_of
from .power_actions import PowerActions
from .targets import Target


class PoweringOn(PowerActions):
    def _powering_on(self, obj: dict, rem: OvirtRemediation, target: Target) -> Result | None:
        power = self._read_power(obj, rem, target)
        if power is None:
            return None
        if power.state == PowerState.UNKNOWN:
            return self._wait_unknown(obj, rem, power)
        if power.state in (PowerState.ON, PowerState.STARTING):
            # With no start of ours recorded (a refused one clears it), the VM was started since this phase began:
            # the Node's Ready counts from then, not from now, which may be after it was Ready already. Its
            # timeout runs from now, when the start is seen to have landed: a start held on its way lands long
            # after it was sent (docs/fencing.md#requests-whose-answer-was-lost).
            self._write(obj, rem, phase=RemediationPhase.WAITING_FOR_NODE,
                        power_on_requested=rem.status.power_on_requested or rem.status.powering_on_since
                        or self._stamp(), vm_start_seen=self._stamp(),
                        message=f"waiting for node {target.node_name} to be Ready")
            return None
        if power.state == PowerState.STOPPING:
            return Result(requeue_after=self._timing.poll_s)
        # Off. A VM the engine will not start counts against the same timeout as a Node that does not come back,
        # measured from the power-on as the CRD documents: the storage release before it does not count.
        since = time_of(rem.status.powering_on_since)
        if since is None:  # a request in this phase from a controller that did not record it
            self._write(obj, rem, powering_on_since=self._stamp())
            since = self._clock()
        timeout = rem.spec.strategy.timeout_seconds
        requested = time_of(rem.status.power_on_requested)
        # A start of ours whose answer was lost may still land (a refusal clears the intent): the cycle does not
        # give up before it no longer can, whatever timeoutSeconds says
        # (docs/fencing.md#requests-whose-answer-was-lost).
        deadline = since + dt.timedelta(seconds=timeout)
        if requested is not None:
            deadline = max(deadline, requested + dt.timedelta(seconds=self._timing.lost_request_lands_by_s))
        if self._clock() >= deadline:
            waited = self._elapsed(since)
            return self._cycle_failed(obj, rem, target, waited, f"the engine has not started the VM of node "
                                                                f"{target.node_name} in {waited:.0f}s")
        if requested is not None and self._elapsed(requested) < self._timing.action_shows_s:
            return Result(requeue_after=self._timing.poll_s)  # a start was sent: give it time to show
        return self._send(obj, rem, target, "power_on_requested", target.power.power_on, "start", "PowerOnRefused")

    def _waiting_for_node(self, obj: dict, rem: OvirtRemediation, target: Target) -> Result | None:
        started = time_of(rem.status.power_on_requested) or self._clock()
        if self._node_is_ready(target.node_name, since=started):
            self._remove_taints(target.node_name)
            self._metrics.outcomes.labels(rem.metadata.namespace, "succeeded").inc()
            self._events.normal(obj, "RemediationSucceeded", f"node {target.node_name} is Ready again")
            self._write(obj, rem, phase=RemediationPhase.SUCCEEDED, message=f"node {target.node_name} is Ready",
                        conditions=[false_condition(CONDITIONS.PROCESSING, "Done", ConditionSeverity.INFO,
                                                    "the node is Ready"),
                                    true_condition(CONDITIONS.SUCCEEDED)])
            return None
        power = self._read_power(obj, rem, target)
        if power is None:
            return None
        if power.state in (PowerState.OFF, PowerState.STOPPING) \
                and target.power.stopped_by_late_power_off(target.provider_id, target.vm_name):
            return self._start_again(obj, rem, target, power)
        # From when the start was seen to land; a request from a controller that did not record it, from the send.
        waited = self._elapsed(time_of(rem.status.vm_start_seen) or started)
        timeout = rem.spec.strategy.timeout_seconds
        if waited < timeout:
            return Result(requeue_after=min(self._timing.poll_s * 2, timeout - waited))
        return self._cycle_failed(obj, rem, target, waited,
                                  f"node {target.node_name} not Ready {timeout}s after the VM was started")

    def _start_again(self, obj: dict, rem: OvirtRemediation, target: Target, power: Power) -> Result | None:
        """The repaired VM went down after the start, stopped by a stop of ours that reached the engine after our
        start (the engine's jobs of the stop's correlation id say so): the controller's own late request, not a
        failure of the cycle. The VM is started again in the same cycle, no retry spent
        (docs/fencing.md#requests-whose-answer-was-lost)."""
        if power.state == PowerState.STOPPING:
            return Result(requeue_after=self._timing.poll_s)
        message = ("the VM went down after it was started: a stop of ours reached oVirt after the start, late; "
                   "starting the VM again in the same power cycle")
        self._events.warning(obj, "LatePowerOff", message)
        self._write(obj, rem, phase=RemediationPhase.POWERING_ON, powering_on_since=self._stamp(),
                    power_on_requested="", vm_start_seen="", message=message)
        return None

    def _cycle_failed(self, obj: dict, rem: OvirtRemediation, target: Target, waited: float,
                      why: str) -> Result | None:
        """`timeoutSeconds` passed since the power-on began, and the engine did not start the VM or its Node is not
        back (`why` says which): another cycle after the cooldown while the retry limit allows, else escalation."""
        timeout = rem.spec.strategy.timeout_seconds
        if rem.status.retry_count < rem.spec.strategy.retry_limit:
            pause = timeout + rem.spec.cooldown_seconds - waited
            if pause > 0:
                self._write(obj, rem, message=f"{why}; next power cycle after a cooldown")
                return Result(requeue_after=pause)
            self._events.warning(obj, "RemediationRetry", f"{why}; power cycle {rem.status.retry_count + 1}")
            self._begin_cycle(obj, rem, target, retry_count=rem.status.retry_count + 1)
            return None
        return self._escalate(obj, rem, target, why)
