"""The MachineHealthCheck controller, one state of a check per row, against `fakes.FakeApi` and an injected clock
(docs/compatibility.md#machinehealthcheck, docs/architecture.md#acting-only-on-what-is-ours).

Each row seeds one check, its Machines (owned by a MachineSet unless it says otherwise), their Nodes and maybe a
remediation template and a registered remediator, runs one pass as the controller loop would (`settle`), and
checks what a user sees: the check's status counts and RemediationAllowed condition, the events, which Machines
are still there, and which remediation requests exist.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import pytest

import fakes
from api import keys
from api.remediation import API_VERSION, NHC_AGGREGATION_LABEL
from fakes import FakeApi, RecordingEvents
from machine_controller.controllers.healthcheck.reconciler import MachineHealthCheckReconciler
from machine_controller.controllers.healthcheck.remediators import CLUSTER_ROLES
from machine_controller.controllers.resources import MACHINEHEALTHCHECKS, MACHINES, NODES, REMEDIATIONS
from machine_controller.runtime.controller import Result, settle
from machine_controller.runtime.informer import Store
from machine_controller.runtime.kube import Resource

NS = "openshift-machine-api"
CHECK = "workers"
KEY = f"{NS}/{CHECK}"
NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.timezone.utc)
TEMPLATES = Resource(REMEDIATIONS.group, REMEDIATIONS.version, "ovirtremediationtemplates",
                     "OvirtRemediationTemplate")
TEMPLATE_SPEC = {"powerOffTimeout": "5m"}


def ago(seconds: float) -> str:
    return (NOW - dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class M:
    """A selected Machine: `not_ready_s` is how long its Node has been Ready=False (None: Ready), `node=False` a
    Machine with no Node yet whose status was last updated `updated_s` ago."""

    name: str
    node: bool = True
    not_ready_s: float | None = None
    updated_s: float = 60
    deleting: bool = False
    owned: bool = True


def machine_obj(m: M) -> dict:
    meta: dict[str, Any] = {"name": m.name, "namespace": NS, "labels": {"role": "worker"}}
    if m.owned:
        meta["ownerReferences"] = [{"apiVersion": keys.API_VERSION, "kind": "MachineSet", "name": "ms",
                                    "uid": "ms-uid", "controller": True}]
    if m.deleting:
        meta["deletionTimestamp"] = ago(5)
        meta["finalizers"] = [keys.MACHINE_FINALIZER]
    status: dict[str, Any] = {"phase": "Running" if m.node else "Provisioned", "lastUpdated": ago(m.updated_s)}
    if m.node:
        status["nodeRef"] = {"kind": "Node", "name": m.name, "uid": f"{m.name}-node"}
    return {"apiVersion": keys.API_VERSION, "kind": "Machine", "metadata": meta, "spec": {}, "status": status}


def node_obj(m: M) -> dict:
    ready = ({"type": "Ready", "status": "True", "lastTransitionTime": ago(3600)} if m.not_ready_s is None else
             {"type": "Ready", "status": "False", "lastTransitionTime": ago(m.not_ready_s)})
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": m.name}, "status": {"conditions": [ready]}}


def check_obj(max_unhealthy: Any = None, template: bool = False) -> dict:
    spec: dict[str, Any] = {"selector": {"matchLabels": {"role": "worker"}},
                            "unhealthyConditions": [{"type": "Ready", "status": "False", "timeout": "300s"}],
                            "nodeStartupTimeout": "10m"}
    if max_unhealthy is not None:
        spec["maxUnhealthy"] = max_unhealthy
    if template:
        spec["remediationTemplate"] = {"apiVersion": API_VERSION, "kind": TEMPLATES.kind, "name": "tpl"}
    return {"apiVersion": keys.API_VERSION, "kind": "MachineHealthCheck", "metadata": {"name": CHECK, "namespace": NS},
            "spec": spec}


REMEDIATOR_ROLE = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "ovirt-remediation", "labels": {NHC_AGGREGATION_LABEL: "true"}},
                   "rules": [{"apiGroups": [REMEDIATIONS.group], "verbs": ["*"],
                              "resources": [TEMPLATES.plural, REMEDIATIONS.plural]}]}


@dataclass
class Row:
    name: str
    machines: list[M]
    max_unhealthy: Any = None
    template: bool = False
    registered: bool = True  # a remediator's ClusterRole names the template's kinds
    requests: tuple[str, ...] = ()  # open remediation requests before the pass
    # expected after one pass
    status: dict = field(default_factory=dict)  # expectedMachines, currentHealthy, remediationsAllowed
    allowed: tuple[str, str | None] = ("True", None)  # RemediationAllowed status, reason
    events: set[tuple[str, str]] = field(default_factory=set)
    deleted: set[str] = field(default_factory=set)  # Machines remediated by deletion
    requests_after: set[str] = field(default_factory=set)
    requeue: float | None = None


ROWS = [
    Row("a healthy Machine: counted healthy, nothing done", [M("w0")],
        status={"expectedMachines": 1, "currentHealthy": 1, "remediationsAllowed": 1}),
    Row("Node Ready=False past its timeout: the Machine is deleted for its MachineSet to replace",
        [M("w0", not_ready_s=301), M("w1"), M("w2")],
        status={"expectedMachines": 3, "currentHealthy": 2, "remediationsAllowed": 2},
        events={("Normal", "MachineDeleted")}, deleted={"w0"}),
    Row("Node Ready=False not yet past its timeout: nothing done, looked at again when it runs out",
        [M("w0", not_ready_s=290), M("w1")],
        status={"expectedMachines": 2, "currentHealthy": 1, "remediationsAllowed": 1}, requeue=11.0),
    Row("no Node past nodeStartupTimeout: the Machine is deleted", [M("w0", node=False, updated_s=601), M("w1")],
        status={"expectedMachines": 2, "currentHealthy": 1, "remediationsAllowed": 1},
        events={("Normal", "MachineDeleted")}, deleted={"w0"}),
    Row("no Node, nodeStartupTimeout not yet over: waited for", [M("w0", node=False, updated_s=590), M("w1")],
        status={"expectedMachines": 2, "currentHealthy": 1, "remediationsAllowed": 1}, requeue=11.0),
    Row("an unhealthy Machine nobody owns is left as it is", [M("w0", not_ready_s=301, owned=False), M("w1")],
        status={"expectedMachines": 2, "currentHealthy": 1, "remediationsAllowed": 1},
        events={("Normal", "SkippedNoController")}),
    Row("maxUnhealthy exceeded: remediation short-circuited, condition and event",
        [M("w0", not_ready_s=400), M("w1", not_ready_s=400), M("w2")], max_unhealthy=1,
        status={"expectedMachines": 3, "currentHealthy": 1, "remediationsAllowed": 0},
        allowed=("False", "TooManyUnhealthy"), events={("Warning", "RemediationRestricted")}, requeue=30.0),
    Row("maxUnhealthy as a percentage, reached but not exceeded: remediated",
        [M("w0", not_ready_s=400), M("w1"), M("w2"), M("w3")], max_unhealthy="25%",
        status={"expectedMachines": 4, "currentHealthy": 3, "remediationsAllowed": 0},
        events={("Normal", "MachineDeleted")}, deleted={"w0"}),
    Row("a Machine being deleted is neither healthy nor remediated again", [M("w0", not_ready_s=400, deleting=True),
                                                                          M("w1")],
        status={"expectedMachines": 2, "currentHealthy": 1, "remediationsAllowed": 1}),
    Row("a Machine being deleted gets no remediation request", [M("w0", not_ready_s=400, deleting=True), M("w1")],
        template=True, status={"expectedMachines": 2, "currentHealthy": 1, "remediationsAllowed": 1}),
    Row("a Machine being deleted (a remediator escalated): its open request is deleted",
        [M("w0", not_ready_s=400, deleting=True), M("w1")], template=True, requests=("w0",),
        status={"expectedMachines": 2, "currentHealthy": 1, "remediationsAllowed": 1},
        events={("Normal", "ExternalRemediationCompleted")}),
    Row("with a registered template: a request is made from it, the Machine is kept",
        [M("w0", not_ready_s=301), M("w1")], template=True,
        status={"expectedMachines": 2, "currentHealthy": 1, "remediationsAllowed": 1},
        events={("Normal", "ExternalRemediationRequested")}, requests_after={"w0"}),
    Row("a request in flight counts as unhealthy and is not made twice", [M("w0", not_ready_s=400), M("w1")],
        template=True, requests=("w0",),
        status={"expectedMachines": 2, "currentHealthy": 1, "remediationsAllowed": 1}, requests_after={"w0"}),
    Row("healthy again: its request is deleted", [M("w0"), M("w1")], template=True, requests=("w0",),
        status={"expectedMachines": 2, "currentHealthy": 1, "remediationsAllowed": 1},
        events={("Normal", "ExternalRemediationCompleted")}),
    Row("a template kind no remediator registers is refused: nothing created, nothing deleted",
        [M("w0", not_ready_s=400), M("w1")], template=True, registered=False,
        status={"expectedMachines": 2, "currentHealthy": 1, "remediationsAllowed": 0},
        allowed=("False", "RemediationTemplateNotRegistered"), events={("Warning", "RemediationTemplateRefused")}),
]


class Env:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, row: Row | None = None) -> None:
        # The fake serves a list by path only for the kinds it knows; the remediation requests are listed so.
        monkeypatch.setitem(fakes.KNOWN, REMEDIATIONS.plural, REMEDIATIONS)
        self.api = FakeApi()
        self.events = RecordingEvents()
        stores = {r.plural: self.api.cache(r, Store()) for r in (MACHINEHEALTHCHECKS, MACHINES, NODES,
                                                                    CLUSTER_ROLES)}
        self.reconciler = MachineHealthCheckReconciler(
            self.api, stores[MACHINEHEALTHCHECKS.plural], stores[MACHINES.plural], stores[NODES.plural],
            stores[CLUSTER_ROLES.plural], self.events, clock=lambda: NOW)
        if row is not None:
            self.seed(row)

    def seed(self, row: Row) -> None:
        self.api.seed(MACHINEHEALTHCHECKS, check_obj(row.max_unhealthy, row.template))
        for m in row.machines:
            self.api.seed(MACHINES, machine_obj(m))
            if m.node:
                self.api.seed(NODES, node_obj(m))
        if row.template:
            self.api.seed(TEMPLATES, {"metadata": {"name": "tpl", "namespace": NS},
                                      "spec": {"template": {"spec": TEMPLATE_SPEC}}})
        if row.registered:
            self.api.seed(CLUSTER_ROLES, REMEDIATOR_ROLE)
        for name in row.requests:
            self.api.seed(REMEDIATIONS, {"metadata": {"name": name, "namespace": NS}, "spec": TEMPLATE_SPEC})

    def status(self) -> dict:
        return (self.api.object(MACHINEHEALTHCHECKS, CHECK, NS) or {}).get("status") or {}

    def allowed(self) -> tuple[str, str | None]:
        [c] = [c for c in self.status().get("conditions") or [] if c["type"] == "RemediationAllowed"]
        return c["status"], c.get("reason")

    def machines(self) -> set[str]:
        return {n for n in ("w0", "w1", "w2", "w3") if self.api.object(MACHINES, n, NS) is not None}

    def requests(self) -> set[str]:
        return {n for n in ("w0", "w1", "w2", "w3") if self.api.object(REMEDIATIONS, n, NS) is not None}


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_a_check_in_each_state(row: Row, monkeypatch: pytest.MonkeyPatch) -> None:
    env = Env(monkeypatch, row)
    result = settle(env.reconciler.reconcile, KEY)

    status = env.status()
    assert {k: status.get(k) for k in row.status} == row.status
    assert env.allowed() == row.allowed
    assert set(env.events.reasons()) == row.events
    assert env.machines() == {m.name for m in row.machines} - row.deleted
    assert env.requests() == row.requests_after
    assert result == (Result(requeue_after=row.requeue) if row.requeue is not None else None)


def test_a_request_is_made_from_the_template_and_names_its_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    env = Env(monkeypatch, Row("", [M("w0", not_ready_s=301), M("w1")], template=True))
    settle(env.reconciler.reconcile, KEY)

    request = env.api.object(REMEDIATIONS, "w0", NS)
    assert request is not None
    assert request["spec"] == TEMPLATE_SPEC
    machine_uid = env.api.object(MACHINES, "w0", NS)["metadata"]["uid"]
    assert [(o["kind"], o["name"], o["uid"]) for o in request["metadata"]["ownerReferences"]] == [
        ("Machine", "w0", machine_uid)]
    assert request["metadata"]["annotations"][keys.ANNOTATION_CLONED_FROM_NAME] == "tpl"


def test_the_refusal_names_the_check_the_field_and_the_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    env = Env(monkeypatch, Row("", [M("w0", not_ready_s=400)], template=True, registered=False))
    settle(env.reconciler.reconcile, KEY)

    [event] = env.events.recorded
    assert f"MachineHealthCheck {NS}/{CHECK}" in event.message
    assert "spec.remediationTemplate.kind" in event.message and TEMPLATES.kind in event.message
    assert not any(plural == REMEDIATIONS.plural for _, plural, _ in env.api.requests)


def test_a_second_pass_over_an_unchanged_check_writes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    env = Env(monkeypatch, Row("", [M("w0"), M("w1", not_ready_s=100)]))
    settle(env.reconciler.reconcile, KEY)
    before = len(env.api.writes(MACHINEHEALTHCHECKS))
    settle(env.reconciler.reconcile, KEY)
    assert len(env.api.writes(MACHINEHEALTHCHECKS)) == before == 1


def test_a_check_deleted_during_the_pass_ends_it_and_remediates_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    env = Env(monkeypatch, Row("", [M("w0", not_ready_s=400), M("w1"), M("w2")]))
    env.api.freeze_cache(MACHINEHEALTHCHECKS)  # the cache still has it; the API server no longer does
    env.api.remove(MACHINEHEALTHCHECKS, CHECK, NS)

    assert settle(env.reconciler.reconcile, KEY) is None
    assert env.machines() == {"w0", "w1", "w2"}
    assert env.events.reasons() == []
