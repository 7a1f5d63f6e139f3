"""The OvirtMachine controller: Cluster API's InfraMachine contract (v1beta2) over the same `Actuator` verbs the
Machine API's Machine controller drives (docs/architecture.md#the-seam).

A pass reads the OvirtMachine, its Cluster API Machine (the controller owner Cluster API sets), the Machine's
Cluster and the Cluster's OvirtCluster from the informers' caches, and does the next step:

- paused (the Cluster's spec.paused, or the paused annotation on the OvirtMachine or the Cluster): nothing but the
  Paused condition;
- an invalid spec: Ready and InstanceProvisioned False with reason InvalidConfiguration naming the field, a Warning,
  and nothing created: the only terminal state, left when the spec is edited;
- waits, each a condition and no engine call, woken by the awaited object's change: for the Cluster's
  infrastructure (the Cluster's or the OvirtCluster's initialization), then for the Machine's bootstrap data
  Secret (spec.bootstrap.dataSecretName);
- the finalizer, written before the engine is first asked anything; then `provision` step by step, the VM's id
  recorded in `status.instanceId` in the status write that follows the step that found or created it, before the
  next step acts on it (a lost write costs a search by name, never a second VM);
- once the VM runs: spec.providerID (`ovirt://<vm id>`, the form the guest's kubelet gives its Node), then the
  status: addresses, failure domain, instance state, `initialization.provisioned`, Ready;
- deletion (Cluster API's Machine controller drained the Node first): `delete` step by step (stop, confirmed down,
  data disks detached, VM removed), then the finalizer goes.

Engine faults are retried with the queue's backoff and shown as conditions; none is terminal.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import structlog

from api.capi import CapiCluster, CapiMachine, cluster_name
from api.infrastructure import MACHINE_FINALIZER, ConditionType, OvirtCluster, OvirtMachineStatus
from api.machine import Machine
from api.meta import ObjectMeta
from machine_controller.controllers.infrastructure.objects import ObjectWriter, Reason, condition, has_condition
from machine_controller.controllers.infrastructure.resources import (
    INDEX_CLUSTER,
    OVIRT_MACHINES,
    capi_cluster,
    capi_machine_of,
    cluster_of_ovirt_cluster,
    ovirt_cluster_of,
    paused,
)
from machine_controller.controllers.infrastructure.seam_machine import in_ovirt_machine_terms, seam_machine
from machine_controller.controllers.provider import (
    Actuator,
    ActuatorError,
    EngineIdentity,
    Engines,
    InstanceNotOwned,
    InvalidMachineConfiguration,
    MissingDependency,
    Progress,
)
from machine_controller.runtime.controller import (
    Controller,
    Result,
    enqueue_mapped,
    enqueue_object,
    unless_own_write,
    when_changed,
)
from machine_controller.runtime.events import EventRecorder
from machine_controller.runtime.informer import Informer, Store
from machine_controller.runtime.kube import Rest, object_key
from machine_controller.runtime.manager import Manager
from machine_controller.runtime.workqueue import WorkQueue

log = structlog.get_logger(__name__)

_RUNNING_STATES = {"up", "migrating"}


@dataclass(frozen=True)
class OvirtMachineTiming:
    """Requeue delays (seconds), as the Machine controller's (controllers/machine/reconciler.py MachineTiming)."""

    running_s: float = 30.0
    waiting_for_ip_s: float = 5.0
    deleting_s: float = 5.0


@dataclass
class _Pass:
    """What one pass read: the OvirtMachine (a copy it may write), and its Machine, Cluster and OvirtCluster."""

    obj: dict
    meta: ObjectMeta
    status: OvirtMachineStatus
    machine: CapiMachine | None
    cluster: CapiCluster | None
    ovirt_cluster: OvirtCluster | None

    @property
    def recorded(self) -> str:
        return self.status.instance_id


