"""Fencing by power cycle, end to end: OvirtRemediation requests (as a MachineHealthCheck creates them: named after
the Machine, owned by it, spec from the template) against the real API server, the simulator and the controller
process. Counts of stop and start requests come from the simulator's own counters."""

from __future__ import annotations

import json
import time

import pytest
import yaml

from api.remediation import API_VERSION, OUT_OF_SERVICE_TAINT_KEY, REMEDIATION_TAINT_KEY
from hack import ovirt_install
from machines import unique_name

HOLD = "test.remediation.ovirt.org/hold"
STOP = "POST /vms/{vm}/stop"
START = "POST /vms/{vm}/start"


def _running_machine(menv, **overrides) -> tuple[str, str, str]:
    name = menv.create_machine(unique_name("fence"), **overrides)
    m = menv.wait_phase(name, "Running", timeout=120)
    vm_id = m["metadata"]["annotations"]["VmId"]
    return name, vm_id, m["status"]["nodeRef"]["name"]


def _node(menv, name: str) -> dict:
    node = menv.cluster.read(f"/api/v1/nodes/{name}")
    assert node is not None, f"no Node {name}"
    return node


def _ready(node: dict) -> str | None:
    return next((c["status"] for c in node["status"].get("conditions", []) if c["type"] == "Ready"), None)


def _taint_keys(node: dict) -> set[str]:
    return {t["key"] for t in (node.get("spec") or {}).get("taints") or []}


def _wait(predicate, what: str, timeout: float, menv, interval: float = 0.3):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"{what} not reached in {timeout}s\n{_state(menv)}\n{menv.controller_logs()}")


def _state(menv) -> str:
    """What a failed wait leaves to read: each request's status and each Node's Ready condition and taints."""
    lines, names = [], set()
    requests = menv.cluster.kubectl("-n", menv.namespace, "get", "ovirtremediation", "-o", "json", check=False)
    for r in json.loads(requests.stdout or "{}").get("items", []) if requests.returncode == 0 else []:
        lines.append(f"request {r['metadata']['name']}: {json.dumps(r.get('status'))}")
        names.add((r.get("status") or {}).get("nodeName") or r["metadata"]["name"])
    nodes = menv.cluster.kubectl("get", "nodes", "-o", "json", check=False)
    for n in json.loads(nodes.stdout or "{}").get("items", []) if nodes.returncode == 0 else []:
        if n["metadata"]["name"] not in names:
            continue
        ready = next((c for c in n["status"].get("conditions", []) if c["type"] == "Ready"), None)
        lines.append(f"node {n['metadata']['name']}: Ready {json.dumps(ready)} taints {sorted(_taint_keys(n))}")
    return "\n".join(lines)


def _request(menv, machine: str, **spec) -> None:
    m = menv.machine(machine)
    doc = {"apiVersion": API_VERSION, "kind": "OvirtRemediation",
           "metadata": {"name": machine, "namespace": menv.namespace,
                        "ownerReferences": [{"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
                                             "name": machine, "uid": m["metadata"]["uid"]}]},
           "spec": {"strategy": {"timeoutSeconds": 60, "retryLimit": 1}, "cooldownSeconds": 0, **spec}}
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))


def _remediation(menv, name: str) -> dict | None:
    return menv.cluster.read(f"/apis/{API_VERSION}/namespaces/{menv.namespace}/ovirtremediations/{name}")


def _phase(menv, name: str) -> str | None:
    return ((_remediation(menv, name) or {}).get("status") or {}).get("phase")


def _counts(menv, vm_id: str) -> tuple[int, int]:
    """Stops and starts the engine received for this VM (the counters are per template; the test's VM is the only
    one power-cycled while it runs, and each test reads a delta)."""
    c = menv.sim.control.counts()
    return c.get(STOP, 0), c.get(START, 0)


def _events(menv, name: str, reason: str) -> list[dict]:
    out = menv.cluster.kubectl("-n", menv.namespace, "get", "events", "--field-selector",
                               f"involvedObject.name={name},reason={reason}", "-o", "json").stdout
    return json.loads(out)["items"]


