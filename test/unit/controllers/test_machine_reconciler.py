"""The Machine controller's lifecycle, one scenario per row, against `fakes.FakeApi` and a scripted `FakeActuator`.

Each row starts from one Machine (and maybe its Node and pods), runs the reconciler a few times as the work queue
would, and then checks what a user would see: the Machine's phase, error fields, conditions and annotations, the
events, the Node and its pods, and how often the actuator was asked. Nothing here needs an API server.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest
from prometheus_client import CollectorRegistry

from api import keys
from api.meta import NodeAddress, format_time, now
from api.remediation import OUT_OF_SERVICE_TAINT_KEY
from fakes import FakeActuator, FakeApi, RecordingEvents
from machine_controller.controllers.machine.metrics import MachineMetrics
from machine_controller.controllers.machine.reconciler import MachineReconciler, node_lost_handler
from machine_controller.controllers.nodes.matching import (
    INDEX_INTERNAL_IP,
    INDEX_PROVIDER_ID,
    NodeMachineMatching,
    internal_ip_index,
    provider_id_index,
)
from machine_controller.controllers.nodes.nodelink import NodeLinkReconciler
from machine_controller.controllers.provider import (
    ActuatorError,
    InstanceNotOwned,
    InstanceStatus,
    InvalidMachineConfiguration,
    MissingDependency,
    Progress,
)
from machine_controller.controllers.resources import MACHINES, NODES, PODS, VOLUME_ATTACHMENTS
from machine_controller.runtime.controller import Result, settle
from machine_controller.runtime.informer import Store

NS = "openshift-machine-api"
NAME = "worker-0"
KEY = f"{NS}/{NAME}"
NODE = NAME  # a Node is named after its VM, and the VM after its Machine (matching.py `machine_for`)
VM = "9f1c2b7e-0000-4000-8000-000000000001"
PID = f"ovirt://{VM}"
T0 = "2026-01-01T00:00:00Z"
SPEC_VALUE = {"apiVersion": "ovirtproviderconfig.machine.openshift.io/v1beta1", "kind": "OvirtMachineProviderSpec",
              "template_name": "rhcos-tpl", "cluster_id": "c-1"}
GONE = "<gone>"  # expected phase of a Machine that no longer exists


def machine(phase: str | None = None, finalizer: bool = True, deleting: bool = False, node: bool = False,
            annotations: dict | None = None, provider_id: str | None = None, addresses: list | None = None,
            value: dict | None = SPEC_VALUE, cluster: bool = True, pre_drain: bool = False,
            pre_terminate: bool = False, conditions: list | None = None, provider_status: dict | None = None,
            error_reason: str | None = None, other_finalizers: tuple = ()) -> dict:
    labels = {keys.LABEL_CLUSTER: "ocp-abc12"} if cluster else {}
    meta: dict[str, Any] = {"name": NAME, "namespace": NS, "labels": labels, "annotations": dict(annotations or {}),
                            "finalizers": [*other_finalizers, *([keys.MACHINE_FINALIZER] if finalizer else [])],
                            "creationTimestamp": T0}
    if deleting:
        meta["deletionTimestamp"] = format_time(now())
    spec: dict[str, Any] = {"providerSpec": {"value": copy.deepcopy(value)} if value is not None else {}}
    if provider_id:
        spec["providerID"] = provider_id
    hooks: dict[str, list] = {}
    if pre_drain:
        hooks["preDrain"] = [{"name": "EtcdQuorum", "owner": "clusteroperator/etcd"}]
    if pre_terminate:
        hooks["preTerminate"] = [{"name": "BackupDisks", "owner": "example/backup"}]
    if hooks:
        spec["lifecycleHooks"] = hooks
    status: dict[str, Any] = {}
    if phase:
        status["phase"] = phase
    if node:
        status["nodeRef"] = {"kind": "Node", "name": NODE, "uid": "node-uid"}
    if addresses:
        status["addresses"] = addresses
    if conditions:
        status["conditions"] = conditions
    if provider_status:
        status["providerStatus"] = provider_status
    if error_reason:
        status["errorReason"] = error_reason
        status["errorMessage"] = "earlier failure"
    return {"apiVersion": keys.API_VERSION, "kind": "Machine", "metadata": meta, "spec": spec, "status": status}


def cond(type_: str, status: str = "True") -> dict:
    return {"type": type_, "status": status, "lastTransitionTime": T0}


def node_obj(unschedulable: bool = False) -> dict:
    return {"metadata": {"name": NODE, "uid": "node-uid"}, "spec": {"providerID": PID, "unschedulable": unschedulable},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}]}}


def pod(name: str, namespace: str = "apps", daemonset: bool = False, mirror: bool = False) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if daemonset:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "ds-uid",
                                    "controller": True}]
    if mirror:
        meta["annotations"] = {"kubernetes.io/config.mirror": "x"}
    return {"metadata": meta, "spec": {"nodeName": NODE}, "status": {"phase": "Running"}}


ADDRESSES = [NodeAddress(type="InternalIP", address="10.0.0.5"), NodeAddress(type="Hostname", address=NODE)]
UP = InstanceStatus(instance_id=VM, state="up", provider_id=PID, addresses=ADDRESSES, has_ip=True,
                    provider_status={"instanceId": VM, "instanceState": "up"})
NO_IP_YET = InstanceStatus(instance_id=VM, state="up", provider_id=PID, addresses=[], has_ip=False)
# What the provider records of an instance the Machine does not record yet (ovirt/actuator.py `_to_record`).
RECORD_CLONING = {"instanceId": VM, "instanceState": "image_locked"}
CLONING = Progress(done=False, requeue_after=7.0, waiting_for="disk copy", instance_id=VM,
                   instance_state="image_locked", provider_status=RECORD_CLONING)
STARTED = Progress(done=True, instance_id=VM, instance_state="up")
NO_HOST = Progress(done=False, requeue_after=30.0, waiting_for="start", instance_id=VM, instance_state="down",
                   problem="Cannot run VM. There is no host that satisfies current scheduling constraints.",
                   provider_status={"instanceId": VM, "instanceState": "down"})
POWERING_DOWN = Progress(done=False, instance_id=VM, instance_state="powering_down")
GONE_FROM_CLOUD = Progress(done=True)
# Another Machine's VM, named in a copied manifest (docs/architecture.md#acting-only-on-what-is-ours).
OTHER_VM = "9f1c2b7e-0000-4000-8000-0000000000aa"
OTHER_PID = f"ovirt://{OTHER_VM}"
COPIED = {keys.ANNOTATION_VM_ID: OTHER_VM, keys.ANNOTATION_INSTANCE_STATE: "up"}


def not_owned() -> InstanceNotOwned:
    return InstanceNotOwned(f"spec.providerID names VM {OTHER_VM}, which is named 'worker-9', not {NAME!r}",
                            OTHER_VM, OTHER_PID)


UNREACHABLE = Progress(done=False, instance_id=VM, instance_state="unknown",
                       problem="VM worker-0 is unknown to the engine (its host does not answer)")


@dataclass
class World:
    api: FakeApi
    machines: Store
    nodes: Store
    actuator: FakeActuator
    events: RecordingEvents
    registry: CollectorRegistry
    reconciler: MachineReconciler

    def machine(self) -> dict | None:
        return self.api.object(MACHINES, NAME, NS)


@dataclass
class Row:
    id: str
    machine: dict
    results: list  # per pass: what reconcile returns (None or a Result), or the exception class it raises
    provision: list = field(default_factory=list)
    status: list = field(default_factory=list)
    delete: list = field(default_factory=list)
    node: dict | None = None
    pods: list = field(default_factory=list)
    refuse_eviction: tuple = ()
    setup: Callable[[World], None] | None = None
    between: Callable[[World, int], None] | None = None  # after pass i, before pass i+1
    # expectations
    phase: str | None = None  # GONE: the Machine no longer exists
    error_reason: str | None = None
    error_message: str | None = None  # a part of it
    conditions: dict = field(default_factory=dict)  # type -> "Status" or "Status/Reason"
    no_conditions: tuple = ()
    annotations: dict = field(default_factory=dict)
    provider_status: dict | None = None  # status.providerStatus, exactly; None: not checked
    finalizer: bool = True
    events: list = field(default_factory=list)  # (type, reason), in order, exactly
    calls: dict = field(default_factory=dict)  # actuator verb -> count, exactly (unlisted verbs: 0)
    node_after: str | None = None  # "gone", "cordoned", "schedulable"; None: not checked
    evictions: list | None = None
    check: Callable[[World], None] | None = None


def world(row: Row, linked: bool = False) -> World:
    """`linked`: with this project's nodelink in the same process, the Machine controller is handed the
    Node <-> Machine matching, as app.build does."""
    api = FakeApi()
    indexers = {INDEX_PROVIDER_ID: provider_id_index, INDEX_INTERNAL_IP: internal_ip_index}
    machines = api.cache(MACHINES, Store(indexers))
    nodes = api.cache(NODES, Store(indexers))
    api.seed(MACHINES, row.machine)
    if row.node is not None:
        api.seed(NODES, row.node)
    for p in row.pods:
        api.seed(PODS, p)
    api.refused_evictions.update(row.refuse_eviction)
    actuator = FakeActuator(provision=row.provision, status=row.status, delete=row.delete)
    events = RecordingEvents()
    registry = CollectorRegistry()
    reconciler = MachineReconciler(api, machines, actuator, events, MachineMetrics.of(registry), nodes=nodes,
                                   matching=NodeMachineMatching(machines, nodes) if linked else None)
    return World(api, machines, nodes, actuator, events, registry, reconciler)


# --- checks used by some rows ------------------------------------------------------------------------------------

def _volume_attached(w: World) -> None:
    w.api.seed(VOLUME_ATTACHMENTS, {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
                                    "metadata": {"name": "csi-1"},
                                    "spec": {"attacher": "csi.ovirt.org", "nodeName": NODE,
                                             "source": {"persistentVolumeName": "pv-1"}}})


def _tainted_then_detached(w: World, i: int) -> None:
    """After the first pass the Node has the out-of-service taint and is still there; Kubernetes detaches the
    volume after the second."""
    node = w.api.object(NODES, NODE)
    assert node is not None
    assert [t for t in node["spec"]["taints"] if t["key"] == OUT_OF_SERVICE_TAINT_KEY] == [
        {"key": OUT_OF_SERVICE_TAINT_KEY, "value": "nodeshutdown", "effect": "NoExecute",
         "timeAdded": node["spec"]["taints"][-1]["timeAdded"]}]
    if i == 1:
        w.api.remove(VOLUME_ATTACHMENTS, "csi-1")


def _attachments_listed_once_a_pass(w: World) -> None:
    assert [r for r in w.api.requests if r[1] == "volumeattachments"] == [("GET", "volumeattachments", None)] * 3


def _node_not_read(w: World) -> None:
    """Without VolumeAttachments the Node, read only for its taints, is not read before it is deleted."""
    assert ("GET", "nodes", NODE) not in w.api.requests


def _writes_nothing(w: World) -> None:
    assert w.api.writes() == []


def _provider_id_and_addresses_recorded(w: World) -> None:
    m = w.machine()
    assert m["spec"]["providerID"] == PID
    assert m["status"]["addresses"] == [a.to_dict() for a in ADDRESSES]
    assert m["status"]["providerStatus"] == {"instanceId": VM, "instanceState": "up"}
    assert [e.message for e in w.events.recorded] == [f"Created Machine {NAME}"]


def _invalid_config_counted(w: World) -> None:
    assert w.registry.get_sample_value("mapi_instance_create_failed_total", {
        "name": NAME, "namespace": NS, "reason": "InvalidConfiguration"}) == 1.0
    assert w.events.recorded[0].message == "InvalidConfiguration: template rhcos-tpl has no boot disk"


def _missing_dependency_told(w: World) -> None:
    assert w.events.recorded[0].message == "template rhcos-tpl not found"
    exists = next(c for c in w.machine()["status"]["conditions"] if c["type"] == "InstanceExists")
    assert exists["message"] == "template rhcos-tpl not found" and exists["severity"] == "Warning"


def _deletion_wait_told(w: World) -> None:
    """The Machine says why its deletion waits, in the cloud's words, and that it is retried."""
    exists = next(c for c in w.machine()["status"]["conditions"] if c["type"] == "InstanceExists")
    assert "oVirt engine unreachable: connection refused" in exists["message"], exists
    assert "retried" in exists["message"] and "deletion" in exists["message"], exists
    assert all("oVirt engine unreachable: connection refused" in e.message for e in w.events.recorded), \
        w.events.recorded


