"""The MachineSet capacity controller (`--controllers machineset-capacity`, docs/compatibility.md#autoscaler): writes
the autoscaler's scale-from-zero capacity annotations on MachineSets, and nothing else.

It is a controller of its own, not a part of the MachineSet controller, because on OpenShift machine-api-operator
runs its own MachineSet controller, which does not write these annotations: each provider's image runs a small
controller beside it that only does this (docs/architecture.md#deployment-modes). So the drop-in deployment runs it
beside MAO's, and the standalone one beside this project's MachineSet controller; either way it is the only writer
of the annotations. The values come from the template's provider spec (`capacity.py`); the controller never talks
to oVirt.
"""

from __future__ import annotations

import structlog
from kubernetes.client.exceptions import ApiException

from api import keys
from api.machine import owned_by_machine_api
from api.machineset import MachineSet
from machine_controller.controllers.machineset.capacity import CAPACITY_ANNOTATIONS, capacity_from_provider_spec
from machine_controller.controllers.resources import MACHINESETS
from machine_controller.runtime.controller import Controller, Result, enqueue_object, when_changed
from machine_controller.runtime.events import EventRecorder
from machine_controller.runtime.informer import Informer, Store
from machine_controller.runtime.kube import ErrorKind, Rest, classify
from machine_controller.runtime.manager import Manager
from machine_controller.runtime.workqueue import WorkQueue

log = structlog.get_logger(__name__)

# The field manager under which the capacity annotations are server-side applied: the API server then remembers
# which annotations this controller wrote, so it can withdraw exactly those (see `reconcile`).
CAPACITY_FIELD_MANAGER = "ovirt-machine-controller-capacity"

# What the annotations depend on, and the annotations themselves (a user removing one gets it back): a status
# write, by this project's MachineSet controller or MAO's, must not wake this controller, but a set given back to
# the Machine API must (docs/compatibility.md#authoritativeapi).
_WATCHED = (("spec", "template", "spec", "providerSpec"), ("metadata", "annotations"), ("metadata", "generation"),
            ("status", "authoritativeAPI"))


class MachineSetCapacityReconciler:
    def __init__(self, rest: Rest, machinesets: Store, events: EventRecorder):
        self._rest = rest
        self._machinesets = machinesets
        self._events = events
        # The generation of each set last warned about, so that a template with no computable capacity is said
        # once per edit, whichever controller writes the set's status.observedGeneration (or none).
        self._warned: dict[str, int | None] = {}

    def reconcile(self, key: str) -> Result | None:
        """Keep the scale-from-zero annotations equal to what the template's provider spec says.

        They are written with server-side apply under their own field manager: the API server records which
        annotation keys this controller owns. When the capacity becomes unknown (the template moved to an oVirt
        instance type), applying an empty set removes exactly those keys, while values a user set by hand, which
        this controller never wrote, stay."""
        obj = self._machinesets.get(key)
        if obj is None:
            self._warned.pop(key, None)
            return None
        ms = MachineSet.from_dict(obj)
        if ms.metadata.deleting or not owned_by_machine_api(obj):
            return None  # while another API owns the set, its controllers write what it carries
        capacity = capacity_from_provider_spec(ms.spec.template.spec.provider_spec.value)
        if capacity.unknown is not None:
            if self._warned.get(key, -1) != ms.metadata.generation:
                self._events.warning(obj, "CapacityUnknown", f"no scale-from-zero capacity: {capacity.unknown}")
                self._warned[key] = ms.metadata.generation
            if not _owned_annotations(obj, CAPACITY_FIELD_MANAGER):
                return None
        else:
            self._warned.pop(key, None)
            if all(ms.metadata.annotations.get(k) == v for k, v in capacity.annotations.items()):
                return None
        meta = obj["metadata"]
        # The uid makes the apply a precondition: an apply to a set that is gone would create it anew (with no
        # spec), since the cache can still hold a set already deleted; with the uid the API server answers 409.
        body = {"apiVersion": keys.API_VERSION, "kind": "MachineSet",
                "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"],
                             "annotations": capacity.annotations}}
        try:
            self._rest.request("PATCH", MACHINESETS.path(meta["namespace"], meta["name"]),
                               {"fieldManager": CAPACITY_FIELD_MANAGER, "force": "true"}, body,
                               content_type="application/apply-patch+yaml")
        except ApiException as e:
            if classify(e) not in (ErrorKind.CONFLICT, ErrorKind.NOT_FOUND):
                raise
            return None  # gone meanwhile (with `force`, a 409 can only be the uid): its delete event forgets it
        log.info("capacity annotations updated", machineset=key, annotations=capacity.annotations or None)
        return None


def _owned_annotations(obj: dict, manager: str) -> bool:
    """Whether `manager` owns any capacity annotation of the object according to its managedFields."""
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        if entry.get("manager") != manager:
            continue
        fields = ((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:annotations") or {}
        if any(f"f:{k}" in fields for k in CAPACITY_ANNOTATIONS):
            return True
    return False


def add_machineset_capacity_controller(manager: Manager, rest: Rest, machinesets: Informer, events: EventRecorder,
                                       queue: WorkQueue, workers: int = 1) -> MachineSetCapacityReconciler:
    """Wire the capacity controller into a Manager, on the process's MachineSet informer (which keeps
    managedFields: the reconciler reads which annotations it owns)."""
    reconciler = MachineSetCapacityReconciler(rest, machinesets.store, events)
    machinesets.add_handler(when_changed(enqueue_object(queue), *_WATCHED))
    manager.add_controller(Controller("machineset-capacity", queue, reconciler.reconcile, workers=workers,
                                      registry=manager.registry))
    return reconciler
