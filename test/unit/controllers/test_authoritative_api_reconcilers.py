"""The Machine API's controllers honour `authoritativeAPI` (docs/compatibility.md#authoritativeapi), against
`fakes.FakeApi`: a Machine or MachineSet whose `status.authoritativeAPI` is `ClusterAPI` or `Migrating` is left
alone, with only MAO's `Paused=True` condition written (the Machine controller, the MachineSet controller), no
instance asked for, no Node linked or written (nodelink, the node instance controller's part of it), no capacity
applied; given back to `MachineAPI`, `Paused=False` is written and each goes on. An object without the field is
reconciled as before, with no write more."""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from api import keys
from fakes import FakeActuator, FakeApi, RecordingEvents, RecordingQueue, StubManager
from machine_controller.controllers.machine.metrics import MachineMetrics
from machine_controller.controllers.machine.reconciler import MachineReconciler
from machine_controller.controllers.machineset.capacity_controller import (
    MachineSetCapacityReconciler,
    add_machineset_capacity_controller,
)
from machine_controller.controllers.machineset.reconciler import MachineSetReconciler
from machine_controller.controllers.nodes.matching import (
    INDEX_INTERNAL_IP,
    INDEX_NAME,
    INDEX_PROVIDER_ID,
    NodeMachineMatching,
    internal_ip_index,
    name_index,
    provider_id_index,
)
from machine_controller.controllers.nodes.nodelink import NodeLinkReconciler
from machine_controller.controllers.provider import InstanceStatus, Progress
from machine_controller.controllers.resources import MACHINES, MACHINESETS, NODES
from machine_controller.runtime.controller import settle
from machine_controller.runtime.informer import Store

REPO = Path(__file__).resolve().parents[3]
SAMPLE_SET = yaml.safe_load((REPO / "config" / "samples" / "machineset.yaml").read_text())
NS = "openshift-machine-api"
NAME = "worker-0"
KEY = f"{NS}/{NAME}"
VM = "9f1c2b7e-0000-4000-8000-000000000001"
PID = f"ovirt://{VM}"
IP = "10.0.0.5"
INDEXERS = {INDEX_PROVIDER_ID: provider_id_index, INDEX_INTERNAL_IP: internal_ip_index}
SPEC_VALUE = {"apiVersion": "ovirtproviderconfig.machine.openshift.io/v1beta1", "kind": "OvirtMachineProviderSpec",
              "template_name": "rhcos-tpl", "cluster_id": "c-1"}
UP = InstanceStatus(instance_id=VM, state="up", provider_id=PID, addresses=[], has_ip=True,
                    provider_status={"instanceId": VM, "instanceState": "up"})
PAUSED = {"type": "Paused", "status": "True", "reason": "AuthoritativeAPINotMachineAPI",
          "message": "The AuthoritativeAPI status is set to 'ClusterAPI'"}
RESUMED = {"type": "Paused", "status": "False", "reason": "AuthoritativeAPIMachineAPI", "severity": "Info",
           "message": "The AuthoritativeAPI status is set to 'MachineAPI'"}


def running_machine(status_api: str | None = None, spec_api: str | None = None, deleting: bool = False,
                    finalizer: bool = True, phase: str | None = "Running") -> dict:
    meta: dict[str, Any] = {"name": NAME, "namespace": NS, "labels": {keys.LABEL_CLUSTER: "ocp-abc12"},
                            "annotations": {keys.ANNOTATION_VM_ID: VM, keys.ANNOTATION_INSTANCE_STATE: "up"},
                            "finalizers": [keys.MACHINE_FINALIZER] if finalizer else []}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: dict[str, Any] = {"providerSpec": {"value": dict(SPEC_VALUE)}, "providerID": PID,
                            "metadata": {"labels": {"example.com/role": "worker"}}}
    if spec_api:
        spec["authoritativeAPI"] = spec_api
    status: dict[str, Any] = {"nodeRef": {"kind": "Node", "name": NAME, "uid": "node-uid"},
                              "addresses": [{"type": "InternalIP", "address": IP}],
                              "providerStatus": {"instanceId": VM, "instanceState": "up"}} if phase else {}
    if phase:
        status["phase"] = phase
    if status_api:
        status["authoritativeAPI"] = status_api
    return {"apiVersion": keys.API_VERSION, "kind": "Machine", "metadata": meta, "spec": spec, "status": status}