def _references_to_the_other_vm_dropped(w: World) -> None:
    m = w.machine()
    assert m["spec"].get("providerID") != OTHER_PID
    assert m["metadata"]["annotations"].get(keys.ANNOTATION_VM_ID) != OTHER_VM
    told = w.events.recorded[0].message
    assert OTHER_VM in told and "worker-9" in told
    exists = next(c for c in m["status"]["conditions"] if c["type"] == "InstanceExists")
    assert exists["message"] == told and exists["severity"] == "Warning"


def _own_writes_wake_nothing(w: World) -> None:
    """The pass writes twice, the finalizer and then Provisioning with the instance's id (the VmId annotation
    comes with providerID when provisioning ends); the events of both are its own echoes, another writer's change
    is not."""
    assert w.api.writes(MACHINES) == [("PATCH", "machines", NAME), ("PATCH", "machines", f"{NAME}/status")]
    machine = w.machine()
    assert keys.ANNOTATION_VM_ID not in machine["metadata"]["annotations"]
    assert w.reconciler.own_writes.is_echo(machine)
    assert not w.reconciler.own_writes.is_echo(machine)  # each echo is dropped once
    w.api.touch(MACHINES, NAME, NS, {"metadata": {"labels": {"team": "infra"}}})
    assert not w.reconciler.own_writes.is_echo(w.machine())


