"""The OvirtCluster controller: Cluster API's InfraCluster contract (v1beta2) for an oVirt engine.

An OvirtCluster names its engine (`spec.identityRef`, a Secret in its namespace: one engine per OvirtCluster, so one
controller serves Clusters on several engines) and the oVirt clusters its VMs go to (`spec.clusterId`, and
`spec.failureDomains`, each an oVirt cluster). A pass checks that the engine has each of them: when it has, the
status reports the failure domains (each with its oVirt cluster's id) and `initialization.provisioned`, and Ready is
True; when one is missing or the engine cannot be asked, Ready is False saying which and why, and it is checked again
(an admin may create the cluster, fix the Secret): never terminal. While paused (the Cluster's spec.paused, or the
paused annotation on it or on the OvirtCluster), nothing but the Paused condition.

Its finalizer keeps it while OvirtMachines of its Cluster exist: they need it to find their engine and remove their
VMs (controllers/infrastructure/ovirtmachine.py).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from api.infrastructure import CLUSTER_FINALIZER, ConditionType, OvirtCluster
from machine_controller.controllers.infrastructure.objects import ObjectWriter, Reason, condition, has_condition
from machine_controller.controllers.infrastructure.resources import (
    INDEX_CLUSTER,
    OVIRT_CLUSTERS,
    capi_cluster,
    cluster_index,
    cluster_of_ovirt_cluster,
    paused,
)
from machine_controller.controllers.provider import ActuatorError, EngineIdentity, Engines, MissingDependency
from machine_controller.runtime.controller import (
    Controller,
    Result,
    enqueue_mapped,
    enqueue_object,
    unless_own_write,
    when_changed,
)
from machine_controller.runtime.events import EventRecorder
from machine_controller.runtime.informer import EventHandler, Informer, Store
from machine_controller.runtime.kube import Rest, object_key
from machine_controller.runtime.manager import Manager
from machine_controller.runtime.workqueue import WorkQueue


@dataclass(frozen=True)
class OvirtClusterTiming:
    missing_s: float = 30.0  # a missing oVirt cluster is looked for again (an admin may create it)


class OvirtClusterReconciler:
    def __init__(self, rest: Rest, ovirt_clusters: Store, clusters: Store, ovirt_machines: Store, engines: Engines,
                 events: EventRecorder, timing: OvirtClusterTiming = OvirtClusterTiming()):
        """`ovirt_machines` carries the INDEX_CLUSTER index (resources.py)."""
        self._ovirt_clusters = ovirt_clusters
        self._clusters = clusters
        self._ovirt_machines = ovirt_machines
        self._engines = engines
        self._events = events
        self._timing = timing
        self._writer = ObjectWriter(rest, OVIRT_CLUSTERS)
        self.own_writes = self._writer.own_writes

    def reconcile(self, key: str) -> Result | None:
        cached = self._ovirt_clusters.get(key)
        if cached is None:
            return None
        obj = copy.deepcopy(cached)
        oc = OvirtCluster.from_dict(obj)
        meta = oc.metadata
        cluster_key = next(iter(cluster_of_ovirt_cluster(obj)), "")
        cluster = capi_cluster(self._clusters, meta.namespace, cluster_key.partition("/")[2])
        if paused(cluster, meta):
            self._writer.status(obj, paused=True)
            return None
        gen = meta.generation
        if meta.deleting:
            if CLUSTER_FINALIZER not in meta.finalizers:
                return None
            left = sorted(object_key(om) for om in self._ovirt_machines.by_index(INDEX_CLUSTER, cluster_key)) \
                if cluster_key else []
            if left:
                # Their VMs are found and removed through this OvirtCluster's engine; an OvirtMachine's deletion
                # wakes this one (add_ovirtcluster_controller).
                message = (f"waiting for {len(left)} OvirtMachine(s) of the Cluster to be deleted first: "
                           f"{', '.join(left[:5])}{' ...' if len(left) > 5 else ''}")
                self._writer.status(obj, [condition(ConditionType.READY, False, Reason.WAITING_FOR_MACHINES,
                                                    message, gen)])
                return None
            self._writer.remove_finalizer(obj, CLUSTER_FINALIZER)
            return None
        self._writer.add_finalizer(obj, CLUSTER_FINALIZER)  # before the engine is asked anything
        named = [("spec.clusterId", oc.spec.cluster_id)] + [
            (f"spec.failureDomains[{i}].clusterId", fd.cluster_id) for i, fd in enumerate(oc.spec.failure_domains)]
        named = [(path, cid) for path, cid in named if cid]
        identity = EngineIdentity(meta.namespace, oc.spec.identity_ref.name)
        try:
            missing = set(self._engines.missing_clusters(identity, [cid for _, cid in named]))
        except ActuatorError as e:
            reason = Reason.MISSING_DEPENDENCY if isinstance(e, MissingDependency) else Reason.PROVIDER_ERROR
            self._not_ready(obj, reason, f"the engine cannot be asked for the oVirt clusters named: {e}", gen)
            raise
        if missing:
            message = "; ".join(f"{path}: oVirt cluster {cid} not found in the engine" for path, cid in named
                                if cid in missing)
            self._not_ready(obj, Reason.OVIRT_CLUSTER_NOT_FOUND, message, gen)
            return Result(requeue_after=self._timing.missing_s)
        domains = [{"name": fd.name, "controlPlane": bool(fd.control_plane),
                    "attributes": {"clusterId": fd.cluster_id}} for fd in oc.spec.failure_domains]
        self._writer.status(obj, [condition(ConditionType.READY, True, Reason.READY, "", gen)],
                            failureDomains=domains, initialization={"provisioned": True})
        return None

    def _not_ready(self, obj: dict, reason: Reason, message: str, gen: int) -> None:
        if not has_condition(obj, ConditionType.READY, "False", reason):
            self._events.warning(obj, reason, message)
        self._writer.status(obj, [condition(ConditionType.READY, False, reason, message, gen)])


def add_ovirtcluster_controller(manager: Manager, rest: Rest, ovirt_clusters: Informer, clusters: Informer,
                                ovirt_machines: Informer, engines: Engines, events: EventRecorder,
                                queue: WorkQueue) -> OvirtClusterReconciler:
    """A Cluster's change (paused, resumed) and an OvirtMachine's deletion wake the Cluster's OvirtCluster."""
    reconciler = OvirtClusterReconciler(rest, ovirt_clusters.store, clusters.store, ovirt_machines.store, engines,
                                        events)
    ovirt_clusters.add_handler(unless_own_write(enqueue_object(queue), reconciler.own_writes))

    def of_clusters(keys: list[str]) -> list[str]:
        return [object_key(oc) for oc in ovirt_clusters.store.list()
                if set(cluster_of_ovirt_cluster(oc)) & set(keys)]

    # Of a Cluster, only pausing concerns its OvirtCluster (Cluster API rewrites its status conditions often).
    clusters.add_handler(when_changed(enqueue_mapped(queue, lambda c: of_clusters([object_key(c)])),
                                      ("spec", "paused"), ("metadata", "annotations")))
    def machine_deleted(om: dict) -> None:
        for key in of_clusters(cluster_index(om)):
            queue.add(key)

    # Only a deletion: an OvirtMachine's other changes tell its OvirtCluster nothing.
    ovirt_machines.add_handler(EventHandler(on_delete=machine_deleted))
    manager.add_controller(Controller(queue.name, queue, reconciler.reconcile, registry=manager.registry))
    return reconciler
