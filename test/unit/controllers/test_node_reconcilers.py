"""The two Node-facing controllers against `fakes.FakeApi`: the node instance controller (providerID, deleting
Nodes whose instance is gone) with a scripted `Instances`, and nodelink (Machine <-> Node)."""

from __future__ import annotations

import datetime as dt

import pytest
from prometheus_client import CollectorRegistry

from api import keys
from api.meta import format_time, now
from api.remediation import OUT_OF_SERVICE_TAINT_KEY
from fakes import FakeActuator, FakeApi, RecordingEvents
from machine_controller.controllers.machine.metrics import MachineMetrics
from machine_controller.controllers.nodes.lifecycle import DOWN_RECHECK_S, NodeInstanceReconciler, wake_on_provider_id
from machine_controller.controllers.nodes.matching import (
    INDEX_INTERNAL_IP,
    INDEX_NAME,
    INDEX_PROVIDER_ID,
    AmbiguousMatch,
    NodeMachineMatching,
    internal_ip_index,
    name_index,
    provider_id_index,
)
from machine_controller.controllers.nodes.nodelink import LINK_WAIT_S, NodeLinkReconciler
from machine_controller.controllers.nodes.status import cached_node, node_ready
from machine_controller.controllers.provider import ActuatorError, InstanceNotOwned, NodeInstance
from machine_controller.controllers.resources import MACHINES, NODES, VOLUME_ATTACHMENTS
from machine_controller.runtime.controller import Result
from machine_controller.runtime.informer import Store
from machine_controller.runtime.workqueue import WorkQueue

NS = "openshift-machine-api"
NODE = "worker-0"
PID = "ovirt://9f1c2b7e-0000-4000-8000-000000000001"
IP = "10.0.0.5"
INDEXERS = {INDEX_PROVIDER_ID: provider_id_index, INDEX_INTERNAL_IP: internal_ip_index}


