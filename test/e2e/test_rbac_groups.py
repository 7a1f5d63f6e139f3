"""Each controller's RBAC group (config/rbac/<group>, docs/architecture.md#deployment-modes) is enough on its own: a
subset of --controllers runs as a fresh ServiceAccount bound to `manager` and that subset's groups only, does its
work, and is never refused. The OpenShift overlay's subset (machine, machineset-capacity, ovirt-nodes, remediation)
is the one that matters most: it is all a drop-in deployment ships."""

from __future__ import annotations

import json
import time
import uuid
from typing import Callable

import pytest
import yaml

from hack import ovirt_install
from hack.controller_process import ControllerProcess
from identities import bind_groups, token_kubeconfig, unbind
from machine_controller.config import MAO_CONTROLLERS
from machines import MACHINE_API_NS, unique_name


def _copy_credentials(cluster, namespace: str) -> None:
    secret = json.loads(cluster.kubectl("-n", MACHINE_API_NS, "get", "secret", "ovirt-credentials", "-o",
                                        "json").stdout)
    secret["metadata"] = {"name": "ovirt-credentials", "namespace": namespace}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(secret))


def _wait(what: str, check: Callable[[], bool], proc: ControllerProcess, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        logs = proc.log_text()
        assert "forbidden" not in logs.lower(), f"refused while waiting for {what}:\n{logs[-4000:]}"
        assert time.monotonic() < deadline, f"never {what}\n{logs[-4000:]}"
        time.sleep(0.3)


def _actuator_side(menv, proc) -> None:
    name = menv.create_machine(unique_name())
    # Without nodelink nothing sets nodeRef, so the Machine stops at Provisioned (MAO's nodelink takes it on).
    m = menv.wait_machine(name, lambda m: (m.get("status") or {}).get("phase") == "Provisioned"
                          and (m.get("spec") or {}).get("providerID"), "Provisioned with a providerID", timeout=90)
    assert m["spec"]["providerID"].startswith("ovirt://")
    menv.cluster.kubectl("-n", menv.namespace, "delete", "machine", name, "--wait=false")
    menv.wait_gone(name, timeout=90)
    assert menv.vms_named(name) == []


def _machineset(menv, proc) -> None:
    cluster, ns = menv.cluster, menv.namespace
    ms = ovirt_install.machineset_for(menv.inst, ns)
    name = ms["metadata"]["name"] = unique_name("rbacset")
    ms["spec"]["replicas"] = 1
    labels = {"machine.openshift.io/cluster-api-machineset": name}
    ms["spec"]["selector"] = {"matchLabels": labels}
    ms["spec"]["template"]["metadata"]["labels"] = {**ms["spec"]["template"]["metadata"].get("labels", {}), **labels}
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(ms))

    def machines() -> list[dict]:
        return json.loads(cluster.kubectl("-n", ns, "get", "machines", "-l",
                                          f"machine.openshift.io/cluster-api-machineset={name}", "-o",
                                          "json").stdout)["items"]

    def replicas() -> int | None:
        doc = json.loads(cluster.kubectl("-n", ns, "get", "machineset", name, "-o", "json").stdout)
        return (doc.get("status") or {}).get("replicas")

    _wait("one Machine and status.replicas 1", lambda: len(machines()) == 1 and replicas() == 1, proc)
    cluster.kubectl("-n", ns, "scale", "machineset", name, "--replicas=0")
    _wait("scaled to zero", lambda: machines() == [] and replicas() == 0, proc)


def _machinehealthcheck(menv, proc) -> None:
    doc = {"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineHealthCheck",
           "metadata": {"name": "rbac-check", "namespace": menv.namespace},
           "spec": {"selector": {"matchLabels": {"machine.openshift.io/cluster-api-machineset": "none"}},
                    "unhealthyConditions": [{"type": "Ready", "status": "False", "timeout": "300s"}]}}
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))

    def status() -> dict:
        return json.loads(menv.cluster.kubectl("-n", menv.namespace, "get", "mhc", "rbac-check", "-o",
                                               "json").stdout).get("status") or {}

    _wait("the check's status written", lambda: status().get("expectedMachines") == 0, proc)


