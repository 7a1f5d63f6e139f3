"""Cluster API's own MachineHealthCheck (the core manager, v1.14.2) on the simulated engine (issue 40 item 3,
docs/fencing.md#both-front-ends, docs/cluster-api.md#health-checks-and-remediation). One Cluster serves both halves:

(a) with `remediation.templateRef` naming an OvirtRemediationTemplate, Cluster API creates an OvirtRemediation named
    after the unhealthy Machine and owned by it; this project's remediation controller power-cycles the same VM (one
    stop, one start, seen by the engine), the Machine is not replaced, and Cluster API deletes the request once the
    Node is Ready again, its taints gone;
(b) without a template, Cluster API's MachineSet replaces the Machine: a new Machine, the old VM removed.

A VM is made unhealthy as in test_remediation.py: paused (an I/O error), its kubelet goes silent and its Node not
Ready, but the VM is not down, so only a stop can fence it. This project's controller runs as a ServiceAccount holding
only the RBAC groups a deployment of it ships (config/rbac: manager, infrastructure, remediation, remediation-capi),
and is never refused; Cluster API's manager runs as the admin (its aggregated role is checked by
test/unit/test_remediation_capi_rbac.py)."""

from __future__ import annotations

import json
import time
from typing import Any, Callable

from api import remediation
from api.remediation import OUT_OF_SERVICE_TAINT_KEY, REMEDIATION_TAINT_KEY
from capi_clusters import (
    CAPI_API_VERSION,
    CLUSTER_NAME_LABEL,
    CONTROLLERS,
    DEPLOYMENT_NAME_LABEL,
    CapiEnv,
    WorkloadCluster,
)
from hack.controller_process import ControllerProcess
from identities import bind_groups, token_kubeconfig, unbind

STOP = "POST /vms/{vm}/stop"
START = "POST /vms/{vm}/start"
TEMPLATE = "power-cycle"
# The Node must be unhealthy this long before Cluster API remediates: short, the test's only wait of its own making.
UNHEALTHY_S = 2
FENCED_S = 90.0
GROUPS = ("manager", "infrastructure", "remediation", "remediation-capi")
ACCOUNT = "capi-fencing"


def _health_check(env: CapiEnv, wc: WorkloadCluster, name: str, template: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "clusterName": wc.name, "selector": {"matchLabels": {DEPLOYMENT_NAME_LABEL: wc.name}},
        "checks": {"unhealthyNodeConditions": [{"type": "Ready", "status": s, "timeoutSeconds": UNHEALTHY_S}
                                               for s in ("Unknown", "False")]}}
    if template:
        spec["remediation"] = {"templateRef": {"apiVersion": remediation.API_VERSION,
                                               "kind": "OvirtRemediationTemplate", "name": TEMPLATE}}
    return {"apiVersion": CAPI_API_VERSION, "kind": "MachineHealthCheck",
            "metadata": {"name": name, "namespace": env.namespace}, "spec": spec}


def _remediation_template(env: CapiEnv) -> dict[str, Any]:
    return {"apiVersion": remediation.API_VERSION, "kind": "OvirtRemediationTemplate",
            "metadata": {"name": TEMPLATE, "namespace": env.namespace},
            "spec": {"template": {"spec": {"strategy": {"timeoutSeconds": 60, "retryLimit": 1},
                                           "cooldownSeconds": 0, "powerOffTimeoutSeconds": 10}}}}


def _request(env: CapiEnv, name: str) -> dict[str, Any] | None:
    return env.cluster.read(f"/apis/{remediation.API_VERSION}/namespaces/{env.namespace}/ovirtremediations/{name}")


def _node(env: CapiEnv, name: str) -> dict[str, Any]:
    node = env.cluster.read(f"/api/v1/nodes/{name}")
    assert node is not None, f"no Node {name}"
    return node


def _ready(node: dict[str, Any]) -> str | None:
    return next((c["status"] for c in node["status"].get("conditions", []) if c["type"] == "Ready"), None)


def _taints(node: dict[str, Any]) -> set[str]:
    return {t["key"] for t in (node.get("spec") or {}).get("taints") or []}


def _counts(env: CapiEnv) -> tuple[int, int]:
    """Stops and starts the engine received (its counters are per path template; this test's VM is the only one
    power-cycled while it runs, and the test reads deltas)."""
    c = env.sim.control.counts()
    return c.get(STOP, 0), c.get(START, 0)


def _events(env: CapiEnv, name: str, reason: str) -> list[dict[str, Any]]:
    out = env.k("-n", env.namespace, "get", "events", "--field-selector",
                f"involvedObject.name={name},reason={reason}", "-o", "json").stdout
    return json.loads(out)["items"]


