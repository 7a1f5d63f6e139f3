"""The OvirtRemediation controller: fencing by power cycle (docs/fencing.md).

One request is one Machine to bring back. Each cycle is: NoSchedule taint → hard power-off, and nothing more until
the hypervisor reports the VM off → release the Node's storage (the out-of-service taint, or force-deleting its
pods) and wait until its pods and volume attachments are gone → power on → wait for the Node to be Ready → remove
the taints. A cycle that does not bring the Node back within the timeout is followed, after a cooldown, by another,
up to the retry limit; then the Machine is deleted so its MachineSet replaces it (never a Machine without a
controller owner, nor a control-plane one).

Safety (docs/fencing.md#the-safety-rules-the-code-keeps): storage is released only after the VM is confirmed
off; `unknown` is never off; a Node that is Ready again before the power-off is left alone. Crash safety: every
step writes its intent into `status` (guarded by resourceVersion) before acting, and every step re-reads the VM
and the Node, so a restarted controller resumes where it was and sends one stop and one start per cycle.
"""

from __future__ import annotations

import copy
import datetime as dt
from dataclasses import dataclass, fields
from typing import Any, Callable

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge

from api import keys
from api.ids import vm_id_from_provider_id
from api.meta import (ConditionSeverity, false_condition, format_time, get_condition, now, parse_time, set_condition,
                      true_condition)
from api.remediation import (FINALIZER, OUT_OF_SERVICE_TAINT_KEY, REMEDIATION_TAINT_KEY,
                             OnExhaustion, OvirtRemediation, RemediationConditionType, RemediationPhase,
                             StorageRelease)
from machine_controller.runtime.bounds import check_number
from machine_controller.runtime.controller import Controller, Result, enqueue_mapped, enqueue_object, when_changed
from machine_controller.runtime.events import EventRecorder
from machine_controller.runtime.informer import Informer, Store
from machine_controller.runtime.kube import Rest, is_conflict, is_not_found, object_key
from machine_controller.runtime.manager import Manager
from machine_controller.runtime.workqueue import WorkQueue

from machine_controller.controllers.provider import ActionRefused, InstanceNotOwned, Power, PowerControl, PowerState
from machine_controller.controllers.machine.drain import MIRROR_POD_ANNOTATION
from machine_controller.controllers.nodes.status import node_ready, ready_condition
from machine_controller.controllers.nodes.storage import TaintsChanged, out_of_service_taint, patch_taints, volume_attachments
from machine_controller.controllers.resources import MACHINES, NODES, PODS, REMEDIATIONS

log = structlog.get_logger(__name__)

_TERMINAL = {RemediationPhase.SUCCEEDED, RemediationPhase.SKIPPED, RemediationPhase.FAILED}
# Phases in which a VM is off or about to be: each counts against the bound on concurrent power operations.
_POWER_PHASES = {RemediationPhase.POWERING_OFF, RemediationPhase.RELEASING_STORAGE, RemediationPhase.POWERING_ON}
_CONDITIONS = RemediationConditionType
_MASTER_ROLES = ("master", "control-plane")
_NODE_NAME_ANNOTATION = "remediation.medik8s.io/node-name"  # NodeHealthCheck names the Node it means


@dataclass(frozen=True)
class RemediationTiming:
    poll_s: float = 2.0  # looking again at a VM or a Node that is on its way
    unknown_recheck_s: float = 10.0  # a VM whose host does not answer
    # A VM back `up` from `unknown` ran all along, cut off with its host: its kubelet reconnects within seconds, so
    # its Node is given this long to be Ready again before the power-off (docs/fencing.md#one-cycle).
    reconnect_grace_s: float = 30.0
    slot_recheck_s: float = 5.0  # waiting for a power slot
    storage_release_timeout_s: float = 300.0  # the VM is off whatever happens; do not wait for ever
    refused_cap_s: float = 60.0  # the longest pause before an action the engine refused is sent again
    # A power action the engine took shows within seconds. It answers a start once the VM has left `down`
    # (wait_for_launch: the run request went to its host); a stop holds a job of ours `started` until the VM is
    # down. One recorded this long ago that shows neither never reached the engine (a controller killed between
    # recording and sending it) and is sent again (docs/fencing.md, "Crash safe").
    action_shows_s: float = 10.0
    max_concurrent_power: int = 3
    # The engine client's timeout (--ovirt-timeout). A power action whose answer it lost may have been held on its
    # way and still reach the engine after that: it is taken as possibly landing until twice this long after it
    # was sent (docs/fencing.md#requests-whose-answer-was-lost).
    request_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        # Checked here as well as by the flags (runtime/bounds.py): 0 power slots would hold every remediation
        # waiting for one for ever, a delay of 0 or less would requeue in a busy loop.
        check_number("RemediationTiming max_concurrent_power", self.max_concurrent_power, 1, integer=True,
                     why="VMs that may be powered off at once")
        for f in fields(self):
            if f.name.endswith("_s"):
                check_number(f"RemediationTiming {f.name}", getattr(self, f.name), 0, above=True, why="seconds")

    @property
    def lost_request_lands_by_s(self) -> float:
        """How long after it was sent a power action whose answer was lost may still land at the engine."""
        return 2 * self.request_timeout_s