def node(provider_id: str | None = PID) -> dict:
    return {"metadata": {"name": NAME, "uid": "node-uid", "labels": {}},
            "spec": {"providerID": provider_id} if provider_id else {},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "addresses": [{"type": "InternalIP", "address": IP}]}}


def paused(status: dict) -> dict | None:
    found = [c for c in status.get("conditions") or [] if c["type"] == "Paused"]
    if not found:
        return None
    return {k: v for k, v in found[0].items() if k != "lastTransitionTime"}


def hand_over(api: FakeApi, resource: Any, name: str, value: str) -> None:
    """What the migration controller writes: `status.authoritativeAPI`."""
    api.touch(resource, name, NS, {"status": {"authoritativeAPI": value}})


# --- the Machine controller ---------------------------------------------------------------------------------------

def machine_world(obj: dict, status: list | None = None, delete: list | None = None,
                  with_node: bool = True) -> tuple[MachineReconciler, FakeApi, FakeActuator, RecordingEvents]:
    api = FakeApi()
    machines = api.cache(MACHINES, Store(INDEXERS))
    nodes = api.cache(NODES, Store(INDEXERS))
    api.seed(MACHINES, obj)
    if with_node:
        api.seed(NODES, node())
    actuator = FakeActuator(status=status or [], delete=delete or [])
    events = RecordingEvents()
    reconciler = MachineReconciler(api, machines, actuator, events, MachineMetrics.of(CollectorRegistry()),
                                   nodes=nodes)
    return reconciler, api, actuator, events


@pytest.mark.parametrize("authority", ["ClusterAPI", "Migrating"])
def test_a_machine_another_api_owns_is_left_alone_with_only_the_paused_condition(authority):
    reconciler, api, actuator, events = machine_world(running_machine(status_api=authority))
    before = api.object(MACHINES, NAME, NS)
    for _ in range(2):
        assert settle(reconciler.reconcile, KEY) is None
    after = api.object(MACHINES, NAME, NS)
    assert paused(after["status"]) == {**PAUSED, "message": f"The AuthoritativeAPI status is set to '{authority}'"}
    assert after["status"]["phase"] == "Running" and after["metadata"] == {
        **before["metadata"], "resourceVersion": after["metadata"]["resourceVersion"]}
    assert not any(actuator.calls.values())
    assert [w[2] for w in api.writes()] == [f"{NAME}/status"]  # once: the second pass found it said
    assert events.recorded == []


def test_a_new_machine_whose_spec_says_cluster_api_gets_it_in_its_status_and_no_finalizer_nor_instance():
    """A MachineSet whose template says ClusterAPI makes such Machines (docs/compatibility.md#authoritativeapi)."""
    reconciler, api, actuator, _ = machine_world(running_machine(spec_api="ClusterAPI", finalizer=False, phase=None),
                                                 with_node=False)
    assert settle(reconciler.reconcile, KEY) is None
    m = api.object(MACHINES, NAME, NS)
    assert m["status"]["authoritativeAPI"] == "ClusterAPI" and paused(m["status"]) == PAUSED
    assert m["metadata"]["finalizers"] == [] and "phase" not in m["status"]
    assert not any(actuator.calls.values())


def test_a_paused_machine_being_deleted_keeps_its_finalizer_until_it_is_given_back():
    """As MAO: the check comes before the deletion, so neither the drain nor the instance's removal starts while
    the Machine API is not authoritative; given back, the deletion goes through."""
    reconciler, api, actuator, _ = machine_world(running_machine(status_api="ClusterAPI", deleting=True),
                                                 delete=[Progress(done=True)])
    assert settle(reconciler.reconcile, KEY) is None
    m = api.object(MACHINES, NAME, NS)
    assert m["metadata"]["finalizers"] == [keys.MACHINE_FINALIZER] and m["status"]["phase"] == "Running"
    assert api.object(NODES, NAME) is not None and not any(actuator.calls.values())

    hand_over(api, MACHINES, NAME, "Migrating")
    settle(reconciler.reconcile, KEY)
    assert not any(actuator.calls.values())
    hand_over(api, MACHINES, NAME, "MachineAPI")
    for _ in range(3):
        if api.object(MACHINES, NAME, NS) is None:
            break
        settle(reconciler.reconcile, KEY)
    assert api.object(MACHINES, NAME, NS) is None  # finalizer removed: the Machine is gone
    assert actuator.calls["delete"] == 1 and api.object(NODES, NAME) is None