def _one_meta_and_one_status_write(w: World) -> None:
    assert w.api.writes(MACHINES) == [("PATCH", "machines", NAME), ("PATCH", "machines", f"{NAME}/status")]
    _provider_id_and_addresses_recorded(w)


def _one_status_write(w: World) -> None:
    assert w.api.writes(MACHINES) == [("PATCH", "machines", f"{NAME}/status")]


def _start_problem_told(w: World) -> None:
    assert NO_HOST.problem in w.events.recorded[0].message
    running = next(c for c in w.machine()["status"]["conditions"] if c["type"] == "InstanceRunning")
    assert running["message"] == NO_HOST.problem


def _state_unknown(w: World) -> None:
    assert w.machine()["status"]["providerStatus"] == {"instanceId": VM, "instanceState": "Unknown"}


def _drain_told(w: World) -> None:
    assert w.events.recorded[0].message == f"Node {NODE!r} drained"


def _no_vm_id(w: World) -> None:
    assert keys.ANNOTATION_VM_ID not in w.machine()["metadata"]["annotations"]


def _no_instance_recorded(w: World) -> None:
    _no_vm_id(w)
    assert "providerStatus" not in (w.machine().get("status") or {})


def _pdb_named(w: World) -> None:
    assert "PodDisruptionBudget" in w.events.recorded[0].message and "apps/web" in w.events.recorded[0].message
    drained = next(c for c in w.machine()["status"]["conditions"] if c["type"] == "Drained")
    assert "apps/web" in drained["message"]
    assert w.api.object(PODS, "web", "apps")["metadata"].get("deletionTimestamp") is None  # not evicted


def _only_the_evictable_pod_evicted(w: World) -> None:
    assert "waiting for 1 pod(s)" in w.events.recorded[0].message
    assert w.api.object(PODS, "web", "apps")["metadata"].get("deletionTimestamp")
    assert w.api.object(PODS, "fluentd", "logging")["metadata"].get("deletionTimestamp") is None
    assert w.api.object(PODS, "static", "kube-system")["metadata"].get("deletionTimestamp") is None


def _full_deletion_messages(w: World) -> None:
    assert [e.message for e in w.events.recorded][2:] == [f"Node {NODE!r} drained", f"Deleted machine {NAME}"]
    assert w.actuator.calls["delete"] == 2


def _pods_untouched(w: World) -> None:
    assert w.api.object(PODS, "web", "apps")["metadata"].get("deletionTimestamp") is None


def _hook_named(w: World) -> None:
    drainable = next(c for c in w.machine()["status"]["conditions"] if c["type"] == "Drainable")
    assert drainable["message"] == "Drain operation currently blocked by: EtcdQuorum"
    _pods_untouched(w)


def _terminate_hook_named(w: World) -> None:
    terminable = next(c for c in w.machine()["status"]["conditions"] if c["type"] == "Terminable")
    assert terminable["message"] == "Terminate operation currently blocked by: BackupDisks"


def _running_counted_once(w: World) -> None:
    assert w.registry.get_sample_value("mapi_machine_phase_transition_seconds_count", {"phase": "Running"}) == 1.0


def _someone_else_writes(w: World) -> None:
    w.api.freeze_cache(MACHINES)
    w.api.touch(MACHINES, NAME, NS, {"metadata": {"labels": {"team": "infra"}}})


def _deleted_behind_the_cache(w: World) -> None:
    w.api.freeze_cache(MACHINES)
    w.api.remove(MACHINES, NAME, NS)


def _no_status_written(w: World) -> None:
    assert w.api.writes(MACHINES) == [("PATCH", "machines", NAME)]  # the refused finalizer patch only
    assert w.machine()["metadata"]["labels"]["team"] == "infra"


def _lift_pdb_then_kubelet(w: World, after: int) -> None:
    if after == 0:
        w.api.refused_evictions.clear()
    elif after == 1:
        w.api.terminate_pods()


STEADY = machine("Running", node=True, provider_id=PID,
                 annotations={keys.ANNOTATION_VM_ID: VM, keys.ANNOTATION_INSTANCE_STATE: "up"},
                 addresses=[a.to_dict() for a in ADDRESSES],
                 provider_status={"instanceId": VM, "instanceState": "up"},
                 conditions=[cond("Drainable"), cond("InstanceExists"), cond("Terminable")])
DRAINED = [cond("Drained"), cond("Drainable"), cond("InstanceExists"), cond("Terminable")]

