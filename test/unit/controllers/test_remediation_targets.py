"""Fencing Cluster API's Machines with the same controller and order as the Machine API's
(docs/fencing.md#both-front-ends): which Machine a request means (by its owner reference's group, since both kinds are
called `Machine`), which VM name and engine prove and reach its VM, and the escalation rule when the retries are
spent (only a Machine a Cluster API MachineSet controls is deleted, never a control-plane one). Against
`fakes.FakeApi`, a `FakePower` per engine and an injected clock, as test_remediation_reconciler.py."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import pytest

from api import capi, infrastructure, keys
from api.meta import ObjectMeta, format_time
from api.remediation import API_VERSION, FINALIZER, REMEDIATION_TAINT_KEY
from fakes import FakeApi, FakePower, RecordingEvents
from machine_controller.controllers.infrastructure.resources import CAPI_CLUSTERS, CAPI_MACHINES, OVIRT_CLUSTERS
from machine_controller.controllers.provider import EngineIdentity, PowerState
from machine_controller.controllers.remediation.reconciler import RemediationReconciler, RemediationTiming
from machine_controller.controllers.remediation.targets import (
    ClusterApiMachines,
    MachineApiMachines,
    Target,
    Targets,
    Unresolved,
)
from machine_controller.controllers.resources import MACHINES, NODES, REMEDIATIONS
from machine_controller.runtime.controller import settle
from machine_controller.runtime.informer import Store

NS = "team-a"
NAME = "workers-abc12-x7k2p"  # Cluster API names the request after the Machine
OVIRT_MACHINE = "workers-abc12-x7k2p"  # the OvirtMachine, whose name the VM bears
NODE = "node-7"
PID = "ovirt://9f1c2b7e-0000-4000-8000-000000000007"
MAPI_PID = "ovirt://9f1c2b7e-0000-4000-8000-000000000009"
T0 = dt.datetime(2026, 11, 29, 4, 0, 0, tzinfo=dt.UTC)
CAPI_OWNER = {"apiVersion": capi.API_VERSION, "kind": "Machine", "name": NAME, "uid": "capi-uid"}
MAPI_OWNER = {"apiVersion": keys.API_VERSION, "kind": "Machine", "name": NAME, "uid": "mapi-uid"}
CAPI_SET = {"apiVersion": capi.API_VERSION, "kind": "MachineSet", "name": "workers-abc12", "uid": "ms",
            "controller": True}


def t(seconds: float) -> str:
    return format_time(T0 + dt.timedelta(seconds=seconds))


class FakeEnginePower:
    """An `EnginePower` handing out one `FakePower` per engine identity, recording what was asked for."""

    def __init__(self, state: PowerState | None = PowerState.ON, owner: str | None = None):
        self.state, self.owner = state, owner
        self.engines: dict[tuple[EngineIdentity, str], FakePower] = {}

    def power(self, identity: EngineIdentity, namespace: str) -> FakePower:
        return self.engines.setdefault((identity, namespace), FakePower(self.state, owner=self.owner))


def capi_machine(uid: str = "capi-uid", owners: tuple = (CAPI_SET,), labels: dict | None = None,
                 infra_kind: str = infrastructure.OVIRT_MACHINE_KIND, cluster: str = "prod") -> dict:
    return {"apiVersion": capi.API_VERSION, "kind": "Machine",
            "metadata": {"name": NAME, "namespace": NS, "uid": uid, "ownerReferences": list(owners),
                         "labels": {capi.CLUSTER_NAME_LABEL: cluster, **(labels or {})}},
            "spec": {"clusterName": cluster, "providerID": PID,
                     "infrastructureRef": {"apiGroup": infrastructure.GROUP, "kind": infra_kind,
                                           "name": OVIRT_MACHINE}},
            "status": {"nodeRef": {"name": NODE}}}


def mapi_machine() -> dict:
    return {"apiVersion": keys.API_VERSION, "kind": "Machine",
            "metadata": {"name": NAME, "namespace": NS, "uid": "mapi-uid"},
            "spec": {"providerID": MAPI_PID}, "status": {"nodeRef": {"name": "mapi-node"}}}


CAPI_CLUSTER = {"apiVersion": capi.API_VERSION, "kind": "Cluster", "metadata": {"name": "prod", "namespace": NS},
                "spec": {"infrastructureRef": {"apiGroup": infrastructure.GROUP, "kind": "OvirtCluster",
                                               "name": "prod-ovirt"}}}
OVIRT_CLUSTER = {"apiVersion": infrastructure.API_VERSION, "kind": "OvirtCluster",
                 "metadata": {"name": "prod-ovirt", "namespace": NS},
                 "spec": {"identityRef": {"name": "engine-b"}, "clusterId": "c1"}}


def store(*objs: dict) -> Store:
    s = Store()
    for o in objs:
        s.put(o)
    return s


def fronts(capi_objs: tuple = (capi_machine(),), mapi_objs: tuple = (mapi_machine(),), clusters=(CAPI_CLUSTER,),
           ovirt_clusters=(OVIRT_CLUSTER,), serve_mapi: bool = True, serve_capi: bool = True
           ) -> tuple[Targets, FakeEnginePower, FakePower]:
    engines, mapi_power = FakeEnginePower(), FakePower()
    return Targets(
        MachineApiMachines(store(*mapi_objs), mapi_power) if serve_mapi else None,
        ClusterApiMachines(store(*capi_objs), store(*clusters), store(*ovirt_clusters), engines)
        if serve_capi else None), engines, mapi_power


def request_meta(*owners: dict, name: str = NAME) -> ObjectMeta:
    return ObjectMeta.from_dict({"name": name, "namespace": NS, "ownerReferences": list(owners)})


NODES_STORE = store({"metadata": {"name": NODE}, "spec": {"providerID": PID}})


# --- which Machine a request means ----------------------------------------------------------------------------------

def test_a_request_owned_by_a_cluster_api_machine_targets_it_not_the_machine_api_machine_of_the_same_name():
    targets, engines, mapi_power = fronts()
    found = targets.find(request_meta(CAPI_OWNER), "", NODES_STORE)
    assert isinstance(found, Target), found
    assert found.machine is not None and found.machine["metadata"]["uid"] == "capi-uid"
    assert (found.node_name, found.provider_id, found.vm_name) == (NODE, PID, OVIRT_MACHINE)
    assert found.front.resource is CAPI_MACHINES
    # The engine of the Machine's Cluster's OvirtCluster, for the VMs of the Machine's namespace (the owner mark).
    assert list(engines.engines) == [(EngineIdentity(NS, "engine-b"), NS)]
    assert found.power is engines.engines[(EngineIdentity(NS, "engine-b"), NS)] and found.power is not mapi_power


def test_a_request_owned_by_a_machine_api_machine_targets_it_not_the_cluster_api_machine_of_the_same_name():
    targets, engines, mapi_power = fronts()
    found = targets.find(request_meta(MAPI_OWNER), "", NODES_STORE)
    assert isinstance(found, Target), found
    assert (found.machine or {})["metadata"]["uid"] == "mapi-uid"
    assert (found.node_name, found.provider_id, found.vm_name) == ("mapi-node", MAPI_PID, NAME)
    assert found.power is mapi_power and found.front.resource is MACHINES and engines.engines == {}


def test_a_request_without_a_machine_owner_is_the_machine_api_one_as_before():
    targets, engines, _ = fronts()
    found = targets.find(request_meta(), "", NODES_STORE)
    assert isinstance(found, Target) and found.front.resource is MACHINES and engines.engines == {}


@pytest.mark.parametrize("serve_mapi, serve_capi, owner", [
    (True, False, CAPI_OWNER), (False, True, MAPI_OWNER),
], ids=["cluster-api-machine-in-a-machine-api-process", "machine-api-machine-in-a-cluster-api-process"])
def test_a_front_end_this_process_does_not_serve_is_waited_for_never_looked_up_in_the_other(serve_mapi, serve_capi,
                                                                                              owner):
    targets, engines, _ = fronts(serve_mapi=serve_mapi, serve_capi=serve_capi)
    assert targets.elsewhere(request_meta(owner)) == owner["apiVersion"].partition("/")[0]
    found = targets.find(request_meta(owner), "", NODES_STORE)
    assert isinstance(found, Unresolved) and not found.refuse, found
    assert "does not watch" in found.message and engines.engines == {}


def test_a_process_serving_only_the_machine_api_leaves_a_cluster_api_request_alone():
    """Another process may serve Cluster API's Machines: no finalizer, no status, no event from this one."""
    api = FakeApi()
    for resource in (REMEDIATIONS, MACHINES, NODES):
        api.cache(resource, Store())
    api.seed(REMEDIATIONS, {"apiVersion": API_VERSION, "kind": "OvirtRemediation",
                            "metadata": {"name": NAME, "namespace": NS, "ownerReferences": [CAPI_OWNER]},
                            "spec": {}, "status": {}})
    events = RecordingEvents()
    reconciler = RemediationReconciler(api, api.cached(REMEDIATIONS), api.cached(MACHINES), api.cached(NODES),
                                       FakePower(), events, clock=lambda: T0)
    assert settle(reconciler.reconcile, f"{NS}/{NAME}") is None
    assert api.writes() == [] and events.reasons() == []