def test_a_machine_given_back_says_paused_false_and_goes_on_in_the_same_pass():
    obj = running_machine(status_api="MachineAPI")
    obj["status"]["conditions"] = [{**PAUSED, "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    reconciler, api, actuator, _ = machine_world(obj, status=[UP])
    settle(reconciler.reconcile, KEY)
    m = api.object(MACHINES, NAME, NS)
    assert paused(m["status"]) == RESUMED  # and kept by the pass's own status write that followed
    assert actuator.calls["status"] == 1
    assert {c["type"] for c in m["status"]["conditions"]} >= {"Paused", "InstanceExists"}


def test_a_machine_without_the_field_or_whose_spec_says_machine_api_is_reconciled_without_a_write_more():
    for spec_api in (None, "MachineAPI"):
        reconciler, api, actuator, _ = machine_world(running_machine(spec_api=spec_api), status=[UP])
        settle(reconciler.reconcile, KEY)
        m = api.object(MACHINES, NAME, NS)
        assert paused(m["status"]) is None and "authoritativeAPI" not in m["status"]
        assert actuator.calls["status"] == 1


def test_an_unknown_authority_is_left_alone_and_named():
    reconciler, api, actuator, events = machine_world(running_machine(status_api="Terraform"))
    settle(reconciler.reconcile, KEY)
    assert not any(actuator.calls.values()) and api.writes() == []
    assert events.reasons() == [("Warning", "InvalidAuthoritativeAPI")]
    assert "status.authoritativeAPI: Unsupported value: 'Terraform'" in events.recorded[0].message


# --- the MachineSet controller ------------------------------------------------------------------------------------

class NamingApi(FakeApi):
    """FakeApi that names a created object from its generateName, as the API server does."""

    def __init__(self) -> None:
        super().__init__()
        self._names = itertools.count()

    def create(self, resource: Any, body: dict, namespace: str | None = None) -> dict:
        if "name" not in body["metadata"]:
            body = copy.deepcopy(body)
            body["metadata"]["name"] = f"{body['metadata']['generateName']}{next(self._names):05d}"
        return super().create(resource, body, namespace)


def machineset_world(replicas: int, status_api: str | None) -> tuple[MachineSetReconciler, NamingApi, str]:
    api = NamingApi()
    machinesets = api.cache(MACHINESETS, Store())
    machines = api.cache(MACHINES, Store(INDEXERS))
    ms = copy.deepcopy(SAMPLE_SET)
    ms["metadata"]["namespace"] = NS
    ms["metadata"]["generation"] = 2
    ms["spec"]["replicas"] = replicas
    ms["status"] = {"replicas": 1, "observedGeneration": 1}
    if status_api:
        ms["status"]["authoritativeAPI"] = status_api
    api.seed(MACHINESETS, ms)
    return MachineSetReconciler(api, machinesets, machines, Store(), RecordingEvents()), api, ms["metadata"]["name"]


def test_a_machineset_another_api_owns_creates_nothing_and_writes_only_paused_until_given_back():
    reconciler, api, name = machineset_world(replicas=2, status_api="ClusterAPI")
    key = f"{NS}/{name}"
    for _ in range(2):
        assert reconciler.reconcile(key) is None
    ms = api.object(MACHINESETS, name, NS)
    assert paused(ms["status"]) == PAUSED
    assert ms["status"]["observedGeneration"] == 1 and ms["status"]["replicas"] == 1  # nothing else of it written
    assert [w[:2] for w in api.writes()] == [("PATCH", "machinesets")]  # no Machine created, said once

    hand_over(api, MACHINESETS, name, "Migrating")
    reconciler.reconcile(key)
    assert api.writes(MACHINES) == []
    hand_over(api, MACHINESETS, name, "MachineAPI")
    reconciler.reconcile(key)
    ms = api.object(MACHINESETS, name, NS)
    assert paused(ms["status"]) == RESUMED and ms["status"]["observedGeneration"] == 2
    assert [w[0] for w in api.writes(MACHINES)] == ["POST", "POST"]


def test_a_machineset_without_the_field_writes_no_paused_condition():
    reconciler, api, name = machineset_world(replicas=0, status_api=None)
    reconciler.reconcile(f"{NS}/{name}")
    assert paused(api.object(MACHINESETS, name, NS)["status"]) is None


# --- nodelink and the node instance controller's part of it -------------------------------------------------------

def nodelink_world(machine_obj: dict, node_obj: dict) -> tuple[NodeLinkReconciler, FakeApi, NodeMachineMatching]:
    api = FakeApi()
    machines = api.cache(MACHINES, Store({**INDEXERS, INDEX_NAME: name_index}))
    nodes = api.cache(NODES, Store(INDEXERS))
    api.seed(MACHINES, machine_obj)
    api.seed(NODES, node_obj)
    matching = NodeMachineMatching(machines, nodes)
    return NodeLinkReconciler(api, nodes, matching, MachineMetrics.of(CollectorRegistry())), api, matching


def test_nodelink_neither_links_nor_labels_for_a_paused_machine_and_does_once_it_is_given_back():
    obj = running_machine(status_api="ClusterAPI", phase="Provisioned")
    del obj["status"]["nodeRef"]
    reconciler, api, _ = nodelink_world(obj, node())
    reconciler.reconcile_quietly(NAME)
    assert api.writes() == []

    hand_over(api, MACHINES, NAME, "Migrating")
    hand_over(api, MACHINES, NAME, "MachineAPI")
    reconciler.reconcile_quietly(NAME)
    m, n = api.object(MACHINES, NAME, NS), api.object(NODES, NAME)
    assert m["status"]["nodeRef"]["name"] == NAME and m["status"]["phase"] == "Running"
    assert n["metadata"]["labels"] == {"example.com/role": "worker"}


def test_a_new_nodes_provider_id_write_carries_no_part_of_a_paused_machine_nor_waits_for_it():
    obj = running_machine(status_api="ClusterAPI", phase="Provisioned")
    _, _, matching = nodelink_world(obj, node(provider_id=None))
    assert not matching.node_part_for_provider_id(node(provider_id=None), PID)
    obj = running_machine(spec_api="ClusterAPI", phase=None)
    del obj["spec"]["providerID"]
    _, _, matching = nodelink_world(obj, node(provider_id=None))
    assert not matching.machine_provisioning_for(NAME)


# --- the MachineSet capacity controller ---------------------------------------------------------------------------

class ApplyRest:
    def __init__(self) -> None:
        self.applied: list[dict] = []

    def request(self, method: str, path: str, query: dict, body: dict, content_type: str) -> dict:
        self.applied.append(body)
        return {}


class _Informer:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.handlers: list[Any] = []

    def add_handler(self, handler: Any) -> None:
        self.handlers.append(handler)


def test_the_capacity_controller_applies_nothing_to_a_paused_set_and_is_woken_when_it_is_given_back():
    ms = copy.deepcopy(SAMPLE_SET)
    ms["metadata"].update(namespace=NS, uid="ms-uid", generation=1, resourceVersion="1")
    ms["status"] = {"replicas": 0, "authoritativeAPI": "ClusterAPI"}
    key = f"{NS}/{ms['metadata']['name']}"
    store = Store()
    store.put(ms)
    rest = ApplyRest()
    reconciler = MachineSetCapacityReconciler(rest, store, RecordingEvents())
    reconciler.reconcile(key)
    assert rest.applied == []

    queue = RecordingQueue()
    informer = _Informer(store)
    add_machineset_capacity_controller(StubManager(), rest, informer, RecordingEvents(), queue)
    given_back = copy.deepcopy(ms)
    given_back["status"]["authoritativeAPI"] = "MachineAPI"
    (handler,) = informer.handlers
    handler.on_update(ms, given_back)
    assert queue.added == [key]
    store.put(given_back)
    reconciler.reconcile(key)
    assert len(rest.applied) == 1
