"""What both infrastructure controllers do to the object they reconcile: its conditions (metav1.Condition, as the
v1beta2 contract has them), the Paused condition of the contract's pausing rule, the finalizer, and the writes, all
through the one write path (runtime/writes.py; metadata and spec in one write, status in another)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Iterable

from api.infrastructure import ConditionType, StatusCondition, set_status_condition
from api.meta import ConditionStatus
from machine_controller.runtime.controller import OwnWrites
from machine_controller.runtime.kube import Resource, Rest
from machine_controller.runtime.writes import write


class Reason(StrEnum):
    READY = "Ready"
    PROVISIONED = "Provisioned"
    PAUSED = "Paused"
    NOT_PAUSED = "NotPaused"
    INVALID_CONFIGURATION = "InvalidConfiguration"
    WAITING_FOR_CLUSTER_INFRASTRUCTURE = "WaitingForClusterInfrastructure"
    WAITING_FOR_BOOTSTRAP_DATA = "WaitingForBootstrapData"
    PROVISIONING = "Provisioning"
    MISSING_DEPENDENCY = "MissingDependency"
    PROVIDER_ERROR = "ProviderError"
    START_REFUSED = "StartRefused"
    INSTANCE_NOT_OWNED = "InstanceNotOwned"
    INSTANCE_GONE = "InstanceGone"
    INSTANCE_NOT_RUNNING = "InstanceNotRunning"
    DELETING = "Deleting"
    WAITING_FOR_MACHINES = "WaitingForMachines"
    OVIRT_CLUSTER_NOT_FOUND = "OvirtClusterNotFound"


def condition(type_: str, ok: bool, reason: str, message: str = "", generation: int = 0) -> StatusCondition:
    return StatusCondition(type=type_, status=ConditionStatus.TRUE if ok else ConditionStatus.FALSE, reason=reason,
                           message=message, observed_generation=generation)


def paused_condition(paused: bool, generation: int) -> StatusCondition:
    return condition(ConditionType.PAUSED, paused, Reason.PAUSED if paused else Reason.NOT_PAUSED,
                     "the object or its Cluster is paused: nothing is done until it is resumed" if paused else "",
                     generation)


@dataclass
class ObjectWriter:
    """Writes one kind's objects, keeping `obj` current after each write (so the next is guarded by the new
    resourceVersion) and telling the controller which watch events are the echo of its own writes."""

    rest: Rest
    resource: Resource
    own_writes: OwnWrites = field(default_factory=OwnWrites)

    def meta(self, obj: dict, metadata: dict[str, Any] | None = None, spec: dict[str, Any] | None = None) -> None:
        """Metadata (and spec), guarded by resourceVersion: a concurrent change ends the pass (writes.Conflict)."""
        self._done(obj, write(self.rest, self.resource, obj, metadata=metadata or {}, spec=spec, guarded=True))

    def add_finalizer(self, obj: dict, finalizer: str) -> None:
        finalizers = obj["metadata"].get("finalizers") or []
        if finalizer not in finalizers:
            self.meta(obj, {"finalizers": [*finalizers, finalizer]})

    def remove_finalizer(self, obj: dict, finalizer: str) -> None:
        finalizers = obj["metadata"].get("finalizers") or []
        if finalizer in finalizers:
            self.meta(obj, {"finalizers": [f for f in finalizers if f != finalizer]})

    def status(self, obj: dict, conditions: Iterable[StatusCondition] = (), *, paused: bool = False,
               guarded: bool = False, **fields: Any) -> None:
        """The status fields given and the conditions set (lastTransitionTime kept while a status stays), with
        Paused saying whether the object is paused; only what changed is sent."""
        generation = int(obj["metadata"].get("generation") or 0)
        merged = [StatusCondition.from_dict(c) for c in (obj.get("status") or {}).get("conditions") or []]
        for c in (paused_condition(paused, generation), *conditions):
            merged = set_status_condition(merged, c)
        status = {**fields, "conditions": [c.to_dict() for c in merged]}
        self._done(obj, write(self.rest, self.resource, obj, status=status, guarded=guarded))

    def _done(self, obj: dict, updated: dict | None) -> None:
        if updated is not None:
            self.own_writes.record(updated)
            obj.clear()
            obj.update(updated)


def has_condition(obj: dict, type_: str, status: str, reason: str | None = None) -> bool:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return c.get("status") == status and (reason is None or c.get("reason") == reason)
    return False