def _pod(menv, name: str) -> dict | None:
    r = menv.cluster.kubectl("-n", menv.namespace, "get", "pod", name, "-o", "json", check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def _crash_for_good(menv, vm_id: str, node: str) -> None:
    """The VM crashes and the engine will never start it again (no host fits it any more)."""
    menv.sim.control.inject_fault(
        f"/vms/{vm_id}/start", method="POST", status=409, count=None,
        detail="[Cannot run VM. There is no host that satisfies current scheduling constraints.]")
    menv.sim.control.crash_vm(vm_id)
    _not_ready(menv, node)


def _not_ready(menv, node: str) -> None:
    _wait(lambda: _ready(_node(menv, node)) != "True", f"node {node} not Ready", 60, menv)


@pytest.mark.parametrize("release", ["OutOfServiceTaint", "ResourceDeletion"])
def test_paused_vm_is_power_cycled_once_and_its_node_returns(renv, release):
    menv = renv
    menv.controller()
    name, vm_id, node = _running_machine(menv)
    _claim_pod_on(menv, node, "old-incarnation")  # a workload with a volume, which must be gone before the VM starts
    menv.sim.control.pause_vm(vm_id)  # the VM hangs on an I/O error: its kubelet goes silent, the VM is not down
    _not_ready(menv, node)
    stops, starts = _counts(menv, vm_id)
    began = time.monotonic()

    _request(menv, name, remediationStrategy=release)
    _wait(lambda: _phase(menv, name) == "Succeeded", "remediation Succeeded", 120, menv)
    elapsed = time.monotonic() - began
    assert _pod(menv, "old-incarnation") is None
    node_obj = _node(menv, node)
    assert _ready(node_obj) == "True"
    assert not _taint_keys(node_obj) & {REMEDIATION_TAINT_KEY, OUT_OF_SERVICE_TAINT_KEY}
    assert _counts(menv, vm_id) == (stops + 1, starts + 1)
    assert menv.vms_named(name)[0]["status"] == "up"
    assert menv.machine(name)["status"]["phase"] == "Running"  # the same Machine, not a replacement
    status = _remediation(menv, name)["status"]
    assert status["retryCount"] == 1 and status["vmId"] == vm_id
    assert {c["type"]: c["status"] for c in status["conditions"]}["PowerOffConfirmed"] == "True"
    print(f"paused VM ({release}): request to Node Ready again in {elapsed:.1f}s")

    # Deleting the request (what the health check does once the Node is healthy) releases its finalizer.
    menv.cluster.kubectl("-n", menv.namespace, "delete", "ovirtremediation", name, "--timeout=30s")


def test_crashed_vm_is_started_again_without_a_stop(renv):
    menv = renv
    menv.controller()
    name, vm_id, node = _running_machine(menv)
    menv.sim.control.crash_vm(vm_id)
    _not_ready(menv, node)
    stops, starts = _counts(menv, vm_id)

    _request(menv, name)
    _wait(lambda: _phase(menv, name) == "Succeeded", "remediation Succeeded", 120, menv)
    assert _counts(menv, vm_id) == (stops, starts + 1)  # already down: nothing to stop
    assert _ready(_node(menv, node)) == "True"


def test_ready_node_is_left_alone(renv):
    menv = renv
    menv.controller()
    name, vm_id, node = _running_machine(menv)
    stops, starts = _counts(menv, vm_id)

    _request(menv, name)
    _wait(lambda: _phase(menv, name) == "Skipped", "remediation Skipped", 60, menv)
    assert _counts(menv, vm_id) == (stops, starts)
    assert not _taint_keys(_node(menv, node)) & {REMEDIATION_TAINT_KEY, OUT_OF_SERVICE_TAINT_KEY}


def test_vm_in_unknown_state_is_never_taken_as_off(renv):
    """Its host stops answering: oVirt reports the VM `unknown`. No stop can be confirmed, so no storage is
    released: a Warning, a condition and a metric say why, until the host is back."""
    menv = renv
    control = menv.sim.control
    proc = menv.controller()
    name, vm_id, node = _running_machine(menv)
    host = control.vm(vm_id)["host"]
    stops, starts = _counts(menv, vm_id)
    control.set_host_status(host, "non_responsive")
    try:
        _not_ready(menv, node)
        _request(menv, name)

        def waiting_on_unknown():
            conds = {c["type"]: c for c in ((_remediation(menv, name) or {}).get("status") or {}).get("conditions", [])}
            return conds.get("PowerOffConfirmed", {}).get("reason") == "PowerStateUnknown"
        _wait(waiting_on_unknown, "the remediation waiting on the unknown VM", 60, menv)
        assert OUT_OF_SERVICE_TAINT_KEY not in _taint_keys(_node(menv, node))
        assert REMEDIATION_TAINT_KEY in _taint_keys(_node(menv, node))  # NoSchedule only
        assert _phase(menv, name) == "PoweringOff"
        events = _wait(lambda: _events(menv, name, "PowerStateUnknown"), "a PowerStateUnknown event", 30, menv)
        assert events[0]["type"] == "Warning"
        assert f'ovirt_remediation_vm_power_unknown{{name="{name}",namespace="{menv.namespace}"}} 1.0' \
            in proc.metrics()
    finally:
        control.set_host_status(host, "up")
    # The host is back with the VM running all along: its guest reconnects, and its Node, Ready again within the
    # reconnect grace, is left alone (no power cycle).
    _wait(lambda: _phase(menv, name) in ("Succeeded", "Skipped"), "remediation ended", 120, menv)
    assert _phase(menv, name) == "Skipped"
    assert _counts(menv, vm_id) == (stops, starts)
    assert _ready(_node(menv, node)) == "True"
    # The alert's gauge says the wait is over (OvirtVMPowerStateUnknown, config/monitoring).
    assert f'ovirt_remediation_vm_power_unknown{{name="{name}",namespace="{menv.namespace}"}} 1.0' \
        not in proc.metrics()


def test_refused_stop_never_releases_storage_and_is_retried(renv):
    menv = renv
    control = menv.sim.control
    menv.controller()
    name, vm_id, node = _running_machine(menv)
    control.pause_vm(vm_id)
    _not_ready(menv, node)
    control.inject_fault(f"/vms/{vm_id}/stop", method="POST", status=409, count=3,
                         detail="[Cannot stop VM. Related operation is currently in progress.]")
    seen_taints: list[set[str]] = []

    _request(menv, name)
    _wait(lambda: control.faults()[0]["fired"] >= 2, "two refused stops", 60, menv)
    seen_taints.append(_taint_keys(_node(menv, node)))
    assert OUT_OF_SERVICE_TAINT_KEY not in seen_taints[-1]
    _wait(lambda: _events(menv, name, "PowerOffRefused"), "a PowerOffRefused event", 30, menv)
    _wait(lambda: _phase(menv, name) == "Succeeded", "remediation Succeeded", 120, menv)
    assert control.faults()[0]["count"] == 0


def test_node_that_never_returns_is_escalated_to_replacement(renv):
    """The engine never starts the VM again: after the retry limit the Machine is deleted, and its MachineSet
    replaces it with a new VM."""
    menv = renv
    control = menv.sim.control
    menv.controller()
    ms_name = unique_name("fencems")
    ms = ovirt_install.machineset_for(menv.inst, menv.namespace, ms_name)
    ms["spec"]["replicas"] = 1
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(ms))

    def machines() -> list[dict]:
        out = menv.cluster.kubectl("-n", menv.namespace, "get", "machines", "-l",
                                   f"machine.openshift.io/cluster-api-machineset={ms_name}", "-o", "json").stdout
        return json.loads(out)["items"]
    first = _wait(lambda: [m for m in machines() if (m.get("status") or {}).get("phase") == "Running"
                           and (m.get("status") or {}).get("nodeRef")], "a Running Machine", 150, menv)[0]
    name = first["metadata"]["name"]
    vm_id = first["metadata"]["annotations"]["VmId"]
    node = first["status"]["nodeRef"]["name"]
    _crash_for_good(menv, vm_id, node)
    _request(menv, name, strategy={"timeoutSeconds": 10, "retryLimit": 1})
    # The request goes with its Machine (it is owned by it), so the event is what stays of the escalation.
    _wait(lambda: _events(menv, name, "RemediationEscalated"), "escalation", 90, menv)
    _wait(lambda: all(m["metadata"]["name"] != name for m in machines()) and [
        m for m in machines() if (m.get("status") or {}).get("phase") == "Running"], "a replacement Running", 180, menv)
    assert menv.vms_named(name) == []
    control.clear_faults()
    menv.cluster.kubectl("-n", menv.namespace, "delete", "machineset", ms_name, "--wait=false")


