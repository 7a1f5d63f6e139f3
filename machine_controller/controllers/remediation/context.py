"""What every step of a remediation shares (docs/fencing.md): its timing, its metrics, its target, and the one
way it writes the request (runtime/writes.py: status guarded by resourceVersion, so a pass that decided from an old
version never overwrites a newer one; a lost race ends the pass with writes.Conflict or writes.Gone)."""

from __future__ import annotations

import datetime as dt
from collections import deque
from dataclasses import dataclass, fields
from typing import Any, Callable, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge

from api.meta import Condition, format_time, now, parse_time, set_condition
from api.remediation import OUT_OF_SERVICE_TAINT_KEY, REMEDIATION_TAINT_KEY, OvirtRemediation, RemediationConditionType
from machine_controller.controllers.nodes.status import node_ready, ready_condition
from machine_controller.controllers.nodes.storage import TaintsChanged, add_taint, remove_taints
from machine_controller.controllers.provider import PowerControl
from machine_controller.controllers.resources import REMEDIATIONS
from machine_controller.runtime import writes
from machine_controller.runtime.bounds import check_number
from machine_controller.runtime.events import EventRecorder
from machine_controller.runtime.informer import Store
from machine_controller.runtime.kube import Rest, object_key

from .targets import ClusterApiMachines, MachineApiMachines, Targets

# How many replaced versions of one request are remembered: a pass writes a few at most.
_SUPERSEDED_KEPT = 8

CONDITIONS = RemediationConditionType


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


class RemediationMetrics:
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


class RemediationContext:
    """The reconciler's state and the operations every phase uses; the phases (powering_off.py,
    releasing_storage.py, powering_on.py) and the endings (outcomes.py) build on it."""

    def __init__(self, rest: Rest, remediations: Store, machines: Store | None, nodes: Store,
                 power: PowerControl | None, events: EventRecorder, registry: CollectorRegistry | None = None,
                 timing: RemediationTiming = RemediationTiming(), clock: Callable[[], dt.datetime] = now,
                 namespace: str | None = None, cluster_api: ClusterApiMachines | None = None):
        """`machines` and `power` serve the Machine API's Machines (None: this process does not), `cluster_api`
        Cluster API's (docs/fencing.md#both-front-ends)."""
        self._rest = rest
        self._remediations = remediations
        self._targets = Targets(
            MachineApiMachines(machines, power) if machines is not None and power is not None else None,
            cluster_api)
        self._nodes = nodes
        self._events = events
        self._timing = timing
        self._clock = clock
        self._metrics = RemediationMetrics(registry, namespace)
        self._refused: dict[str, tuple[int, dt.datetime]] = {}  # request key -> (refusals in a row, next try)
        # The resourceVersions of each request that this controller's own writes replaced. The informer may still
        # hand one back (its watch event of the write not yet in), and a pass over it would act again on what was
        # already decided, e.g. taint a Node again after the request ended
        # (docs/fencing.md#the-safety-rules-the-code-keeps).
        self._superseded: dict[str, deque[str]] = {}

    def _node_is_ready(self, node_name: str, since: dt.datetime | None = None) -> bool:
        node = self._nodes.get(node_name) if node_name else None
        if node is None or node_ready(node) != "True":
            return False
        if since is None:
            return True
        # Ready since the VM was powered on: the new incarnation's kubelet, not a stale status.
        changed = time_of((ready_condition(node) or {}).get("lastTransitionTime"))
        return changed is not None and changed >= since.replace(microsecond=0)

    def _taint(self, node_name: str, taint: dict[str, str]) -> None:
        """Add `taint` to the Node (as the cache has it) unless a taint of its key and effect is there already."""
        try:
            add_taint(self._rest, self._nodes.get(node_name), taint)
        except TaintsChanged:
            # The next pass reads it again.
            raise writes.Conflict(f"Node {node_name}'s taints changed meanwhile") from None

    def _remove_taints(self, node_name: str) -> None:
        """Remove the remediation's taints from the Node (only ends and finalizers come here, so its fresh read
        is rare)."""
        try:
            remove_taints(self._rest, node_name, (REMEDIATION_TAINT_KEY, OUT_OF_SERVICE_TAINT_KEY))
        except TaintsChanged:
            raise writes.Conflict(f"Node {node_name}'s taints changed meanwhile") from None

    def _write(self, obj: dict, rem: OvirtRemediation, conditions: Sequence[Condition] = (), **fields: Any) -> None:
        """Merge-patch status with the given fields, guarded by resourceVersion; keeps `obj` and `rem` current. An
        emptied field ("") is removed (a merge-patch null): "" is not a valid date-time for the schema."""
        merged = rem.status.conditions
        stamp = self._clock()
        for c in conditions:
            merged = set_condition(merged, c, at=stamp)
        status: dict[str, Any] = {_JSON[name]: (None if value == "" else value) for name, value in fields.items()}
        status["conditions"] = [c.to_dict() for c in merged]
        replaced = obj["metadata"].get("resourceVersion")
        updated = writes.write(self._rest, REMEDIATIONS, obj, status=status, guarded=True)
        if updated is None:
            return
        self._superseded_by_own_write(object_key(obj), replaced)
        obj.clear()
        obj.update(updated)
        rem.status = OvirtRemediation.from_dict(updated).status
        rem.metadata.resource_version = updated["metadata"]["resourceVersion"]

    def _patch_meta(self, obj: dict, metadata: dict[str, Any]) -> None:
        replaced = obj["metadata"].get("resourceVersion")
        if writes.write(self._rest, REMEDIATIONS, obj, metadata=metadata, guarded=True) is not None:
            self._superseded_by_own_write(object_key(obj), replaced)

    def _superseded_by_own_write(self, key: str, resource_version: str | None) -> None:
        if resource_version:
            self._superseded.setdefault(key, deque(maxlen=_SUPERSEDED_KEPT)).append(resource_version)

    def _stale(self, obj: dict) -> bool:
        """`obj` is a version of the request that this controller's own write already replaced: the newer one's
        event is on its way and queues the request again."""
        return obj["metadata"].get("resourceVersion") in self._superseded.get(object_key(obj), ())

    def _forget(self, key: str) -> None:
        self._superseded.pop(key, None)

    def _stamp(self) -> str:
        return format_time(self._clock())

    def _elapsed(self, since: dt.datetime) -> float:
        return (self._clock() - since).total_seconds()


_JSON = {"phase": "phase", "retry_count": "retryCount", "vm_id": "vmId", "node_name": "nodeName",
         "last_remediated": "lastRemediated", "power_off_requested": "powerOffRequested",
         "storage_released": "storageReleased", "powering_on_since": "poweringOnSince",
         "power_on_requested": "powerOnRequested", "vm_start_seen": "vmStartSeen",
         "power_off_may_land_until": "powerOffMayLandUntil", "message": "message"}


def time_of(value: str | None) -> dt.datetime | None:
    return parse_time(value) if value else None