def _wait(env: CapiEnv, wc: WorkloadCluster, proc: ControllerProcess, what: str, predicate: Callable[[], Any],
          timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() > deadline:
            requests = env.get(f"ovirtremediations.{remediation.GROUP}") or []
            raise AssertionError(
                f"{what}: not reached in {timeout}s\nrequests: "
                f"{[(r['metadata']['name'], r.get('status')) for r in requests]}\nmachines: "
                f"{[(m['metadata']['name'], m.get('status', {}).get('conditions')) for m in wc.machines()]}\n"
                f"{wc.describe()}\n{proc.log_text()[-8000:]}\n{env.logs()}")
        time.sleep(0.3)


def _controller(env: CapiEnv) -> ControllerProcess:
    """This project's controller with the Cluster API front end and remediation, as the ServiceAccount bound to the
    shipped groups only (test/e2e/identities.py)."""
    kubeconfig = token_kubeconfig(env.cluster, env.namespace, ACCOUNT, env.menv.tmp_path / f"{ACCOUNT}.kubeconfig")
    proc = ControllerProcess(kubeconfig, env.menv.tmp_path / f"{ACCOUNT}.log", namespace=env.namespace,
                             extra_args=("--backoff-base=0.2", "--backoff-cap=5", "--log-level=debug",
                                         f"{CONTROLLERS},remediation"))
    proc.start()
    return proc


def test_health_check_with_the_ovirt_template_power_cycles_the_vm_and_without_it_replaces_the_machine(capi):
    bound = bind_groups(capi.cluster, GROUPS, capi.namespace, ACCOUNT)
    proc = _controller(capi)
    try:
        proc.wait_ready()
        _fence_then_replace(capi, proc)
        assert "forbidden" not in proc.log_text().lower(), proc.log_text()[-8000:]
    finally:
        proc.stop()
        unbind(capi.cluster, bound)


def _fence_then_replace(capi: CapiEnv, proc: ControllerProcess) -> None:
    wc = capi.create_cluster(replicas=2)
    machines = wc.wait_running(2)

    # --- (a) external remediation: the same VM power-cycled ---------------------------------------------------------
    capi.apply(_remediation_template(capi), _health_check(capi, wc, f"{wc.name}-fence", template=True))
    victim = machines[0]
    name, uid = victim["metadata"]["name"], victim["metadata"]["uid"]
    vm_id = victim["spec"]["providerID"].removeprefix("ovirt://")
    node = victim["status"]["nodeRef"]["name"]
    stops, starts = _counts(capi)
    capi.sim.control.pause_vm(vm_id)
    began = time.monotonic()

    request = _wait(capi, wc, proc, "Cluster API creates the OvirtRemediation", lambda: _request(capi, name),
                    FENCED_S)
    # As Cluster API's MachineHealthCheck makes it: named after the Machine, owned by it (its group and uid), the
    # spec from the template, the Cluster's label.
    assert request["metadata"]["ownerReferences"] == [
        {"apiVersion": CAPI_API_VERSION, "kind": "Machine", "name": name, "uid": uid}], request["metadata"]
    assert request["metadata"]["labels"][CLUSTER_NAME_LABEL] == wc.name
    assert request["spec"]["strategy"]["timeoutSeconds"] == 60

    phases: set[str] = set()

    def request_gone() -> bool:
        r = _request(capi, name)
        if r is not None:
            phases.add((r.get("status") or {}).get("phase") or "")
            return False
        return True

    _wait(capi, wc, proc, "the request deleted by Cluster API once the Node is Ready", request_gone, FENCED_S)
    elapsed = time.monotonic() - began
    node_obj = _node(capi, node)
    assert _ready(node_obj) == "True"
    assert not _taints(node_obj) & {REMEDIATION_TAINT_KEY, OUT_OF_SERVICE_TAINT_KEY}, _taints(node_obj)
    assert _counts(capi) == (stops + 1, starts + 1)  # one stop, one start: the fencing order, once
    assert capi.sim.control.vm(vm_id)["status"] == "up"
    assert _events(capi, name, "RemediationSucceeded"), "no RemediationSucceeded event on the request"
    assert not phases & {"Failed", "DeletingMachine", "Skipped"}, phases
    after = wc.wait_running(2)
    assert {m["metadata"]["uid"] for m in after} == {m["metadata"]["uid"] for m in machines}  # not replaced
    print(f"Cluster API MHC with OvirtRemediationTemplate: pause to request deleted in {elapsed:.1f}s; "
          f"phases seen {sorted(phases)}")

    # --- (b) the same check without a template: Cluster API replaces the Machine -----------------------------------
    capi.k("-n", capi.namespace, "delete", "machinehealthchecks.cluster.x-k8s.io", f"{wc.name}-fence")
    capi.apply(_health_check(capi, wc, f"{wc.name}-replace", template=False))
    victim = next(m for m in after if m["metadata"]["name"] != name)
    replaced, old_vm = victim["metadata"]["name"], victim["spec"]["providerID"].removeprefix("ovirt://")
    capi.sim.control.pause_vm(old_vm)
    began = time.monotonic()
    final = wc.wait_running(
        2, timeout=FENCED_S,
        also=lambda vms: old_vm not in {v["id"] for v in capi.sim.control.vms()}
        and replaced not in {m["metadata"]["name"] for m in wc.machines()})
    assert name in {m["metadata"]["name"] for m in final}  # the power-cycled Machine stays
    assert _request(capi, replaced) is None  # no external remediation without a template
    print(f"Cluster API MHC without a template: pause to replacement Running in {time.monotonic() - began:.1f}s")
