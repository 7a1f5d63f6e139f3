"""The MachineSet controller (docs/compatibility.md#machinesets): keeps `spec.replicas` Machines built from the
template, deletes the ones the delete policy picks, adopts matching orphans, and reports status for `kubectl get` and
the scale subresource. The autoscaler's scale-from-zero capacity annotations are not its business: the
`machineset-capacity` controller (`machineset_capacity.py`) writes them, beside this one or beside MAO's.

Differences from MAO, and why:
- MAO polls up to 10 s per Machine inside the reconcile until the cache shows its creates and deletes; here the
  writes are remembered as expectations (`expectations.py`) and the next reconcile, triggered by the Machine's
  own watch event, goes on. No worker waits.
- An invalid selector is reported as a Warning event *and* in `status.errorReason/errorMessage` (declared by
  openshift/api, unused by MAO), and is not retried with backoff: only a change of the MachineSet can fix it, and
  that change is itself an event.
- Node events are watched too (MAO relies on nodelink rewriting nodeRef at every Ready flip), so readyReplicas
  follows a Node's Ready condition even where nodelink is not running.
- MAO replaces a Failed Machine the health check deleted at once, for ever; here a template whose Machines fail
  as invalid is reported (`TemplateValid=False`, a Warning) and makes nothing until it changes, and other failures
  of new Machines back creation off (`machineset_failures.py`).
The controller never talks to oVirt: Machines are created and deleted as API objects; the Machine controller
does the rest.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, Callable

import structlog
from kubernetes.client.exceptions import ApiException

from api import keys
from api.machine import Machine, decide_authority
from api.machineset import MachineSet
from api.meta import ConditionStatus, get_condition, parse_time, set_condition
from api.meta import now as utc_now
from machine_controller.controllers.machineset.delete_policy import machines_to_delete
from machine_controller.controllers.machineset.expectations import Expectations
from machine_controller.controllers.machineset.failures import (
    INVALID_TEMPLATE_EVENT,
    TEMPLATE_VALID,
    CreationGuard,
    Hold,
    template_hash,
    template_valid,
)
from machine_controller.controllers.machineset.metrics import ITEMS as MACHINESET_ITEMS
from machine_controller.controllers.machineset.metrics import machineset_families
from machine_controller.controllers.mao_metrics import MaoCollector
from machine_controller.controllers.nodes.status import node_ready, ready_condition
from machine_controller.controllers.resources import INDEX_NODE_REF, MACHINES, MACHINESETS, node_ref_index
from machine_controller.runtime.controller import (
    Controller,
    Result,
    TerminalError,
    enqueue_mapped,
    enqueue_object,
    owner_keys,
    when_changed,
)
from machine_controller.runtime.events import EventRecorder
from machine_controller.runtime.informer import EventHandler, Informer, Store
from machine_controller.runtime.kube import ErrorKind, Rest, classify
from machine_controller.runtime.manager import Manager
from machine_controller.runtime.workqueue import WorkQueue
from machine_controller.runtime.writes import Conflict, Gone, write

log = structlog.get_logger(__name__)

INVALID_CONFIGURATION = "InvalidConfiguration"
CONFLICT_RETRY_S = 0.5


class MachineSetReconciler:
    def __init__(self, rest: Rest, machinesets: Store, machines: Store, nodes: Store, events: EventRecorder,
                 expectations: Expectations | None = None, clock: Callable[[], dt.datetime] = utc_now,
                 guard: CreationGuard | None = None):
        self._rest = rest
        self._machinesets = machinesets
        self._machines = machines
        machines.add_indexer(INDEX_NODE_REF, node_ref_index)
        self._nodes = nodes
        self._events = events
        self._expectations = expectations or Expectations()
        self._clock = clock
        self._guard = guard or CreationGuard()

    # --- entry point ----------------------------------------------------------------------------------------
    def reconcile(self, key: str) -> Result | None:
        obj = self._machinesets.get(key)
        if obj is None:
            self._expectations.forget(key)
            self._guard.forget(key)
            return None
        ms = MachineSet.from_dict(obj)
        if ms.metadata.deleting:
            return None  # owned Machines go with the set: the garbage collector follows their ownerReferences
        authoritative = self._authoritative(obj, ms)
        if authoritative is None:
            return None
        obj, ms = authoritative
        problems = ms.spec.selector_problems()
        if problems:
            message = "invalid selector: " + "; ".join(problems)
            self._events.warning(obj, "ReconcileError", message)
            self._write_status(obj, {"errorReason": INVALID_CONFIGURATION, "errorMessage": message,
                                     "observedGeneration": ms.metadata.generation})
            raise TerminalError(message)  # only an edit of the MachineSet can fix it; the edit enqueues it again
        self._check_autoscaler_bounds(obj)
        machines, contested = self._claim(obj, ms)
        pending = self._expectations.pending(key, lambda name: self._machines.get(f"{ms.metadata.namespace}/{name}"))
        if contested:
            # An orphan could not be adopted because it changed meanwhile (maybe adopted by this set in a pass the
            # cache does not show yet): counting without it could create a Machine too many.
            pending = min(pending or CONFLICT_RETRY_S, CONFLICT_RETRY_S)
        current = template_hash(obj)
        hold = self._guard.hold(key, current)
        backoff = self._sync_replicas(obj, ms, machines, current, hold) if pending is None else None
        status, recheck = self._status(ms, machines)
        status["conditions"] = self._template_conditions(obj, ms, hold)
        self._write_status(obj, status)
        waits = [w for w in (pending, recheck, backoff) if w is not None]
        return Result(requeue_after=min(waits)) if waits else None

    def _authoritative(self, obj: dict, ms: MachineSet) -> tuple[dict, MachineSet] | None:
        """MAO's check (docs/compatibility.md#authoritativeapi): a set whose `status.authoritativeAPI` is
        `ClusterAPI` or `Migrating` gets `Paused=True` and nothing more (no Machine created, deleted or adopted, no
        other status); given back, `Paused=False` and the pass goes on. The set as written, or None when it is
        left alone."""
        decided = decide_authority(ms.spec.authoritative_api, ms.status.authoritative_api, ms.status.conditions,
                                   self._clock())
        if decided.problem:
            self._events.warning(obj, "InvalidAuthoritativeAPI", decided.problem)
        if decided.status is not None:
            # Guarded: the conditions are sent whole, from the set this pass read.
            updated = write(self._rest, MACHINESETS, obj, status=decided.status, guarded=True)
            if updated is not None:
                obj, ms = updated, MachineSet.from_dict(updated)
                log.info("authoritative API", machineset=ms.key, authoritative_api=ms.status.authoritative_api,
                         paused=not decided.machine_api)
        return (obj, ms) if decided.machine_api else None

    # --- which Machines belong to the set ---------------------------------------------------------------------
    def _claim(self, obj: dict, ms: MachineSet) -> tuple[list[Machine], bool]:
        """The Machines the set counts: controlled by it (by UID), not being deleted (so replacements are created
        while old Machines drain), matching the selector. Matching orphans are adopted on the way; the flag says
        whether an adoption lost a race (the count may then be short)."""
        counted = []
        contested = False
        for raw in self._machines.list():
            machine = Machine.from_dict(raw)
            if machine.metadata.namespace != ms.metadata.namespace or machine.metadata.deleting:
                continue
            if not ms.spec.selector.matches(machine.metadata.labels):
                continue
            ref = machine.metadata.controller_ref()
            if ref is None:
                if not self._adopt(obj, raw):
                    contested = True
                    continue
            elif ref.uid != ms.metadata.uid:
                continue
            counted.append(machine)
        return sorted(counted, key=lambda m: m.metadata.name), contested

    def _adopt(self, obj: dict, machine: dict) -> bool:
        meta = machine["metadata"]
        refs = [*(meta.get("ownerReferences") or []), controller_reference(obj)]
        # Guarded by resourceVersion: if someone else claimed it meanwhile, the patch fails and the Machine's
        # update event brings us back to look again.
        try:
            write(self._rest, MACHINES, machine, metadata={"ownerReferences": refs}, guarded=True)
        except (Conflict, Gone):
            return False
        self._events.normal(obj, "SuccessfulAdopt", f"Adopted machine {meta['name']}")
        log.info("adopted machine", machine=meta["name"])
        return True

    # --- replicas -------------------------------------------------------------------------------------------
    def _sync_replicas(self, obj: dict, ms: MachineSet, machines: list[Machine], current: str,
                       hold: Hold | None) -> float | None:
        """Create or delete Machines; the seconds until creation may be tried again if it was held back."""
        if ms.spec.replicas is None:
            raise ValueError("spec.replicas is unset")  # the CRD defaults it to 1, so only a broken object gets here
        diff = ms.spec.replicas - len(machines)
        if diff > 0 and hold is not None:
            return self._withhold(obj, ms, diff, hold)
        if diff > 0:
            for _ in range(diff):
                self._create_machine(obj, ms, current)
        elif diff < 0:
            victims = machines_to_delete(machines, -diff, ms.spec.effective_delete_policy, self._clock())
            for victim in victims:
                self._guard.chose(ms.key, victim.metadata.name)
                self._delete_machine(obj, ms, victim.metadata.name)
        return None

    def _withhold(self, obj: dict, ms: MachineSet, missing: int, hold: Hold) -> float | None:
        """Create nothing while new Machines fail (docs/architecture.md#acting-only-on-what-is-ours); an invalid
        template is said by the TemplateValid condition and waits for its change, which is itself an event."""
        log.info("not creating machines", missing=missing, failed=hold.failures, last=hold.machine,
                 invalid_template=hold.invalid, retry_after=None if hold.invalid else round(hold.delay_s, 1))
        if hold.invalid:
            return None
        if self._guard.news(ms.key, hold):
            self._events.warning(obj, "CreateBackoff", f"{hold.failures} new machines failed (the last, "
                                 f"{hold.machine}: {hold.reason}); the next is created after {hold.backoff_s:.0f}s")
        return hold.delay_s

    def _create_machine(self, obj: dict, ms: MachineSet, current: str) -> None:
        template = (obj.get("spec") or {}).get("template") or {}
        tmeta = template.get("metadata") or {}
        body = {
            "apiVersion": keys.API_VERSION,
            "kind": "Machine",
            "metadata": {
                "generateName": f"{ms.metadata.name}-",
                "namespace": ms.metadata.namespace,
                "labels": dict(tmeta.get("labels") or {}),
                # The template hash tells a failure of this template from one of an earlier template.
                "annotations": {**(tmeta.get("annotations") or {}), keys.ANNOTATION_TEMPLATE_HASH: current},
                "ownerReferences": [controller_reference(obj)],
            },
            # The raw template spec, not a re-serialised dataclass: fields this project does not model survive.
            "spec": template.get("spec") or {},
        }
        created = self._rest.create(MACHINES, body, ms.metadata.namespace)
        name = created["metadata"]["name"]
        self._expectations.expect_created(ms.key, name)
        self._events.normal(obj, "SuccessfulCreate", f"Created machine {name}")
        log.info("created machine", machine=name)

    def _delete_machine(self, obj: dict, ms: MachineSet, name: str) -> None:
        try:
            self._rest.delete(MACHINES, name, ms.metadata.namespace)
        except ApiException as e:
            if classify(e) != ErrorKind.NOT_FOUND:
                raise
        self._expectations.expect_deleted(ms.key, name)
        self._events.normal(obj, "SuccessfulDelete", f"Deleted machine {name}")
        log.info("deleted machine", machine=name)

    # --- status ---------------------------------------------------------------------------------------------
    def _status(self, ms: MachineSet, machines: list[Machine]) -> tuple[dict[str, Any], float | None]:
        """Status as MAO computes it (3.2 step 5), and when to look again for a Machine that is Ready but not yet
        available for minReadySeconds (MAO requeues after minReadySeconds; this waits only as long as needed)."""
        now = self._clock()
        template_labels = ms.spec.template.metadata.labels
        fully_labeled = ready = available = 0
        recheck: float | None = None
        for machine in machines:
            if all(machine.metadata.labels.get(k) == v for k, v in template_labels.items()):
                fully_labeled += 1
            ready_since = self._node_ready_since(machine)
            if ready_since is None:
                continue
            ready += 1
            remaining = ms.spec.min_ready_seconds - (now - ready_since).total_seconds()
            if remaining <= 0:
                available += 1
            else:
                recheck = remaining if recheck is None else min(recheck, remaining)
        status = {
            "replicas": len(machines),
            "fullyLabeledReplicas": fully_labeled,
            "readyReplicas": ready,
            "availableReplicas": available,
            "labelSelector": ms.spec.selector.to_string(),
            "observedGeneration": ms.metadata.generation,
            "errorReason": None,
            "errorMessage": None,
        }
        return status, recheck

    def _template_conditions(self, obj: dict, ms: MachineSet, hold: Hold | None) -> list[dict[str, Any]]:
        """The set's conditions with TemplateValid as the guard sees it; turning False is also a Warning."""
        condition = template_valid(hold)
        old = get_condition(ms.status.conditions, TEMPLATE_VALID)
        if condition.status == ConditionStatus.FALSE and (old is None or not old.same_state(condition)):
            self._events.warning(obj, INVALID_TEMPLATE_EVENT, condition.message)
        return [c.to_dict() for c in set_condition(ms.status.conditions, condition, at=self._clock())]

    def _node_ready_since(self, machine: Machine) -> dt.datetime | None:
        """When the Machine's Node became Ready, or None if it has no Node or the Node is not Ready."""
        if machine.status.node_ref is None or not machine.status.node_ref.name:
            return None
        node = self._nodes.get(machine.status.node_ref.name)
        if node is None:
            return None
        condition = ready_condition(node)
        if condition is None or condition.get("status") != ConditionStatus.TRUE:
            return None
        since = condition.get("lastTransitionTime")
        return parse_time(since) if since else self._clock()

    def _write_status(self, obj: dict, status: dict[str, Any]) -> None:
        write(self._rest, MACHINESETS, obj, status=status)

    # --- autoscaler bounds ------------------------------------------------------------------------------------
    def _check_autoscaler_bounds(self, obj: dict) -> None:
        """The min/max annotations belong to the autoscaler (via MachineAutoscaler): it refuses to scale outside
        them, and while the bounds of one set it watches do not parse it builds no node group at all, so it scales
        no set (docs/compatibility.md#autoscaler). The controller does not clamp `spec.replicas` to them, as MAO
        does not: a manual `kubectl scale` stays possible. It only says, with a Warning, what is wrong and what it
        costs."""
        problem = autoscaler_bounds_problem((obj["metadata"].get("annotations") or {}))
        if problem:
            self._events.warning(obj, "InvalidAutoscalerBounds", f"{problem}: {AUTOSCALER_STOPS}")

    # --- event mapping --------------------------------------------------------------------------------------
    def observe_machine(self, old: dict | None, new: dict | None) -> None:
        """Tell the creation guard of a Machine event (`old` None: added, `new` None: gone), for the set that
        controls the Machine by UID, before the event enqueues that set."""
        meta = (new or old or {}).get("metadata") or {}
        ref: dict[str, Any] = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), {})
        if ref.get("kind") != "MachineSet":
            return
        key = f"{meta.get('namespace')}/{ref.get('name')}"
        obj = self._machinesets.get(key)
        if obj is not None and obj["metadata"].get("uid") == ref.get("uid"):
            self._guard.observe(key, template_hash(obj), old, new)

    def machinesets_for_machine(self, machine: dict) -> list[str]:
        """The set that controls a Machine; for an orphan, every set whose selector matches it (adoption)."""
        meta = machine.get("metadata") or {}
        if any(r.get("controller") for r in meta.get("ownerReferences") or []):
            return owner_keys(machine, "MachineSet", keys.GROUP)
        labels = meta.get("labels") or {}
        found = []
        for raw in self._machinesets.list():
            if raw["metadata"].get("namespace") != meta.get("namespace"):
                continue
            ms = MachineSet.from_dict(raw)
            if not ms.spec.selector_problems() and ms.spec.selector.matches(labels):
                found.append(ms.key)
        return found

    def machinesets_for_node(self, node: dict) -> list[str]:
        """Node Ready flips change readyReplicas: the sets of the Machines whose nodeRef names this Node."""
        found: set[str] = set()
        for machine in self._machines.by_index(INDEX_NODE_REF, node["metadata"]["name"]):
            found.update(self.machinesets_for_machine(machine))
        return sorted(found)


