"""The MachineSet controller, and the capacity controller beside it as `--controllers=*` runs them, against a real
API server (docs/compatibility.md#machinesets, docs/compatibility.md#autoscaler).

The reconcilers run in-process with their informers, without the Machine controller and without oVirt: Machines
never get a VM or a finalizer here. Readiness is simulated the way a kubelet and nodelink would leave it: Node
objects with a Ready condition, and `status.nodeRef` patched onto Machines.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import json
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml
from kubernetes.client.exceptions import ApiException
from prometheus_client import CollectorRegistry, generate_latest

import machines
from api import keys
from api.meta import format_time, now, parse_time
from machine_controller.controllers.machineset.capacity_controller import (
    CAPACITY_FIELD_MANAGER,
    MachineSetCapacityReconciler,
    add_machineset_capacity_controller,
)
from machine_controller.controllers.machineset.failures import template_hash
from machine_controller.controllers.machineset.reconciler import add_machineset_controller
from machine_controller.controllers.mao_metrics import MaoCollector
from machine_controller.controllers.resources import MACHINES, MACHINESETS, NODES
from machine_controller.runtime.events import EventRecorder
from machine_controller.runtime.informer import Informer, Store
from machine_controller.runtime.kube import ErrorKind, Rest, classify
from machine_controller.runtime.manager import Manager
from machine_controller.runtime.ratelimit import controller_rate_limiter
from machine_controller.runtime.workqueue import WorkQueue
from machines import unique_name
from test_machinehealthcheck import _machines, _machineset, _mhc, _running
from test_remediation import _events, _wait

REPO = Path(__file__).resolve().parents[2]
SAMPLE = yaml.safe_load((REPO / "config" / "samples" / "machineset.yaml").read_text())
CONVERGE_S = 60.0


def wait_for(what: str, probe: Callable[[], Any], timeout: float = CONVERGE_S) -> Any:
    return machines.wait_for(what, probe, timeout)


class Harness:
    """The controller under test plus the user's view of the cluster (kubectl)."""

    def __init__(self, cluster, namespace: str, rest: Rest, events: EventRecorder, registry: CollectorRegistry):
        self.cluster = cluster
        self.ns = namespace
        self.rest = rest
        self.events = events
        self.registry = registry
        self.created_nodes: list[str] = []

    def kubectl(self, *args: str, **kw) -> str:
        return self.cluster.kubectl(*args, "-n", self.ns, **kw).stdout

    def get(self, kind: str, name: str, *extra: str) -> dict:
        return json.loads(self.kubectl("get", kind, name, "-o", "json", *extra))

    def apply(self, doc: dict) -> None:
        self.cluster.kubectl("apply", "-f", "-", input=json.dumps(doc))

    def machines(self, include_deleting: bool = False, of: str | None = None) -> list[dict]:
        """Machines of the namespace, oldest first; `of`: only those labelled for that MachineSet."""
        selector = [f"--selector={keys.LABEL_MACHINESET}={of}"] if of else []
        items = json.loads(self.kubectl("get", "machines", "-o", "json", *selector))["items"]
        if not include_deleting:
            items = [m for m in items if not m["metadata"].get("deletionTimestamp")]
        return sorted(items, key=lambda m: m["metadata"]["creationTimestamp"] + m["metadata"]["name"])

    def names(self) -> list[str]:
        return [m["metadata"]["name"] for m in self.machines()]

    def scale(self, name: str, replicas: int) -> None:
        self.kubectl("scale", "machineset", name, f"--replicas={replicas}")

    def converged(self, name: str, replicas: int) -> list[dict]:
        """Wait until exactly `replicas` Machines exist and the status says so for the current generation."""
        def done():
            ms = self.get("machineset", name)
            status = ms.get("status") or {}
            machines = self.machines(of=name)
            ok = (len(machines) == replicas and status.get("replicas", 0) == replicas
                  and status.get("observedGeneration") == ms["metadata"]["generation"])
            return (machines,) if ok else None
        (machines,) = wait_for(f"{name} at {replicas} replicas", done)
        return machines

    def events_for(self, name: str, reason: str) -> list[dict]:
        self.events.flush()
        items = json.loads(self.kubectl("get", "events", "-o", "json"))["items"]
        return [e for e in items if e["involvedObject"]["name"] == name and e["reason"] == reason]

    def patch_machine_status(self, name: str, status: dict) -> None:
        self.rest.merge_patch(MACHINES, name, {"status": status}, self.ns, subresource="status")

    def node(self, name: str, ready: str, since: str) -> None:
        """A Node as a kubelet would report it: created, then its Ready condition written through /status."""
        try:
            self.rest.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
            self.created_nodes.append(name)
        except ApiException as e:
            if classify(e) != ErrorKind.ALREADY_EXISTS:  # it exists from an earlier step of the test
                raise
        condition = {"type": "Ready", "status": ready, "reason": "E2E", "message": "set by the test",
                     "lastHeartbeatTime": format_time(now()), "lastTransitionTime": since}
        self.rest.request("PATCH", NODES.path(name=name, subresource="status"),
                          body={"status": {"conditions": [condition]}},
                          content_type="application/strategic-merge-patch+json")


