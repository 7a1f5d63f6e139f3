"""The OvirtRemediation controller: fencing by power cycle (docs/fencing.md).

One request is one Machine to bring back, of OpenShift's Machine API or of Cluster API, found by its owner
reference's group, in the same order for both (targets.py, docs/fencing.md#both-front-ends). Each cycle is:
NoSchedule taint → hard power-off, and nothing more until the hypervisor reports the VM off → release the Node's
storage (the out-of-service taint, or force-deleting its pods) and wait until its pods and volume attachments are
gone → power on → wait for the Node to be Ready → remove the taints. A cycle that does not bring the Node back
within the timeout is followed, after a cooldown, by another, up to the retry limit; then the Machine is deleted so
its MachineSet replaces it (never a Machine without a MachineSet to replace it, nor a control-plane one).

Safety (docs/fencing.md#the-safety-rules-the-code-keeps): storage is released only after the VM is confirmed
off; `unknown` is never off; a Node that is Ready again before the power-off is left alone. Crash safety: every
step writes its intent into `status` (guarded by resourceVersion) before acting, and every step re-reads the VM
and the Node, so a restarted controller resumes where it was and sends one stop and one start per cycle.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable

import structlog

from api.capi import GROUP as CAPI_GROUP
from api.ids import vm_id_from_provider_id
from api.keys import GROUP as MACHINE_API_GROUP
from api.meta import ObjectMeta
from api.remediation import FINALIZER, OvirtRemediation, RemediationPhase
from machine_controller.controllers.nodes.status import node_ready
from machine_controller.controllers.provider import EnginePower, PowerControl
from machine_controller.controllers.resources import REMEDIATIONS
from machine_controller.runtime.controller import Controller, Result, enqueue_mapped, enqueue_object, when_changed
from machine_controller.runtime.events import EventRecorder
from machine_controller.runtime.informer import Informer
from machine_controller.runtime.kube import Rest, object_key
from machine_controller.runtime.manager import Manager
from machine_controller.runtime.workqueue import WorkQueue

from .context import RESULTS, RemediationTiming
from .powering_off import PoweringOff
from .powering_on import PoweringOn
from .releasing_storage import ReleasingStorage
from .targets import ClusterApiMachines, Target, machine_owner

log = structlog.get_logger(__name__)

__all__ = ["RESULTS", "ClusterApiSources", "RemediationReconciler", "RemediationTiming", "add_remediation_controller"]

_TERMINAL = {RemediationPhase.SUCCEEDED, RemediationPhase.SKIPPED, RemediationPhase.FAILED}
# How soon a request whose Machine, Cluster or Node is not cached yet is looked at again (its informers wake it too).
_NO_TARGET_REQUEUE_S = 30.0
# How soon a pass whose write lost a race (writes.Conflict) looks again at the newer request.
_CONFLICT_REQUEUE_S = 0.2


class RemediationReconciler(PoweringOff, ReleasingStorage, PoweringOn):
    """Dispatch by phase; the phases live in powering_off.py, releasing_storage.py and powering_on.py, the endings
    in outcomes.py."""

    def reconcile(self, key: str) -> Result | None:
        cached = self._remediations.get(key)
        if cached is None:
            self._forget(key)
            return None
        if self._stale(cached):
            return None
        return self._reconcile(copy.deepcopy(cached))  # the informer's object is never written in place

    def _reconcile(self, obj: dict) -> Result | None:
        rem = OvirtRemediation.from_dict(obj)
        elsewhere = self._targets.elsewhere(rem.metadata)
        if elsewhere is not None:
            log.debug("a request for a Machine of a front end this process does not serve: left alone",
                      request=object_key(obj), group=elsewhere)
            return None
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
            return None if rem.status.phase in _TERMINAL else Result(requeue_after=_NO_TARGET_REQUEUE_S)
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
        """The Machine in the front end its owner reference's group names (targets.py), its Node and its VM. One not
        found yet is looked for again (a Warning says why); one that is not ours to fence is refused for good."""
        found = self._targets.find(rem.metadata, rem.status.node_name, self._nodes)
        if isinstance(found, Target):
            return found
        if found.refuse:
            self._refuse(obj, rem, rem.status.node_name, found.reason, found.message)
        else:
            self._events.warning(obj, found.reason, found.message)
            self._write(obj, rem, message=found.message)
        return None

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


@dataclass(frozen=True)
class ClusterApiSources:
    """What fencing Cluster API's Machines reads (docs/fencing.md#both-front-ends): their informer, their Clusters'
    and OvirtClusters' (which engine a Machine's VM is on), and the power control of each engine."""

    machines: Informer
    clusters: Informer
    ovirt_clusters: Informer
    engines: EnginePower


def add_remediation_controller(manager: Manager, api: Any, rest: Rest, machines: Informer | None, nodes: Informer,
                               power: PowerControl | None, events: EventRecorder, queue: WorkQueue,
                               namespace: str | None, resync_s: float | None, workers: int = 2,
                               timing: RemediationTiming = RemediationTiming(),
                               cluster_api: ClusterApiSources | None = None) -> RemediationReconciler:
    """Requests are looked at when they change, when their Machine changes (in the front end their owner's group
    names), and when a Node's readiness or taints change (heartbeats alone do not wake them). `machines` and `power`
    serve the Machine API's Machines, `cluster_api` Cluster API's; either may be None, not both."""
    if (machines is None or power is None) and cluster_api is None:
        raise ValueError("the remediation controller serves no front end: give the Machine API's machines and power, "
                         "or Cluster API's sources")
    remediations = manager.add_informer(Informer(api, REMEDIATIONS, namespace=namespace, resync_period=resync_s))
    capi_targets = None if cluster_api is None else ClusterApiMachines(
        cluster_api.machines.store, cluster_api.clusters.store, cluster_api.ovirt_clusters.store, cluster_api.engines)
    reconciler = RemediationReconciler(rest, remediations.store, machines.store if machines is not None else None,
                                       nodes.store, power, events, registry=manager.registry, timing=timing,
                                       namespace=namespace, cluster_api=capi_targets)
    remediations.add_handler(enqueue_object(queue))

    def of_group(group: str) -> Callable[[dict], list[str]]:
        def requests_of(machine: dict) -> list[str]:
            key, name = object_key(machine), machine["metadata"]["name"]
            keys_ = []
            for r in remediations.store.list():
                owner = machine_owner(ObjectMeta.from_dict(r["metadata"]))
                if owner is None:
                    mine = group == MACHINE_API_GROUP and object_key(r) == key
                else:
                    mine = owner.name == name and owner.api_version.partition("/")[0] == group
                if mine and r["metadata"].get("namespace") == machine["metadata"].get("namespace"):
                    keys_.append(object_key(r))
            return keys_
        return requests_of

    def for_node(node: dict) -> list[str]:
        name = node["metadata"]["name"]
        return [object_key(r) for r in remediations.store.list()
                if (r.get("status") or {}).get("nodeName") == name or r["metadata"]["name"] == name]

    if machines is not None:
        machines.add_handler(enqueue_mapped(queue, of_group(MACHINE_API_GROUP)))
    if cluster_api is not None:
        cluster_api.machines.add_handler(enqueue_mapped(queue, of_group(CAPI_GROUP)))
    nodes.add_handler(when_changed(enqueue_mapped(queue, for_node), node_ready, ("spec", "taints")))
    manager.add_controller(Controller(queue.name, queue, reconciler.reconcile, workers=workers,
                                      registry=manager.registry, conflict_requeue_s=_CONFLICT_REQUEUE_S))
    return reconciler