def test_machine_without_a_controller_owner_is_not_deleted_on_exhaustion(renv):
    menv = renv
    control = menv.sim.control
    menv.controller()
    name, vm_id, node = _running_machine(menv)
    _crash_for_good(menv, vm_id, node)
    _request(menv, name, strategy={"timeoutSeconds": 10, "retryLimit": 1})
    _wait(lambda: _phase(menv, name) == "Failed", "remediation Failed", 90, menv)
    assert "no controller owner" in _remediation(menv, name)["status"]["message"]
    m = menv.machine(name)
    assert m is not None and not m["metadata"].get("deletionTimestamp")
    control.clear_faults()


@pytest.mark.parametrize("phase", ["PoweringOff", "ReleasingStorage", "PoweringOn", "WaitingForNode"])
def test_controller_killed_in_each_phase_resumes_with_one_stop_and_one_start(renv, phase):
    menv = renv
    control = menv.sim.control
    # A controller killed while it waited for the stop's answer leaves a stop that may still land until twice the
    # client's timeout after it was sent: the next one starts the VM after that
    # (docs/fencing.md#requests-whose-answer-was-lost). A short client timeout keeps that wait short.
    client_timeout = ("--ovirt-timeout=5",)
    proc = menv.controller(extra_args=client_timeout)
    name, vm_id, node = _running_machine(menv)
    # Slow the engine's steps so each phase lasts long enough to be caught.
    control.delay(f"/vms/{vm_id}/stop", 1.5, method="POST", count=1)
    control.delay(f"/vms/{vm_id}/start", 1.5, method="POST", count=1)
    control.pause_vm(vm_id)
    _not_ready(menv, node)
    stops, starts = _counts(menv, vm_id)

    if phase == "ReleasingStorage":
        # A pod of the old incarnation with a volume, slow to go (a finalizer), holds the cycle in ReleasingStorage.
        _claim_pod_on(menv, node, "held", finalizers=[HOLD])
    _request(menv, name)
    _wait(lambda: _phase(menv, name) == phase, f"phase {phase}", 90, menv, interval=0.05)
    proc.kill()
    menv.controller(extra_args=client_timeout)
    if phase == "ReleasingStorage":
        _wait(lambda: _pod(menv, "held") and _pod(menv, "held")["metadata"].get("deletionTimestamp"),
              "the held pod deleted by the out-of-service taint", 60, menv)
        assert _phase(menv, name) == "ReleasingStorage"  # the VM stays off while the pod is there
        menv.cluster.kubectl("-n", menv.namespace, "patch", "pod", "held", "--type=merge",
                             "-p", '{"metadata":{"finalizers":null}}')
    _wait(lambda: _phase(menv, name) == "Succeeded", "remediation Succeeded after the restart", 120, menv)
    assert _counts(menv, vm_id) == (stops + 1, starts + 1)
    assert _ready(_node(menv, node)) == "True"
    assert not _taint_keys(_node(menv, node)) & {REMEDIATION_TAINT_KEY, OUT_OF_SERVICE_TAINT_KEY}