@contextlib.contextmanager
def running_controller(cluster, namespace: str, user: str = "admin",
                       controllers: tuple[str, ...] = ("machineset", "machineset-capacity")) -> Iterator[Harness]:
    """The MachineSet controllers for one namespace, calling the API server as `user`; the Harness acts as admin."""
    cluster.apply_crds()
    api = cluster.api_client(user)
    rest = Rest(api)
    registry = CollectorRegistry()
    manager = Manager(api, registry=registry, health_address=None, metrics_address=None, shutdown_timeout=10)
    machinesets = manager.add_informer(Informer(api, MACHINESETS, namespace=namespace))
    machines = manager.add_informer(Informer(api, MACHINES, namespace=namespace))
    nodes = manager.add_informer(Informer(api, NODES))
    events = EventRecorder(api, "machineset-e2e")
    mao = MaoCollector()
    registry.register(mao)

    def queue(name: str) -> WorkQueue:
        return WorkQueue(name, controller_rate_limiter(base=0.05, cap=2.0), registry=registry)

    if "machineset" in controllers:
        add_machineset_controller(manager, rest, machinesets, machines, nodes, events, queue("machineset"), mao=mao)
    if "machineset-capacity" in controllers:
        add_machineset_capacity_controller(manager, rest, machinesets, events, queue("machineset-capacity"))
    manager.start()
    h = Harness(cluster, namespace, Rest(cluster.api_client()), events, registry)
    try:
        yield h
    finally:
        manager.shutdown()
        events.close()
        for node in h.created_nodes:
            cluster.kubectl("delete", "node", node, "--wait=false", check=False)


@pytest.fixture
def harness(cluster, namespace) -> Iterator[Harness]:
    with running_controller(cluster, namespace) as h:
        yield h


def machineset(namespace: str, name: str = "worker", replicas: int = 0, **spec: Any) -> dict:
    doc = copy.deepcopy(SAMPLE)
    doc["metadata"].update(name=name, namespace=namespace)
    doc["spec"]["replicas"] = replicas
    doc["spec"]["selector"]["matchLabels"][keys.LABEL_MACHINESET] = name
    doc["spec"]["template"]["metadata"]["labels"][keys.LABEL_MACHINESET] = name
    doc["spec"]["template"]["metadata"]["annotations"] = {"e2e.example.com/from-template": "yes"}
    doc["spec"].update(spec)
    return doc


# --- scaling ---------------------------------------------------------------------------------------------------