def node(provider_id: str | None = None, ip: str | None = IP, ready: str = "True", deleting: bool = False,
         taints: list | None = None, labels: dict | None = None, finalizers: list | None = None) -> dict:
    meta: dict = {"name": NODE, "uid": "node-uid", "labels": dict(labels or {})}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        meta["finalizers"] = finalizers or ["example.com/keep"]
    spec: dict = {}
    if provider_id:
        spec["providerID"] = provider_id
    if taints is not None:
        spec["taints"] = taints
    status: dict = {"conditions": [{"type": "Ready", "status": ready}]}
    if ip:
        status["addresses"] = [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": NODE}]
    return {"metadata": meta, "spec": spec, "status": status}


# --- the node instance controller ---------------------------------------------------------------------------------

def instance_world(node_obj: dict | None, find: list) -> tuple[NodeInstanceReconciler, FakeApi, FakeActuator,
                                                                  RecordingEvents]:
    api = FakeApi()
    nodes = api.cache(NODES, Store(INDEXERS))
    if node_obj is not None:
        api.seed(NODES, node_obj)
    instances = FakeActuator(find=find)
    events = RecordingEvents()
    return NodeInstanceReconciler(api, nodes, instances, events), api, instances, events


def test_a_new_node_gets_the_provider_id_of_the_instance_of_its_name():
    reconciler, api, instances, events = instance_world(node(), [NodeInstance(PID, running=True)])
    assert reconciler.reconcile(NODE) is None
    assert api.object(NODES, NODE)["spec"]["providerID"] == PID
    assert instances.seen == [("find", (NODE, None))]
    assert events.recorded == []
    # The write's own event is its echo: it queues no second lookup.
    assert reconciler.own_writes.is_echo(api.object(NODES, NODE))


def test_a_node_with_no_instance_of_its_name_is_left_alone():
    reconciler, api, instances, _ = instance_world(node(), [None])
    assert reconciler.reconcile(NODE) is None
    assert "providerID" not in api.object(NODES, NODE)["spec"]
    assert api.writes() == [] and instances.calls["find"] == 1


def test_another_providers_node_is_not_looked_up_nor_touched():
    reconciler, api, instances, events = instance_world(node("aws:///us-east-1a/i-0abc"), [])
    assert reconciler.reconcile(NODE) is None  # FakeActuator fails the test if find is called: none scripted
    assert instances.calls["owns"] == 1 and instances.calls["find"] == 0
    assert api.object(NODES, NODE) is not None and api.writes() == [] and events.recorded == []


def test_a_node_whose_instance_is_gone_is_deleted_with_an_event():
    reconciler, api, instances, events = instance_world(node(PID), [None])
    assert reconciler.reconcile(NODE) is None
    assert api.object(NODES, NODE) is None
    assert instances.seen == [("find", (NODE, PID))]
    assert events.reasons() == [("Normal", "DeletingNode")]
    assert events.recorded[0].involved == f"Node {NODE}" and NODE in events.recorded[0].message


def test_a_node_whose_instance_is_gone_keeps_its_volumes_until_kubernetes_released_them():
    """Deleted at once, the Node would leave its VolumeAttachments for Kubernetes' six minutes: it first gets the
    out-of-service taint, and goes when they are gone."""
    reconciler, api, _, events = instance_world(node(PID, ready="Unknown"), [None, None])
    api.seed(VOLUME_ATTACHMENTS, {"metadata": {"name": "csi-1"},
                                  "spec": {"attacher": "csi.ovirt.org", "nodeName": NODE,
                                           "source": {"persistentVolumeName": "pv-1"}}})
    assert reconciler.reconcile(NODE) == Result(requeue_after=2.0)
    taints = api.object(NODES, NODE)["spec"]["taints"]
    assert [(t["key"], t["value"], t["effect"]) for t in taints] == [(OUT_OF_SERVICE_TAINT_KEY, "nodeshutdown",
                                                                      "NoExecute")]
    assert events.reasons() == [("Normal", "ReleasingStorage")]
    api.remove(VOLUME_ATTACHMENTS, "csi-1")  # Kubernetes detached it
    assert reconciler.reconcile(NODE) is None
    assert api.object(NODES, NODE) is None
    assert events.reasons() == [("Normal", "ReleasingStorage"), ("Normal", "DeletingNode")]


def test_a_failed_lookup_never_deletes_the_node():
    reconciler, api, _, events = instance_world(node(PID, ready="Unknown"), [ActuatorError("engine unreachable")])
    with pytest.raises(ActuatorError):
        reconciler.reconcile(NODE)
    assert api.object(NODES, NODE) is not None
    assert api.writes() == [] and events.recorded == []


def test_a_node_already_deleted_behind_the_cache_is_fine():
    reconciler, api, _, events = instance_world(node(PID), [None])
    api.freeze_cache(NODES)
    api.remove(NODES, NODE)
    assert reconciler.reconcile(NODE) is None
    assert events.reasons() == [("Normal", "DeletingNode")]


def test_a_node_delete_that_fails_is_retried():
    reconciler, api, _, _ = instance_world(node(PID), [None])
    api.fail("DELETE", NODES, 500)
    with pytest.raises(Exception) as raised:
        reconciler.reconcile(NODE)
    assert getattr(raised.value, "status", None) == 500
    assert api.object(NODES, NODE) is not None


def test_a_stopped_instance_is_looked_at_again_in_a_minute():
    reconciler, api, _, events = instance_world(node(PID, ready="Unknown"), [NodeInstance(PID, running=False)])
    assert DOWN_RECHECK_S == 60.0
    assert reconciler.reconcile(NODE) == Result(requeue_after=60.0)
    assert api.object(NODES, NODE) is not None and api.writes() == [] and events.recorded == []


def test_a_running_instance_needs_nothing():
    reconciler, api, instances, _ = instance_world(node(PID), [NodeInstance(PID, running=True)])
    assert reconciler.reconcile(NODE) is None
    assert api.writes() == [] and instances.calls["find"] == 1


def test_a_node_whose_provider_id_names_another_vm_is_told_and_left_alone():
    """docs/architecture.md#acting-only-on-what-is-ours: a Node's VM is the VM of its name."""
    other = InstanceNotOwned("spec.providerID names VM 9f1c2b7e-0000-4000-8000-000000000001, which is named "
                             "'worker-9'", "9f1c2b7e-0000-4000-8000-000000000001", PID)
    reconciler, api, instances, events = instance_world(node(PID, ready="Unknown"), [other])
    assert reconciler.reconcile(NODE) is None  # no recheck of a VM that is not its own
    assert api.object(NODES, NODE) is not None and api.writes() == []
    assert events.reasons() == [("Warning", "InstanceNotOwned")]
    assert events.recorded[0].involved == f"Node {NODE}" and "worker-9" in events.recorded[0].message


@pytest.mark.parametrize("node_obj", [None, node(PID, deleting=True)], ids=["not cached", "being deleted"])
def test_absent_or_deleting_nodes_are_not_looked_up(node_obj):
    reconciler, api, instances, _ = instance_world(node_obj, [])
    assert reconciler.reconcile(NODE) is None
    assert instances.calls["find"] == 0 and api.writes() == []


# --- nodelink -----------------------------------------------------------------------------------------------------

def machine(name: str, provider_id: str | None = None, ip: str | None = None, deleting: bool = False,
            labels: dict | None = None, annotations: dict | None = None, taints: list | None = None,
            phase: str = "Provisioned") -> dict:
    meta: dict = {"name": name, "namespace": NS, "finalizers": [keys.MACHINE_FINALIZER]}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: dict = {"metadata": {"labels": dict(labels or {}), "annotations": dict(annotations or {})},
                  "taints": list(taints or [])}
    if provider_id:
        spec["providerID"] = provider_id
    status: dict = {"phase": phase}
    if ip:
        status["addresses"] = [{"type": "InternalIP", "address": ip}]
    return {"apiVersion": keys.API_VERSION, "kind": "Machine", "metadata": meta, "spec": spec, "status": status}


def link_world(node_obj: dict, *machine_objs: dict, registry: CollectorRegistry | None = None,
               node_part_left_to_provider_id_write: bool = False) -> tuple[NodeLinkReconciler, FakeApi]:
    api = FakeApi()
    nodes = api.cache(NODES, Store(INDEXERS))
    machines = api.cache(MACHINES, Store({**INDEXERS, INDEX_NAME: name_index}))
    api.seed(NODES, node_obj)
    for m in machine_objs:
        api.seed(MACHINES, m)
    metrics = MachineMetrics(registry if registry is not None else CollectorRegistry())
    return NodeLinkReconciler(api, nodes, NodeMachineMatching(machines, nodes), metrics,
                              node_part_left_to_provider_id_write), api


def node_ref(api: FakeApi, name: str) -> dict | None:
    return api.object(MACHINES, name, NS)["status"].get("nodeRef")


def phase(api: FakeApi, name: str) -> str | None:
    return api.object(MACHINES, name, NS)["status"].get("phase")


def status_writes(api: FakeApi, name: str) -> int:
    return len([w for w in api.writes(MACHINES) if w[2] == f"{name}/status"])


def running_observed(registry: CollectorRegistry) -> float | None:
    return registry.get_sample_value("mapi_machine_phase_transition_seconds_count", {"phase": "Running"})


def test_a_node_is_linked_to_the_machine_of_its_provider_id():
    reconciler, api = link_world(node(PID), machine("by-ip", ip=IP), machine(NODE, provider_id=PID))
    assert reconciler.reconcile_quietly(NODE) is None
    assert node_ref(api, NODE) == {"kind": "Node", "name": NODE, "uid": "node-uid"}
    assert node_ref(api, "by-ip") is None  # the providerID match wins over the address
    assert api.object(NODES, NODE)["metadata"]["annotations"][keys.ANNOTATION_NODE_MACHINE] == f"{NS}/{NODE}"


def test_without_a_provider_id_match_the_internal_ip_links():
    reconciler, api = link_world(node(None), machine("other", ip="10.0.0.99"), machine("by-ip", ip=IP))
    assert reconciler.reconcile_quietly(NODE) is None
    assert node_ref(api, "by-ip")["name"] == NODE
    assert node_ref(api, "other") is None
    assert api.object(NODES, NODE)["metadata"]["annotations"][keys.ANNOTATION_NODE_MACHINE] == f"{NS}/by-ip"


def test_a_node_matching_no_machine_is_left_alone():
    reconciler, api = link_world(node(None, ip="10.9.9.9"), machine("m", ip=IP))
    assert reconciler.reconcile_quietly(NODE) is None
    assert api.writes() == []


def test_labels_annotations_and_taints_go_to_the_node_and_taints_are_never_removed():
    existing = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
    wanted = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}
    m = machine(NODE, provider_id=PID, labels={"node-role.kubernetes.io/infra": ""},
                annotations={"example.com/owner": "team-a"}, taints=[wanted])
    reconciler, api = link_world(node(PID, taints=[existing], labels={"kubernetes.io/hostname": NODE}), m)
    reconciler.reconcile_quietly(NODE)
    n = api.object(NODES, NODE)
    assert n["metadata"]["labels"] == {"kubernetes.io/hostname": NODE, "node-role.kubernetes.io/infra": ""}
    assert n["metadata"]["annotations"] == {"example.com/owner": "team-a", keys.ANNOTATION_NODE_MACHINE: f"{NS}/{NODE}"}
    assert n["spec"]["taints"] == [existing, wanted]

    # The taint leaves the Machine's spec: the Node keeps it; nothing else to write either.
    api.touch(MACHINES, NODE, NS, {"spec": {"taints": []}})
    node_writes = len(api.writes(NODES))
    reconciler.reconcile_quietly(NODE)
    assert api.object(NODES, NODE)["spec"]["taints"] == [existing, wanted]
    assert len(api.writes(NODES)) == node_writes