def _foreign_node(menv, provider_id: str) -> str:
    """A Node registered by another provider's kubelet (or with a providerID that names no VM), not Ready: no
    kubelet posts its status."""
    name = unique_name("foreign")
    doc = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {"providerID": provider_id}}
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))
    return name


@pytest.mark.parametrize("provider_id", ["aws:///us-east-1a/i-0123456789abcdef0", "ovirt://not-a-vm-id"])
def test_node_that_is_no_ovirt_vm_is_refused_at_once_and_left_untouched(renv, provider_id):
    """NodeHealthCheck names its request after the Node; a Node of another provider is not ours to fence: the
    request ends Skipped with the reason, no taint goes on the Node and nothing is sent to the engine. Only the
    remediation controller runs: the Node controller's own view of such Nodes is not what this test is about."""
    menv = renv
    menv.controller(extra_args=("--controllers=remediation",))
    node = _foreign_node(menv, provider_id)
    try:
        before = menv.sim.control.counts()
        doc = {"apiVersion": API_VERSION, "kind": "OvirtRemediation",
               "metadata": {"name": node, "namespace": menv.namespace,
                            "annotations": {"remediation.medik8s.io/node-name": node}},
               "spec": {"strategy": {"timeoutSeconds": 60, "retryLimit": 1}, "cooldownSeconds": 0}}
        menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))
        _wait(lambda: _phase(menv, node) == "Skipped", "remediation Skipped", 30, menv)
        status = _remediation(menv, node)["status"]
        assert provider_id in status["message"] and "no oVirt VM" in status["message"], status["message"]
        assert {c["type"]: c["status"] for c in status["conditions"]}["Succeeded"] == "False"
        events = _events(menv, node, "NotAnOvirtVM")
        assert events and events[0]["type"] == "Warning"
        assert not _taint_keys(_node(menv, node)) & {REMEDIATION_TAINT_KEY, OUT_OF_SERVICE_TAINT_KEY}
        after = menv.sim.control.counts()
        assert (after.get(STOP, 0), after.get(START, 0)) == (before.get(STOP, 0), before.get(START, 0))
        menv.cluster.kubectl("-n", menv.namespace, "delete", "ovirtremediation", node, "--timeout=30s")
    finally:
        menv.cluster.kubectl("delete", "node", node, "--wait=false", check=False)