ROWS = [
    # --- creation ---------------------------------------------------------------------------------------------
    Row("a new Machine gets the finalizer, its first step, and Provisioning with the instance id in one pass",
        machine(finalizer=False), [Result(requeue_after=7.0)], provision=[CLONING], phase="Provisioning",
        conditions={"InstanceExists": "True"}, provider_status=RECORD_CLONING,
        calls={"provision": 1}, check=_own_writes_wake_nothing),
    Row("never reconciled -> the first step, then Provisioning, InstanceExists=True, the id: one status write",
        machine(), [Result(requeue_after=7.0)], provision=[CLONING],
        phase="Provisioning", conditions={"InstanceExists": "True", "Drainable": "True", "Terminable": "True"},
        provider_status=RECORD_CLONING, calls={"provision": 1}, check=_one_status_write),
    Row("never reconciled, no instance yet -> Provisioning, InstanceExists=False",
        machine(), [Result(requeue_after=1.0)],
        provision=[Progress(done=False, requeue_after=1.0, waiting_for="the next list of the VMs")],
        phase="Provisioning", conditions={"InstanceExists": "False/InstanceNotCreated"}, calls={"provision": 1},
        check=_one_status_write),
    Row("provisioning in progress: requeue as the actuator says, instance id recorded", machine("Provisioning"),
        [Result(requeue_after=7.0)], provision=[CLONING], phase="Provisioning", provider_status=RECORD_CLONING,
        calls={"provision": 1}, check=_one_status_write),
    Row("instance runs, no Node yet -> Provisioned, polled every 30 s", machine("Provisioning"),
        [Result(requeue_after=30.0)], provision=[STARTED], status=[UP],
        phase="Provisioned", conditions={"InstanceExists": "True"},
        annotations={keys.ANNOTATION_VM_ID: VM, keys.ANNOTATION_INSTANCE_STATE: "up"},
        events=[("Normal", "Created")], calls={"provision": 1, "status": 1},
        check=_provider_id_and_addresses_recorded),
    Row("a passing state of the instance while provisioning is not written: its id is already recorded",
        machine("Provisioning",
                annotations={keys.ANNOTATION_VM_ID: VM, keys.ANNOTATION_INSTANCE_STATE: "image_locked"}),
        [Result(requeue_after=1.0)],
        provision=[Progress(done=False, requeue_after=1.0, instance_id=VM, instance_state="wait_for_launch")],
        phase="Provisioning", annotations={keys.ANNOTATION_VM_ID: VM, keys.ANNOTATION_INSTANCE_STATE: "image_locked"},
        calls={"provision": 1}, check=_writes_nothing),
    Row("a passing state while provisioning is not written: its id is already recorded in the status",
        machine("Provisioning", provider_status=RECORD_CLONING), [Result(requeue_after=1.0)],
        provision=[Progress(done=False, requeue_after=1.0, instance_id=VM, instance_state="wait_for_launch")],
        phase="Provisioning", provider_status=RECORD_CLONING, calls={"provision": 1}, check=_writes_nothing),
    Row("the instance runs: its state and providerID in one metadata write, Provisioned in one status write",
        machine("Provisioning", annotations={keys.ANNOTATION_VM_ID: VM, keys.ANNOTATION_INSTANCE_STATE: "down"}),
        [Result(requeue_after=30.0)], provision=[STARTED], status=[UP], phase="Provisioned",
        annotations={keys.ANNOTATION_VM_ID: VM, keys.ANNOTATION_INSTANCE_STATE: "up"},
        events=[("Normal", "Created")], calls={"provision": 1, "status": 1}, check=_one_meta_and_one_status_write),
    Row("instance runs and the Node is linked -> Running", machine("Provisioning", node=True), [None],
        provision=[STARTED], status=[UP], phase="Running", conditions={"InstanceExists": "True"},
        events=[("Normal", "Created")], calls={"provision": 1, "status": 1}),
    Row("Provisioned with no guest IP yet: looked at again in 5 s", machine("Provisioned"),
        [Result(requeue_after=5.0)], status=[NO_IP_YET], phase="Provisioned", calls={"status": 1}),
    Row("Provisioned Machine whose Node MAO's nodelink linked -> Running", machine("Provisioned", node=True), [None],
        status=[UP], phase="Running", calls={"status": 1}, check=_running_counted_once),
    Row("steady Running Machine: one status look, no write", STEADY, [None], status=[UP], phase="Running",
        calls={"status": 1}, check=_writes_nothing),
    # --- the only road to Failed --------------------------------------------------------------------------------
    Row("InvalidMachineConfiguration -> Failed/InvalidConfiguration, and no second try", machine("Provisioning"),
        [None, None], provision=[InvalidMachineConfiguration("template rhcos-tpl has no boot disk")],
        phase="Failed", error_reason="InvalidConfiguration", error_message="template rhcos-tpl has no boot disk",
        annotations={keys.ANNOTATION_INSTANCE_STATE: "Unknown"}, events=[("Warning", "FailedCreate")],
        calls={"provision": 1}, check=_invalid_config_counted),
    Row("no spec.providerSpec.value -> Failed naming the field, cloud never asked", machine(value=None), [None],
        phase="Failed", error_reason="InvalidConfiguration", error_message="spec.providerSpec.value",
        annotations={keys.ANNOTATION_INSTANCE_STATE: "Unknown"}, events=[("Warning", "FailedValidate")]),
    Row("no cluster label -> Failed naming the label, cloud never asked", machine("Provisioning", cluster=False),
        [None], phase="Failed", error_reason="InvalidConfiguration",
        error_message=f"metadata.labels[{keys.LABEL_CLUSTER}]", events=[("Warning", "FailedValidate")]),
    Row("a Failed Machine is left alone", machine("Failed", error_reason="InvalidConfiguration"), [None],
        phase="Failed", error_reason="InvalidConfiguration", error_message="earlier failure", check=_writes_nothing),
    # --- faults that are retried, never Failed --------------------------------------------------------------------
    Row("MissingDependency -> Warning event, InstanceExists=False, retried", machine("Provisioning"),
        [MissingDependency], provision=[MissingDependency("template rhcos-tpl not found")],
        phase="Provisioning", conditions={"InstanceExists": "False/InstanceNotCreated"},
        events=[("Warning", "FailedCreate")], calls={"provision": 1}, check=_missing_dependency_told),
    Row("ActuatorError -> retried without an event, not Failed", machine("Provisioning"), [ActuatorError],
        provision=[ActuatorError("engine unreachable")], phase="Provisioning",
        conditions={"InstanceExists": "False/InstanceNotCreated"}, calls={"provision": 1}),
    Row("ActuatorError three times -> still Provisioning", machine("Provisioning"),
        [ActuatorError, ActuatorError, ActuatorError], provision=[ActuatorError("engine unreachable")],
        phase="Provisioning", calls={"provision": 3}),
    Row("the engine refuses to start the VM -> FailedStart, InstanceRunning=False, not Failed",
        machine("Provisioning"), [Result(requeue_after=30.0)], provision=[NO_HOST], phase="Provisioning",
        conditions={"InstanceRunning": "False/StartRefused"}, events=[("Warning", "FailedStart")],
        provider_status={"instanceId": VM, "instanceState": "down"},
        calls={"provision": 1}, check=_start_problem_told),
    Row("a refused start that later succeeds turns InstanceRunning True", machine("Provisioning"),
        [Result(requeue_after=30.0), Result(requeue_after=30.0)], provision=[NO_HOST, STARTED], status=[UP],
        phase="Provisioned", conditions={"InstanceRunning": "True", "InstanceExists": "True"},
        events=[("Warning", "FailedStart"), ("Normal", "Created")], calls={"provision": 2, "status": 1}),
    Row("status lookup fails -> InstanceExists Unknown, phase kept, retried", STEADY, [ActuatorError],
        status=[ActuatorError("engine timeout")], phase="Running",
        conditions={"InstanceExists": "Unknown/ErrorCheckingProvider"}, calls={"status": 1}),
    Row("the instance of a Running Machine vanished -> Failed", STEADY, [None], status=[None],
        phase="Failed", error_reason=None, error_message="Can't find created instance.",
        conditions={"InstanceExists": "False/InstanceMissing"},
        annotations={keys.ANNOTATION_INSTANCE_STATE: "Unknown"}, calls={"status": 1}, check=_state_unknown),
    Row("a Provisioned Machine that never had an instance goes back to Provisioning", machine("Provisioned"),
        [Result(requeue=True)], status=[None], phase="Provisioning", calls={"status": 1}),
    # --- an instance that is not the Machine's (docs/architecture.md#acting-only-on-what-is-ours) ---------------
    Row("a copied Machine naming another's VM -> told, references dropped, then its own VM",
        machine(annotations=COPIED, provider_id=OTHER_PID), [Result(requeue=True), Result(requeue_after=7.0)],
        provision=[not_owned(), CLONING], phase="Provisioning",
        conditions={"InstanceExists": "False/InstanceNotOwned"}, provider_status=RECORD_CLONING,
        events=[("Warning", "InstanceNotOwned")], calls={"provision": 2}, check=_references_to_the_other_vm_dropped),
    Row("a Running Machine whose references name another's VM -> told, references dropped, phase kept",
        machine("Running", node=True, provider_id=OTHER_PID, annotations=COPIED), [Result(requeue=True)],
        status=[not_owned()], phase="Running", conditions={"InstanceExists": "False/InstanceNotOwned"},
        events=[("Warning", "InstanceNotOwned")], calls={"status": 1}, check=_references_to_the_other_vm_dropped),
    Row("deleting a copied Machine leaves the other's VM and ends with nothing of its own",
        machine("Deleting", deleting=True, annotations=COPIED, provider_id=OTHER_PID),
        [Result(requeue=True), None], delete=[not_owned(), GONE_FROM_CLOUD], phase=GONE,
        events=[("Warning", "InstanceNotOwned"), ("Normal", "Deleted")], calls={"delete": 2}),
    # --- deletion ---------------------------------------------------------------------------------------------
    Row("deletion: the instance's state is unknown -> InstanceRunning Unknown, retried with the queue's backoff",
        machine("Deleting", deleting=True, node=True, conditions=DRAINED), [Result(requeue=True)],
        node=node_obj(True), delete=[UNREACHABLE], phase="Deleting",
        conditions={"InstanceRunning": "Unknown/InstanceStateUnknown", "Drained": "True"},
        annotations={keys.ANNOTATION_INSTANCE_STATE: "unknown"}, events=[("Warning", "InstanceStateUnknown")],
        node_after="cordoned", calls={"delete": 1}),
    Row("deletion: Deleting, Node cordoned, a PodDisruptionBudget refuses -> Drained=False, retry in 20 s",
        machine("Running", deleting=True, node=True), [Result(requeue_after=20.0)],
        node=node_obj(), pods=[pod("web")], refuse_eviction=("apps/web",),
        phase="Deleting", conditions={"Drained": "False/DrainError"}, events=[("Warning", "DrainRequeued")],
        node_after="cordoned", evictions=[], check=_pdb_named),
    Row("deletion: pods evicted, daemonset and mirror pods left, waiting for them to go",
        machine("Deleting", deleting=True, node=True), [Result(requeue_after=5.0)], node=node_obj(),
        pods=[pod("web"), pod("fluentd", "logging", daemonset=True), pod("static", "kube-system", mirror=True)],
        phase="Deleting", conditions={"Drained": "False/DrainError"}, events=[("Warning", "DrainRequeued")],
        node_after="cordoned", evictions=["apps/web"], check=_only_the_evictable_pod_evicted),
    Row("deletion: a finished drain is told once, as a Normal event",
        machine("Deleting", deleting=True, node=True), [Result(requeue_after=5.0), Result(requeue_after=5.0)],
        node=node_obj(), delete=[POWERING_DOWN], phase="Deleting", conditions={"Drained": "True"},
        events=[("Normal", "Deleted")], node_after="cordoned", calls={"delete": 2},
        check=_drain_told),
    Row("deletion: drained, instance powering down -> requeue, State column follows",
        machine("Deleting", deleting=True, node=True, conditions=DRAINED), [Result(requeue_after=5.0)],
        node=node_obj(), delete=[POWERING_DOWN], phase="Deleting", conditions={"Drained": "True"},
        annotations={keys.ANNOTATION_INSTANCE_STATE: "powering_down"}, node_after="cordoned", calls={"delete": 1}),
    Row("deletion of a Running Machine whose Node drains at once: one status write, the stopping VM's state not "
        "written",
        machine("Running", deleting=True, node=True, annotations={keys.ANNOTATION_VM_ID: VM,
                                                                  keys.ANNOTATION_INSTANCE_STATE: "up"}),
        [Result(requeue_after=5.0)], node=node_obj(), delete=[POWERING_DOWN], phase="Deleting",
        conditions={"Drained": "True"}, annotations={keys.ANNOTATION_INSTANCE_STATE: "up"},
        events=[("Normal", "Deleted")], node_after="cordoned", calls={"delete": 1}, check=_one_status_write),
    Row("deletion: instance gone -> Node deleted, finalizer removed, Machine gone",
        machine("Deleting", deleting=True, node=True, conditions=DRAINED), [None], node=node_obj(True),
        delete=[GONE_FROM_CLOUD], phase=GONE, events=[("Normal", "Deleted")], node_after="gone",
        calls={"delete": 1}, check=_node_not_read),
    Row("deletion start to end: PDB, eviction, kubelet, instance delete, Node, finalizer",
        machine("Running", deleting=True, node=True), [Result(requeue_after=20.0), Result(requeue_after=5.0),
                                                       Result(requeue_after=5.0), None],
        node=node_obj(), pods=[pod("web")], refuse_eviction=("apps/web",), between=_lift_pdb_then_kubelet,
        delete=[POWERING_DOWN, GONE_FROM_CLOUD], phase=GONE,
        events=[("Warning", "DrainRequeued"), ("Warning", "DrainRequeued"), ("Normal", "Deleted"),
                ("Normal", "Deleted")],
        node_after="gone", evictions=["apps/web"], calls={"delete": 2}, check=_full_deletion_messages),
    Row("deletion: instance gone, the Node still has a volume attached -> out-of-service taint, Node kept until the "
        "attachment is gone, then deleted",
        machine("Deleting", deleting=True, node=True, conditions=DRAINED), [Result(requeue_after=2.0),
                                                                           Result(requeue_after=2.0), None],
        node=node_obj(True), delete=[GONE_FROM_CLOUD] * 3, setup=_volume_attached, between=_tainted_then_detached,
        phase=GONE, events=[("Normal", "ReleasingStorage"), ("Normal", "Deleted")], node_after="gone",
        calls={"delete": 3}, check=_attachments_listed_once_a_pass),
    Row("deletion: a Node already gone counts as drained",
        machine("Deleting", deleting=True, node=True, conditions=DRAINED), [None], delete=[GONE_FROM_CLOUD],
        phase=GONE, events=[("Normal", "Deleted")], node_after="gone", calls={"delete": 1}),
    Row("deletion: exclude-node-draining skips the drain",
        machine("Running", deleting=True, node=True, annotations={keys.ANNOTATION_EXCLUDE_NODE_DRAINING: ""}),
        [Result(requeue_after=5.0)], node=node_obj(), pods=[pod("web")], delete=[POWERING_DOWN],
        phase="Deleting", no_conditions=("Drained",), node_after="schedulable", evictions=[], calls={"delete": 1},
        check=_pods_untouched),
    Row("deletion: a preDrain hook blocks the drain and the instance delete",
        machine("Running", deleting=True, node=True, pre_drain=True), [None], node=node_obj(), pods=[pod("web")],
        phase="Deleting", conditions={"Drainable": "False/HookPresent", "Terminable": "True"},
        no_conditions=("Drained",), node_after="schedulable", evictions=[], check=_hook_named),
    Row("deletion: a preTerminate hook lets the drain happen and blocks the instance delete",
        machine("Running", deleting=True, node=True, pre_terminate=True), [Result(requeue_after=5.0)],
        node=node_obj(), pods=[pod("web")], phase="Deleting",
        conditions={"Drained": "False/DrainError", "Terminable": "False/HookPresent", "Drainable": "True"},
        events=[("Warning", "DrainRequeued")], node_after="cordoned", evictions=["apps/web"]),
    Row("deletion: a drained Machine with a preTerminate hook keeps its instance",
        machine("Deleting", deleting=True, node=True, pre_terminate=True, conditions=DRAINED), [None],
        node=node_obj(True), phase="Deleting", conditions={"Drained": "True", "Terminable": "False/HookPresent"},
        node_after="cordoned", check=_terminate_hook_named),
    Row("deletion: the cloud cannot be asked -> told (InstanceExists Unknown, FailedDelete), retried with the "
        "queue's backoff, finalizer and Node kept",
        machine("Deleting", deleting=True, node=True, conditions=DRAINED), [ActuatorError, ActuatorError],
        node=node_obj(True), delete=[ActuatorError("oVirt engine unreachable: connection refused")],
        phase="Deleting", conditions={"InstanceExists": "Unknown/ErrorCheckingProvider", "Drained": "True"},
        events=[("Warning", "FailedDelete"), ("Warning", "FailedDelete")], node_after="cordoned",
        calls={"delete": 2}, check=_deletion_wait_told),
    Row("deletion of a Machine that never had an instance, the cloud unreachable, then answering -> told, then gone",
        machine("Failed", deleting=True, error_reason="InvalidConfiguration"), [ActuatorError, None],
        delete=[ActuatorError("oVirt engine unreachable: connection refused"), GONE_FROM_CLOUD], phase=GONE,
        events=[("Warning", "FailedDelete"), ("Normal", "Deleted")], calls={"delete": 2}),
    Row("deletion: the Node delete fails -> retried, finalizer kept",
        machine("Deleting", deleting=True, node=True, conditions=DRAINED), [Exception], node=node_obj(True),
        delete=[GONE_FROM_CLOUD], setup=lambda w: w.api.fail("DELETE", NODES, 500), phase="Deleting",
        node_after="cordoned", calls={"delete": 1}),
    Row("deletion of a Machine without our finalizer: phase only",
        machine("Running", deleting=True, finalizer=False, other_finalizers=("example.com/keep",)),
        [None], phase="Deleting", finalizer=False),
    # --- races with other writers -------------------------------------------------------------------------------
    Row("409 on the finalizer write (the cache is behind) -> requeue, no error", machine(finalizer=False),
        [Result(requeue_after=0.5)], setup=_someone_else_writes, phase=None, finalizer=False,
        check=_no_status_written),
    Row("409 on recording the instance id -> requeue, no error", machine("Provisioning"),
        [Result(requeue_after=0.5)], provision=[CLONING], setup=_someone_else_writes, phase="Provisioning",
        calls={"provision": 1}, check=_no_instance_recorded),
    Row("404 on the status write (Machine deleted, cache stale) -> returns quietly", machine(), [None],
        provision=[CLONING], setup=_deleted_behind_the_cache, phase=GONE, calls={"provision": 1}),
    Row("404 on recording the instance id -> returns quietly", machine("Provisioning"), [None],
        provision=[CLONING], setup=_deleted_behind_the_cache, phase=GONE, calls={"provision": 1}),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_machine_reconciler(row: Row) -> None:
    w = world(row)
    if row.setup:
        row.setup(w)
    for i, expected in enumerate(row.results):
        if isinstance(expected, type) and issubclass(expected, BaseException):
            with pytest.raises(expected):
                settle(w.reconciler.reconcile, KEY)
        else:
            assert settle(w.reconciler.reconcile, KEY) == expected, f"pass {i}"
        if row.between and i < len(row.results) - 1:
            row.between(w, i)

    m = w.machine()
    if row.phase == GONE:
        assert m is None, f"the Machine still exists: {m}"
    else:
        assert m is not None
        status = m.get("status") or {}
        assert status.get("phase") == row.phase
        assert status.get("errorReason") == row.error_reason
        if row.error_message:
            assert row.error_message in status.get("errorMessage", "")
        else:
            assert status.get("errorMessage") is None
        got = {c["type"]: c for c in status.get("conditions") or []}
        for ctype, want in row.conditions.items():
            assert ctype in got, f"no {ctype} condition: {sorted(got)}"
            have = got[ctype]["status"] + (f"/{got[ctype]['reason']}" if "/" in want else "")
            assert have == want, ctype
        for ctype in row.no_conditions:
            assert ctype not in got
        annotations = m["metadata"].get("annotations") or {}
        for k, v in row.annotations.items():
            assert annotations.get(k) == v, k
        if row.provider_status is not None:
            assert status.get("providerStatus") == row.provider_status
        assert (keys.MACHINE_FINALIZER in (m["metadata"].get("finalizers") or [])) == row.finalizer
    assert w.events.reasons() == row.events
    assert all(e.involved == f"Machine {KEY}" for e in w.events.recorded)
    assert {k: v for k, v in w.actuator.calls.items() if v} == row.calls
    if row.node_after == "gone":
        assert w.api.object(NODES, NODE) is None
    elif row.node_after is not None:
        node = w.api.object(NODES, NODE)
        assert node is not None
        assert bool(node["spec"].get("unschedulable")) == (row.node_after == "cordoned")
    if row.evictions is not None:
        assert w.api.evictions == row.evictions
    if row.check:
        row.check(w)


def test_the_reconciler_leaves_the_informer_cache_as_it_found_it() -> None:
    """The Store hands out its own dicts, to be treated as read-only: other controllers read them concurrently,
    and the informer diffs the cached object against the next watch event. A reconcile that writes to the
    Machine must not change the cached object in place."""
    row = Row("cache", machine("Provisioning"), [], provision=[STARTED], status=[UP])
    w = world(row)
    w.api.freeze_cache(MACHINES)  # the cache sees no write, so only the reconciler could change its object
    before = copy.deepcopy(w.machines.get(KEY))
    settle(w.reconciler.reconcile, KEY)
    assert w.machine()["status"]["phase"] == "Provisioned"  # it did write
    assert w.machines.get(KEY) == before


def test_after_nodelink_wrote_running_with_the_node_ref_the_machine_controller_writes_nothing() -> None:
    """Standalone, our nodelink writes Running with the nodeRef (docs/compatibility.md#nodelink): the Machine
    controller's next pass finds the status it would write (conditions, addresses, providerStatus) and writes
    nothing, and the Machine reaching Running is counted once."""
    row = Row("fold", machine("Provisioning"), [], provision=[STARTED], status=[UP, UP], node=node_obj())
    w = world(row)
    assert settle(w.reconciler.reconcile, KEY) == Result(requeue_after=30.0)
    assert w.machine()["status"]["phase"] == "Provisioned"
    nodelink = NodeLinkReconciler(w.api, w.nodes, NodeMachineMatching(w.machines, w.nodes),
                                  MachineMetrics.of(w.registry))
    assert nodelink.reconcile_quietly(NODE) is None
    assert w.machine()["status"]["phase"] == "Running"
    writes = len(w.api.writes(MACHINES))
    assert settle(w.reconciler.reconcile, KEY) is None
    assert len(w.api.writes(MACHINES)) == writes
    _running_counted_once(w)


def _linked(row: Row) -> tuple[World, NodeLinkReconciler]:
    """The Machine controller with this project's nodelink in the same process, as app.build wires them."""
    w = world(row, linked=True)
    nodelink = NodeLinkReconciler(w.api, w.nodes, NodeMachineMatching(w.machines, w.nodes),
                                  MachineMetrics.of(w.registry))
    return w, nodelink


def _status_writes(w: World) -> list:
    return [r for r in w.api.writes(MACHINES) if r[2] == f"{NAME}/status"]


@pytest.mark.parametrize("registered", [node_obj(), {**node_obj(), "spec": {}}], ids=["by-provider-id", "by-ip"])
def test_a_machine_whose_node_registered_first_ends_its_provisioning_running_with_its_node_ref(registered) -> None:
    """On the simulator the guest registers its Node before the Machine controller sees the VM up: the status write
    that ends the provisioning carries the nodeRef and Running, instead of Provisioned and then nodelink's Running
    (docs/compatibility.md#nodelink); nodelink, woken by it, has only the Node's part to write."""
    w, nodelink = _linked(Row("linked", machine("Provisioning"), [], provision=[STARTED], status=[UP],
                              node=registered))
    assert settle(w.reconciler.reconcile, KEY) is None
    status = w.machine()["status"]
    assert status["phase"] == "Running" and status["nodeRef"] == {"kind": "Node", "name": NODE, "uid": "node-uid"}
    assert len(_status_writes(w)) == 1
    _running_counted_once(w)
    assert w.registry.get_sample_value("mapi_machine_phase_transition_seconds_count", {"phase": "Provisioned"}) is None
    writes = len(w.api.writes(MACHINES))
    assert nodelink.reconcile_quietly(NODE) is None
    assert len(w.api.writes(MACHINES)) == writes  # linked already: nothing to rewrite before a Ready flip
    assert w.api.object(NODES, NODE)["metadata"]["annotations"][keys.ANNOTATION_NODE_MACHINE] == KEY
    # A Ready flip is still written, so the Machine controller looks at its instance again.
    w.api.touch(NODES, NODE, change={"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}})
    assert nodelink.reconcile_quietly(NODE) is None
    assert len(w.api.writes(MACHINES)) == writes + 1


def _other_machine_with_the_address(w: World) -> None:
    other = machine("Running", addresses=[{"type": "InternalIP", "address": "10.0.0.5"}])
    other["metadata"]["name"] = "worker-9"
    w.api.seed(MACHINES, other)


@pytest.mark.parametrize("setup", [
    lambda w: None,  # no Node yet: a kubelet registers minutes after the VM is up on real hosts
    _other_machine_with_the_address,  # nodelink would not link that Node to this Machine
], ids=["no-node", "another-machine-matches-it"])
def test_without_the_one_node_nodelink_would_link_the_provisioning_ends_provisioned(setup) -> None:
    row = Row("unlinked", machine("Provisioning"), [], provision=[STARTED], status=[UP],
              node=None if setup.__name__ == "<lambda>" else node_obj())
    w, _ = _linked(row)
    setup(w)
    assert settle(w.reconciler.reconcile, KEY) == Result(requeue_after=30.0)
    assert w.machine()["status"]["phase"] == "Provisioned" and "nodeRef" not in w.machine()["status"]


def test_a_node_of_another_name_with_the_machines_provider_id_is_not_its_node() -> None:
    """A copied Node manifest, renamed, carries the Machine's providerID: the name is the proof, the providerID a hint
    (docs/architecture.md#acting-only-on-what-is-ours). The provisioning ends Provisioned beside that Node, nodelink
    neither links nor writes to it, and the Node of the Machine's name is linked when it registers, the copy still
    there."""
    copy = {**node_obj(), "metadata": {"name": "copy", "uid": "copy-uid"}}
    w, nodelink = _linked(Row("copy", machine("Provisioning"), [], provision=[STARTED], status=[UP], node=copy))
    assert settle(w.reconciler.reconcile, KEY) == Result(requeue_after=30.0)
    assert w.machine()["status"]["phase"] == "Provisioned" and "nodeRef" not in w.machine()["status"]
    assert nodelink.reconcile_quietly("copy") is None
    assert "nodeRef" not in w.machine()["status"] and w.api.writes(NODES) == []
    w.api.seed(NODES, node_obj())
    assert nodelink.reconcile_quietly(NODE) is None
    status = w.machine()["status"]
    assert status["phase"] == "Running" and status["nodeRef"] == {"kind": "Node", "name": NODE, "uid": "node-uid"}
    assert nodelink.reconcile_quietly("copy") is None
    assert w.machine()["status"]["nodeRef"]["name"] == NODE
    assert not w.api.object(NODES, "copy")["metadata"].get("annotations")


def test_a_finished_drain_is_not_done_again_while_the_vm_goes_but_a_restarted_controller_drains_again() -> None:
    """The passes that stop and remove the VM do not read the Node and its pods again once this process drained
    it in this deletion; a controller that restarted does not know that, and drains again."""
    row = Row("drain once", machine("Running", deleting=True, node=True), [], node=node_obj(),
              delete=[POWERING_DOWN])
    w = world(row)

    def node_and_pod_requests() -> list:
        return [r for r in w.api.requests if r[1] in ("nodes", "pods")]

    assert settle(w.reconciler.reconcile, KEY) == Result(requeue_after=5.0)
    drained = node_and_pod_requests()
    # The Node is read from the informer's cache, as MAO's drain reads it; it is cordoned, and its pods listed.
    assert drained == [("PATCH", "nodes", NODE), ("GET", "pods", None)]
    assert settle(w.reconciler.reconcile, KEY) == Result(requeue_after=5.0)
    assert settle(w.reconciler.reconcile, KEY) == Result(requeue_after=5.0)
    assert node_and_pod_requests() == drained
    assert w.actuator.calls["delete"] == 3
    # Restarted, here without a Node cache: the Node is asked of the API server.
    restarted = MachineReconciler(w.api, w.machines, w.actuator, w.events, MachineMetrics(CollectorRegistry()))
    assert restarted.reconcile(KEY) == Result(requeue_after=5.0)
    assert len(node_and_pod_requests()) > len(drained) and ("GET", "nodes", NODE) in node_and_pod_requests()[
        len(drained):]
    assert w.events.reasons() == [("Normal", "Deleted")]  # the drain is told once


def test_a_pass_reading_a_cache_without_the_last_status_write_neither_writes_nor_tells_it_again() -> None:
    """Two passes may follow each other before the watch brings the first one's status write (a wake by the VM
    list, another writer's event): the second sees the Machine still Provisioning. Its write is guarded by the
    resourceVersion it read, so it meets 409 and looks again, instead of writing Provisioned, counting it and telling
    `Created` a second time."""
    recorded = {keys.ANNOTATION_VM_ID: VM, keys.ANNOTATION_INSTANCE_STATE: "up"}  # no metadata write is due
    row = Row("stale", machine("Provisioning", provider_id=PID, annotations=recorded), [],
              provision=[STARTED, STARTED], status=[UP, UP])
    w = world(row)
    w.api.freeze_cache(MACHINES)  # the watch brings nothing in between
    assert settle(w.reconciler.reconcile, KEY) == Result(requeue_after=30.0)
    assert w.machine()["status"]["phase"] == "Provisioned"
    version = w.machine()["metadata"]["resourceVersion"]
    # 409: looked at again with the newer Machine.
    assert settle(w.reconciler.reconcile, KEY) == Result(requeue_after=0.5)
    assert w.machine()["metadata"]["resourceVersion"] == version  # nothing written
    assert [e.reason for e in w.events.recorded] == ["Created"]
    assert w.registry.get_sample_value("mapi_machine_phase_transition_seconds_count", {"phase": "Provisioned"}) == 1.0


class _Queue:
    def __init__(self) -> None:
        self.keys: list[str] = []

    def add(self, key: str) -> None:
        self.keys.append(key)


def _running_with_its_node() -> dict:
    return machine("Running", node=True, provider_id=PID, addresses=[a.to_dict() for a in ADDRESSES],
                   annotations={keys.ANNOTATION_VM_ID: VM, keys.ANNOTATION_INSTANCE_STATE: "up"},
                   provider_status=UP.provider_status)


def _not_ready(node: dict, status: str = "Unknown") -> dict:
    changed = copy.deepcopy(node)
    changed["status"]["conditions"] = [{"type": "Ready", "status": status}]
    return changed


def test_a_machine_whose_node_is_deleted_looks_at_its_instance_afresh_and_fails_when_it_is_gone() -> None:
    """The node controller deletes the Node of a removed VM at once, before nodelink could rewrite the Machine at
    the Node's Ready flip: the Machine is woken by the Node's deletion itself, and its pass asks the provider what
    is there now rather than what a list from before the removal said (docs/compatibility.md#machine-phases)."""
    w = world(Row("node deleted", _running_with_its_node(), [], node=node_obj(), status=[None]))
    queue = _Queue()
    handler = node_lost_handler(w.machines, w.reconciler, queue)
    handler.on_delete(node_obj())
    assert queue.keys == [KEY]
    assert settle(w.reconciler.reconcile, KEY) is None
    assert w.actuator.calls == {"status": 1, "status fresh": 1}
    status = w.machine()["status"]
    assert status["phase"] == "Failed" and status["errorMessage"] == "Can't find created instance."


def test_only_a_node_leaving_ready_or_gone_wakes_its_machine_and_only_its_next_pass_looks_afresh() -> None:
    w = world(Row("node flips", _running_with_its_node(), [], node=node_obj(), status=[UP]))
    queue = _Queue()
    handler = node_lost_handler(w.machines, w.reconciler, queue)
    ready, new = node_obj(), _not_ready(node_obj(), "False")
    handler.on_update(_not_ready(ready, "Unknown"), ready)  # becoming Ready says nothing is lost
    handler.on_update(ready, copy.deepcopy(ready))  # a heartbeat
    other = node_obj()
    other["spec"]["providerID"] = OTHER_PID
    handler.on_delete(other)  # another Machine's Node (none here)
    handler.on_delete({"metadata": {"name": "no-provider-id"}, "spec": {}})
    assert queue.keys == []
    handler.on_update(ready, new)
    assert queue.keys == [KEY]
    assert settle(w.reconciler.reconcile, KEY) is None
    assert settle(w.reconciler.reconcile, KEY) is None
    assert w.actuator.calls == {"status": 2, "status fresh": 1}
    assert w.machine()["status"]["phase"] == "Running"


def test_a_machine_being_deleted_is_not_woken_by_the_node_its_deletion_removes() -> None:
    w = world(Row("deleting", machine("Deleting", deleting=True, node=True, provider_id=PID), [], node=node_obj()))
    queue = _Queue()
    node_lost_handler(w.machines, w.reconciler, queue).on_delete(node_obj())
    assert queue.keys == []


def test_a_node_the_cache_still_has_but_the_api_server_no_longer_has_counts_as_drained() -> None:
    from machine_controller.controllers.machine.drain import Drainer

    cache = Store()
    cache.put(node_obj())
    progress = Drainer(FakeApi(), cache).drain(NODE)  # the cordon meets 404: the Node was deleted meanwhile
    assert (progress.done, progress.message) == (True, "node already gone")


def test_a_machine_gone_before_its_deletion_was_seen_through_is_forgotten_by_the_provider() -> None:
    """A Machine whose finalizer is removed by hand disappears mid-deletion: the provider drops what it remembers
    of it (when its deletion began, its VM's history), so a Machine created again under its name starts afresh."""
    w = world(Row("gone", machine("Running", provider_id=PID), []))
    w.api.remove(MACHINES, NAME, NS)
    assert settle(w.reconciler.reconcile, KEY) is None
    assert ("forget", KEY) in w.actuator.seen
    assert w.api.writes() == []