RESULTS = ("succeeded", "skipped", "failed", "escalated")


class _Metrics:
    def __init__(self, registry: CollectorRegistry | None, namespace: str | None):
        self.cycles = Counter("ovirt_remediation_power_cycles", "Power cycles started by oVirt remediations.",
                              ["namespace"], registry=registry)
        self.outcomes = Counter("ovirt_remediation_outcomes",
                                "Ended oVirt remediations by result (succeeded, skipped, failed, escalated).",
                                ["namespace", "result"], registry=registry)
        self.unknown = Gauge("ovirt_remediation_vm_power_unknown",
                             "1 while a remediation waits on a VM whose state oVirt reports unknown (alert on it).",
                             ["namespace", "name"], registry=registry)
        if namespace:
            # The counters of the watched namespace start at 0: a series that first appears at 1 shows Prometheus
            # no increase, and the first failed remediation would never fire its alert (config/monitoring).
            self.cycles.labels(namespace)
            for result in RESULTS:
                self.outcomes.labels(namespace, result)


class _Target:
    def __init__(self, machine: dict | None, node_name: str, provider_id: str):
        self.machine = machine
        self.node_name = node_name
        self.provider_id = provider_id
        # The name the VM must bear to be the target's (docs/architecture.md#acting-only-on-what-is-ours).
        self.vm_name: str = (machine or {}).get("metadata", {}).get("name") or node_name


