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
from typing import Any

from api.ids import vm_id_from_provider_id
from api.remediation import FINALIZER, OvirtRemediation, RemediationPhase
from machine_controller.controllers.nodes.status import node_ready
from machine_controller.controllers.provider import PowerControl
from machine_controller.controllers.resources import REMEDIATIONS
from machine_controller.runtime.controller import Controller, Result, enqueue_mapped, enqueue_object, when_changed
from machine_controller.runtime.events import EventRecorder
from machine_controller.runtime.informer import Informer
from machine_controller.runtime.kube import Rest, object_key
from machine_controller.runtime.manager import Manager
from machine_controller.runtime.workqueue import WorkQueue

from .context import RESULTS, RemediationTiming, Target
from .powering_off import PoweringOff
from .powering_on import PoweringOn
from .releasing_storage import ReleasingStorage

__all__ = ["RESULTS", "RemediationReconciler", "RemediationTiming", "add_remediation_controller"]

_TERMINAL = {RemediationPhase.SUCCEEDED, RemediationPhase.SKIPPED, RemediationPhase.FAILED}
_NODE_NAME_ANNOTATION = "remediation.medik8s.io/node-name"  # NodeHealthCheck names the Node it means
# How soon a pass whose write lost a race (writes.Conflict) looks again at the newer request.
_CONFLICT_REQUEUE_S = 0.2


class RemediationReconciler(PoweringOff, ReleasingStorage, PoweringOn):
    """Dispatch by phase; the phases live in powering_off.py, releasing_storage.py and powering_on.py, the endings
    in outcomes.py."""

    def reconcile(self, key: str) -> Result | None:
        cached = self._remediations.get(key)
        if cached is None:
            return None
        return self._reconcile(copy.deepcopy(cached))  # the informer's object is never written in place

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

    def _target(self, obj: dict, rem: OvirtRemediation) -> Target | None:
        """The Machine (owner, else the one of the same name: MHC names the request after it), its Node and the
        VM's providerID. NodeHealthCheck names requests after the Node: then the Node alone gives the VM."""
        ns = rem.metadata.namespace
        owner = next((r.name for r in rem.metadata.owner_references if r.kind == "Machine"), None)
        machine = self._machines.get(f"{ns}/{owner or rem.metadata.name}")
        node_name = ((machine or {}).get("status") or {}).get("nodeRef", {}).get("name") \
            or rem.metadata.annotations.get(_NODE_NAME_ANNOTATION) or rem.status.node_name \
            or (rem.metadata.name if machine is None else "")
        node = self._nodes.get(node_name) if node_name else None
        pid = (((machine or {}).get("spec") or {}).get("providerID")
               or ((node or {}).get("spec") or {}).get("providerID"))
        if not pid:
            message = f"no Machine or Node with a providerID found for {rem.metadata.name}"
            self._events.warning(obj, "NoTarget", message)
            self._write(obj, rem, message=message)
            return None
        return Target(machine, node_name, pid)

    def _start(self, obj: dict, rem: OvirtRemediation, target: Target) -> Result | None:
        if self._node_is_ready(target.node_name):
            return self._end_healthy(obj, rem, target, RemediationPhase.SKIPPED,
                                     f"node {target.node_name} is Ready: nothing to remediate")
        self._events.normal(obj, "RemediationStarted", f"power-cycling the VM of node {target.node_name}")
        self._begin_cycle(obj, rem, target, retry_count=1)
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
                if object_key(r) == key
                or any(o.get("kind") == "Machine" and o.get("name") == machine["metadata"]["name"]
                       for o in r["metadata"].get("ownerReferences") or [])]

    def for_node(node: dict) -> list[str]:
        name = node["metadata"]["name"]
        return [object_key(r) for r in remediations.store.list()
                if (r.get("status") or {}).get("nodeName") == name or r["metadata"]["name"] == name]

    machines.add_handler(enqueue_mapped(queue, for_machine))
    nodes.add_handler(when_changed(enqueue_mapped(queue, for_node), node_ready, ("spec", "taints")))
    manager.add_controller(Controller(queue.name, queue, reconciler.reconcile, workers=workers,
                                      registry=manager.registry, conflict_requeue_s=_CONFLICT_REQUEUE_S))
    return reconciler
