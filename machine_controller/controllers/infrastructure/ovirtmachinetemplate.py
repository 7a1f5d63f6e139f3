"""The OvirtMachineTemplate controller (`--controllers ovirtmachinetemplate`): Cluster API's "autoscaling from zero"
rule of the InfraMachine contract (v1beta2), the counterpart of the Machine API's `machineset-capacity`
(docs/compatibility.md#autoscaler).

The cluster-autoscaler grows a MachineDeployment or MachineSet from zero replicas only if it can build a node of
its template: it reads `status.capacity` of the infrastructure template it names (each value a string that parses
as a Kubernetes quantity; a value that is not a string loses the whole map) and `status.nodeInfo` (the template
node's `kubernetes.io/arch` and `kubernetes.io/os` labels, which are empty without it). This controller writes
them from the template's own `spec.template.spec` and never asks the engine:

- `capacity`: `cpu` (vCPUs) and `memory` (Mi), the VM's size from its spec (api/capacity.py, the same computation
  as the MachineSets' annotations). No `pods`: the autoscaler always sets the template node's pods from the
  MachineDeployment's maxPods annotation (110 without it), over anything the template says.
- `nodeInfo`: `linux` (the bootstrap data the VMs take, cloud-config or Ignition, is Linux's) on `amd64` (the
  engine limits this project checks VM shapes against are x86_64's, docs/compatibility.md#engine-limits).

Pausing (the contract's rule, as for OvirtMachines): nothing is written while the template carries the paused
annotation or the Cluster that owns it (Cluster API sets that owner reference) is paused, as during `clusterctl
move`; resuming wakes it.

When the size cannot be known from the spec (an oVirt instance type, whose size only the engine knows; no cpu or
memory_mb), the `cpu` and `memory` it writes are removed, and a `CapacityUnknown` Warning says why once per
generation; the autoscaler's capacity annotations on the MachineDeployment are then the way to scale from zero.
"""

from __future__ import annotations

from typing import Any, Mapping

import structlog

from api import capi
from api.capacity import VMSize, vm_size
from api.field_errors import InvalidProviderSpec
from api.infrastructure import TEMPLATE_SPEC_PATH, Architecture, OvirtMachineSpec
from api.meta import ObjectMeta
from api.provider_spec import decode_spec
from machine_controller.controllers.infrastructure.resources import (
    OVIRT_MACHINE_TEMPLATES,
    capi_cluster,
    owner_name,
    paused,
)
from machine_controller.runtime.controller import Controller, Result, enqueue_mapped, enqueue_object, when_changed
from machine_controller.runtime.events import EventRecorder
from machine_controller.runtime.informer import Informer, Store
from machine_controller.runtime.kube import Rest, object_key
from machine_controller.runtime.manager import Manager
from machine_controller.runtime.workqueue import WorkQueue
from machine_controller.runtime.writes import write

log = structlog.get_logger(__name__)

# The capacity keys this controller owns in status.capacity; others (a user's) are left alone.
CAPACITY_CPU = "cpu"
CAPACITY_MEMORY = "memory"
_OWN_CAPACITY = (CAPACITY_CPU, CAPACITY_MEMORY)
NODE_INFO = {"architecture": Architecture.AMD64.value, "operatingSystem": "linux"}
_BY_HAND = ("set the capacity.cluster-autoscaler.kubernetes.io/cpu and memory annotations on the "
            "MachineDeployment by hand to scale from zero")

# What the status depends on, and the status itself (a value changed by someone else is written back).
_WATCHED = (("spec", "template", "spec"), ("status",), ("metadata", "generation"), ("metadata", "annotations"))


def cluster_of_template(meta: ObjectMeta) -> str:
    """The name of the Cluster a template belongs to: its owner Cluster, else Cluster API's label ("" for none)."""
    return owner_name(meta, capi.CLUSTER_KIND) or capi.cluster_name(meta)