class OvirtMachineReconciler:
    def __init__(self, rest: Rest, ovirt_machines: Store, machines: Store, clusters: Store, ovirt_clusters: Store,
                 engines: Engines, events: EventRecorder, timing: OvirtMachineTiming = OvirtMachineTiming()):
        self._ovirt_machines = ovirt_machines
        self._machines = machines
        self._clusters = clusters
        self._ovirt_clusters = ovirt_clusters
        self._engines = engines
        self._events = events
        self._timing = timing
        self._writer = ObjectWriter(rest, OVIRT_MACHINES)
        self.own_writes = self._writer.own_writes

    def reconcile(self, key: str) -> Result | None:
        cached = self._ovirt_machines.get(key)
        if cached is None:
            self._engines.forget(key)
            return None
        p = self._read(copy.deepcopy(cached))  # the informer's object is shared with every reader
        if paused(p.cluster, p.meta):
            self._writer.status(p.obj, paused=True)
            return None
        if p.meta.deleting:
            return self._delete(p)
        if p.machine is None or p.cluster is None:
            return None  # Cluster API sets the owner Machine and its Cluster; their events bring the pass back
        if p.ovirt_cluster is None:
            return self._wait(p, Reason.WAITING_FOR_CLUSTER_INFRASTRUCTURE,
                              f"Cluster {p.cluster.metadata.name} names no OvirtCluster that exists "
                              f"(spec.infrastructureRef)")
        try:
            machine = seam_machine(p.meta, p.obj.get("spec"), p.obj.get("status"), p.machine, p.ovirt_cluster)
        except InvalidMachineConfiguration as e:
            return self._invalid(p, str(e))
        except MissingDependency as e:
            self._not_provisioned(p, Reason.MISSING_DEPENDENCY, str(e), event="FailedCreate")
            raise
        if not (p.cluster.infrastructure_provisioned or p.ovirt_cluster.status.initialization.provisioned):
            return self._wait(p, Reason.WAITING_FOR_CLUSTER_INFRASTRUCTURE,
                              f"waiting for the infrastructure of Cluster {p.cluster.metadata.name} "
                              f"(OvirtCluster {p.ovirt_cluster.metadata.name}) to be provisioned")
        if not p.machine.bootstrap_data_secret and not p.recorded:
            return self._wait(p, Reason.WAITING_FOR_BOOTSTRAP_DATA,
                              f"waiting for Machine {p.machine.metadata.name}'s bootstrap data "
                              "(spec.bootstrap.dataSecretName)")
        # Written before the engine is asked anything, so a VM is never made for an object that could go without
        # its removal.
        self._writer.add_finalizer(p.obj, MACHINE_FINALIZER)
        actuator = self._actuator(p)
        if not p.status.initialization.provisioned:
            try:
                progress = actuator.provision(machine)
            except InvalidMachineConfiguration as e:
                return self._invalid(p, str(in_ovirt_machine_terms(e)))
            except InstanceNotOwned as e:
                return self._not_owned(p, e)
            except MissingDependency as e:
                self._not_provisioned(p, Reason.MISSING_DEPENDENCY, str(e), event="FailedCreate")
                raise
            except ActuatorError as e:
                self._not_provisioned(p, Reason.PROVIDER_ERROR, str(e))
                raise
            if not progress.done:
                self._provisioning(p, progress)
                return Result(requeue_after=progress.requeue_after)
            self._events.normal(p.obj, "Created", f"Created VM {p.meta.name} ({progress.instance_id})")
        return self._refresh(p, actuator, machine)

    # --- reading --------------------------------------------------------------------------------------------
    def _read(self, obj: dict) -> _Pass:
        meta = ObjectMeta.from_dict(obj["metadata"])
        status = OvirtMachineStatus.from_dict(obj.get("status") or {})
        machine = capi_machine_of(self._machines, meta)
        name = (machine.spec.cluster_name if machine is not None else "") or cluster_name(meta)
        cluster = capi_cluster(self._clusters, meta.namespace, name)
        ovirt_cluster = ovirt_cluster_of(self._ovirt_clusters, cluster) if cluster is not None else None
        return _Pass(obj, meta, status, machine, cluster, ovirt_cluster)

    def _actuator(self, p: _Pass) -> Actuator:
        assert p.ovirt_cluster is not None
        identity = EngineIdentity(p.meta.namespace, p.ovirt_cluster.spec.identity_ref.name)
        try:
            return self._engines.actuator(identity)
        except ActuatorError as e:
            self._not_provisioned(p, Reason.MISSING_DEPENDENCY, str(e))
            raise

    # --- provisioning ---------------------------------------------------------------------------------------
    def _provisioning(self, p: _Pass, progress: Progress) -> None:
        """The step's news in one status write: the VM's id the first time it is known (guarded, before the next
        step acts on it), a refused start as a Warning and the condition's message."""
        new_id = progress.instance_id if progress.instance_id and progress.instance_id != p.recorded else None
        if progress.problem:
            self._events.warning(p.obj, "FailedStart", progress.problem)
        message = progress.problem or "the VM is being created and started"
        reason = Reason.START_REFUSED if progress.problem else Reason.PROVISIONING
        fields: dict[str, Any] = {}
        if new_id:
            fields = {"instanceId": new_id, "instanceState": progress.instance_state}
        self._writer.status(p.obj, [condition(ConditionType.INSTANCE_PROVISIONED, False, reason, message,
                                              p.meta.generation),
                                    condition(ConditionType.READY, False, reason, message, p.meta.generation)],
                            guarded=bool(new_id), **fields)

    def _refresh(self, p: _Pass, actuator: Actuator, machine: Machine) -> Result | None:
        status = actuator.status(machine)
        gen = p.meta.generation
        if status is None:
            if not p.status.initialization.provisioned:
                return Result(requeue_after=self._timing.deleting_s)  # just started: the next list shows it
            # Provisioned, and gone: never made again behind Cluster API's back (a new VM would be a new Machine);
            # its MachineHealthCheck replaces the Machine.
            message = f"VM {p.meta.name} ({p.recorded}) no longer exists in the engine"
            if not has_condition(p.obj, ConditionType.READY, "False", Reason.INSTANCE_GONE):
                self._events.warning(p.obj, Reason.INSTANCE_GONE, message)
            self._writer.status(p.obj, [condition(ConditionType.READY, False, Reason.INSTANCE_GONE, message, gen)],
                                instanceState="removed")
            return None
        if (p.obj.get("spec") or {}).get("providerID") != status.provider_id:
            self._writer.meta(p.obj, spec={"providerID": status.provider_id})
        running = status.state in _RUNNING_STATES
        ready = (condition(ConditionType.READY, True, Reason.READY, "", gen) if running else
                 condition(ConditionType.READY, False, Reason.INSTANCE_NOT_RUNNING,
                           f"VM {p.meta.name} is {status.state}", gen))
        fields: dict[str, Any] = {"instanceId": status.instance_id, "instanceState": status.state,
                                  "initialization": {"provisioned": True}}
        if status.addresses is not None:
            fields["addresses"] = [a.to_dict() for a in status.addresses]
        domain = p.machine.spec.failure_domain if p.machine is not None else ""
        if domain:
            fields["failureDomain"] = domain
        self._writer.status(p.obj, [condition(ConditionType.INSTANCE_PROVISIONED, True, Reason.PROVISIONED, "", gen),
                                    ready], **fields)
        return Result(requeue_after=self._timing.running_s if status.has_ip else self._timing.waiting_for_ip_s)

    # --- deletion -------------------------------------------------------------------------------------------
    def _delete(self, p: _Pass) -> Result | None:
        if MACHINE_FINALIZER not in p.meta.finalizers:
            return None
        gen = p.meta.generation
        if p.ovirt_cluster is None:
            # Which engine holds the VM is the OvirtCluster's to say; its finalizer keeps it while OvirtMachines
            # of its Cluster exist, so it comes back (or its Cluster was never there to create a VM).
            message = "the OvirtCluster naming the engine is not found: the VM cannot be confirmed gone"
            self._writer.status(p.obj, [condition(ConditionType.READY, False, Reason.DELETING, message, gen)])
            return Result(requeue=True)
        spec = p.obj.get("spec") or {}
        if p.machine is None:
            # Without its Machine, the failure domain it was placed in is unknown: the VM is then looked for by its
            # recorded id or its name in the whole engine, never in one oVirt cluster's list only, where its absence
            # would be taken for its removal.
            spec = {"providerID": spec.get("providerID")}
        machine = seam_machine(p.meta, spec, p.obj.get("status"), p.machine or CapiMachine(), p.ovirt_cluster,
                               deleting=True)
        actuator = self._actuator(p)
        try:
            progress = actuator.delete(machine)
        except InstanceNotOwned as e:
            return self._not_owned(p, e)
        except ActuatorError as e:
            message = f"the VM cannot be confirmed gone, so the deletion waits and is retried with backoff: {e}"
            self._events.warning(p.obj, "FailedDelete", message)
            self._writer.status(p.obj, [condition(ConditionType.READY, False, Reason.DELETING, message, gen)])
            raise
        if not progress.done:
            message = progress.problem or "the VM is being stopped, its data disks detached and it is removed"
            if progress.problem:
                self._events.warning(p.obj, "FailedDelete", progress.problem)
            fields: dict[str, Any] = {}
            if progress.instance_id and progress.instance_id != p.recorded:
                fields["instanceId"] = progress.instance_id
            if progress.problem and progress.instance_state:
                fields["instanceState"] = progress.instance_state
            self._writer.status(p.obj, [condition(ConditionType.READY, False, Reason.DELETING, message, gen)],
                                **fields)
            if progress.problem and not progress.requeue_after:
                return Result(requeue=True)  # the queue's backoff, growing while the engine cannot tell
            return Result(requeue_after=progress.requeue_after or self._timing.deleting_s)
        self._events.normal(p.obj, "Deleted", f"Deleted VM {p.meta.name}")
        self._writer.remove_finalizer(p.obj, MACHINE_FINALIZER)
        return None

    # --- outcomes -------------------------------------------------------------------------------------------
    def _wait(self, p: _Pass, reason: Reason, message: str) -> Result | None:
        self._not_provisioned(p, reason, message)
        return None

    def _not_provisioned(self, p: _Pass, reason: Reason, message: str, event: str | None = None) -> None:
        if event and not has_condition(p.obj, ConditionType.INSTANCE_PROVISIONED, "False", reason):
            self._events.warning(p.obj, event, message)
        gen = p.meta.generation
        conditions = [condition(ConditionType.READY, False, reason, message, gen)]
        if not p.status.initialization.provisioned:
            conditions.append(condition(ConditionType.INSTANCE_PROVISIONED, False, reason, message, gen))
        self._writer.status(p.obj, conditions)

    def _invalid(self, p: _Pass, message: str) -> Result | None:
        """The spec can never be built: said once (a Warning), and nothing is done until it is edited."""
        self._not_provisioned(p, Reason.INVALID_CONFIGURATION, message, event=Reason.INVALID_CONFIGURATION)
        return None

    def _not_owned(self, p: _Pass, e: InstanceNotOwned) -> Result:
        """The recorded id or providerID names a VM of another name (a copied manifest): that VM is left alone, the
        references to it go, and the next pass goes on with the VM of this OvirtMachine's name
        (docs/architecture.md#acting-only-on-what-is-ours)."""
        message = f"{e}; the references to it are dropped, and the VM of this OvirtMachine's name is used"
        self._events.warning(p.obj, Reason.INSTANCE_NOT_OWNED, message)
        if (p.obj.get("spec") or {}).get("providerID") == e.provider_id:
            self._writer.meta(p.obj, spec={"providerID": None})
        fields: dict[str, Any] = {"instanceId": None} if p.recorded == e.instance_id else {}
        self._writer.status(p.obj, [condition(ConditionType.READY, False, Reason.INSTANCE_NOT_OWNED, message,
                                              p.meta.generation)], **fields)
        return Result(requeue=True)