def test_kubectl_scale_up_down_and_to_zero_converges(harness):
    harness.apply(machineset(harness.ns))
    ms = harness.get("machineset", "worker")

    harness.scale("worker", 3)
    machines = harness.converged("worker", 3)
    for m in machines:
        meta = m["metadata"]
        assert meta["generateName"] == "worker-" and meta["name"].startswith("worker-")
        assert meta["labels"] == SAMPLE["spec"]["template"]["metadata"]["labels"] | {keys.LABEL_MACHINESET: "worker"}
        # The template's annotations, and the template's hash the set tells its Machines' failures apart by.
        assert meta["annotations"] == {"e2e.example.com/from-template": "yes",
                                       keys.ANNOTATION_TEMPLATE_HASH: template_hash(ms)}
        assert meta["ownerReferences"] == [{
            "apiVersion": keys.API_VERSION, "kind": "MachineSet", "name": "worker", "uid": ms["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}]
        assert m["spec"] == ms["spec"]["template"]["spec"]  # verbatim, provider spec included
    # The burst of three creates was not doubled before the informer saw it.
    assert len(harness.events_for("worker", "SuccessfulCreate")) == 3

    status = harness.get("machineset", "worker")["status"]
    assert (status["replicas"], status["fullyLabeledReplicas"]) == (3, 3)
    assert status["labelSelector"] == (
        f"{keys.LABEL_CLUSTER}=ocp-demo-x7k2p,{keys.LABEL_MACHINESET}=worker")
    scale = harness.get("machineset", "worker", "--subresource=scale")
    assert scale["status"] == {"replicas": 3, "selector": status["labelSelector"]}
    # The collector reads the informer cache, which may be a moment behind what kubectl just showed.
    sample = f'mapi_machine_set_status_replicas{{name="worker",namespace="{harness.ns}"}} 3.0'
    metrics = wait_for("replicas metric", lambda: sample in generate_latest(harness.registry).decode())
    assert metrics and "mapi_machineset_items 1.0" in generate_latest(harness.registry).decode()

    harness.scale("worker", 1)
    assert len(harness.converged("worker", 1)) == 1
    harness.scale("worker", 0)
    harness.converged("worker", 0)
    assert harness.get("machineset", "worker")["status"]["replicas"] == 0


def _grow_one_at_a_time(harness: Harness, name: str, count: int) -> list[str]:
    """Scale up by one per step, each Machine created in a later second than the one before: creationTimestamps
    have whole seconds, and they are what Oldest and Newest order by."""
    for n in range(1, count + 1):
        if n > 1:
            newest = max(parse_time(m["metadata"]["creationTimestamp"]) for m in harness.converged(name, n - 1))
            wait_for("the next second after the newest Machine's creation",
                     lambda newest=newest: dt.datetime.now(dt.timezone.utc).replace(microsecond=0) > newest)
        harness.scale(name, n)
        harness.converged(name, n)
    machines = harness.converged(name, count)
    created = [m["metadata"]["creationTimestamp"] for m in machines]
    assert len(set(created)) == count, created  # each in its own second: the order below is the servers'
    return [m["metadata"]["name"] for m in sorted(machines, key=lambda m: m["metadata"]["creationTimestamp"])]


def test_scale_down_removes_the_annotated_machine_then_the_oldest_then_the_newest(harness):
    harness.apply(machineset(harness.ns, deletePolicy="Oldest"))
    m1, m2, m3, m4 = _grow_one_at_a_time(harness, "worker", 4)

    harness.kubectl("annotate", "machine", m3, f"{keys.ANNOTATION_DELETE_MACHINE}=2026-05-01 12:00:00 +0000 UTC")
    harness.scale("worker", 3)
    assert [m["metadata"]["name"] for m in harness.converged("worker", 3)] == [m1, m2, m4]

    harness.scale("worker", 2)
    assert [m["metadata"]["name"] for m in harness.converged("worker", 2)] == [m2, m4]

    harness.kubectl("patch", "machineset", "worker", "--type=merge", "-p", '{"spec":{"deletePolicy":"Newest"}}')
    harness.scale("worker", 1)
    assert [m["metadata"]["name"] for m in harness.converged("worker", 1)] == [m2]


def test_scale_down_prefers_errored_then_nodeless_machines_under_random(harness):
    harness.apply(machineset(harness.ns, replicas=3))
    healthy, errored, nodeless = (m["metadata"]["name"] for m in harness.converged("worker", 3))
    harness.patch_machine_status(healthy, {"nodeRef": {"kind": "Node", "name": f"{harness.ns}-a"}})
    harness.patch_machine_status(errored, {"nodeRef": {"kind": "Node", "name": f"{harness.ns}-b"},
                                           "errorReason": "CreateError", "errorMessage": "boom"})

    harness.scale("worker", 2)
    assert sorted(m["metadata"]["name"] for m in harness.converged("worker", 2)) == sorted([healthy, nodeless])
    harness.scale("worker", 1)
    assert [m["metadata"]["name"] for m in harness.converged("worker", 1)] == [healthy]


def test_deleted_machine_is_replaced_even_while_it_drains(harness):
    harness.apply(machineset(harness.ns, replicas=2))
    # Names come from the converged list: right after the apply the MachineSet may have created only one.
    first = sorted(m["metadata"]["name"] for m in harness.converged("worker", 2))
    assert len(first) == 2

    # A finalizer stands in for the Machine controller draining the node: the old Machine lingers as deleting.
    victim = first[0]
    harness.kubectl("patch", "machine", victim, "--type=merge", "-p", '{"metadata":{"finalizers":["e2e/hold"]}}')
    harness.kubectl("delete", "machine", victim, "--wait=false")
    replaced = harness.converged("worker", 2)
    names = {m["metadata"]["name"] for m in replaced}
    assert victim not in names and first[1] in names
    lingering = [m for m in harness.machines(include_deleting=True) if m["metadata"]["name"] == victim]
    assert lingering and lingering[0]["metadata"]["deletionTimestamp"]

    harness.kubectl("patch", "machine", victim, "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    wait_for("drained machine gone", lambda: victim not in {
        m["metadata"]["name"] for m in harness.machines(include_deleting=True)})
    assert len(harness.converged("worker", 2)) == 2


def test_matching_orphans_are_adopted_and_others_left_alone(harness):
    spec = machineset(harness.ns)["spec"]
    template = spec["template"]

    def machine(name: str, labels: dict, owner: dict | None = None) -> dict:
        meta: dict = {"name": name, "namespace": harness.ns, "labels": labels}
        if owner:
            meta["ownerReferences"] = [owner]
        return {"apiVersion": keys.API_VERSION, "kind": "Machine", "metadata": meta, "spec": template["spec"]}

    harness.apply(machine("orphan", dict(template["metadata"]["labels"])))
    harness.apply(machine("stranger", {keys.LABEL_MACHINESET: "other"}))
    # The other owner must exist: kube-controller-manager's garbage collector deletes a dependent whose owner
    # does not (a made-up uid made this test race the collector).
    harness.apply(machineset(harness.ns, name="someone-else", replicas=0))
    foreign_owner = {"apiVersion": keys.API_VERSION, "kind": "MachineSet", "name": "someone-else",
                     "uid": harness.get("machineset", "someone-else")["metadata"]["uid"], "controller": True}
    harness.apply(machine("owned-elsewhere", dict(template["metadata"]["labels"]), foreign_owner))

    harness.apply(machineset(harness.ns, replicas=1))
    uid = harness.get("machineset", "worker")["metadata"]["uid"]
    wait_for("orphan adopted", lambda: (harness.get("machine", "orphan")["metadata"].get("ownerReferences")
                                        or [{}])[0].get("uid") == uid)
    wait_for("status counts the adopted machine",
             lambda: (harness.get("machineset", "worker").get("status") or {}).get("replicas") == 1)
    assert sorted(harness.names()) == ["orphan", "owned-elsewhere", "stranger"]  # nothing created
    assert "ownerReferences" not in harness.get("machine", "stranger")["metadata"]
    assert harness.get("machine", "owned-elsewhere")["metadata"]["ownerReferences"] == [foreign_owner]
    assert harness.events_for("worker", "SuccessfulAdopt")


def test_deleting_the_machineset_removes_every_machine(harness):
    harness.apply(machineset(harness.ns, replicas=3))
    assert len(harness.converged("worker", 3)) == 3
    harness.kubectl("delete", "machineset", "worker", "--wait=false")
    wait_for("garbage collector to delete the machines", lambda: harness.machines(include_deleting=True) == [])


# --- status ----------------------------------------------------------------------------------------------------


def test_ready_and_available_replicas_follow_nodes_and_min_ready_seconds(harness):
    harness.apply(machineset(harness.ns, replicas=3, minReadySeconds=3600))
    long_ready, just_ready, _nodeless = (m["metadata"]["name"] for m in harness.converged("worker", 3))
    a_day_ago = format_time(now() - dt.timedelta(days=1))
    for machine, ready_since in ((long_ready, a_day_ago), (just_ready, format_time(now()))):
        node = f"{harness.ns}-{machine}"[:63]
        harness.node(node, "True", ready_since)
        harness.patch_machine_status(machine, {"nodeRef": {"kind": "Node", "name": node}})

    def counts():
        status = harness.get("machineset", "worker").get("status") or {}
        return status.get("replicas"), status.get("readyReplicas"), status.get("availableReplicas")

    # Ready for a day counts as available; Ready just now does not, with minReadySeconds an hour.
    wait_for("ready 2, available 1", lambda: counts() == (3, 2, 1))
    harness.node(f"{harness.ns}-{long_ready}"[:63], "False", format_time(now()))
    wait_for("the NotReady node's machine no longer ready", lambda: counts() == (3, 1, 0))


# --- autoscaler-facing annotations -----------------------------------------------------------------------------


def _annotations(harness: Harness) -> dict:
    return harness.get("machineset", "worker")["metadata"].get("annotations") or {}


def test_capacity_annotations_follow_the_template(harness):
    harness.apply(machineset(harness.ns))
    wait_for("capacity annotations", lambda: _annotations(harness).get(keys.ANNOTATION_VCPU) == "4")
    got = _annotations(harness)
    assert got[keys.ANNOTATION_MEMORY_MB] == "16348" and got[keys.ANNOTATION_MAX_PODS] == "250"
    assert got[keys.ANNOTATION_CAPACITY_CPU] == "4" and got[keys.ANNOTATION_CAPACITY_MEMORY] == "16348Mi"

    value = '{"spec":{"template":{"spec":{"providerSpec":{"value":{"cpu":{"sockets":2,"cores":4,"threads":1},' \
            '"memory_mb":32768}}}}}}'
    harness.kubectl("patch", "machineset", "worker", "--type=merge", "-p", value)
    wait_for("capacity follows the template", lambda: _annotations(harness).get(keys.ANNOTATION_VCPU) == "8")
    got = _annotations(harness)
    assert got[keys.ANNOTATION_CAPACITY_MEMORY] == "32768Mi" and got[keys.ANNOTATION_MEMORY_MB] == "32768"

    # An oVirt instance type: the size is unknown without the engine, so the computed values are withdrawn...
    to_instance_type = '{"spec":{"template":{"spec":{"providerSpec":{"value":{"cpu":null,"memory_mb":null,' \
                       '"instance_type_id":"00000003-0003-0003-0003-0000000000be"}}}}}}'
    harness.kubectl("patch", "machineset", "worker", "--type=merge", "-p", to_instance_type)
    wait_for("computed capacity withdrawn", lambda: not any(
        k.startswith(keys.CAPACITY_PREFIX) or k in (keys.ANNOTATION_VCPU, keys.ANNOTATION_MEMORY_MB)
        for k in _annotations(harness)))
    wait_for("a Warning saying why", lambda: harness.events_for("worker", "CapacityUnknown"))
    assert harness.events_for("worker", "CapacityUnknown")[0]["type"] == "Warning"

    # ...and values a user sets by hand for it are left alone.
    harness.kubectl("annotate", "machineset", "worker", f"{keys.ANNOTATION_CAPACITY_CPU}=16",
                    f"{keys.ANNOTATION_CAPACITY_MEMORY}=64Gi")
    harness.scale("worker", 1)
    harness.converged("worker", 1)
    got = _annotations(harness)
    assert (got[keys.ANNOTATION_CAPACITY_CPU], got[keys.ANNOTATION_CAPACITY_MEMORY]) == ("16", "64Gi")


def test_the_capacity_controller_alone_writes_only_the_annotations(cluster, namespace):
    """`machineset-capacity` without `machineset` (as beside MAO's MachineSet controller): the annotations are
    written, under their own field manager, and the set is otherwise left alone (no Machine, no status)."""
    with running_controller(cluster, namespace, controllers=("machineset-capacity",)) as h:
        h.apply(machineset(h.ns, replicas=1))
        wait_for("capacity annotations", lambda: _annotations(h).get(keys.ANNOTATION_CAPACITY_CPU) == "4")
        ms = json.loads(h.kubectl("get", "machineset", "worker", "-o", "json", "--show-managed-fields"))
        owners = {e["manager"] for e in ms["metadata"]["managedFields"]
                  if f"f:{keys.ANNOTATION_VCPU}" in ((e.get("fieldsV1") or {}).get("f:metadata") or {})
                  .get("f:annotations", {})}
        assert owners == {CAPACITY_FIELD_MANAGER}
        assert not ms.get("status") and h.machines(include_deleting=True) == []


def test_the_capacity_of_a_set_deleted_meanwhile_recreates_nothing(cluster, namespace):
    """The cache can still hold a set already deleted: applying its annotations must not create it again."""
    with running_controller(cluster, namespace, controllers=()) as h:
        h.apply(machineset(h.ns, name="gone"))
        stale = h.get("machineset", "gone")
        h.kubectl("delete", "machineset", "gone")
        store = Store()
        store.put(stale)
        MachineSetCapacityReconciler(h.rest, store, h.events).reconcile(f"{h.ns}/gone")
        assert h.cluster.kubectl("-n", h.ns, "get", "machineset", "gone", check=False).returncode != 0


def test_invalid_autoscaler_bounds_are_reported(harness):
    harness.apply(machineset(harness.ns))
    harness.kubectl("annotate", "machineset", "worker", f"{keys.ANNOTATION_AUTOSCALER_MIN_SIZE}=3",
                    f"{keys.ANNOTATION_AUTOSCALER_MAX_SIZE}=1")
    events = wait_for("InvalidAutoscalerBounds event", lambda: harness.events_for("worker", "InvalidAutoscalerBounds"))
    assert events[0]["type"] == "Warning" and "below min size" in events[0]["message"]


# --- validation ------------------------------------------------------------------------------------------------


def test_selector_not_matching_the_template_yields_a_warning_and_no_machines(harness):
    doc = machineset(harness.ns, replicas=2)
    doc["spec"]["selector"]["matchLabels"][keys.LABEL_MACHINESET] = "not-the-template"
    harness.apply(doc)
    status = wait_for("errorReason on the status",
                      lambda: (harness.get("machineset", "worker").get("status") or {}).get("errorReason"))
    assert status == "InvalidConfiguration"
    events = wait_for("ReconcileError event", lambda: harness.events_for("worker", "ReconcileError"))
    assert events[0]["type"] == "Warning" and "does not match template" in events[0]["message"]
    assert harness.machines(include_deleting=True) == []

    # Fixing the selector is enough: the set recovers and the error goes away.
    harness.kubectl("patch", "machineset", "worker", "--type=merge", "-p",
                    json.dumps({"spec": {"selector": {"matchLabels": {keys.LABEL_MACHINESET: "worker"}}}}))
    harness.converged("worker", 2)
    assert "errorReason" not in harness.get("machineset", "worker")["status"]


# --- permissions -----------------------------------------------------------------------------------------------


def test_the_shipped_rbac_allows_every_call_of_the_controller(cluster):
    """Run as the controller's restricted identity in openshift-machine-api with config/rbac applied: list+watch,
    adoption, creates, capacity apply (the capacity controller's group), status, events and deletes all succeed."""
    namespace = "openshift-machine-api"
    cluster.apply_crds()
    cluster.ensure_namespace(namespace)
    cluster.kubectl("apply", "-k", str(REPO / "config" / "rbac"))
    name = f"rbac-{uuid.uuid4().hex[:6]}"
    doc = machineset(namespace, name)
    with running_controller(cluster, namespace, user="restricted") as h:
        try:
            orphan = {"apiVersion": keys.API_VERSION, "kind": "Machine", "spec": doc["spec"]["template"]["spec"],
                      "metadata": {"name": f"{name}-orphan", "namespace": namespace,
                                   "labels": doc["spec"]["template"]["metadata"]["labels"]}}
            h.apply(orphan)
            doc["spec"]["replicas"] = 2
            h.apply(doc)
            names = [m["metadata"]["name"] for m in h.converged(name, 2)]
            assert f"{name}-orphan" in names  # adopted, and one created
            assert h.events_for(name, "SuccessfulCreate") and h.events_for(name, "SuccessfulAdopt")
            wait_for("capacity annotations", lambda: (h.get("machineset", name)["metadata"].get("annotations")
                                                      or {}).get(keys.ANNOTATION_VCPU) == "4")
            h.scale(name, 0)
            h.converged(name, 0)
        finally:
            h.kubectl("delete", "machineset", name, "--wait=false")


# --- new Machines that fail ---------------------------------------------------------------------------------------


def test_an_invalid_template_under_a_health_check_stops_creating_until_it_changes(menv):
    """Each Machine of the template goes Failed (InvalidConfiguration), the health check deletes it, and the set used
    to create the next at once: 131 Machines and 2,199 deletions in a minute. The set says so and creates nothing
    more until its template changes (docs/architecture.md#acting-only-on-what-is-ours). The whole controller
    process runs here: the Machine controller fails the Machines, the health check deletes them."""
    replicas = 2
    menv.controller()
    name = unique_name("badset")
    # Valid for the CRD and any admission policy; only the engine's template says the OS disk cannot shrink to it.
    _machineset(menv, name, replicas, os_disk={"size_gb": 10})
    _mhc(menv, "churn", name)
    seen: set[str] = set()

    def blocked():
        seen.update(m["metadata"]["name"] for m in _machines(menv, name))
        ms = json.loads(menv.cluster.kubectl("-n", menv.namespace, "get", "machineset", name, "-o", "json").stdout)
        c = next((c for c in (ms.get("status") or {}).get("conditions", []) if c["type"] == "TemplateValid"), None)
        return c if c and c["status"] == "False" else None
    cond = _wait(blocked, "TemplateValid=False on the set", 90, menv)
    assert cond["reason"] == "InvalidConfiguration" and "os_disk.size_gb" in cond["message"], cond
    assert _events(menv, name, "InvalidTemplate")
    deadline = time.monotonic() + 20  # long enough for dozens of Machines if the set went on creating
    while time.monotonic() < deadline:
        seen.update(m["metadata"]["name"] for m in _machines(menv, name))
        time.sleep(0.2)
    created = {e["message"] for e in _events(menv, name, "SuccessfulCreate")}
    # Before any of them failed the set made `replicas` Machines of the template, and the failure of the first is
    # known to the set before the health check can delete it (it is a status write the set's watch sees first):
    # not one more, and not one VM.
    assert len(created) <= replicas and len(seen) <= replicas, (created, seen)
    assert blocked()
    assert not [v for v in menv.sim.control.vms() if v["name"].startswith(name + "-")]

    menv.cluster.kubectl("-n", menv.namespace, "patch", "machineset", name, "--type=json", "-p", json.dumps(
        [{"op": "replace", "path": "/spec/template/spec/providerSpec/value/os_disk/size_gb", "value": 120}]))
    _running(menv, name, replicas)
    ms = json.loads(menv.cluster.kubectl("-n", menv.namespace, "get", "machineset", name, "-o", "json").stdout)
    assert [c["status"] for c in ms["status"]["conditions"] if c["type"] == "TemplateValid"] == ["True"]


def test_a_new_machine_deleted_before_it_got_a_node_is_replaced_after_a_growing_back_off(harness):
    """Someone deletes the set's new Machines as soon as they appear (a health check's startup timeout, a script):
    the replacement waits 10 s, then 20 s (machineset_failures.py), instead of following at once."""
    harness.apply(machineset(harness.ns, replicas=1))
    waits = []
    for _ in range(2):
        (victim,) = harness.converged("worker", 1)
        victim_name = victim["metadata"]["name"]
        harness.kubectl("delete", "machine", victim_name, "--wait=false")
        gone = time.monotonic()

        def replaced(victim_name=victim_name):
            return [m for m in harness.machines(of="worker") if m["metadata"]["name"] != victim_name]
        wait_for("a replacement", replaced)
        waits.append(time.monotonic() - gone)
    assert 9 <= waits[0] < 20 and 19 <= waits[1] < 40, waits
    events = harness.events_for("worker", "CreateBackoff")
    assert events and victim_name in events[-1]["message"] and "deleted before it got a node" in events[-1]["message"]