def test_a_second_pass_with_nothing_new_writes_nothing():
    reconciler, api = link_world(node(PID), machine(NODE, provider_id=PID, labels={"a": "b"}))
    reconciler.reconcile_quietly(NODE)
    before = len(api.writes())
    reconciler.reconcile_quietly(NODE)
    assert len(api.writes()) == before


def test_a_provisioned_machine_gets_its_node_ref_and_running_in_one_write_counted_once():
    registry = CollectorRegistry()
    reconciler, api = link_world(node(PID), machine(NODE, provider_id=PID), registry=registry)
    assert reconciler.reconcile_quietly(NODE) is None
    assert node_ref(api, NODE)["name"] == NODE and phase(api, NODE) == "Running"
    assert status_writes(api, NODE) == 1
    assert running_observed(registry) == 1.0


@pytest.mark.parametrize("change", [
    {"status": {"phase": "Failed", "errorMessage": "Can't find created instance."}},
    {"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}, "status": {"phase": "Deleting"}},
], ids=["failed", "deleted"])
def test_a_machine_changed_since_nodelink_saw_it_provisioned_is_not_made_running(change):
    """The write of Running is guarded by the resourceVersion the Machine was seen Provisioned at."""
    registry = CollectorRegistry()
    reconciler, api = link_world(node(PID), machine(NODE, provider_id=PID), registry=registry)
    api.freeze_cache(MACHINES)
    api.touch(MACHINES, NODE, NS, change)
    assert reconciler.reconcile_quietly(NODE) == Result(requeue=True)
    assert phase(api, NODE) == change["status"]["phase"] and node_ref(api, NODE) is None
    assert running_observed(registry) is None


@pytest.mark.parametrize("before", ["Provisioning", "Failed", "Running"])
def test_a_machine_not_provisioned_gets_only_its_node_ref(before):
    """Only the Machine controller moves a Provisioning Machine on (it makes it Running itself once provisioned
    and linked); a Failed one stays Failed; a Running one relinked to a new Node stays Running. That write is not
    guarded, as before the fold: a Machine changed since the cache saw it still gets its nodeRef."""
    registry = CollectorRegistry()
    reconciler, api = link_world(node(PID), machine(NODE, provider_id=PID, phase=before), registry=registry)
    api.freeze_cache(MACHINES)
    api.touch(MACHINES, NODE, NS, {"metadata": {"labels": {"team": "infra"}}})
    assert reconciler.reconcile_quietly(NODE) is None
    assert node_ref(api, NODE)["name"] == NODE and phase(api, NODE) == before
    assert running_observed(registry) is None


def test_a_ready_flip_rewrites_the_node_ref_so_the_machine_is_looked_at_again():
    reconciler, api = link_world(node(PID), machine(NODE, provider_id=PID))
    reconciler.reconcile_quietly(NODE)
    status_writes = [w for w in api.writes(MACHINES) if w[2] == f"{NODE}/status"]
    api.touch(NODES, NODE, change={"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}})
    reconciler.reconcile_quietly(NODE)
    assert len([w for w in api.writes(MACHINES) if w[2] == f"{NODE}/status"]) == len(status_writes) + 1


def test_two_machines_matching_one_node_is_an_error_and_nothing_is_written():
    reconciler, api = link_world(node(PID), machine("a", provider_id=PID), machine("b", provider_id=PID))
    with pytest.raises(AmbiguousMatch, match=f"{NS}/a, {NS}/b"):
        reconciler.reconcile_quietly(NODE)
    assert api.writes() == []


def test_a_deleting_machine_does_not_count_as_a_match():
    reconciler, api = link_world(node(PID), machine("old", provider_id=PID, deleting=True),
                                 machine(NODE, provider_id=PID))
    assert reconciler.reconcile_quietly(NODE) is None
    assert node_ref(api, NODE)["name"] == NODE
    assert node_ref(api, "old") is None


def test_a_deleting_node_is_not_linked():
    reconciler, api = link_world(node(PID, deleting=True), machine("m", provider_id=PID))
    assert reconciler.reconcile_quietly(NODE) is None
    assert api.writes() == []


def other_node(name: str, provider_id: str | None = None, ip: str = IP) -> dict:
    n = node(provider_id, ip=ip)
    n["metadata"] = {"name": name, "uid": f"{name}-uid"}
    return n


def linked_by_ip(name: str = NODE) -> dict:
    """A Machine the Machine controller made Running with the Node found by its InternalIP, the Node's providerID
    still to come (docs/compatibility.md#node-controllers)."""
    m = machine(name, provider_id=PID, ip=IP, phase="Running")
    m["status"]["nodeRef"] = {"kind": "Node", "name": NODE, "uid": "node-uid"}
    return m


@pytest.mark.parametrize("own_node", [node(None), node(PID), None], ids=["without-provider-id", "with-it", "absent"])
def test_a_node_of_another_name_carrying_a_machines_provider_id_is_neither_linked_nor_written(own_node):
    """A Node manifest copied and renamed carries the providerID of another Machine's VM: the name is the proof, the
    providerID a hint (docs/architecture.md#acting-only-on-what-is-ours). CI saw the copy linked in the second
    between the Machine's link to its own Node (by its InternalIP) and that Node's providerID."""
    owner = linked_by_ip() if own_node is not None else machine(NODE, provider_id=PID, ip=IP)
    reconciler, api = link_world(other_node("impostor", PID), owner)
    if own_node is not None:
        api.seed(NODES, own_node)
    assert reconciler.reconcile_quietly("impostor") is None
    assert api.writes() == []
    if own_node is not None:  # the Machine's own Node is linked and written as ever, the copy beside it
        api.touch(NODES, NODE, change={"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}})
        assert reconciler.reconcile_quietly(NODE) is None
        assert node_ref(api, NODE)["name"] == NODE and phase(api, NODE) == "Running"
        assert api.object(NODES, NODE)["metadata"]["annotations"][keys.ANNOTATION_NODE_MACHINE] == f"{NS}/{NODE}"
    assert not api.object(NODES, "impostor")["metadata"].get("annotations")


def test_an_address_does_not_move_a_machine_off_a_node_that_is_still_there():
    """Two Nodes report one InternalIP: the Machine stays linked to the Node it has. Once that Node is gone, the
    address links the other, as MAO's nodelink would."""
    reconciler, api = link_world(other_node("second"), linked_by_ip("m"))
    api.seed(NODES, node(None))
    assert reconciler.reconcile_quietly("second") is None
    assert api.writes() == [] and node_ref(api, "m")["name"] == NODE
    api.remove(NODES, NODE)
    assert reconciler.reconcile_quietly("second") is None
    assert node_ref(api, "m")["name"] == "second"


def test_a_node_changed_since_the_cache_saw_it_is_a_requeue_not_an_error():
    reconciler, api = link_world(node(PID), machine(NODE, provider_id=PID, labels={"a": "b"}))
    api.freeze_cache(NODES)
    api.touch(NODES, NODE, change={"metadata": {"labels": {"kubelet": "heartbeat"}}})
    assert reconciler.reconcile_quietly(NODE) == Result(requeue=True)
    assert "a" not in api.object(NODES, NODE)["metadata"]["labels"]  # the guarded patch was refused


def test_other_errors_are_not_swallowed():
    reconciler, api = link_world(node(PID), machine(NODE, provider_id=PID))
    api.fail("PATCH", MACHINES, 500)
    with pytest.raises(Exception) as raised:
        reconciler.reconcile_quietly(NODE)
    assert getattr(raised.value, "status", None) == 500


# --- the providerID write carrying nodelink's part ------------------------------------------------------------------

def linked_world(node_obj: dict, *machine_objs: dict) -> tuple[NodeInstanceReconciler, NodeLinkReconciler, FakeApi]:
    """Both Node controllers of one process over one API, as app.build wires them."""
    linker, api = link_world(node_obj, *machine_objs, node_part_left_to_provider_id_write=True)
    instances = FakeActuator(find=[NodeInstance(PID, running=True)])
    matching = NodeMachineMatching(api.cached(MACHINES), api.cached(NODES))
    reconciler = NodeInstanceReconciler(api, api.cached(NODES), instances, RecordingEvents(), matching)
    return reconciler, linker, api


def test_a_node_registered_after_its_machine_was_provisioned_gets_its_provider_id_and_link_in_one_write():
    reconciler, linker, api = linked_world(
        node(None), machine(NODE, provider_id=PID, ip=IP, labels={"node-role.kubernetes.io/infra": ""},
                            taints=[{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]))
    assert reconciler.reconcile(NODE) is None
    n = api.object(NODES, NODE)
    assert n["spec"]["providerID"] == PID
    assert n["metadata"]["annotations"] == {keys.ANNOTATION_NODE_MACHINE: f"{NS}/{NODE}"}
    assert n["metadata"]["labels"]["node-role.kubernetes.io/infra"] == ""
    assert n["spec"]["taints"] == [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
    assert len(api.writes(NODES)) == 1
    # nodelink, woken by that write, has only the Machine's status left to write.
    assert linker.reconcile_quietly(NODE) is None
    assert node_ref(api, NODE)["name"] == NODE and phase(api, NODE) == "Running"
    assert len(api.writes(NODES)) == 1


@pytest.mark.parametrize("machines", [
    [machine("m", ip=IP, phase="Provisioning")],  # not provisioned yet: nodelink links it later itself
    [machine("a", provider_id=PID), machine("b", provider_id=PID)],  # which is the Node's cannot be told
    [machine("old", provider_id=PID, deleting=True)],
    [machine("other-name", provider_id=PID)],  # not this Node's Machine: the name is the proof
], ids=["no-provider-id-yet", "two-machines", "deleting", "another-name"])
def test_without_one_machine_of_that_provider_id_only_the_provider_id_is_written(machines):
    reconciler, _, api = linked_world(node(None), *machines)
    assert reconciler.reconcile(NODE) is None
    n = api.object(NODES, NODE)
    assert n["spec"] == {"providerID": PID} and not n["metadata"].get("annotations")


def test_with_another_node_carrying_that_provider_id_only_the_provider_id_is_written():
    """A copied Node manifest: nodelink links neither Node, so neither gets the Machine's annotation here."""
    reconciler, _, api = linked_world(node(None), machine(NODE, provider_id=PID))
    api.seed(NODES, {**node(PID), "metadata": {"name": "copy", "uid": "copy-uid"}})
    assert reconciler.reconcile(NODE) is None
    n = api.object(NODES, NODE)
    assert n["spec"] == {"providerID": PID} and not n["metadata"].get("annotations")


def test_a_node_changed_since_the_cache_saw_it_is_looked_at_again_before_its_provider_id_is_written():
    """Nodelink's part is guarded by the Node's resourceVersion (its taints replace the list)."""
    reconciler, _, api = linked_world(node(None), machine(NODE, provider_id=PID))
    api.freeze_cache(NODES)
    api.touch(NODES, NODE, change={"metadata": {"labels": {"kubelet": "heartbeat"}}})
    assert reconciler.reconcile(NODE) == Result(requeue=True)
    assert "providerID" not in api.object(NODES, NODE)["spec"]


def test_a_node_registered_while_its_machine_is_provisioned_waits_for_its_provider_id_and_gets_both_in_one_write():
    """On the simulator the guest registers its Node before the Machine controller sees the VM up: the Node waits for
    the Machine's providerID (asking the engine nothing meanwhile), and then gets it with nodelink's part."""
    reconciler, linker, api = linked_world(node(None), machine(NODE, ip=IP, phase="Provisioning"))
    instances = reconciler._instances
    wait = reconciler.reconcile(NODE)
    assert wait is not None and LINK_WAIT_S - 5 < wait.requeue_after <= LINK_WAIT_S
    assert api.writes(NODES) == [] and instances.calls["find"] == 0
    api.touch(MACHINES, NODE, NS, {"spec": {"providerID": PID}})  # the Machine controller saw the VM up
    assert reconciler.reconcile(NODE) is None
    n = api.object(NODES, NODE)
    assert n["spec"]["providerID"] == PID
    assert n["metadata"]["annotations"] == {keys.ANNOTATION_NODE_MACHINE: f"{NS}/{NODE}"}
    assert len(api.writes(NODES)) == 1


def test_nodelink_leaves_its_part_of_a_node_waiting_for_its_provider_id_to_that_write():
    """The Machine controller linked the Machine (found by the Node's InternalIP) when it got its providerID; nodelink,
    woken by that, would write its part of the Node before the providerID write that carries it: two Node writes."""
    linked = machine(NODE, provider_id=PID, ip=IP, phase="Running")
    linked["status"]["nodeRef"] = {"kind": "Node", "name": NODE, "uid": "node-uid"}
    reconciler, linker, api = linked_world(node(None), linked)
    wait = linker.reconcile_quietly(NODE)
    assert wait is not None and LINK_WAIT_S - 5 < wait.requeue_after <= LINK_WAIT_S
    assert api.writes() == []
    assert reconciler.reconcile(NODE) is None
    assert api.object(NODES, NODE)["metadata"]["annotations"] == {keys.ANNOTATION_NODE_MACHINE: f"{NS}/{NODE}"}
    assert linker.reconcile_quietly(NODE) is None
    assert len(api.writes(NODES)) == 1 and api.writes(MACHINES) == []
    # Past LINK_WAIT_S (the providerID write did not come), nodelink writes its part itself.
    late = node(None)
    late["metadata"]["creationTimestamp"] = format_time(now() - dt.timedelta(seconds=LINK_WAIT_S + 1))
    _, linker, api = linked_world(late, linked)
    assert linker.reconcile_quietly(NODE) is None
    assert api.object(NODES, NODE)["metadata"]["annotations"] == {keys.ANNOTATION_NODE_MACHINE: f"{NS}/{NODE}"}


def test_a_node_that_waited_long_enough_gets_its_provider_id_alone():
    """A Machine stuck in its provisioning holds no Node back for longer than LINK_WAIT_S."""
    old = node(None)
    old["metadata"]["creationTimestamp"] = format_time(now() - dt.timedelta(seconds=LINK_WAIT_S + 1))
    reconciler, _, api = linked_world(old, machine(NODE, ip=IP, phase="Provisioning"))
    assert reconciler.reconcile(NODE) is None
    assert api.object(NODES, NODE)["spec"] == {"providerID": PID}


@pytest.mark.parametrize("machines", [
    [machine(NODE, provider_id=PID, phase="Provisioning")],  # it has its providerID: the link goes with this write
    [machine(NODE, ip=IP, phase="Provisioned")],
    [machine(NODE, phase="Provisioning", deleting=True)],
], ids=["machine-has-its-provider-id", "provisioned", "deleting"])
def test_a_node_whose_machine_is_not_being_provisioned_waits_for_nothing(machines):
    reconciler, _, api = linked_world(node(None), *machines)
    assert reconciler.reconcile(NODE) is None
    assert api.object(NODES, NODE)["spec"]["providerID"] == PID


def test_a_machine_that_gets_its_provider_id_wakes_the_node_of_its_name_that_has_none():
    class Machines:
        handler = None

        def add_handler(self, handler):
            self.handler = handler
    nodes = Store(INDEXERS)
    nodes.put(node(None))
    nodes.put({**node(PID), "metadata": {"name": "named", "uid": "u"}})
    queue = WorkQueue("ovirt-node", registry=CollectorRegistry())
    try:
        machines = Machines()
        wake_on_provider_id(machines, nodes, queue)
        before, after = machine(NODE, phase="Provisioning"), machine(NODE, provider_id=PID, phase="Provisioning")
        machines.handler.on_update(before, machine(NODE, phase="Provisioning", labels={"a": "b"}))  # no providerID
        assert queue.get(timeout=0) is None
        machines.handler.on_update(before, after)
        assert queue.get(timeout=0) == NODE
        machines.handler.on_update(machine("named"), machine("named", provider_id=PID))  # that Node has one
        assert queue.get(timeout=0) is None
    finally:
        queue.shutdown()


def test_the_node_cache_keeps_the_status_the_controllers_read_and_drops_the_kubelets_image_list():
    conditions = [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
    addresses = [{"type": "InternalIP", "address": "10.0.0.7"}, {"type": "Hostname", "address": "worker-7"}]
    node = {"metadata": {"name": "worker-7", "managedFields": [{"manager": "kubelet"}], "labels": {"a": "b"}},
            "spec": {"providerID": "ovirt://vm-7", "taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {"conditions": conditions, "addresses": addresses,
                       "images": [{"names": [f"registry.example/img-{i}@sha256:{i:064x}"], "sizeBytes": i}
                                  for i in range(50)],
                       "nodeInfo": {"bootID": "b", "kubeletVersion": "v1.35.4"}, "capacity": {"cpu": "4"},
                       "allocatable": {"cpu": "4"}, "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}}
    cached = cached_node(node)
    assert cached["status"] == {"conditions": conditions, "addresses": addresses}
    assert cached["spec"] == {"providerID": "ovirt://vm-7", "taints": [{"key": "k", "effect": "NoSchedule"}]}
    assert "managedFields" not in cached["metadata"] and cached["metadata"]["labels"] == {"a": "b"}
    assert node_ready(cached) == "True"
    assert cached_node({"metadata": {"name": "new"}}) == {"metadata": {"name": "new"}}  # no status yet