def _nodelink(menv, proc) -> None:
    cluster, ns = menv.cluster, menv.namespace
    node, pid = unique_name("rbac-node"), f"ovirt://{uuid.uuid4()}"
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}, "spec": {"providerID": pid}}))
    try:
        machine = {"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
                   "metadata": {"name": node, "namespace": ns},
                   "spec": {"providerID": pid, "metadata": {"labels": {"rbac-check": "linked"}}}}
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(machine))

        def linked() -> bool:
            m = json.loads(cluster.kubectl("-n", ns, "get", "machine", node, "-o", "json").stdout)
            n = json.loads(cluster.kubectl("get", "node", node, "-o", "json").stdout)
            return (((m.get("status") or {}).get("nodeRef") or {}).get("name") == node
                    and n["metadata"].get("labels", {}).get("rbac-check") == "linked")

        _wait("the Machine linked to its Node and the Node labelled", linked, proc)
    finally:
        cluster.kubectl("delete", "node", node, "--wait=false", check=False)


def _capacity(menv, proc) -> None:
    cluster, ns = menv.cluster, menv.namespace
    ms = ovirt_install.machineset_for(menv.inst, ns)
    name = ms["metadata"]["name"] = unique_name("rbaccap")
    ms["spec"]["replicas"] = 0
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(ms))

    def annotations() -> dict:
        doc = json.loads(cluster.kubectl("-n", ns, "get", "machineset", name, "-o", "json").stdout)
        return doc["metadata"].get("annotations") or {}

    _wait("the capacity annotations applied", lambda: "machine.openshift.io/vCPU" in annotations(), proc)


def _openshift_subset(menv, proc) -> None:
    _actuator_side(menv, proc)
    _capacity(menv, proc)


@pytest.mark.parametrize("controllers, groups, scenario", [
    (MAO_CONTROLLERS, ("manager", "machine", "machineset-capacity", "ovirt-nodes", "remediation"), _openshift_subset),
    ("machineset", ("manager", "machineset"), _machineset),
    ("machineset-capacity", ("manager", "machineset-capacity"), _capacity),
    ("machinehealthcheck", ("manager", "machinehealthcheck"), _machinehealthcheck),
    ("nodelink", ("manager", "nodelink"), _nodelink),
], ids=["openshift-subset", "machineset", "machineset-capacity", "machinehealthcheck", "nodelink"])
def test_a_subset_runs_with_only_its_rbac_groups(menv, tmp_path, controllers, groups, scenario):
    cluster, ns = menv.cluster, menv.namespace
    _copy_credentials(cluster, ns)
    bound = bind_groups(cluster, groups, ns, "controller")
    kubeconfig = token_kubeconfig(cluster, ns, "controller", tmp_path / "controller.kubeconfig")
    proc = ControllerProcess(kubeconfig, tmp_path / "subset.log", namespace=ns, leader_elect=True, extra_args=(
        f"--controllers={controllers}", f"--credentials-namespace={ns}", f"--leader-election-namespace={ns}",
        "--leader-elect-lease-duration=6", "--leader-elect-renew-deadline=4", "--leader-elect-retry-period=1",
        "--backoff-base=0.2", "--backoff-cap=5", "--log-level=debug"))
    proc.start()
    try:
        proc.wait_ready(60)  # every informer listed and watching, the credentials read: all allowed
        scenario(menv, proc)
        logs = proc.log_text()
        assert "forbidden" not in logs.lower(), logs[-4000:]
        assert "became leader" in logs, logs[-2000:]  # the Lease: get, create, update
    finally:
        proc.stop()
        unbind(cluster, bound)