class RemediationReconciler:
    def __init__(self, rest: Rest, remediations: Store, machines: Store, nodes: Store, power: PowerControl,
                 events: EventRecorder, registry: CollectorRegistry | None = None,
                 timing: RemediationTiming = RemediationTiming(), clock: Callable[[], dt.datetime] = now,
                 namespace: str | None = None):
        self._rest = rest
        self._remediations = remediations
        self._machines = machines
        self._nodes = nodes
        self._power = power
        self._events = events
        self._timing = timing
        self._clock = clock
        self._metrics = _Metrics(registry, namespace)
        self._refused: dict[str, tuple[int, dt.datetime]] = {}  # request key -> (refusals in a row, next try)

    # --- entry point --------------------------------------------------------------------------------------------
    def reconcile(self, key: str) -> Result | None:
        cached = self._remediations.get(key)
        if cached is None:
            return None
        try:
            return self._reconcile(copy.deepcopy(cached))  # the informer's object is never written in place
        except _Stale:
            return Result(requeue_after=0.2)

    def _reconcile(self, obj: dict) -> Result | None:
        rem = OvirtRemediation.from_dict(obj)
        if rem.metadata.deleting:
            return self._finalize(obj, rem)
        if FINALIZER not in rem.metadata.finalizers:
            self._patch_meta(obj, {"finalizers": [*rem.metadata.finalizers, FINALIZER]})
            return None
        phase = rem.status.phase
        if phase in _TERMINAL:
            return None
        target = self._target(obj, rem)
        if target is None:
            return Result(requeue_after=30.0)
        if vm_id_from_provider_id(target.provider_id) is None:
            return self._refuse_not_ovirt(obj, rem, target)
        if phase == RemediationPhase.DELETING_MACHINE:
            self._delete_machine(target)
            return None
        if not phase:
            return self._start(obj, rem, target)
        handler = {
            RemediationPhase.POWERING_OFF: self._powering_off,
            RemediationPhase.RELEASING_STORAGE: self._releasing_storage,
            RemediationPhase.POWERING_ON: self._powering_on,
            RemediationPhase.WAITING_FOR_NODE: self._waiting_for_node,
        }[RemediationPhase(phase)]
        return handler(obj, rem, target)

    # --- the target -------------------------------------------------------------------------------------------
    def _target(self, obj: dict, rem: OvirtRemediation) -> _Target | None:
        """The Machine (owner, else the one of the same name: MHC names the request after it), its Node and the
        VM's providerID. NodeHealthCheck names requests after the Node: then the Node alone gives the VM."""
        ns = rem.metadata.namespace
        owner = next((r.name for r in rem.metadata.owner_references if r.kind == "Machine"), None)
        machine = self._machines.get(f"{ns}/{owner or rem.metadata.name}")
        node_name = ((machine or {}).get("status") or {}).get("nodeRef", {}).get("name") \
            or rem.metadata.annotations.get(_NODE_NAME_ANNOTATION) or rem.status.node_name \
            or (rem.metadata.name if machine is None else "")
        node = self._nodes.get(node_name) if node_name else None
        pid = ((machine or {}).get("spec") or {}).get("providerID") or ((node or {}).get("spec") or {}).get("providerID")
        if not pid:
            message = f"no Machine or Node with a providerID found for {rem.metadata.name}"
            self._events.warning(obj, "NoTarget", message)
            self._write(obj, rem, message=message)
            return None
        return _Target(machine, node_name, pid)

    # --- the steps --------------------------------------------------------------------------------------------
    def _start(self, obj: dict, rem: OvirtRemediation, target: _Target) -> Result | None:
        if self._node_is_ready(target.node_name):
            return self._end_healthy(obj, rem, target, RemediationPhase.SKIPPED,
                                     f"node {target.node_name} is Ready: nothing to remediate")
        self._events.normal(obj, "RemediationStarted", f"power-cycling the VM of node {target.node_name}")
        self._begin_cycle(obj, rem, target, retry_count=1)
        return None

    def _begin_cycle(self, obj: dict, rem: OvirtRemediation, target: _Target, retry_count: int) -> None:
        self._write(obj, rem, phase=RemediationPhase.POWERING_OFF, retry_count=retry_count,
                    vm_id=vm_id_from_provider_id(target.provider_id), node_name=target.node_name,
                    last_remediated=self._stamp(), power_off_requested="", storage_released="",
                    powering_on_since="", power_on_requested="", vm_start_seen="", message="powering the VM off",
                    conditions=[true_condition(_CONDITIONS.PROCESSING),
                                false_condition(_CONDITIONS.POWER_OFF_CONFIRMED, "PowerOffPending",
                                                ConditionSeverity.INFO, "the VM has not been confirmed off yet")])

    def _powering_off(self, obj: dict, rem: OvirtRemediation, target: _Target) -> Result | None:
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
                        conditions=[true_condition(_CONDITIONS.POWER_OFF_CONFIRMED)])
            return None
        requested = _time(rem.status.power_off_requested)
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
        return self._send(obj, rem, target, "power_off_requested", self._power.power_off, "stop", "PowerOffRefused",
                          said=said, lands_by="power_off_may_land_until")

    def _stop_may_show(self, power: Power, target: _Target, waited: float) -> bool:
        """Whether a stop recorded `waited` seconds ago may still be the engine's to carry out: it is too recent to
        show, the VM is powering down, or the engine has a stop of ours under way."""
        return (waited < self._timing.action_shows_s or power.state == PowerState.STOPPING
                or self._power.power_off_under_way(target.provider_id, target.vm_name))

    def _releasing_storage(self, obj: dict, rem: OvirtRemediation, target: _Target) -> Result | None:
        power = self._read_power(obj, rem, target)
        if power is None:
            return None
        if power.state != PowerState.OFF:
            # Someone started the VM: what it holds can no longer be released safely. Fence it again.
            self._events.warning(obj, "VMRunningAgain", f"the VM is {power.detail} before its storage was released")
            self._write(obj, rem, phase=RemediationPhase.POWERING_OFF, power_off_requested="",
                        conditions=[false_condition(_CONDITIONS.POWER_OFF_CONFIRMED, "VMRunningAgain",
                                                    ConditionSeverity.WARNING, f"the VM is {power.detail}")])
            return None
        node = self._nodes.get(target.node_name) if target.node_name else None
        released = _time(rem.status.storage_released)
        if node is not None and released is None:
            if rem.spec.remediation_strategy == StorageRelease.RESOURCE_DELETION:
                self._force_delete_pods(target.node_name)
            else:
                self._taint(target.node_name, out_of_service_taint(self._stamp()))
            self._write(obj, rem, storage_released=self._stamp(),
                        message="waiting for the node's pods with volumes and its volume attachments to go")
            return Result(requeue_after=self._timing.poll_s)
        if node is not None:
            left = self._held_by(target.node_name)
            if left and self._elapsed(released) < self._timing.storage_release_timeout_s:
                self._write(obj, rem, message=f"waiting for {left} to go")
                return Result(requeue_after=self._timing.poll_s)
            if left:
                self._events.warning(obj, "StorageReleaseSlow",
                                     f"{left} still there {self._timing.storage_release_timeout_s:.0f}s after the "
                                     "storage release; the VM is off, so it is powered on all the same")
        lands_by = _time(rem.status.power_off_may_land_until)
        if lands_by is not None and self._clock() < lands_by:
            # A stop of ours whose answer was lost could still land and kill the repaired VM: the start waits
            # until it no longer can (docs/fencing.md#requests-whose-answer-was-lost).
            self._write(obj, rem, message="the VM is off; a stop of ours whose answer was lost may still reach "
                                          f"oVirt until {format_time(lands_by)}: the VM is started after that")
            return Result(requeue_after=min(self._timing.poll_s, (lands_by - self._clock()).total_seconds()))
        self._write(obj, rem, phase=RemediationPhase.POWERING_ON, powering_on_since=self._stamp(),
                    message="powering the VM on")
        return None

    def _powering_on(self, obj: dict, rem: OvirtRemediation, target: _Target) -> Result | None:
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
        since = _time(rem.status.powering_on_since)
        if since is None:  # a request in this phase from a controller that did not record it
            self._write(obj, rem, powering_on_since=self._stamp())
            since = self._clock()
        timeout = rem.spec.strategy.timeout_seconds
        requested = _time(rem.status.power_on_requested)
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
        return self._send(obj, rem, target, "power_on_requested", self._power.power_on, "start", "PowerOnRefused")

    def _send(self, obj: dict, rem: OvirtRemediation, target: _Target, intent: str,
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
            answered[lands_by] = earlier if (_time(earlier) or self._clock()) > self._clock() else ""
            fields[lands_by] = format_time(max(lands, _time(earlier) or lands))
        self._write(obj, rem, message=f"sending a {verb}", **fields)
        try:
            sent = action(target.provider_id, target.vm_name)
        except ActionRefused as e:
            count = refused[0] + 1 if refused else 1
            pause = min(self._timing.poll_s * 2 ** (count - 1), self._timing.refused_cap_s)
            self._refused[key] = (count, self._clock() + dt.timedelta(seconds=pause))
            message = f"oVirt refused to {verb} the VM: {e}"
            self._events.warning(obj, refused_reason, message)
            self._write(obj, rem, message=message, **{intent: ""}, **answered)
            raise
        except Exception as e:
            # No answer: the engine may have the action, or get it later
            # (docs/fencing.md#requests-whose-answer-was-lost).
            message = (f"the answer to the {verb} was lost ({e}): it may still reach oVirt until "
                       f"{format_time(lands)}")
            log.warning(message, node=target.node_name, provider_id=target.provider_id)
            try:
                self._write(obj, rem, message=message)
            except _Stale:
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

    def _waiting_for_node(self, obj: dict, rem: OvirtRemediation, target: _Target) -> Result | None:
        started = _time(rem.status.power_on_requested) or self._clock()
        if self._node_is_ready(target.node_name, since=started):
            self._remove_taints(target.node_name)
            self._metrics.outcomes.labels(rem.metadata.namespace, "succeeded").inc()
            self._events.normal(obj, "RemediationSucceeded", f"node {target.node_name} is Ready again")
            self._write(obj, rem, phase=RemediationPhase.SUCCEEDED, message=f"node {target.node_name} is Ready",
                        conditions=[false_condition(_CONDITIONS.PROCESSING, "Done", ConditionSeverity.INFO,
                                                    "the node is Ready"),
                                    true_condition(_CONDITIONS.SUCCEEDED)])
            return None
        power = self._read_power(obj, rem, target)
        if power is None:
            return None
        if power.state in (PowerState.OFF, PowerState.STOPPING) \
                and self._power.stopped_by_late_power_off(target.provider_id, target.vm_name):
            return self._start_again(obj, rem, target, power)
        # From when the start was seen to land; a request from a controller that did not record it, from the send.
        waited = self._elapsed(_time(rem.status.vm_start_seen) or started)
        timeout = rem.spec.strategy.timeout_seconds
        if waited < timeout:
            return Result(requeue_after=min(self._timing.poll_s * 2, timeout - waited))
        return self._cycle_failed(obj, rem, target, waited,
                                  f"node {target.node_name} not Ready {timeout}s after the VM was started")

    def _start_again(self, obj: dict, rem: OvirtRemediation, target: _Target, power: Power) -> Result | None:
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

    def _cycle_failed(self, obj: dict, rem: OvirtRemediation, target: _Target, waited: float,
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

    # --- endings ------------------------------------------------------------------------------------------------
    def _refuse_not_ovirt(self, obj: dict, rem: OvirtRemediation, target: _Target) -> Result | None:
        """A Node of another provider (or a providerID that names no VM) is not ours to fence: nothing is tainted
        or sent, and Succeeded=False tells an orchestrator such as NodeHealthCheck to try its next remediator
        (docs/architecture.md#acting-only-on-what-is-ours)."""
        return self._refuse(obj, rem, target, "NotAnOvirtVM",
                            f"node {target.node_name or '(none)'} has providerID {target.provider_id!r}, which names "
                            "no oVirt VM: nothing to power-cycle")

    def _refuse(self, obj: dict, rem: OvirtRemediation, target: _Target, reason: str, message: str) -> None:
        """The target is not ours to fence: `Skipped` with Succeeded=False (an orchestrator tries its next
        remediator) and a Warning saying why; the taints of a cycle already begun go."""
        if rem.status.phase:
            self._remove_taints(target.node_name)  # begun by a controller that did not check it, or before a check
        self._metrics.outcomes.labels(rem.metadata.namespace, "skipped").inc()
        self._events.warning(obj, reason, message)
        self._write(obj, rem, phase=RemediationPhase.SKIPPED, message=message,
                    conditions=[false_condition(_CONDITIONS.PROCESSING, reason, ConditionSeverity.WARNING, message),
                                false_condition(_CONDITIONS.SUCCEEDED, reason, ConditionSeverity.ERROR, message)])

    def _escalate(self, obj: dict, rem: OvirtRemediation, target: _Target, last: str) -> Result | None:
        why = f"{last}, after {rem.status.retry_count} power cycle(s)"
        refusal = self._refuse_machine_deletion(rem, target)
        if refusal:
            self._metrics.outcomes.labels(rem.metadata.namespace, "failed").inc()
            self._events.warning(obj, "RemediationFailed", f"{why}; {refusal}")
            self._write(obj, rem, phase=RemediationPhase.FAILED, message=f"{why}; {refusal}",
                        conditions=[false_condition(_CONDITIONS.PROCESSING, "Exhausted", ConditionSeverity.WARNING, why),
                                    false_condition(_CONDITIONS.SUCCEEDED, "Exhausted", ConditionSeverity.ERROR,
                                                    f"{why}; {refusal}")])
            return None
        self._metrics.outcomes.labels(rem.metadata.namespace, "escalated").inc()
        self._events.warning(obj, "RemediationEscalated", f"{why}; deleting machine {target.machine['metadata']['name']}"
                                                         " so that its MachineSet replaces it")
        self._write(obj, rem, phase=RemediationPhase.DELETING_MACHINE, message=f"{why}; machine deleted",
                    conditions=[true_condition(_CONDITIONS.PERMANENT_NODE_DELETION_EXPECTED)])
        self._delete_machine(target)
        return None

    @staticmethod
    def _refuse_machine_deletion(rem: OvirtRemediation, target: _Target) -> str | None:
        if rem.spec.on_exhaustion == OnExhaustion.NONE:
            return "onExhaustion is None: the machine is left as it is"
        machine = target.machine
        if machine is None:
            return "no Machine to replace"
        meta = machine["metadata"]
        if not any(r.get("controller") for r in meta.get("ownerReferences") or []):
            return "the machine has no controller owner to replace it: it is left as it is"
        role = (meta.get("labels") or {}).get(keys.LABEL_MACHINE_ROLE, "")
        if role in _MASTER_ROLES:
            return "a control-plane machine is never deleted by remediation"
        return None

    def _delete_machine(self, target: _Target) -> None:
        machine = target.machine
        if machine is None or machine["metadata"].get("deletionTimestamp"):
            return
        meta = machine["metadata"]
        try:
            self._rest.delete(MACHINES, meta["name"], meta["namespace"])
        except Exception as e:
            if not is_not_found(e):
                raise

    def _end_healthy(self, obj: dict, rem: OvirtRemediation, target: _Target, phase: RemediationPhase,
                     message: str) -> Result | None:
        self._remove_taints(target.node_name)
        self._metrics.outcomes.labels(rem.metadata.namespace,
                                      "skipped" if phase == RemediationPhase.SKIPPED else "succeeded").inc()
        self._events.normal(obj, "NodeHealthy", message)
        self._write(obj, rem, phase=phase, node_name=target.node_name, message=message,
                    conditions=[false_condition(_CONDITIONS.PROCESSING, "NodeHealthy", ConditionSeverity.INFO, message),
                                true_condition(_CONDITIONS.SUCCEEDED)])
        return None

    def _finalize(self, obj: dict, rem: OvirtRemediation) -> Result | None:
        """The health check deletes the request once the Node is healthy (or a user deletes it): the taints go. The
        out-of-service taint was only ever put on a Node whose VM was confirmed off, and the VM is powered on only
        after the old pods and attachments are gone, so removing it now cannot expose a volume twice."""
        if FINALIZER not in rem.metadata.finalizers:
            return None
        self._refused.pop(object_key(obj), None)
        node_name = rem.status.node_name
        if node_name:
            self._remove_taints(node_name)
        try:
            self._metrics.unknown.remove(rem.metadata.namespace, rem.metadata.name)
        except KeyError:
            pass  # never waited on an unknown VM
        self._patch_meta(obj, {"finalizers": [f for f in rem.metadata.finalizers if f != FINALIZER]})
        return None

    # --- helpers ------------------------------------------------------------------------------------------------
    def _read_power(self, obj: dict, rem: OvirtRemediation, target: _Target) -> Power | None:
        try:
            power = self._power.power(target.provider_id, target.vm_name)
        except InstanceNotOwned as e:
            # A copied providerID names another's VM: nothing was read from it or sent to it, nor will be.
            self._refuse(obj, rem, target, "VMNotOwned", str(e))
            return None
        if power is None or power.state is not PowerState.UNKNOWN:
            # The wait on an unknown VM, if there was one, is over (the gauge is removed with the request).
            self._metrics.unknown.labels(rem.metadata.namespace, rem.metadata.name).set(0)
        if power is None:
            # A VM that no longer exists writes to nothing; its Machine fails (instance missing) and is replaced.
            self._metrics.outcomes.labels(rem.metadata.namespace, "failed").inc()
            self._events.warning(obj, "VMGone", f"the VM {target.provider_id} no longer exists")
            self._write(obj, rem, phase=RemediationPhase.FAILED, message="the VM no longer exists",
                        conditions=[false_condition(_CONDITIONS.SUCCEEDED, "VMGone", ConditionSeverity.ERROR,
                                                    "the VM no longer exists")])
        return power

    def _wait_unknown(self, obj: dict, rem: OvirtRemediation, power: Power) -> Result:
        message = (f"oVirt reports the VM {power.detail}: its host does not answer, so the VM may still be running; "
                   "waiting (no storage is released until the VM is confirmed down)")
        self._metrics.unknown.labels(rem.metadata.namespace, rem.metadata.name).set(1)
        self._events.warning(obj, "PowerStateUnknown", message)
        self._write(obj, rem, message=message,
                    conditions=[false_condition(_CONDITIONS.POWER_OFF_CONFIRMED, "PowerStateUnknown",
                                                ConditionSeverity.WARNING, message)])
        return Result(requeue_after=self._timing.unknown_recheck_s)

    def _reconnecting(self, obj: dict, rem: OvirtRemediation, target: _Target) -> Result | None:
        """Wait a while (requeue) for the Node of a VM that is back from `unknown` before powering it off: its
        host answers again and the VM ran all along. The wait is in the request's status (the condition's reason
        and time), so a restarted controller keeps it; None once the grace is over, or when the VM was not
        unknown."""
        confirmed = get_condition(rem.status.conditions, _CONDITIONS.POWER_OFF_CONFIRMED)
        grace = self._timing.reconnect_grace_s
        if confirmed is None or confirmed.reason not in ("PowerStateUnknown", "HostAnswersAgain"):
            return None
        if confirmed.reason == "PowerStateUnknown":
            message = (f"the VM's host answers again and the VM is up: waiting up to {grace:.0f}s for node "
                       f"{target.node_name} to be Ready before powering it off")
            self._events.normal(obj, "HostAnswersAgain", message)
            self._write(obj, rem, message=message,
                        conditions=[false_condition(_CONDITIONS.POWER_OFF_CONFIRMED, "HostAnswersAgain",
                                                    ConditionSeverity.INFO, message)])
            return Result(requeue_after=self._timing.poll_s)
        waited = self._elapsed(_time(confirmed.last_transition_time) or self._clock())
        return Result(requeue_after=min(self._timing.poll_s, grace - waited)) if waited < grace else None

    def _node_is_ready(self, node_name: str, since: dt.datetime | None = None) -> bool:
        node = self._nodes.get(node_name) if node_name else None
        if node is None or node_ready(node) != "True":
            return False
        if since is None:
            return True
        # Ready since the VM was powered on: the new incarnation's kubelet, not a stale status.
        changed = _time((ready_condition(node) or {}).get("lastTransitionTime"))
        return changed is not None and changed >= since.replace(microsecond=0)

    def _power_slots_taken(self, obj: dict) -> int:
        me = object_key(obj)
        return sum(1 for r in self._remediations.list()
                   if object_key(r) != me and ((r.get("status") or {}).get("phase") in _POWER_PHASES)
                   and (r.get("status") or {}).get("powerOffRequested"))

    def _held_by(self, node_name: str) -> str:
        """What of the old incarnation still holds storage the Node had: its pods with volumes to detach (the
        out-of-service taint has them deleted and force-removed) and its volume attachments. Other pods are not
        waited for: most node agents tolerate every taint and never leave, and what they mount lives and dies with
        the node (docs/fencing.md#one-cycle); mirror pods are the kubelet's own."""
        pods = self._rest.request("GET", PODS.path(), query={"fieldSelector": f"spec.nodeName={node_name}"})
        left = [p for p in pods.get("items", [])
                if MIRROR_POD_ANNOTATION not in (p["metadata"].get("annotations") or {}) and _holds_storage(p)]
        attached = volume_attachments(self._rest, node_name)
        parts = []
        if left:
            parts.append(f"{len(left)} pod(s) with volumes")
        if attached:
            parts.append(f"{len(attached)} volume attachment(s)")
        return " and ".join(parts)

    def _force_delete_pods(self, node_name: str) -> None:
        pods = self._rest.request("GET", PODS.path(), query={"fieldSelector": f"spec.nodeName={node_name}"})
        for pod in pods.get("items", []):
            meta = pod["metadata"]
            try:
                self._rest.request("DELETE", PODS.path(meta["namespace"], meta["name"]),
                                   body={"gracePeriodSeconds": 0})
            except Exception as e:
                if not is_not_found(e):
                    raise

    def _taint(self, node_name: str, taint: dict[str, str]) -> None:
        """Add `taint` to the Node unless a taint of its key and effect is there already."""
        node = self._nodes.get(node_name)
        if node is None:
            return
        taints = list((node.get("spec") or {}).get("taints") or [])
        if any(t.get("key") == taint["key"] and t.get("effect") == taint["effect"] for t in taints):
            return
        self._patch_taints(node_name, taints, [*taints, taint])

    def _remove_taints(self, node_name: str) -> None:
        # Read afresh, not from the cache: a pass that tainted the Node a moment ago and then ends (the Node Ready
        # again) must see its own taint, which the informer may not have brought yet. Only ends and finalizers
        # come here, so the read is rare.
        if not node_name:
            return
        try:
            node = self._rest.get(NODES, node_name)
        except Exception as e:
            if is_not_found(e):
                return
            raise
        taints = list((node.get("spec") or {}).get("taints") or [])
        kept = [t for t in taints if t.get("key") not in (REMEDIATION_TAINT_KEY, OUT_OF_SERVICE_TAINT_KEY)]
        if len(kept) != len(taints):
            self._patch_taints(node_name, taints, kept)

    def _patch_taints(self, node_name: str, old: list[dict], new: list[dict]) -> None:
        try:
            patch_taints(self._rest, node_name, old, new)
        except TaintsChanged:
            raise _Stale() from None  # the next pass starts from the newer Node

    def _write(self, obj: dict, rem: OvirtRemediation, conditions: list = (), **fields: Any) -> None:
        """Merge-patch status with the given fields, guarded by resourceVersion; keeps `obj` and `rem` current."""
        current = rem.status.to_dict()
        merged = rem.status.conditions
        stamp = self._clock()
        for c in conditions:
            merged = set_condition(merged, c, at=stamp)
        status = dict(current)
        for name, value in fields.items():
            status[_JSON[name]] = value
        status["conditions"] = [c.to_dict() for c in merged]
        changed = {k: v for k, v in status.items() if current.get(k) != v and not (v == "" and not current.get(k))}
        # An emptied field is removed (a merge-patch null): "" is not a valid date-time for the schema.
        changed = {k: (None if v == "" else v) for k, v in changed.items()}
        if not changed:
            return
        meta = obj["metadata"]
        patch = {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": changed}
        try:
            updated = self._rest.merge_patch(REMEDIATIONS, meta["name"], patch, meta["namespace"],
                                             subresource="status")
        except Exception as e:
            if is_conflict(e) or is_not_found(e):
                raise _Stale() from None
            raise
        obj.clear()
        obj.update(updated)
        rem.status = OvirtRemediation.from_dict(updated).status
        rem.metadata.resource_version = updated["metadata"]["resourceVersion"]

    def _patch_meta(self, obj: dict, metadata: dict[str, Any]) -> None:
        meta = obj["metadata"]
        patch = {"metadata": {**metadata, "resourceVersion": meta["resourceVersion"]}}
        try:
            self._rest.merge_patch(REMEDIATIONS, meta["name"], patch, meta["namespace"])
        except Exception as e:
            if is_conflict(e) or is_not_found(e):
                raise _Stale() from None
            raise

    def _stamp(self) -> str:
        return format_time(self._clock())

    def _elapsed(self, since: dt.datetime) -> float:
        return (self._clock() - since).total_seconds()


class _Stale(Exception):
    """A write lost to a newer version of the object: look again at the current one."""


_JSON = {"phase": "phase", "retry_count": "retryCount", "vm_id": "vmId", "node_name": "nodeName",
         "last_remediated": "lastRemediated", "power_off_requested": "powerOffRequested",
         "storage_released": "storageReleased", "powering_on_since": "poweringOnSince",
         "power_on_requested": "powerOnRequested", "vm_start_seen": "vmStartSeen",
         "power_off_may_land_until": "powerOffMayLandUntil", "message": "message"}

# Volume sources that live and die with the node (or are only read from the API server): nothing to detach from a
# VM that is off. Any other source (a claim, CSI, FlexVolume, an ephemeral claim, an in-tree network disk, or a
# kind this list does not know) may hold a volume, so its pod is waited for (docs/fencing.md#one-cycle).
_NODE_LOCAL_VOLUMES = frozenset({"emptyDir", "configMap", "secret", "downwardAPI", "projected", "hostPath",
                                 "gitRepo", "image"})


def _holds_storage(pod: dict) -> bool:
    return any(set(volume) - {"name"} - _NODE_LOCAL_VOLUMES for volume in (pod.get("spec") or {}).get("volumes") or [])


def _time(value: str | None) -> dt.datetime | None:
    return parse_time(value) if value else None


def add_remediation_controller(manager: Manager, api: Any, rest: Rest, machines: Informer, nodes: Informer,
                               power: PowerControl, events: EventRecorder, queue: WorkQueue,
                               namespace: str | None, resync_s: float | None, workers: int = 2,
                               timing: RemediationTiming = RemediationTiming()) -> RemediationReconciler:
    """Requests are looked at when they change, when their Machine changes, and when a Node's readiness or taints
    change (heartbeats alone do not wake them)."""
    remediations = manager.add_informer(Informer(api, REMEDIATIONS, namespace=namespace, resync_period=resync_s))
    reconciler = RemediationReconciler(rest, remediations.store, machines.store, nodes.store, power, events,
                                       registry=manager.registry, timing=timing, namespace=namespace)
    remediations.add_handler(enqueue_object(queue))

    def for_machine(machine: dict) -> list[str]:
        key = object_key(machine)
        return [object_key(r) for r in remediations.store.list()
                if object_key(r) == key or any(o.get("kind") == "Machine" and o.get("name") == machine["metadata"]["name"]
                                               for o in r["metadata"].get("ownerReferences") or [])]

    def for_node(node: dict) -> list[str]:
        name = node["metadata"]["name"]
        return [object_key(r) for r in remediations.store.list()
                if (r.get("status") or {}).get("nodeName") == name or r["metadata"]["name"] == name]

    machines.add_handler(enqueue_mapped(queue, for_machine))
    nodes.add_handler(when_changed(enqueue_mapped(queue, for_node), node_ready, ("spec", "taints")))
    manager.add_controller(Controller(queue.name, queue, reconciler.reconcile, workers=workers,
                                      registry=manager.registry))
    return reconciler