def _ovirt_machine_of(machine: dict) -> list[str]:
    ref = (machine.get("spec") or {}).get("infrastructureRef") or {}
    if ref.get("kind") != OVIRT_MACHINES.kind or not ref.get("name"):
        return []
    return [f"{(machine.get('metadata') or {}).get('namespace')}/{ref['name']}"]


def add_ovirtmachine_controller(manager: Manager, rest: Rest, ovirt_machines: Informer, machines: Informer,
                                clusters: Informer, ovirt_clusters: Informer, engines: Engines,
                                events: EventRecorder, queue: WorkQueue, workers: int) -> OvirtMachineReconciler:
    """`ovirt_machines` carries the INDEX_CLUSTER index. A Machine's change (its bootstrap data) wakes its
    OvirtMachine; a Cluster's or an OvirtCluster's (infrastructure provisioned, unpaused) wakes the Cluster's."""
    reconciler = OvirtMachineReconciler(rest, ovirt_machines.store, machines.store, clusters.store,
                                        ovirt_clusters.store, engines, events)
    ovirt_machines.add_handler(unless_own_write(enqueue_object(queue), reconciler.own_writes))
    # Cluster API rewrites a Machine's, a Cluster's and an OvirtCluster's status conditions often; an OvirtMachine
    # reads only these parts of them (the bootstrap data, the failure domain, the Node; pausing; the infrastructure
    # provisioned; the engine and the failure domains offered).
    machines.add_handler(when_changed(enqueue_mapped(queue, _ovirt_machine_of), ("spec",), ("status", "nodeRef")))

    def of_clusters(keys: list[str]) -> list[str]:
        return [object_key(om) for key in keys for om in ovirt_machines.store.by_index(INDEX_CLUSTER, key)]

    clusters.add_handler(when_changed(enqueue_mapped(queue, lambda c: of_clusters([object_key(c)])),
                                      ("spec",), ("metadata", "annotations"), ("status", "initialization")))
    ovirt_clusters.add_handler(when_changed(
        enqueue_mapped(queue, lambda oc: of_clusters(cluster_of_ovirt_cluster(oc))),
        ("spec",), ("metadata", "annotations"), ("status", "initialization")))
    manager.add_controller(Controller(queue.name, queue, reconciler.reconcile, workers=workers,
                                      registry=manager.registry))
    return reconciler