def _daemon_pod_on(menv, node: str, name: str) -> None:
    """A node agent as DaemonSets make them: it tolerates every taint (so the out-of-service taint never evicts it)
    and mounts only what lives and dies with the node."""
    doc = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": menv.namespace},
           "spec": {"nodeName": node, "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": "c", "image": "registry.invalid/none"}],
                    "volumes": [{"name": "proc", "hostPath": {"path": "/proc"}},
                                {"name": "scratch", "emptyDir": {}},
                                {"name": "conf", "configMap": {"name": "agent-conf", "optional": True}},
                                {"name": "info", "downwardAPI": {"items": [
                                    {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}]}}
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))


def _claim_pod_on(menv, node: str, name: str, finalizers: list[str] = ()) -> None:
    """A pod of the old incarnation with a PersistentVolumeClaim, bound to the Node as the scheduler would bind it
    (no kubelet runs it): its volume must be detached before the VM runs again."""
    doc = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": menv.namespace, "finalizers": list(finalizers)},
           "spec": {"nodeName": node, "containers": [{"name": "c", "image": "registry.invalid/none"}],
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": f"{name}-data"}}]}}
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))


def test_pods_that_tolerate_everything_and_hold_no_storage_do_not_hold_the_power_on(renv):
    """A node agent that tolerates every taint never leaves the out-of-service Node. It holds nothing to detach,
    so the VM is started at once (not after the 300 s storage-release bound); the agent is the returning kubelet's
    business."""
    menv = renv
    menv.controller()
    name, vm_id, node = _running_machine(menv)
    _daemon_pod_on(menv, node, "node-agent")
    menv.sim.control.pause_vm(vm_id)
    _not_ready(menv, node)
    stops, starts = _counts(menv, vm_id)

    _request(menv, name)
    _wait(lambda: _phase(menv, name) == "Succeeded", "remediation Succeeded", 90, menv)
    assert _counts(menv, vm_id) == (stops + 1, starts + 1)
    assert _pod(menv, "node-agent") is not None  # tolerated the taint: never evicted, never waited for
    assert not _events(menv, name, "StorageReleaseSlow")
    assert _ready(_node(menv, node)) == "True"


def test_timeout_runs_from_the_power_on_not_from_the_storage_release(renv):
    """A claim's pod slow to go holds the VM off longer than `timeoutSeconds`; the Node still gets its
    `timeoutSeconds` after the start (as the CRD documents), so the cycle ends Succeeded with one start."""
    menv = renv
    menv.controller()
    name, vm_id, node = _running_machine(menv)
    _claim_pod_on(menv, node, "db-0", finalizers=[HOLD])
    menv.sim.control.pause_vm(vm_id)
    _not_ready(menv, node)
    stops, starts = _counts(menv, vm_id)

    _request(menv, name, strategy={"timeoutSeconds": 10, "retryLimit": 1})
    _wait(lambda: (_pod(menv, "db-0") or {}).get("metadata", {}).get("deletionTimestamp"),
          "the claim's pod deleted by the out-of-service taint", 60, menv)
    released = time.monotonic()
    while time.monotonic() - released < 14:  # longer than timeoutSeconds
        assert _phase(menv, name) == "ReleasingStorage"  # the VM stays off while the claim's pod is there
        assert _counts(menv, vm_id) == (stops + 1, starts)
        time.sleep(1)
    menv.cluster.kubectl("-n", menv.namespace, "patch", "pod", "db-0", "--type=merge",
                         "-p", '{"metadata":{"finalizers":null}}')
    _wait(lambda: _phase(menv, name) in ("Succeeded", "Failed"), "remediation ended", 60, menv)
    assert _phase(menv, name) == "Succeeded", _state(menv)
    assert _counts(menv, vm_id) == (stops + 1, starts + 1)
    assert _ready(_node(menv, node)) == "True"