def test_a_machine_of_a_group_neither_front_end_serves_is_refused():
    other = {"apiVersion": "metal3.io/v1alpha1", "kind": "Machine", "name": NAME, "uid": "x"}
    found = fronts()[0].find(request_meta(other), "", NODES_STORE)
    assert isinstance(found, Unresolved) and found.refuse and found.reason == "NotAnOvirtMachine", found


def test_a_cluster_api_machine_made_again_under_the_same_name_is_not_the_one_the_check_judged():
    targets, engines, _ = fronts(capi_objs=(capi_machine(uid="a-new-uid"),))
    found = targets.find(request_meta(CAPI_OWNER), "", NODES_STORE)
    assert isinstance(found, Unresolved) and not found.refuse and engines.engines == {}, found


def test_a_cluster_api_machine_of_another_infrastructure_provider_is_refused():
    targets, engines, _ = fronts(capi_objs=(capi_machine(infra_kind="AWSMachine"),))
    found = targets.find(request_meta(CAPI_OWNER), "", NODES_STORE)
    assert isinstance(found, Unresolved) and found.refuse and "AWSMachine" in found.message, found
    assert engines.engines == {}


@pytest.mark.parametrize("clusters, ovirt_clusters, says", [
    ((), (OVIRT_CLUSTER,), "Cluster prod not found"),
    ((CAPI_CLUSTER,), (), "OvirtCluster of Cluster prod not found"),
], ids=["no-cluster", "no-ovirtcluster"])
def test_a_cluster_api_machine_whose_engine_is_not_known_yet_is_waited_for(clusters, ovirt_clusters, says):
    targets, engines, _ = fronts(clusters=clusters, ovirt_clusters=ovirt_clusters)
    found = targets.find(request_meta(CAPI_OWNER), "", NODES_STORE)
    assert isinstance(found, Unresolved) and not found.refuse and says in found.message, found
    assert engines.engines == {}


