"""The OvirtMachineTemplate controller (Cluster API's autoscaling from zero, docs/compatibility.md#autoscaler), one
scenario per row, against `fakes.FakeApi`: what a user and the cluster-autoscaler see of the template's status
(capacity, nodeInfo), the writes it took, and the events. test/e2e/test_capi_template_capacity.py proves the same
against a real API server."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest

from api.meta import format_time, now
from fakes import FakeApi, RecordingEvents, RecordingQueue, StubManager
from machine_controller.controllers.infrastructure.ovirtmachinetemplate import (
    OvirtMachineTemplateReconciler,
    add_ovirtmachinetemplate_controller,
)
from machine_controller.controllers.infrastructure.resources import CAPI_CLUSTERS, OVIRT_MACHINE_TEMPLATES
from machine_controller.runtime.informer import Informer, Store

NS = "capi-ns"
NAME = "workers-v1"
KEY = f"{NS}/{NAME}"
CLUSTER_ID = "9f1c2b7e-0000-4000-8000-0000000000c1"
INSTANCE_TYPE_ID = "00000003-0003-0003-0003-0000000000be"
NODE_INFO = {"architecture": "amd64", "operatingSystem": "linux"}
SPEC: dict[str, Any] = {"template_name": "ubuntu-2404-kube", "cluster_id": CLUSTER_ID,
                        "cpu": {"sockets": 1, "cores": 4, "threads": 1}, "memory_mb": 16384,
                        "os_disk": {"size_gb": 40}}


def template(generation: int = 1, status: dict | None = None, deleting: bool = False, **changes: Any) -> dict:
    spec = copy.deepcopy(SPEC)
    for k, v in changes.items():
        if v is None:
            spec.pop(k, None)
        else:
            spec[k] = v
    meta: dict[str, Any] = {"name": NAME, "namespace": NS, "generation": generation}
    if deleting:
        meta["deletionTimestamp"] = format_time(now())
        meta["finalizers"] = ["someone-elses"]
    obj: dict[str, Any] = {"metadata": meta, "spec": {"template": {"spec": spec}}}
    if status is not None:
        obj["status"] = status
    return obj


INSTANCE_TYPE = {"instance_type_id": INSTANCE_TYPE_ID, "cpu": None, "memory_mb": None}
WRITTEN = {"capacity": {"cpu": "4", "memory": "16384Mi"}, "nodeInfo": NODE_INFO}


@dataclass
class Row:
    id: str
    obj: dict | None
    # expectations
    status: dict | None = None  # the template's whole status after the pass (None: no status at all)
    writes: int = 0
    warning: str = ""  # a part of the one CapacityUnknown Warning's message; "" for none


ROWS = [
    Row("the sample template -> cpu and memory as quantity strings, amd64 linux, one status write", template(),
        status=WRITTEN, writes=1),
    Row("vCPUs are sockets x cores x threads", template(cpu={"sockets": 2, "cores": 3, "threads": 2}),
        status={**WRITTEN, "capacity": {"cpu": "12", "memory": "16384Mi"}}, writes=1),
    Row("already current -> nothing written", template(status=copy.deepcopy(WRITTEN)), status=WRITTEN),
    Row("a value changed by someone else -> written back",
        template(status={**WRITTEN, "capacity": {"cpu": "64", "memory": "16384Mi"}}), status=WRITTEN, writes=1),
    Row("an oVirt instance type -> no cpu or memory, a Warning naming it, the node info still",
        template(**INSTANCE_TYPE), status={"nodeInfo": NODE_INFO},
        writes=1, warning=f"oVirt instance type {INSTANCE_TYPE_ID}, whose size only the engine knows"),
    Row("moved to an instance type -> the cpu and memory it wrote go, a user's GPU count stays",
        template(status={"capacity": {"cpu": "4", "memory": "16384Mi", "nvidia.com/gpu": "1"},
                         "nodeInfo": NODE_INFO}, **INSTANCE_TYPE),
        status={"capacity": {"nvidia.com/gpu": "1"}, "nodeInfo": NODE_INFO}, writes=1,
        warning="annotations on the MachineDeployment by hand"),
    Row("moved to an instance type, nothing else in the capacity -> the capacity goes",
        template(status=copy.deepcopy(WRITTEN), **INSTANCE_TYPE), status={"nodeInfo": NODE_INFO}, writes=1,
        warning="whose size only the engine knows"),
    Row("no cpu -> unknown, said", template(cpu=None), status={"nodeInfo": NODE_INFO}, writes=1,
        warning="spec.template.spec sets no positive cpu topology and memory_mb"),
    Row("two negative factors make no positive count", template(cpu={"sockets": -2, "cores": -2, "threads": 1}),
        status={"nodeInfo": NODE_INFO}, writes=1, warning="no positive cpu topology"),
    Row("no memory -> unknown", template(memory_mb=None), status={"nodeInfo": NODE_INFO}, writes=1,
        warning="no positive cpu topology and memory_mb"),
    Row("beyond any oVirt VM -> unknown, the limits named", template(cpu={"sockets": 711, "cores": 1, "threads": 1}),
        status={"nodeInfo": NODE_INFO}, writes=1,
        warning="asks for 711 vCPUs and 16384 MiB, more than an oVirt VM has (at most 710"),
    Row("a field of the wrong type -> unknown, naming its path", template(memory_mb="lots"),
        status={"nodeInfo": NODE_INFO}, writes=1, warning="spec.template.spec.memory_mb"),
    Row("being deleted -> nothing", template(deleting=True)),
    Row("gone -> nothing", None),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_ovirtmachinetemplate_capacity(row: Row) -> None:
    api, events = FakeApi(), RecordingEvents()
    store = api.cache(OVIRT_MACHINE_TEMPLATES, Store())
    if row.obj is not None:
        api.seed(OVIRT_MACHINE_TEMPLATES, row.obj)
    reconciler = OvirtMachineTemplateReconciler(api, store, events)
    assert reconciler.reconcile(KEY) is None
    assert reconciler.reconcile(KEY) is None  # a second pass (its own write's event) finds nothing to do
    stored = api.object(OVIRT_MACHINE_TEMPLATES, NAME, NS)
    if row.obj is not None:
        assert stored is not None
        assert stored.get("status") == row.status
    assert len(api.writes(OVIRT_MACHINE_TEMPLATES)) == row.writes
    assert [r for r in api.writes() if r[1] != OVIRT_MACHINE_TEMPLATES.plural] == []
    if row.warning:
        assert events.reasons() == [("Warning", "CapacityUnknown")]
        assert row.warning in events.recorded[0].message, events.recorded[0].message
        assert events.recorded[0].message.startswith("no scale-from-zero capacity: ")
    else:
        assert events.recorded == []


def test_unknown_capacity_is_said_once_per_generation() -> None:
    api, events = FakeApi(), RecordingEvents()
    store = api.cache(OVIRT_MACHINE_TEMPLATES, Store())
    api.seed(OVIRT_MACHINE_TEMPLATES, template(**INSTANCE_TYPE))
    reconciler = OvirtMachineTemplateReconciler(api, store, events)
    for _ in range(3):
        reconciler.reconcile(KEY)
    assert events.reasons() == [("Warning", "CapacityUnknown")]
    api.touch(OVIRT_MACHINE_TEMPLATES, NAME, NS, {"metadata": {"generation": 2},
                                                  "spec": {"template": {"spec": {"memory_mb": 8192}}}})
    reconciler.reconcile(KEY)  # edited, still an instance type: said again
    assert events.reasons() == [("Warning", "CapacityUnknown")] * 2
    api.touch(OVIRT_MACHINE_TEMPLATES, NAME, NS, {"metadata": {"generation": 3},
                                                  "spec": {"template": {"spec": {"instance_type_id": None,
                                                                                 "cpu": SPEC["cpu"]}}}})
    reconciler.reconcile(KEY)
    assert (api.object(OVIRT_MACHINE_TEMPLATES, NAME, NS) or {})["status"]["capacity"] == {"cpu": "4",
                                                                                           "memory": "8192Mi"}
    assert len(events.recorded) == 2


def test_only_the_spec_or_the_status_of_a_template_wakes_it() -> None:
    informer, queue = Informer(None, OVIRT_MACHINE_TEMPLATES), RecordingQueue()
    add_ovirtmachinetemplate_controller(StubManager(), FakeApi(), informer, RecordingEvents(), queue)
    old = template()
    informer._emit_update(old, {**old, "metadata": {**old["metadata"], "labels": {"team": "a"}}})
    assert queue.added == []
    informer._emit_update(old, template(memory_mb=8192))
    informer._emit_update(old, {**old, "status": {"capacity": {"cpu": "1"}}})
    assert queue.added == [KEY, KEY]


def _owned_by(obj: dict, cluster: str) -> dict:
    obj["metadata"]["ownerReferences"] = [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                                           "name": cluster, "uid": "c-uid"}]
    return obj


@pytest.mark.parametrize("case", ["annotation on the template", "owner Cluster's spec.paused",
                                  "owner Cluster's annotation", "Cluster named by the label"])
def test_a_paused_template_is_not_written_and_resuming_writes_it(case: str) -> None:
    api, events = FakeApi(), RecordingEvents()
    store = api.cache(OVIRT_MACHINE_TEMPLATES, Store())
    clusters = api.cache(CAPI_CLUSTERS, Store())
    obj = template()
    cluster: dict[str, Any] = {"metadata": {"name": "c1", "namespace": NS}, "spec": {}}
    if case == "annotation on the template":
        obj["metadata"]["annotations"] = {"cluster.x-k8s.io/paused": ""}
    elif case == "Cluster named by the label":
        obj["metadata"]["labels"] = {"cluster.x-k8s.io/cluster-name": "c1"}
        cluster["spec"]["paused"] = True
    else:
        _owned_by(obj, "c1")
        if case == "owner Cluster's spec.paused":
            cluster["spec"]["paused"] = True
        else:
            cluster["metadata"]["annotations"] = {"cluster.x-k8s.io/paused": ""}
    api.seed(OVIRT_MACHINE_TEMPLATES, obj)
    api.seed(CAPI_CLUSTERS, cluster)
    reconciler = OvirtMachineTemplateReconciler(api, store, events, clusters)
    reconciler.reconcile(KEY)
    assert api.writes(OVIRT_MACHINE_TEMPLATES) == []

    if case == "annotation on the template":
        api.touch(OVIRT_MACHINE_TEMPLATES, NAME, NS, {"metadata": {"annotations": None}})
    else:
        api.touch(CAPI_CLUSTERS, "c1", NS, {"spec": {"paused": False}, "metadata": {"annotations": None}})
    reconciler.reconcile(KEY)
    assert (api.object(OVIRT_MACHINE_TEMPLATES, NAME, NS) or {}).get("status") == WRITTEN


def test_pausing_or_resuming_its_cluster_wakes_a_template() -> None:
    templates, clusters, queue = Informer(None, OVIRT_MACHINE_TEMPLATES), Informer(None, CAPI_CLUSTERS), \
        RecordingQueue()
    add_ovirtmachinetemplate_controller(StubManager(), FakeApi(), templates, RecordingEvents(), queue,
                                        clusters=clusters)
    templates.store.put(_owned_by(template(), "c1"))
    other = {"metadata": {"name": "c2", "namespace": NS}, "spec": {}}
    mine = {"metadata": {"name": "c1", "namespace": NS}, "spec": {}}
    clusters._emit_update(other, {**other, "spec": {"paused": True}})
    clusters._emit_update(mine, {**mine, "metadata": {**mine["metadata"], "labels": {"a": "b"}}})
    assert queue.added == []
    clusters._emit_update(mine, {**mine, "spec": {"paused": True}})
    assert queue.added == [KEY]