@pytest.mark.parametrize("node_ready", [False, True], ids=["node-not-ready", "node-ready"])
def test_a_stop_recorded_by_a_controller_killed_before_sending_it_is_sent_by_the_next(renv, node_ready):
    """A controller records its intent to stop the VM, then dies before the request leaves (the window of the
    PoweringOff kill case): the next controller finds the stop recorded, the VM still up and no stop of ours under
    way at the engine. It sends the stop once it is clear the engine never took it, not after
    powerOffTimeoutSeconds (120 s by default), and says so; as before a first stop, a Node Ready again by then is
    left alone."""
    menv = renv
    proc = menv.controller()
    name, vm_id, node = _running_machine(menv)
    if not node_ready:
        menv.sim.control.pause_vm(vm_id)
        _not_ready(menv, node)
    proc.kill()
    stops, starts = _counts(menv, vm_id)
    _request(menv, name)
    # What the killed controller leaves when it dies between recording the stop and sending it.
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = {"phase": "PoweringOff", "retryCount": 1, "vmId": vm_id, "nodeName": node, "lastRemediated": stamp,
              "powerOffRequested": stamp, "message": "stop sent"}
    menv.cluster.kubectl("-n", menv.namespace, "patch", "ovirtremediation", name, "--subresource=status",
                         "--type=merge", "-p", json.dumps({"status": status}))

    menv.controller()
    if node_ready:
        _wait(lambda: _phase(menv, name) in ("Skipped", "Succeeded", "Failed"), "remediation ended", 60, menv)
        assert _phase(menv, name) == "Skipped", _state(menv)
        assert _counts(menv, vm_id) == (stops, starts)
        assert not _taint_keys(_node(menv, node)) & {REMEDIATION_TAINT_KEY, OUT_OF_SERVICE_TAINT_KEY}
        return
    _wait(lambda: _counts(menv, vm_id)[0] == stops + 1, "the stop sent by the next controller", 60, menv)
    _wait(lambda: _phase(menv, name) in ("Succeeded", "Failed"), "remediation ended", 90, menv)
    assert _phase(menv, name) == "Succeeded", _state(menv)
    assert _counts(menv, vm_id) == (stops + 1, starts + 1)
    assert _ready(_node(menv, node)) == "True"
    assert _events(menv, name, "PowerOffLost")


def test_a_start_recorded_by_a_controller_killed_before_sending_it_is_sent_by_the_next(renv):
    """A controller records its intent to start the VM, then dies before the request leaves (the window of the
    PoweringOn kill case): the next controller finds the start recorded, the VM still down and nothing at the
    engine. It sends the start once it is clear the engine never took it, not after powerOffTimeoutSeconds (120 s
    by default, longer than this request's timeoutSeconds, which then failed the cycle with no start sent)."""
    menv = renv
    proc = menv.controller()
    name, vm_id, node = _running_machine(menv)
    _claim_pod_on(menv, node, "held", finalizers=[HOLD])
    menv.sim.control.pause_vm(vm_id)
    _not_ready(menv, node)
    stops, starts = _counts(menv, vm_id)
    _request(menv, name)
    _wait(lambda: (_pod(menv, "held") or {}).get("metadata", {}).get("deletionTimestamp"),
          "the held pod deleted by the out-of-service taint", 60, menv)
    proc.kill()
    menv.cluster.kubectl("-n", menv.namespace, "patch", "pod", "held", "--type=merge",
                         "-p", '{"metadata":{"finalizers":null}}')
    # What the killed controller leaves when it dies between recording the start and sending it.
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = {"phase": "PoweringOn", "poweringOnSince": stamp, "powerOnRequested": stamp, "message": "start sent"}
    menv.cluster.kubectl("-n", menv.namespace, "patch", "ovirtremediation", name, "--subresource=status",
                         "--type=merge", "-p", json.dumps({"status": status}))
    assert _counts(menv, vm_id) == (stops + 1, starts)

    menv.controller()
    _wait(lambda: _phase(menv, name) in ("Succeeded", "Failed"), "remediation ended", 90, menv)
    assert _phase(menv, name) == "Succeeded", _state(menv)
    assert _counts(menv, vm_id) == (stops + 1, starts + 1)
    assert _ready(_node(menv, node)) == "True"