# --- the same order, through the reconciler, for a Cluster API Machine -----------------------------------------------

@dataclass
class Row:
    id: str
    status: dict
    at: float = 0
    machine: dict = field(default_factory=capi_machine)
    spec: dict = field(default_factory=dict)
    phase: str | None = None
    sent: list = field(default_factory=list)
    events: set = field(default_factory=set)
    message_has: str = ""
    machine_deleted: bool = False


def cycle(phase: str, **fields: Any) -> dict:
    return {"phase": phase, "retryCount": 1, "nodeName": NODE, "lastRemediated": t(0), **fields}


SPENT = cycle("WaitingForNode", powerOnRequested=t(0), vmStartSeen=t(100))

ROWS = [
    Row("a new request: the cycle begins", {}, phase="PoweringOff", events={("Normal", "RemediationStarted")}),
    Row("powering off: the stop goes to the OvirtMachine's VM on its Cluster's engine", cycle("PoweringOff"),
        phase="PoweringOff", sent=[("power_off", OVIRT_MACHINE)]),
    Row("retries spent, a Machine its Cluster API MachineSet controls: deleted so that the set replaces it", SPENT,
        at=700, phase="DeletingMachine", events={("Warning", "RemediationEscalated")}, machine_deleted=True),
    Row("retries spent, a control-plane Machine: Failed, kept", SPENT, at=700,
        machine=capi_machine(labels={"cluster.x-k8s.io/control-plane": ""}), phase="Failed",
        events={("Warning", "RemediationFailed")}, message_has="control-plane"),
    Row("retries spent, a Machine a control-plane provider controls: Failed, kept", SPENT, at=700,
        machine=capi_machine(owners=({"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2",
                                      "kind": "KubeadmControlPlane", "name": "cp", "uid": "kcp",
                                      "controller": True},)),
        phase="Failed", message_has="not controlled by a MachineSet"),
    Row("retries spent, a Machine no one controls: Failed, kept", SPENT, at=700, machine=capi_machine(owners=()),
        phase="Failed", message_has="not controlled by a MachineSet"),
    Row("retries spent, a MachineSet owner that is not the controller: Failed, kept", SPENT, at=700,
        machine=capi_machine(owners=({**CAPI_SET, "controller": False},)), phase="Failed",
        message_has="not controlled by a MachineSet"),
    Row("retries spent, onExhaustion None: Failed, kept", SPENT, at=700, spec={"onExhaustion": "None"},
        phase="Failed", message_has="onExhaustion is None"),
]


