"""The OvirtCluster controller (Cluster API's InfraCluster contract), one scenario per row, against `fakes.FakeApi`
and `FakeEngines`: what a user sees of the OvirtCluster (status, conditions, finalizer, events) and what the engine
was asked, for which identity."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import pytest

from api import capi
from api.infrastructure import CLUSTER_FINALIZER
from api.meta import format_time, now
from fakes import FakeApi, FakeEngines, RecordingEvents, check_conditions, run_passes
from machine_controller.controllers.infrastructure.ovirtcluster import OvirtClusterReconciler
from machine_controller.controllers.infrastructure.resources import (
    CAPI_CLUSTERS,
    INDEX_CLUSTER,
    OVIRT_CLUSTERS,
    OVIRT_MACHINES,
    cluster_index,
)
from machine_controller.controllers.provider import ActuatorError, EngineIdentity, MissingDependency
from machine_controller.runtime.controller import Result
from machine_controller.runtime.informer import Store

NS = "capi-ns"
CLUSTER = "c1"
NAME = "c1-ovirt"
KEY = f"{NS}/{NAME}"
IDENTITY = "engine-a"
DEFAULT_ID = "9f1c2b7e-0000-4000-8000-0000000000c1"
ZONE_A = "9f1c2b7e-0000-4000-8000-0000000000c2"
ZONE_B = "9f1c2b7e-0000-4000-8000-0000000000c3"


def cluster(paused: bool = False, annotations: dict | None = None) -> dict:
    return {"metadata": {"name": CLUSTER, "namespace": NS, "annotations": dict(annotations or {})},
            "spec": {"paused": paused, "infrastructureRef": {"kind": "OvirtCluster", "name": NAME}}}


def ovirt_cluster(finalizer: bool = False, deleting: bool = False, annotations: dict | None = None,
                  owner: bool = True) -> dict:
    meta: dict[str, Any] = {"name": NAME, "namespace": NS, "generation": 2, "annotations": dict(annotations or {}),
                            "finalizers": [CLUSTER_FINALIZER] if finalizer else []}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": capi.API_VERSION, "kind": "Cluster", "name": CLUSTER,
                                    "uid": "c-uid"}]
    else:
        meta["labels"] = {capi.CLUSTER_NAME_LABEL: CLUSTER}
    if deleting:
        meta["deletionTimestamp"] = format_time(now())
    return {"metadata": meta, "spec": {
        "identityRef": {"name": IDENTITY}, "clusterId": DEFAULT_ID,
        "failureDomains": [{"name": "zone-a", "clusterId": ZONE_A, "controlPlane": True},
                           {"name": "zone-b", "clusterId": ZONE_B}]}}


def ovirt_machine(name: str, cluster_name: str = CLUSTER) -> dict:
    return {"metadata": {"name": name, "namespace": NS, "labels": {capi.CLUSTER_NAME_LABEL: cluster_name}},
            "spec": {}}


@dataclass
class World:
    api: FakeApi
    engines: FakeEngines
    events: RecordingEvents
    reconciler: OvirtClusterReconciler

    def obj(self) -> dict | None:
        return self.api.object(OVIRT_CLUSTERS, NAME, NS)


@dataclass
class Row:
    id: str
    ovirt_cluster: dict
    results: list
    cluster: dict | None = field(default_factory=cluster)
    ovirt_machines: list = field(default_factory=list)
    missing: tuple = ()
    engine_error: BaseException | None = None
    # expectations
    gone: bool = False
    finalizer: bool = True
    conditions: dict = field(default_factory=dict)
    message: str = ""  # a part of Ready's message
    status_fields: dict = field(default_factory=dict)
    no_status_fields: tuple = ()
    events: list = field(default_factory=list)
    asked: int = 0  # engine calls, each for the OvirtCluster's identity
    check: Callable[[World], None] | None = None


def world(row: Row) -> World:
    api = FakeApi()
    ovirt_clusters = api.cache(OVIRT_CLUSTERS, Store())
    clusters = api.cache(CAPI_CLUSTERS, Store())
    ovirt_machines = api.cache(OVIRT_MACHINES, Store({INDEX_CLUSTER: cluster_index}))
    api.seed(OVIRT_CLUSTERS, row.ovirt_cluster)
    if row.cluster is not None:
        api.seed(CAPI_CLUSTERS, row.cluster)
    for om in row.ovirt_machines:
        api.seed(OVIRT_MACHINES, om)
    engines = FakeEngines(missing=row.missing, error=row.engine_error)
    engines.check = lambda: CLUSTER_FINALIZER in ((api.object(OVIRT_CLUSTERS, NAME, NS) or {"metadata": {}})
                                                  ["metadata"].get("finalizers") or [])
    events = RecordingEvents()
    return World(api, engines, events, OvirtClusterReconciler(api, ovirt_clusters, clusters, ovirt_machines,
                                                              engines, events))


def _finalizer_before_the_engine_is_asked(w: World) -> None:
    assert w.engines.checked and all(w.engines.checked)


FAILURE_DOMAINS = [{"name": "zone-a", "controlPlane": True, "attributes": {"clusterId": ZONE_A}},
                   {"name": "zone-b", "controlPlane": False, "attributes": {"clusterId": ZONE_B}}]
ROWS = [
    Row("every oVirt cluster found -> failure domains, provisioned, Ready", ovirt_cluster(), [None], asked=1,
        conditions={"Ready": "True/Ready", "Paused": "False/NotPaused"},
        status_fields={"failureDomains": FAILURE_DOMAINS, "initialization": {"provisioned": True}},
        check=_finalizer_before_the_engine_is_asked),
    Row("the Cluster by Cluster API's label when there is no owner yet", ovirt_cluster(owner=False), [None],
        cluster=cluster(paused=True), finalizer=False, conditions={"Paused": "True"}),
    Row("a failure domain's oVirt cluster missing -> Ready False naming it, retried, not provisioned",
        ovirt_cluster(), [Result(requeue_after=30.0), Result(requeue_after=30.0)], missing=(ZONE_B,), asked=2,
        conditions={"Ready": "False/OvirtClusterNotFound"},
        message=f"spec.failureDomains[1].clusterId: oVirt cluster {ZONE_B} not found",
        no_status_fields=("initialization", "failureDomains"), events=[("Warning", "OvirtClusterNotFound")]),
    Row("the default oVirt cluster missing -> named", ovirt_cluster(), [Result(requeue_after=30.0)],
        missing=(DEFAULT_ID,), asked=1, conditions={"Ready": "False/OvirtClusterNotFound"},
        message=f"spec.clusterId: oVirt cluster {DEFAULT_ID} not found",
        events=[("Warning", "OvirtClusterNotFound")]),
    Row("identity Secret unusable -> Ready False MissingDependency, retried", ovirt_cluster(), [MissingDependency],
        engine_error=MissingDependency("secret capi-ns/engine-a: key url is missing or empty"), asked=1,
        conditions={"Ready": "False/MissingDependency"}, message="key url",
        events=[("Warning", "MissingDependency")]),
    Row("engine unreachable -> Ready False, retried", ovirt_cluster(), [ActuatorError],
        engine_error=ActuatorError("engine unreachable"), asked=1, conditions={"Ready": "False/ProviderError"},
        events=[("Warning", "ProviderError")]),
    Row("Cluster paused -> nothing", ovirt_cluster(), [None], cluster=cluster(paused=True), finalizer=False,
        conditions={"Paused": "True/Paused"}, no_status_fields=("initialization",)),
    Row("paused annotation on the OvirtCluster -> nothing", ovirt_cluster(annotations={capi.PAUSED_ANNOTATION: ""}),
        [None], finalizer=False, conditions={"Paused": "True"}),
    Row("paused annotation on the Cluster -> nothing", ovirt_cluster(),
        [None], cluster=cluster(annotations={capi.PAUSED_ANNOTATION: ""}), finalizer=False,
        conditions={"Paused": "True"}),
    Row("deleting while OvirtMachines of its Cluster exist -> the finalizer stays",
        ovirt_cluster(finalizer=True, deleting=True), [None, None],
        ovirt_machines=[ovirt_machine("m-1"), ovirt_machine("other", cluster_name="c2")],
        conditions={"Ready": "False/WaitingForMachines"},
        message=f"1 OvirtMachine(s) of the Cluster to be deleted first: {NS}/m-1"),
    Row("deleting, no OvirtMachine of its Cluster left -> the finalizer goes",
        ovirt_cluster(finalizer=True, deleting=True), [None], ovirt_machines=[ovirt_machine("x", cluster_name="c2")],
        gone=True),
    Row("deleting while paused -> the finalizer stays", ovirt_cluster(finalizer=True, deleting=True), [None],
        cluster=cluster(paused=True), conditions={"Paused": "True"}),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_ovirtcluster_reconciler(row: Row) -> None:
    w = world(row)
    run_passes(w.reconciler.reconcile, KEY, row.results)
    o = w.obj()
    if row.gone:
        assert o is None
    else:
        assert o is not None
        status = o.get("status") or {}
        got = check_conditions(status, row.conditions)
        assert all(got[ctype]["observedGeneration"] == 2 for ctype in row.conditions)
        if row.message:
            assert row.message in got["Ready"]["message"]
        for k, v in row.status_fields.items():
            assert status.get(k) == v, k
        for k in row.no_status_fields:
            assert k not in status, k
        assert (CLUSTER_FINALIZER in (o["metadata"].get("finalizers") or [])) == row.finalizer
    assert w.events.reasons() == row.events
    assert w.engines.asked == [EngineIdentity(NS, IDENTITY)] * row.asked
    if row.check:
        row.check(w)


def test_an_ovirtclusters_deletion_wait_is_woken_by_its_clusters_last_ovirtmachines_deletion_only() -> None:
    import copy

    from fakes import RecordingQueue, StubManager
    from machine_controller.controllers.infrastructure.ovirtcluster import add_ovirtcluster_controller
    from machine_controller.runtime.informer import Informer

    inf = {r: Informer(None, r, indexers={INDEX_CLUSTER: cluster_index} if r == OVIRT_MACHINES else None)
           for r in (OVIRT_CLUSTERS, CAPI_CLUSTERS, OVIRT_MACHINES)}
    queue = RecordingQueue()
    add_ovirtcluster_controller(StubManager(), FakeApi(), inf[OVIRT_CLUSTERS], inf[CAPI_CLUSTERS],
                                inf[OVIRT_MACHINES], FakeEngines(), RecordingEvents(), queue)
    inf[OVIRT_CLUSTERS].store.put(ovirt_cluster())
    om = ovirt_machine("m-1")
    changed = copy.deepcopy(om)
    changed["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    inf[OVIRT_MACHINES]._emit_update(om, changed)
    inf[OVIRT_MACHINES]._emit_delete(ovirt_machine("other", cluster_name="c2"))
    assert queue.added == []
    inf[OVIRT_MACHINES]._emit_delete(om)
    assert queue.added == [KEY]
    queue.added.clear()
    c = cluster()
    inf[CAPI_CLUSTERS]._emit_update(c, {**c, "status": {"conditions": [{"type": "Available"}]}})
    assert queue.added == []
    inf[CAPI_CLUSTERS]._emit_update(c, cluster(paused=True))
    assert queue.added == [KEY]
