"""The MachineHealthCheck controller, with OpenShift's semantics (docs/compatibility.md#machinehealthcheck).

Targets are the Machines the selector matches in the check's namespace. A target needs remediation when it
failed, when its Node was deleted, when a Node condition of `unhealthyConditions` held for its timeout, or when it
has no Node `nodeStartupTimeout` after its status was last updated. A target with an open remediation request
counts as unhealthy too, so a remediation in flight uses up the budget until it ends (docs/fencing.md). With more
unhealthy targets than `maxUnhealthy` allows, nothing is remediated. Remediation is the deletion of a Machine a
MachineSet owns, or, with `spec.remediationTemplate`, a request created from the template and deleted once the
target is healthy again. A template is used only when its kind is a registered remediator (`remediators.py`);
any other is refused on the check's `RemediationAllowed` condition, and nothing is created or deleted for it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Callable

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge

from api import keys
from api.machine import Machine, MachinePhase
from api.machinehealthcheck import (
    DEFAULT_NODE_STARTUP_TIMEOUT,
    MachineHealthCheck,
    MHCConditionReason,
    MHCConditionType,
    max_unhealthy_count,
    parse_duration,
)
from api.meta import ConditionSeverity, InvalidSelector, false_condition, now, parse_time, set_condition, true_condition
from machine_controller.controllers.healthcheck.remediators import (
    CLUSTER_ROLES,
    REMEDIATOR_SELECTOR,
    RemediationKinds,
    TemplateRefused,
    remediation_kinds,
)
from machine_controller.controllers.nodes.status import node_ready
from machine_controller.controllers.resources import INDEX_NODE_REF, MACHINEHEALTHCHECKS, MACHINES, node_ref_index
from machine_controller.runtime import writes
from machine_controller.runtime.controller import (
    Controller,
    Result,
    TerminalError,
    enqueue_mapped,
    enqueue_object,
    when_changed,
)
from machine_controller.runtime.events import EventRecorder
from machine_controller.runtime.informer import Informer, Store
from machine_controller.runtime.kube import Rest, is_not_found, object_key
from machine_controller.runtime.manager import Manager
from machine_controller.runtime.workqueue import WorkQueue

log = structlog.get_logger(__name__)
_RECHECK_SLACK_S = 1.0  # look again just after a timeout expires, as MAO does


class _Metrics:
    def __init__(self, registry: CollectorRegistry | None):
        self.nodes_covered = Gauge("mapi_machinehealthcheck_nodes_covered",
                                   "Number of nodes covered by MachineHealthChecks", ["name", "namespace"],
                                   registry=registry)
        self.remediations = Counter("mapi_machinehealthcheck_remediation_success",
                                    "Number of successful remediations performed by MachineHealthChecks",
                                    ["name", "namespace"], registry=registry)
        self.short_circuit = Gauge("mapi_machinehealthcheck_short_circuit",
                                   "Short circuit status for MachineHealthCheck (0=no, 1=yes)", ["name", "namespace"],
                                   registry=registry)


@dataclass
class _Verdict:
    machine: dict
    unhealthy: str | None = None  # why it needs remediation
    recheck_s: float | None = None  # a timeout still running out
    has_node: bool = False


class MachineHealthCheckReconciler:
    def __init__(self, rest: Rest, checks: Store, machines: Store, nodes: Store, remediators: Store,
                 events: EventRecorder, registry: CollectorRegistry | None = None,
                 clock: Callable[[], dt.datetime] = now):
        self._rest = rest
        self._checks = checks
        self._machines = machines
        machines.add_indexer(INDEX_NODE_REF, node_ref_index)
        self._nodes = nodes
        self._remediators = remediators  # the ClusterRoles that register remediators (remediators.py)
        self._events = events
        self._clock = clock
        self._metrics = _Metrics(registry)

    def checks_for_machine(self, machine: dict) -> list[str]:
        labels = machine["metadata"].get("labels") or {}
        ns = machine["metadata"].get("namespace")
        keys_ = []
        for obj in self._checks.list():
            if obj["metadata"].get("namespace") != ns:
                continue
            try:
                if MachineHealthCheck.from_dict(obj).spec.selector.matches(labels):
                    keys_.append(object_key(obj))
            except (InvalidSelector, ValueError):
                continue
        return keys_

    def checks_for_node(self, node: dict) -> list[str]:
        out: list[str] = []
        for m in self._machines.by_index(INDEX_NODE_REF, node["metadata"]["name"]):
            out += self.checks_for_machine(m)
        return out

    # --- reconcile ----------------------------------------------------------------------------------------------
    def reconcile(self, key: str) -> Result | None:
        obj = self._checks.get(key)
        namespace, name = key.split("/", 1)
        if obj is None:
            self._metrics.nodes_covered.labels(name, namespace).set(0)
            self._metrics.short_circuit.labels(name, namespace).set(0)
            return None
        mhc = MachineHealthCheck.from_dict(obj)
        if keys.ANNOTATION_PAUSED in mhc.metadata.annotations:
            return None
        try:
            targets = [m for m in self._machines.list() if m["metadata"].get("namespace") == namespace
                       and mhc.spec.selector.matches(m["metadata"].get("labels") or {})]
        except InvalidSelector as e:
            self._events.warning(obj, "ReconcileError", f"invalid selector: {e}")
            raise TerminalError(f"invalid selector: {e}") from None
        verdicts = [self._judge(mhc, m) for m in targets]
        try:
            kinds = remediation_kinds(mhc, self._remediators.list())
        except TemplateRefused as e:
            return self._refuse_template(obj, mhc, verdicts, str(e))
        requests = self._open_requests(kinds, namespace)
        healthy = [v for v in verdicts if self._counts_healthy(v, requests)]
        unhealthy = [v for v in verdicts if v.unhealthy]
        expected = len(verdicts)
        self._metrics.nodes_covered.labels(name, namespace).set(sum(1 for v in verdicts if v.has_node))
        problem: str | None
        try:
            allowed = max_unhealthy_count(mhc.spec.max_unhealthy, expected)
        except ValueError as e:
            allowed = -1
            problem = str(e)
        else:
            problem = None
        unhealthy_count = expected - len(healthy)
        if problem or unhealthy_count > allowed:
            message = problem or (f"Remediation is not allowed, the number of not started or unhealthy machines "
                                  f"exceeds maxUnhealthy (total: {expected}, unhealthy: {unhealthy_count}, "
                                  f"maxUnhealthy: {mhc.spec.max_unhealthy})")
            self._metrics.short_circuit.labels(name, namespace).set(1)
            self._events.warning(obj, "RemediationRestricted", message)
            self._write_status(obj, mhc, expected, len(healthy), 0,
                               false_condition(MHCConditionType.REMEDIATION_ALLOWED,
                                               MHCConditionReason.TOO_MANY_UNHEALTHY, ConditionSeverity.WARNING,
                                               message))
            return Result(requeue_after=self._recheck(verdicts) or 30.0)
        self._metrics.short_circuit.labels(name, namespace).set(0)
        self._write_status(obj, mhc, expected, len(healthy), max(allowed - unhealthy_count, 0),
                           true_condition(MHCConditionType.REMEDIATION_ALLOWED))
        for v in unhealthy:
            self._remediate(obj, mhc, kinds, v, requests)
        if kinds is not None:
            for v in verdicts:
                if not v.unhealthy and v.recheck_s is None:
                    self._close_request(kinds, v.machine, requests)
        after = self._recheck(verdicts)
        return Result(requeue_after=after) if after else None

    def _refuse_template(self, obj: dict, mhc: MachineHealthCheck, verdicts: list[_Verdict],
                         message: str) -> Result | None:
        """Nothing is remediated, nothing of the template's kinds is read, created or deleted: the check waits for
        an edit, or for a remediator's ClusterRole to appear (its watch enqueues every check)."""
        self._metrics.short_circuit.labels(mhc.metadata.name, mhc.metadata.namespace).set(0)
        self._events.warning(obj, "RemediationTemplateRefused", message)
        healthy = [v for v in verdicts if self._counts_healthy(v, set())]
        self._write_status(obj, mhc, len(verdicts), len(healthy), 0, false_condition(
            MHCConditionType.REMEDIATION_ALLOWED, MHCConditionReason.REMEDIATION_TEMPLATE_NOT_REGISTERED,
            ConditionSeverity.WARNING, message))
        log.warning("remediation template refused", why=message)
        return None  # not retried: an edit of the check, or a remediator's ClusterRole, enqueues it

    # --- health -------------------------------------------------------------------------------------------------
    def _judge(self, mhc: MachineHealthCheck, obj: dict) -> _Verdict:
        machine = Machine.from_dict(obj)
        v = _Verdict(obj)
        if machine.metadata.deleting:
            return v
        if machine.status.phase == MachinePhase.FAILED:
            v.unhealthy = "the Machine failed"
            return v
        stamp = self._clock()
        node_name = machine.status.node_ref.name if machine.status.node_ref else ""
        if not node_name:
            timeout = parse_duration(mhc.spec.node_startup_timeout or DEFAULT_NODE_STARTUP_TIMEOUT)
            if timeout == 0:
                return v
            since = parse_time(machine.status.last_updated) if machine.status.last_updated else None
            if since is None:
                v.recheck_s = timeout
            elif (stamp - since).total_seconds() > timeout:
                v.unhealthy = f"no Node after nodeStartupTimeout ({mhc.spec.node_startup_timeout or '10m'})"
            else:
                v.recheck_s = timeout - (stamp - since).total_seconds() + _RECHECK_SLACK_S
            return v
        node = self._nodes.get(node_name)
        if node is None:
            v.unhealthy = f"its Node {node_name} was deleted"
            return v
        v.has_node = True
        for cond in (node.get("status") or {}).get("conditions") or []:
            for rule in mhc.spec.unhealthy_conditions:
                if cond.get("type") != rule.type or cond.get("status") != rule.status:
                    continue
                held = (stamp - parse_time(cond.get("lastTransitionTime"))).total_seconds()
                timeout = parse_duration(rule.timeout)
                if held > timeout:
                    v.unhealthy = f"Node condition {rule.type}={rule.status} for more than {rule.timeout}"
                    return v
                left = timeout - held + _RECHECK_SLACK_S
                v.recheck_s = left if v.recheck_s is None else min(v.recheck_s, left)
        return v

    @staticmethod
    def _counts_healthy(v: _Verdict, requests: set[str]) -> bool:
        meta = v.machine["metadata"]
        return (not v.unhealthy and v.recheck_s is None and not meta.get("deletionTimestamp") and v.has_node
                and keys.ANNOTATION_EXTERNAL_REMEDIATION not in (meta.get("annotations") or {})
                and meta["name"] not in requests)

    @staticmethod
    def _recheck(verdicts: list[_Verdict]) -> float | None:
        waits = [v.recheck_s for v in verdicts if v.recheck_s is not None and not v.unhealthy]
        return min(waits) if waits else None

    # --- remediation --------------------------------------------------------------------------------------------
    def _remediate(self, obj: dict, mhc: MachineHealthCheck, kinds: RemediationKinds | None, v: _Verdict,
                   requests: set[str]) -> None:
        meta = v.machine["metadata"]
        name = meta["name"]
        if kinds is not None:
            if name not in requests:
                self._open_request(obj, mhc, kinds, v)
            return
        if meta.get("deletionTimestamp"):
            return
        if not any(r.get("controller") for r in meta.get("ownerReferences") or []):
            self._events.normal(v.machine, "SkippedNoController",
                                f"Machine {name} is unhealthy ({v.unhealthy}) but has no controller owner to "
                                "replace it: it is left as it is")
            return
        try:
            self._rest.delete(MACHINES, name, meta["namespace"])
        except Exception as e:
            if not is_not_found(e):
                self._events.warning(v.machine, "MachineDeletionFailed", f"{name}: {e}")
                raise
        self._metrics.remediations.labels(mhc.metadata.name, mhc.metadata.namespace).inc()
        self._events.normal(v.machine, "MachineDeleted", f"Machine {name} deleted: {v.unhealthy}")
        log.info("remediated by deletion", machine=name, why=v.unhealthy)

    def _open_requests(self, kinds: RemediationKinds | None, namespace: str) -> set[str]:
        if kinds is None:
            return set()
        try:
            items = self._rest.request("GET", kinds.request.path(namespace)).get("items") or []
        except Exception as e:
            if is_not_found(e):
                return set()
            raise
        return {i["metadata"]["name"] for i in items if not i["metadata"].get("deletionTimestamp")}

    def _open_request(self, obj: dict, mhc: MachineHealthCheck, kinds: RemediationKinds, v: _Verdict) -> None:
        ref = mhc.spec.remediation_template
        assert ref is not None  # kinds come from it
        meta = v.machine["metadata"]
        resource, group, template_kind = kinds.request, kinds.group, kinds.template.kind
        try:
            template = self._rest.get(kinds.template, ref.name, meta["namespace"])
        except Exception as e:
            if not is_not_found(e):
                raise
            message = f"template {template_kind} {meta['namespace']}/{ref.name} not found"
            self._events.warning(obj, "ExternalRemediationTemplateNotFound", message)
            self._set_condition(obj, mhc, false_condition(
                MHCConditionType.EXTERNAL_REMEDIATION_TEMPLATE_AVAILABLE,
                MHCConditionReason.EXTERNAL_REMEDIATION_TEMPLATE_NOT_FOUND, ConditionSeverity.ERROR, message))
            return
        body: dict[str, Any] = {
            "apiVersion": ref.api_version, "kind": resource.kind,
            "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                         "annotations": {keys.ANNOTATION_CLONED_FROM_NAME: ref.name,
                                         keys.ANNOTATION_CLONED_FROM_GROUPKIND: f"{template_kind}.{group}"},
                         "ownerReferences": [{"apiVersion": keys.API_VERSION, "kind": "Machine",
                                              "name": meta["name"], "uid": meta["uid"]}]},
            "spec": ((template.get("spec") or {}).get("template") or {}).get("spec") or {},
        }
        try:
            self._rest.create(resource, body, meta["namespace"])
        except Exception as e:
            self._set_condition(obj, mhc, false_condition(
                MHCConditionType.EXTERNAL_REMEDIATION_REQUEST_AVAILABLE,
                MHCConditionReason.EXTERNAL_REMEDIATION_REQUEST_CREATION_FAILED, ConditionSeverity.ERROR, str(e)))
            raise
        self._metrics.remediations.labels(mhc.metadata.name, mhc.metadata.namespace).inc()
        self._events.normal(v.machine, "ExternalRemediationRequested",
                            f"{resource.kind} {meta['name']} created: {v.unhealthy}")

    def _close_request(self, kinds: RemediationKinds, machine: dict, requests: set[str]) -> None:
        name = machine["metadata"]["name"]
        if name not in requests:
            return
        try:
            self._rest.delete(kinds.request, name, machine["metadata"]["namespace"])
        except Exception as e:
            if not is_not_found(e):
                raise
        # A Machine being deleted (a remediator escalated to its replacement) is judged no more, not healthy.
        why = "the Machine is being deleted" if machine["metadata"].get("deletionTimestamp") else "healthy again"
        self._events.normal(machine, "ExternalRemediationCompleted", f"{kinds.request.kind} {name} deleted: {why}")

    # --- status -------------------------------------------------------------------------------------------------
    def _write_status(self, obj: dict, mhc: MachineHealthCheck, expected: int, healthy: int, allowed: int,
                      condition) -> None:
        conditions = set_condition(mhc.status.conditions, condition, at=self._clock())
        self._patch_status(obj, {"expectedMachines": expected, "currentHealthy": healthy,
                                 "remediationsAllowed": allowed, "conditions": [c.to_dict() for c in conditions]})
        mhc.status.conditions = conditions

    def _set_condition(self, obj: dict, mhc: MachineHealthCheck, condition) -> None:
        conditions = set_condition(mhc.status.conditions, condition, at=self._clock())
        self._patch_status(obj, {"conditions": [c.to_dict() for c in conditions]})
        mhc.status.conditions = conditions

    def _patch_status(self, obj: dict, status: dict) -> None:
        # Only the changed fields go out; a check deleted meanwhile ends the pass (writes.Gone), and nothing is
        # remediated for it (docs/architecture.md#writing-an-object).
        writes.write(self._rest, MACHINEHEALTHCHECKS, obj, status=status)