def world(row: Row) -> tuple[RemediationReconciler, FakeApi, RecordingEvents, FakeEnginePower]:
    api = FakeApi()
    # Only Cluster API's Machines here: the fake keeps one collection per plural, and both kinds are `machines`.
    for resource in (REMEDIATIONS, CAPI_MACHINES, CAPI_CLUSTERS, OVIRT_CLUSTERS, NODES):
        api.cache(resource, Store())
    api.seed(CAPI_MACHINES, row.machine)
    api.seed(CAPI_CLUSTERS, CAPI_CLUSTER)
    api.seed(OVIRT_CLUSTERS, OVIRT_CLUSTER)
    api.seed(NODES, {"metadata": {"name": NODE},
                     "spec": {"providerID": PID, "taints": [{"key": REMEDIATION_TAINT_KEY, "effect": "NoSchedule"}]},
                     "status": {"conditions": [{"type": "Ready", "status": "Unknown", "lastTransitionTime": t(-300)}]}})
    spec = {"strategy": {"type": "Reboot", "timeoutSeconds": 600, "retryLimit": 1},
            "remediationStrategy": "OutOfServiceTaint", "powerOffTimeoutSeconds": 120, "cooldownSeconds": 0,
            "onExhaustion": "DeleteMachine", **row.spec}
    # As Cluster API's MachineHealthCheck creates it (external.GenerateTemplate): named after the Machine, owned by
    # it (no controller flag), the cluster-name label and the cloned-from annotations.
    meta = {"name": NAME, "namespace": NS, "finalizers": [FINALIZER], "ownerReferences": [CAPI_OWNER],
            "labels": {capi.CLUSTER_NAME_LABEL: "prod"},
            "annotations": {"cluster.x-k8s.io/cloned-from-name": "fence",
                            "cluster.x-k8s.io/cloned-from-groupkind": "OvirtRemediationTemplate.remediation.ovirt.org"}}
    api.seed(REMEDIATIONS, {"apiVersion": API_VERSION, "kind": "OvirtRemediation", "metadata": meta, "spec": spec,
                            "status": row.status})
    engines = FakeEnginePower(owner=OVIRT_MACHINE)
    events = RecordingEvents()
    cluster_api = ClusterApiMachines(api.cached(CAPI_MACHINES), api.cached(CAPI_CLUSTERS), api.cached(OVIRT_CLUSTERS),
                                     engines)
    reconciler = RemediationReconciler(api, api.cached(REMEDIATIONS), None, api.cached(NODES), None, events,
                                       timing=RemediationTiming(request_timeout_s=60.0),
                                       clock=lambda: T0 + dt.timedelta(seconds=row.at), cluster_api=cluster_api)
    return reconciler, api, events, engines


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_a_cluster_api_machine_is_fenced_and_escalated_by_the_same_rules(row: Row):
    reconciler, api, events, engines = world(row)
    settle(reconciler.reconcile, f"{NS}/{NAME}")
    status = api.object(REMEDIATIONS, NAME, NS)["status"]
    assert status.get("phase") == row.phase, status
    sent = [a for power in engines.engines.values() for a in power.sent]
    assert sent == row.sent, sent
    assert row.events <= set(events.reasons()), events.reasons()
    assert row.message_has in (status.get("message") or ""), status.get("message")
    assert (api.object(CAPI_MACHINES, NAME, NS) is None) == row.machine_deleted