def controller_reference(machineset: dict) -> dict[str, Any]:
    """The ownerReference a MachineSet puts on its Machines: controller, and blocking its foreground deletion."""
    meta = machineset["metadata"]
    return {"apiVersion": keys.API_VERSION, "kind": "MachineSet", "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


# What invalid bounds cost, as cluster-autoscaler's clusterapi provider (1.35) behaves: it builds its node groups
# from every MachineSet at once and drops the whole list at the first set whose bounds do not parse
# (docs/compatibility.md#autoscaler).
AUTOSCALER_STOPS = ("the cluster-autoscaler builds no node group while any MachineSet it watches has invalid "
                    "bounds, so it scales no MachineSet, not only this one, until they are fixed")


_GO_ATOI = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.Atoi, which the autoscaler uses, accepts


def autoscaler_bounds_problem(annotations: dict[str, str]) -> str | None:
    """Why cluster-autoscaler would refuse this set's min/max annotations (A1 `parseScalingBounds`), or None.
    An absent annotation means 0 to the autoscaler and is not a problem."""
    bounds = {}
    for name, key in (("min", keys.ANNOTATION_AUTOSCALER_MIN_SIZE), ("max", keys.ANNOTATION_AUTOSCALER_MAX_SIZE)):
        raw = annotations.get(key)
        if raw is None:
            continue
        # Python's int() would also take " 3", "1_0", non-ASCII digits and numbers beyond Go's 64-bit int.
        if not _GO_ATOI.fullmatch(raw) or not -2**63 <= int(raw) < 2**63:
            return f"annotation {key}: {raw!r} is not an integer"
        bounds[name] = int(raw)
        if bounds[name] < 0:
            return f"annotation {key}: {raw} is negative"
    if "min" in bounds and "max" in bounds and bounds["max"] < bounds["min"]:
        return (f"annotation {keys.ANNOTATION_AUTOSCALER_MAX_SIZE}: {bounds['max']} is below min size "
                f"{bounds['min']} ({keys.ANNOTATION_AUTOSCALER_MIN_SIZE})")
    return None


def add_machineset_controller(manager: Manager, rest: Rest, machinesets: Informer, machines: Informer,
                              nodes: Informer, events: EventRecorder, queue: WorkQueue, workers: int = 2,
                              mao: MaoCollector | None = None) -> MachineSetReconciler:
    """Wire the MachineSet controller into a Manager, on the MachineSet, Machine and Node informers the process
    already has (events from Machines and Nodes are mapped to MachineSet keys)."""
    reconciler = MachineSetReconciler(rest, machinesets.store, machines.store, nodes.store, events)
    machinesets.add_handler(enqueue_object(queue))
    # The guard first: the set's pass that an event triggers must already know of a failure that event shows.
    machines.add_handler(EventHandler(on_add=lambda m: reconciler.observe_machine(None, m),
                                      on_update=reconciler.observe_machine,
                                      on_delete=lambda m: reconciler.observe_machine(m, None)))
    machines.add_handler(enqueue_mapped(queue, reconciler.machinesets_for_machine))
    # Only a Node's readiness counts for ready/available replicas: its heartbeats must not wake the set.
    nodes.add_handler(when_changed(enqueue_mapped(queue, reconciler.machinesets_for_node), node_ready))
    if mao is not None:
        mao.add(MACHINESET_ITEMS, machinesets.store.list, machineset_families)
    manager.add_controller(Controller("machineset", queue, reconciler.reconcile, workers=workers,
                                      registry=manager.registry))
    return reconciler