def add_machinehealthcheck_controller(manager: Manager, api: Any, rest: Rest, machines: Informer, nodes: Informer,
                                      events: EventRecorder, queue: WorkQueue, namespace: str | None,
                                      resync_s: float | None, workers: int = 1) -> MachineHealthCheckReconciler:
    """Checks are looked at when they change, when a Machine they may select changes, and when a Node's readiness
    or conditions change (heartbeats alone do not wake them)."""
    checks = manager.add_informer(Informer(api, MACHINEHEALTHCHECKS, namespace=namespace, resync_period=resync_s))
    remediators = manager.add_informer(Informer(api, CLUSTER_ROLES, label_selector=REMEDIATOR_SELECTOR,
                                                resync_period=resync_s))
    reconciler = MachineHealthCheckReconciler(rest, checks.store, machines.store, nodes.store, remediators.store,
                                              events, registry=manager.registry)
    checks.add_handler(enqueue_object(queue))
    # A remediator installed or removed changes which templates are obeyed: every check with one looks again.
    remediators.add_handler(enqueue_mapped(queue, lambda _role: [
        object_key(c) for c in checks.store.list() if (c.get("spec") or {}).get("remediationTemplate")]))
    machines.add_handler(enqueue_mapped(queue, reconciler.checks_for_machine))

    def conditions(node: dict) -> Any:
        return [(c.get("type"), c.get("status")) for c in (node.get("status") or {}).get("conditions") or []]
    nodes.add_handler(when_changed(enqueue_mapped(queue, reconciler.checks_for_node), node_ready, conditions))
    manager.add_controller(Controller(queue.name, queue, reconciler.reconcile, workers=workers,
                                      registry=manager.registry))
    return reconciler
