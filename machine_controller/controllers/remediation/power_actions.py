"""Reading the VM's power and sending a power action: the intent recorded before the action leaves, a refusal
paused on, a lost answer taken as possibly landing (docs/fencing.md#power-actions-are-sent-once,
docs/fencing.md#requests-whose-answer-was-lost)."""

from __future__ import annotations

import datetime as dt
from typing import Any, Callable

import structlog

from api.ids import vm_id_from_provider_id
from api.meta import ConditionSeverity, false_condition, format_time, true_condition
from api.remediation import OvirtRemediation, RemediationPhase
from machine_controller.controllers.provider import ActionRefused, InstanceNotOwned, Power, PowerState
from machine_controller.runtime.controller import Result
from machine_controller.runtime.kube import object_key
from machine_controller.runtime.writes import Conflict, Gone

from .context import CONDITIONS, time_of
from .outcomes import Outcomes
from .targets import Target

log = structlog.get_logger(__name__)


class PowerActions(Outcomes):
    def _begin_cycle(self, obj: dict, rem: OvirtRemediation, target: Target, retry_count: int) -> None:
        self._write(obj, rem, phase=RemediationPhase.POWERING_OFF, retry_count=retry_count,
                    vm_id=vm_id_from_provider_id(target.provider_id), node_name=target.node_name,
                    last_remediated=self._stamp(), power_off_requested="", storage_released="",
                    powering_on_since="", power_on_requested="", vm_start_seen="", message="powering the VM off",
                    conditions=[true_condition(CONDITIONS.PROCESSING),
                                false_condition(CONDITIONS.POWER_OFF_CONFIRMED, "PowerOffPending",
                                                ConditionSeverity.INFO, "the VM has not been confirmed off yet")])

    def _read_power(self, obj: dict, rem: OvirtRemediation, target: Target) -> Power | None:
        try:
            power = target.power.power(target.provider_id, target.vm_name)
        except InstanceNotOwned as e:
            # A copied providerID names another's VM: nothing was read from it or sent to it, nor will be.
            self._refuse(obj, rem, target.node_name, "VMNotOwned", str(e))
            return None
        if power is None or power.state is not PowerState.UNKNOWN:
            # The wait on an unknown VM, if there was one, is over (the gauge is removed with the request).
            self._metrics.unknown.labels(rem.metadata.namespace, rem.metadata.name).set(0)
        if power is None:
            # A VM that no longer exists writes to nothing; its Machine fails (instance missing) and is replaced.
            self._metrics.outcomes.labels(rem.metadata.namespace, "failed").inc()
            self._events.warning(obj, "VMGone", f"the VM {target.provider_id} no longer exists")
            self._write(obj, rem, phase=RemediationPhase.FAILED, message="the VM no longer exists",
                        conditions=[false_condition(CONDITIONS.SUCCEEDED, "VMGone", ConditionSeverity.ERROR,
                                                    "the VM no longer exists")])
        return power

    def _wait_unknown(self, obj: dict, rem: OvirtRemediation, power: Power) -> Result:
        message = (f"oVirt reports the VM {power.detail}: its host does not answer, so the VM may still be running; "
                   "waiting (no storage is released until the VM is confirmed down)")
        self._metrics.unknown.labels(rem.metadata.namespace, rem.metadata.name).set(1)
        self._events.warning(obj, "PowerStateUnknown", message)
        self._write(obj, rem, message=message,
                    conditions=[false_condition(CONDITIONS.POWER_OFF_CONFIRMED, "PowerStateUnknown",
                                                ConditionSeverity.WARNING, message)])
        return Result(requeue_after=self._timing.unknown_recheck_s)

    def _send(self, obj: dict, rem: OvirtRemediation, target: Target, intent: str,
              action: Callable[[str, str], bool], verb: str, refused_reason: str,
              said: Callable[[bool], None] | None = None, lands_by: str | None = None) -> Result:
        """A power action, its intent recorded first: a controller killed after sending it finds the time it was
        sent and waits for it to show instead of sending it twice. An outright refusal clears the intent (nothing
        happened), and the action is sent again after a pause that doubles with each refusal in a row: the request's
        own status writes wake it at once, and a refused action must not be repeated as fast as they are written
        (docs/fencing.md#power-actions-are-sent-once).

        `lands_by` names the status field that says until when an action of this verb whose answer was lost may
        still land: it is moved on with the intent, before the action leaves, and put back once the engine has
        answered, so a controller killed while it waited for the answer keeps it
        (docs/fencing.md#requests-whose-answer-was-lost). `said` is told whether the action was sent, or found
        under way at the engine and not sent."""
        key = object_key(obj)
        refused = self._refused.get(key)
        if refused is not None and self._clock() < refused[1]:
            return Result(requeue_after=(refused[1] - self._clock()).total_seconds())
        lands = self._clock() + dt.timedelta(seconds=self._timing.lost_request_lands_by_s)
        fields: dict[str, Any] = {intent: self._stamp()}
        answered: dict[str, Any] = {}
        if lands_by is not None:
            earlier = getattr(rem.status, lands_by)
            answered[lands_by] = earlier if (time_of(earlier) or self._clock()) > self._clock() else ""
            fields[lands_by] = format_time(max(lands, time_of(earlier) or lands))
        self._write(obj, rem, message=f"sending a {verb}", **fields)
        try:
            sent = action(target.provider_id, target.vm_name)
        except ActionRefused as e:
            count = refused[0] + 1 if refused else 1
            pause = min(self._timing.poll_s * 2 ** (count - 1), self._timing.refused_cap_s)
            self._refused[key] = (count, self._clock() + dt.timedelta(seconds=pause))
            message = f"oVirt refused to {verb} the VM: {e}"
            self._events.warning(obj, refused_reason, message)
            cleared: dict[str, Any] = {intent: ""}
            self._write(obj, rem, message=message, **cleared, **answered)
            raise
        except Exception as e:
            # No answer: the engine may have the action, or get it later
            # (docs/fencing.md#requests-whose-answer-was-lost).
            message = (f"the answer to the {verb} was lost ({e}): it may still reach oVirt until "
                       f"{format_time(lands)}")
            log.warning(message, node=target.node_name, provider_id=target.provider_id)
            try:
                self._write(obj, rem, message=message)
            except (Conflict, Gone):
                pass  # the next pass reads the newer request; the lost answer is what the queue retries
            raise
        self._refused.pop(key, None)
        message = f"{verb} sent: oVirt took it" if sent else \
            f"a {verb} of ours is still under way at oVirt: no other {verb} was sent"
        self._write(obj, rem, message=message, **answered)
        log.info(message, node=target.node_name, provider_id=target.provider_id)
        if said is not None:
            said(sent)
        return Result(requeue_after=self._timing.poll_s)
