"""The OvirtMachine controller (Cluster API's InfraMachine contract), one scenario per row, against `fakes.FakeApi`,
a scripted `FakeActuator` and `FakeEngines`.

Each row starts from an OvirtMachine with its Cluster API Machine, Cluster and OvirtCluster, runs the reconciler a few
times as the work queue would, and checks what a user sees: the OvirtMachine's spec.providerID, status and
conditions, its finalizer, the events, and what the engine was asked (which verbs, for which identity, with which
Machine description). Nothing here needs an API server.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest

from api import capi
from api.infrastructure import MACHINE_FINALIZER
from api.meta import NodeAddress, format_time, now
from fakes import FakeActuator, FakeApi, FakeEngines, RecordingEvents, check_conditions, run_passes
from machine_controller.controllers.infrastructure.ovirtmachine import OvirtMachineReconciler
from machine_controller.controllers.infrastructure.resources import (
    CAPI_CLUSTERS,
    CAPI_MACHINES,
    INDEX_CLUSTER,
    OVIRT_CLUSTERS,
    OVIRT_MACHINES,
    cluster_index,
)
from machine_controller.controllers.provider import (
    ActuatorError,
    EngineIdentity,
    InstanceNotOwned,
    InstanceStatus,
    InvalidMachineConfiguration,
    MissingDependency,
    Progress,
)
from machine_controller.runtime.controller import Result
from machine_controller.runtime.informer import Store

NS = "capi-ns"
CLUSTER = "c1"
OVIRT_CLUSTER = "c1-ovirt"
IDENTITY = "engine-a"
MACHINE = "c1-md-0-x7k2p"
NAME = "c1-md-0-abcde"  # the OvirtMachine, and so the VM
KEY = f"{NS}/{NAME}"
VM = "9f1c2b7e-0000-4000-8000-000000000001"
OTHER_VM = "9f1c2b7e-0000-4000-8000-000000000002"
PID = f"ovirt://{VM}"
DEFAULT_CLUSTER_ID = "9f1c2b7e-0000-4000-8000-0000000000c1"
ZONE_CLUSTER_ID = "9f1c2b7e-0000-4000-8000-0000000000c2"
SPEC = {"template_name": "ubuntu-2404-kube", "type": "server", "cpu": {"sockets": 1, "cores": 2, "threads": 1},
        "memory_mb": 4096, "os_disk": {"size_gb": 20}}
GONE = "<gone>"

CLONING = Progress(done=False, requeue_after=5.0, waiting_for="the new VM's disks to be copied", instance_id=VM,
                   instance_state="image_locked")
BOOTING = Progress(done=False, requeue_after=10.0, waiting_for="the VM to boot", instance_id=VM,
                   instance_state="wait_for_launch")
UP = Progress(done=True, instance_id=VM, instance_state="up")
RUNNING = InstanceStatus(instance_id=VM, state="up", provider_id=PID, has_ip=True,
                         addresses=[NodeAddress(type="InternalIP", address="10.0.0.5"),
                                    NodeAddress(type="Hostname", address=NAME)])
STOPPING = Progress(done=False, requeue_after=5.0, waiting_for="the VM to stop", instance_id=VM,
                    instance_state="powering_down")
REMOVED = Progress(done=True)


def cluster(paused: bool = False, provisioned: bool = True, annotations: dict | None = None) -> dict:
    return {"apiVersion": capi.API_VERSION, "kind": "Cluster",
            "metadata": {"name": CLUSTER, "namespace": NS, "annotations": dict(annotations or {})},
            "spec": {"paused": paused, "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                                              "kind": "OvirtCluster", "name": OVIRT_CLUSTER}},
            "status": {"initialization": {"infrastructureProvisioned": provisioned}}}


def ovirt_cluster(provisioned: bool = True) -> dict:
    return {"metadata": {"name": OVIRT_CLUSTER, "namespace": NS, "labels": {capi.CLUSTER_NAME_LABEL: CLUSTER}},
            "spec": {"identityRef": {"name": IDENTITY}, "clusterId": DEFAULT_CLUSTER_ID,
                     "failureDomains": [{"name": "zone-b", "clusterId": ZONE_CLUSTER_ID}]},
            "status": {"initialization": {"provisioned": provisioned}}}


def capi_machine(data_secret: str | None = "c1-md-0-bootstrap", failure_domain: str = "") -> dict:
    spec: dict[str, Any] = {"clusterName": CLUSTER,
                            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                                  "kind": "OvirtMachine", "name": NAME},
                            "bootstrap": {"dataSecretName": data_secret} if data_secret else {}}
    if failure_domain:
        spec["failureDomain"] = failure_domain
    return {"metadata": {"name": MACHINE, "namespace": NS, "labels": {capi.CLUSTER_NAME_LABEL: CLUSTER}},
            "spec": spec}


def ovirt_machine(spec: dict | None = None, status: dict | None = None, finalizer: bool = False,
                  deleting: bool = False, annotations: dict | None = None, provider_id: str = "") -> dict:
    meta: dict[str, Any] = {
        "name": NAME, "namespace": NS, "generation": 1, "labels": {capi.CLUSTER_NAME_LABEL: CLUSTER},
        "annotations": dict(annotations or {}), "finalizers": [MACHINE_FINALIZER] if finalizer else [],
        "ownerReferences": [{"apiVersion": capi.API_VERSION, "kind": "Machine", "name": MACHINE, "uid": "m-uid",
                             "controller": True}]}
    if deleting:
        meta["deletionTimestamp"] = format_time(now())
    body = copy.deepcopy(SPEC if spec is None else spec)
    if provider_id:
        body["providerID"] = provider_id
    return {"metadata": meta, "spec": body, "status": copy.deepcopy(status or {})}


class SeeingActuator(FakeActuator):
    """A FakeActuator that keeps the Machine descriptions it was handed."""

    def __init__(self, **scripts: Any) -> None:
        super().__init__(**scripts)
        self.machines: list[Any] = []

    def provision(self, machine):
        self.machines.append(machine)
        return super().provision(machine)

    def delete(self, machine):
        self.machines.append(machine)
        return super().delete(machine)


@dataclass
class World:
    api: FakeApi
    engines: FakeEngines
    events: RecordingEvents
    reconciler: OvirtMachineReconciler

    @property
    def actuator(self) -> SeeingActuator:
        return self.engines.fake  # type: ignore[return-value]

    def obj(self) -> dict | None:
        return self.api.object(OVIRT_MACHINES, NAME, NS)


@dataclass
class Row:
    id: str
    ovirt_machine: dict
    results: list  # per pass: what reconcile returns, or the exception class it raises
    cluster: dict = field(default_factory=cluster)
    ovirt_cluster: dict | None = field(default_factory=ovirt_cluster)
    machine: dict | None = field(default_factory=capi_machine)
    provision: list = field(default_factory=list)
    status: list = field(default_factory=list)
    delete: list = field(default_factory=list)
    engine_error: BaseException | None = None
    setup: Callable[[World], None] | None = None
    # expectations
    gone: bool = False
    finalizer: bool = True
    conditions: dict = field(default_factory=dict)  # type -> "Status" or "Status/Reason"
    message: tuple[str, str] | None = None  # (condition type, a part of its message)
    status_fields: dict = field(default_factory=dict)  # status key -> value, exactly
    provider_id: str | None = None  # spec.providerID; None: absent
    events: list = field(default_factory=list)  # (type, reason), in order, exactly
    calls: dict = field(default_factory=dict)  # actuator verb -> count, exactly
    check: Callable[[World], None] | None = None


def world(row: Row) -> World:
    api = FakeApi()
    stores = {r: api.cache(r, Store({INDEX_CLUSTER: cluster_index} if r == OVIRT_MACHINES else None))
              for r in (OVIRT_MACHINES, CAPI_MACHINES, CAPI_CLUSTERS, OVIRT_CLUSTERS)}
    api.seed(OVIRT_MACHINES, row.ovirt_machine)
    api.seed(CAPI_CLUSTERS, row.cluster)
    if row.ovirt_cluster is not None:
        api.seed(OVIRT_CLUSTERS, row.ovirt_cluster)
    if row.machine is not None:
        api.seed(CAPI_MACHINES, row.machine)
    engines = FakeEngines(SeeingActuator(provision=row.provision, status=row.status, delete=row.delete),
                          error=row.engine_error)
    # Whether the finalizer was in place each time the engine was asked (the rule: before any engine action).
    engines.check = lambda: MACHINE_FINALIZER in ((api.object(OVIRT_MACHINES, NAME, NS) or {"metadata": {}})
                                                  ["metadata"].get("finalizers") or [])
    events = RecordingEvents()
    reconciler = OvirtMachineReconciler(api, stores[OVIRT_MACHINES], stores[CAPI_MACHINES], stores[CAPI_CLUSTERS],
                                        stores[OVIRT_CLUSTERS], engines, events)
    return World(api, engines, events, reconciler)


# --- checks used by some rows ------------------------------------------------------------------------------------

def _nothing_asked_of_the_engine(w: World) -> None:
    assert w.engines.asked == []


def _finalizer_before_every_engine_call(w: World) -> None:
    assert w.engines.checked and all(w.engines.checked), w.engines.checked


def _described_as_the_seam_machine(w: World) -> None:
    m = w.actuator.machines[0]
    assert m.metadata.name == NAME and m.metadata.namespace == NS  # the VM bears the OvirtMachine's name
    value = m.spec.provider_spec.value
    assert value["userDataSecret"] == {"name": "c1-md-0-bootstrap"}  # the Machine's bootstrap data Secret
    assert value["cluster_id"] == DEFAULT_CLUSTER_ID  # the OvirtCluster's default oVirt cluster
    assert value["template_name"] == "ubuntu-2404-kube" and value["memory_mb"] == 4096
    assert w.engines.asked[0] == EngineIdentity(NS, IDENTITY)  # the OvirtCluster's engine


def _placed_in_the_failure_domain(w: World) -> None:
    assert w.actuator.machines[0].spec.provider_spec.value["cluster_id"] == ZONE_CLUSTER_ID


def _recorded_id_and_provider_id_handed_on(w: World) -> None:
    m = w.actuator.machines[0]
    assert m.status.provider_status == {"instanceId": VM}
    assert m.spec.provider_id == PID


def _invalid_told_once(w: World) -> None:
    message = w.events.recorded[0].message
    assert "spec.template_name" in message


def _forgotten(w: World) -> None:
    assert w.engines.forgotten == [KEY]


def _removed_from_the_api(w: World) -> None:
    w.api.remove(OVIRT_MACHINES, NAME, NS)


def _status_written_behind_the_cache(w: World) -> None:
    w.api.freeze_cache(OVIRT_MACHINES)
    w.api.touch(OVIRT_MACHINES, NAME, NS, {"status": {"instanceState": "written by another"}})


def _no_instance_id(w: World) -> None:
    assert "instanceId" not in (w.obj() or {}).get("status", {})


def _looked_for_engine_wide(w: World) -> None:
    m = w.actuator.machines[0]
    assert m.spec.provider_spec.value is None and m.spec.provider_id == PID


def _deleted_ids_dropped(w: World) -> None:
    o = w.obj()
    assert o is not None
    assert "instanceId" not in o["status"] and "providerID" not in o["spec"]


def _status_guarded_when_recording(w: World) -> None:
    patches = [r for r in w.api.requests if r[0] == "PATCH" and r[2] == f"{NAME}/status"]
    assert patches, w.api.requests


def _no_write_when_waiting_again(w: World) -> None:
    writes = w.api.writes(OVIRT_MACHINES)
    assert len(writes) == 1, writes  # the condition, once; the second pass has nothing new to say


P = "InstanceProvisioned"
ROWS = [
    # --- pausing: nothing but the Paused condition
    Row("Cluster spec.paused -> nothing done", ovirt_machine(), [None], cluster=cluster(paused=True),
        finalizer=False, conditions={"Paused": "True/Paused"}, check=_nothing_asked_of_the_engine),
    Row("paused annotation on the OvirtMachine -> nothing done",
        ovirt_machine(annotations={capi.PAUSED_ANNOTATION: ""}), [None], finalizer=False,
        conditions={"Paused": "True"}, check=_nothing_asked_of_the_engine),
    Row("paused annotation on the Cluster -> nothing done", ovirt_machine(), [None],
        cluster=cluster(annotations={capi.PAUSED_ANNOTATION: ""}), finalizer=False, conditions={"Paused": "True"},
        check=_nothing_asked_of_the_engine),
    Row("paused while deleting -> the VM is not touched", ovirt_machine(finalizer=True, deleting=True), [None],
        cluster=cluster(paused=True), conditions={"Paused": "True"}, check=_nothing_asked_of_the_engine),
    # --- invalid spec: terminal, nothing created
    Row("invalid spec -> Ready False InvalidConfiguration naming the field, nothing created, told once",
        ovirt_machine(spec={k: v for k, v in SPEC.items() if k != "template_name"}), [None, None],
        finalizer=False, conditions={"Ready": "False/InvalidConfiguration", P: "False/InvalidConfiguration",
                                     "Paused": "False"},
        message=("Ready", "spec.template_name: Required value"),
        events=[("Warning", "InvalidConfiguration")], check=_invalid_told_once),
    Row("the actuator finds the spec invalid -> InvalidConfiguration, not retried", ovirt_machine(), [None],
        provision=[InvalidMachineConfiguration("Machine spec.bootstrap.dataSecretName: Invalid value: format")],
        conditions={"Ready": "False/InvalidConfiguration"}, message=("Ready", "dataSecretName"),
        events=[("Warning", "InvalidConfiguration")], calls={"provision": 1}),
    Row("the actuator's refusal names the OvirtMachine's field", ovirt_machine(), [None],
        provision=[InvalidMachineConfiguration("spec.providerSpec.value.os_disk.size_gb: Invalid value: 10: must be "
                                               "at least the template's OS disk size, 16 GiB")],
        conditions={"Ready": "False/InvalidConfiguration"}, message=("Ready", "spec.os_disk.size_gb: Invalid value"),
        events=[("Warning", "InvalidConfiguration")], calls={"provision": 1}),
    # --- waits, each a condition and no engine call
    Row("infrastructure not provisioned -> waits", ovirt_machine(), [None, None],
        cluster=cluster(provisioned=False), ovirt_cluster=ovirt_cluster(provisioned=False), finalizer=False,
        conditions={P: "False/WaitingForClusterInfrastructure", "Ready": "False"},
        check=lambda w: (_nothing_asked_of_the_engine(w), _no_write_when_waiting_again(w))),
    Row("the OvirtCluster's provisioned is enough", ovirt_machine(), [Result(requeue_after=5.0)],
        cluster=cluster(provisioned=False), provision=[CLONING], calls={"provision": 1},
        conditions={P: "False/Provisioning"}),
    Row("no OvirtCluster -> waits for the infrastructure", ovirt_machine(), [None], ovirt_cluster=None,
        finalizer=False, conditions={P: "False/WaitingForClusterInfrastructure"},
        check=_nothing_asked_of_the_engine),
    Row("no bootstrap data yet -> waits", ovirt_machine(), [None], machine=capi_machine(data_secret=None),
        finalizer=False, conditions={P: "False/WaitingForBootstrapData", "Ready": "False/WaitingForBootstrapData"},
        check=_nothing_asked_of_the_engine),
    Row("no owner Machine yet -> nothing", ovirt_machine(), [None], machine=None, finalizer=False,
        check=_nothing_asked_of_the_engine),
    Row("failure domain not offered -> MissingDependency, retried, nothing created", ovirt_machine(),
        [MissingDependency], machine=capi_machine(failure_domain="zone-x"), finalizer=False,
        conditions={P: "False/MissingDependency"}, message=(P, "'zone-x'"),
        events=[("Warning", "FailedCreate")], check=_nothing_asked_of_the_engine),
    # --- provisioning
    Row("first step -> finalizer first, the VM's id recorded, Provisioning", ovirt_machine(),
        [Result(requeue_after=5.0)], provision=[CLONING], calls={"provision": 1},
        conditions={P: "False/Provisioning", "Ready": "False/Provisioning", "Paused": "False/NotPaused"},
        status_fields={"instanceId": VM, "instanceState": "image_locked"},
        check=lambda w: (_finalizer_before_every_engine_call(w), _described_as_the_seam_machine(w),
                         _status_guarded_when_recording(w))),
    Row("recording the id over a status changed meanwhile -> looked at again, nothing overwritten",
        ovirt_machine(finalizer=True), [Result(requeue_after=0.5)], provision=[CLONING], calls={"provision": 1},
        setup=_status_written_behind_the_cache, status_fields={"instanceState": "written by another"},
        check=lambda w: _no_instance_id(w)),
    Row("the failure domain's oVirt cluster", ovirt_machine(), [Result(requeue_after=5.0)],
        machine=capi_machine(failure_domain="zone-b"), provision=[CLONING], calls={"provision": 1},
        check=_placed_in_the_failure_domain),
    Row("the recorded id and providerID go to the actuator",
        ovirt_machine(status={"instanceId": VM}, finalizer=True, provider_id=PID), [Result(requeue_after=10.0)],
        provision=[BOOTING], calls={"provision": 1}, provider_id=PID, check=_recorded_id_and_provider_id_handed_on),
    Row("running -> providerID, addresses, failure domain, provisioned, Ready", ovirt_machine(),
        [Result(requeue_after=5.0), Result(requeue_after=30.0)], machine=capi_machine(failure_domain="zone-b"),
        provision=[CLONING, UP], status=[RUNNING], calls={"provision": 2, "status": 1}, provider_id=PID,
        conditions={P: "True/Provisioned", "Ready": "True/Ready", "Paused": "False"},
        status_fields={"instanceId": VM, "instanceState": "up", "initialization": {"provisioned": True},
                       "failureDomain": "zone-b",
                       "addresses": [{"type": "InternalIP", "address": "10.0.0.5"},
                                     {"type": "Hostname", "address": NAME}]},
        events=[("Normal", "Created")]),
    Row("provisioned -> status only, never provision again",
        ovirt_machine(status={"instanceId": VM, "initialization": {"provisioned": True}}, finalizer=True,
                      provider_id=PID), [Result(requeue_after=30.0)], status=[RUNNING], calls={"status": 1},
        conditions={"Ready": "True"}, provider_id=PID),
    Row("provisioned VM gone -> Ready False InstanceGone, not made again",
        ovirt_machine(status={"instanceId": VM, "initialization": {"provisioned": True}}, finalizer=True,
                      provider_id=PID), [None, None], status=[None], calls={"status": 2},
        conditions={"Ready": "False/InstanceGone"}, provider_id=PID, events=[("Warning", "InstanceGone")]),
    Row("a refused start -> Warning and the condition, retried", ovirt_machine(finalizer=True),
        [Result(requeue_after=5.0)],
        provision=[Progress(done=False, requeue_after=5.0, instance_id=VM, instance_state="down",
                            problem="VM exists but the engine refuses to start it: no host")],
        calls={"provision": 1}, conditions={P: "False/StartRefused"}, message=(P, "no host"),
        events=[("Warning", "FailedStart")]),
    Row("MissingDependency -> condition and Warning, retried, never terminal", ovirt_machine(),
        [MissingDependency], provision=[MissingDependency("oVirt template 'x' not found")], calls={"provision": 1},
        conditions={P: "False/MissingDependency"}, message=(P, "template 'x'"), events=[("Warning", "FailedCreate")]),
    Row("engine fault -> condition, retried, never terminal", ovirt_machine(), [ActuatorError],
        provision=[ActuatorError("engine unreachable")], calls={"provision": 1},
        conditions={P: "False/ProviderError"}),
    Row("identity Secret missing -> MissingDependency, retried", ovirt_machine(), [MissingDependency],
        engine_error=MissingDependency("engine identity Secret capi-ns/engine-a not found"),
        conditions={P: "False/MissingDependency"}, message=(P, "engine-a")),
    Row("a recorded id naming another's VM -> references dropped, retried",
        ovirt_machine(status={"instanceId": OTHER_VM}, finalizer=True, provider_id=f"ovirt://{OTHER_VM}"),
        [Result(requeue=True)],
        provision=[InstanceNotOwned("VM is named 'other'", OTHER_VM, f"ovirt://{OTHER_VM}")],
        calls={"provision": 1}, conditions={"Ready": "False/InstanceNotOwned"},
        events=[("Warning", "InstanceNotOwned")], check=_deleted_ids_dropped),
    # --- deletion
    Row("deleting -> stop, detach, remove step by step, then the finalizer goes",
        ovirt_machine(status={"instanceId": VM}, finalizer=True, deleting=True),
        [Result(requeue_after=5.0), None], delete=[STOPPING, REMOVED], calls={"delete": 2}, gone=True,
        events=[("Normal", "Deleted")]),
    Row("deleting, engine fault -> the finalizer stays, retried",
        ovirt_machine(status={"instanceId": VM}, finalizer=True, deleting=True), [ActuatorError],
        delete=[ActuatorError("engine unreachable")], calls={"delete": 1}, conditions={"Ready": "False/Deleting"},
        events=[("Warning", "FailedDelete")]),
    Row("deleting an invalid spec -> the VM is still removed",
        ovirt_machine(spec={"memory_mb": "lots"}, status={"instanceId": VM}, finalizer=True, deleting=True),
        [None], delete=[REMOVED], calls={"delete": 1}, gone=True, events=[("Normal", "Deleted")]),
    Row("deleting without its Machine -> the VM looked for in the whole engine, not one cluster's list",
        ovirt_machine(finalizer=True, deleting=True, provider_id=PID), [None], machine=None, delete=[REMOVED],
        calls={"delete": 1}, gone=True, events=[("Normal", "Deleted")], check=_looked_for_engine_wide),
    Row("deleting without the finalizer -> nothing", ovirt_machine(deleting=True, finalizer=False), [None],
        finalizer=False, check=_nothing_asked_of_the_engine),
    Row("gone from the API -> the provider forgets it", ovirt_machine(), [None], setup=_removed_from_the_api,
        gone=True, check=_forgotten),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_ovirtmachine_reconciler(row: Row) -> None:
    w = world(row)
    if row.setup:
        row.setup(w)
    run_passes(w.reconciler.reconcile, KEY, row.results)
    o = w.obj()
    if row.gone:
        assert o is None, o
    else:
        assert o is not None
        status = o.get("status") or {}
        got = check_conditions(status, row.conditions)
        if row.message:
            assert row.message[1] in got[row.message[0]]["message"]
        for k, v in row.status_fields.items():
            assert status.get(k) == v, k
        assert o["spec"].get("providerID") == row.provider_id
        assert (MACHINE_FINALIZER in (o["metadata"].get("finalizers") or [])) == row.finalizer
    assert w.events.reasons() == row.events
    assert {k: v for k, v in w.actuator.calls.items() if v} == row.calls
    if row.check:
        row.check(w)


def _informers() -> dict:
    from machine_controller.runtime.informer import Informer

    return {r: Informer(None, r, indexers={INDEX_CLUSTER: cluster_index} if r == OVIRT_MACHINES else None)
            for r in (OVIRT_MACHINES, CAPI_MACHINES, CAPI_CLUSTERS, OVIRT_CLUSTERS)}


def test_only_what_an_ovirtmachine_reads_of_its_machine_cluster_and_ovirtcluster_wakes_it() -> None:
    """Cluster API rewrites status conditions often: those wake nothing; the bootstrap data, pausing and the
    infrastructure provisioned wake the OvirtMachines concerned."""
    from fakes import RecordingQueue, StubManager
    from machine_controller.controllers.infrastructure.ovirtmachine import add_ovirtmachine_controller

    inf, queue = _informers(), RecordingQueue()
    add_ovirtmachine_controller(StubManager(), FakeApi(), inf[OVIRT_MACHINES], inf[CAPI_MACHINES], inf[CAPI_CLUSTERS],
                                inf[OVIRT_CLUSTERS], FakeEngines(), RecordingEvents(), queue, workers=1)
    inf[OVIRT_MACHINES].store.put(ovirt_machine())

    def update(resource, old: dict, change: Callable[[dict], None]) -> list[str]:
        new = copy.deepcopy(old)
        change(new)
        queue.added.clear()
        inf[resource]._emit_update(old, new)
        return queue.added

    def conditions(o: dict) -> None:
        o.setdefault("status", {})["conditions"] = [{"type": "Ready", "status": "False"}]

    assert update(CAPI_MACHINES, capi_machine(data_secret=None), conditions) == []
    assert update(CAPI_MACHINES, capi_machine(data_secret=None),
                  lambda o: o["spec"].update(bootstrap={"dataSecretName": "b"})) == [KEY]
    assert update(CAPI_CLUSTERS, cluster(), conditions) == []
    assert update(CAPI_CLUSTERS, cluster(), lambda o: o["spec"].update(paused=True)) == [KEY]
    assert update(CAPI_CLUSTERS, cluster(provisioned=False),
                  lambda o: o["status"]["initialization"].update(infrastructureProvisioned=True)) == [KEY]
    assert update(OVIRT_CLUSTERS, ovirt_cluster(), conditions) == []
    assert update(OVIRT_CLUSTERS, ovirt_cluster(provisioned=False),
                  lambda o: o["status"]["initialization"].update(provisioned=True)) == [KEY]