def template_size(raw_spec: Any) -> VMSize:
    """The size of a VM made from an OvirtMachineTemplate's `spec.template.spec` (raw, as stored)."""
    try:
        spec = decode_spec(OvirtMachineSpec, raw_spec, TEMPLATE_SPEC_PATH)
    except InvalidProviderSpec as e:
        return VMSize(unknown=f"{TEMPLATE_SPEC_PATH} cannot be read: {e}")
    return vm_size(spec, TEMPLATE_SPEC_PATH, _BY_HAND)


def template_status(size: VMSize, current: Mapping[str, Any]) -> dict[str, Any]:
    """The status fields to hold, given the `current` status: the capacity when known; when not, the keys this
    controller writes removed (the whole map when nothing else is in it); the node info either way."""
    status: dict[str, Any] = {"nodeInfo": dict(NODE_INFO)}
    if size.unknown is None:
        status["capacity"] = {CAPACITY_CPU: str(size.vcpus), CAPACITY_MEMORY: size.memory_quantity}
        return status
    capacity = current.get("capacity") or {}
    ours = [k for k in _OWN_CAPACITY if k in capacity]
    if ours:
        status["capacity"] = None if set(capacity) <= set(_OWN_CAPACITY) else dict.fromkeys(ours)
    return status


class OvirtMachineTemplateReconciler:
    def __init__(self, rest: Rest, templates: Store, events: EventRecorder, clusters: Store | None = None):
        self._rest = rest
        self._templates = templates
        self._clusters = clusters
        self._events = events
        # The generation of each template last warned about: an unknown capacity is said once per edit.
        self._warned: dict[str, int] = {}

    def reconcile(self, key: str) -> Result | None:
        """Keep status.capacity and status.nodeInfo equal to what the template's spec says; one status merge
        patch of what differs (runtime/writes.py), nothing when nothing does."""
        obj = self._templates.get(key)
        if obj is None:
            self._warned.pop(key, None)
            return None
        meta = obj["metadata"]
        if meta.get("deletionTimestamp") or self._paused(ObjectMeta.from_dict(meta)):
            return None
        generation = int(meta.get("generation") or 0)
        size = template_size((((obj.get("spec") or {}).get("template") or {}).get("spec")))
        if size.unknown is not None:
            if self._warned.get(key) != generation:
                self._events.warning(obj, "CapacityUnknown", f"no scale-from-zero capacity: {size.unknown}")
                self._warned[key] = generation
        else:
            self._warned.pop(key, None)
        status = template_status(size, obj.get("status") or {})
        # Unguarded: the status follows from the spec alone, and a newer spec queues the template again.
        if write(self._rest, OVIRT_MACHINE_TEMPLATES, obj, status=status) is not None:
            log.info("template capacity updated", ovirtmachinetemplate=key, capacity=status.get("capacity"))
        return None

    def _paused(self, meta: ObjectMeta) -> bool:
        name = cluster_of_template(meta)
        cluster = capi_cluster(self._clusters, meta.namespace, name) if self._clusters is not None and name else None
        return paused(cluster, meta)


def add_ovirtmachinetemplate_controller(manager: Manager, rest: Rest, templates: Informer, events: EventRecorder,
                                        queue: WorkQueue, clusters: Informer | None = None,
                                        ) -> OvirtMachineTemplateReconciler:
    """Templates are looked at when their spec, status or annotations change, and when their Cluster is paused or
    resumed."""
    reconciler = OvirtMachineTemplateReconciler(rest, templates.store, events,
                                                clusters.store if clusters is not None else None)
    templates.add_handler(when_changed(enqueue_object(queue), *_WATCHED))
    if clusters is not None:
        def of_cluster(cluster: dict) -> list[str]:
            meta = cluster["metadata"]
            return [object_key(t) for t in templates.store.list()
                    if t["metadata"].get("namespace") == meta.get("namespace")
                    and cluster_of_template(ObjectMeta.from_dict(t["metadata"])) == meta.get("name")]

        clusters.add_handler(when_changed(enqueue_mapped(queue, of_cluster), ("spec", "paused"),
                                          ("metadata", "annotations")))
    manager.add_controller(Controller(queue.name, queue, reconciler.reconcile, registry=manager.registry))
    return reconciler
