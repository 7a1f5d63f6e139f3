"""Two tenants on one engine, through Cluster API's own core controllers (v1.14.2) and this project's Cluster API
front end: an OvirtMachine in one namespace named like another namespace's OvirtMachine, whose VM the engine holds
under that name, is refused with a clear condition, and deleting it leaves the other's VM running
(docs/cluster-api.md#the-contract-rule-by-rule, docs/architecture.md#acting-only-on-what-is-ours).

Each namespace has its own controller process watching only it, as two management clusters sharing an engine
would."""

from __future__ import annotations

import copy
import time

from api import infrastructure
from capi_clusters import CAPI_API_VERSION, CLUSTER_NAME_LABEL, CONTROLLERS, CONVERGE_S, CapiEnv, release_namespace
from hack.ovirtsim.seed import KUBE_NODE_TEMPLATE_NAME, KUBELET_VERSIONS
from machines import unique_name

OVIRT_MACHINES = f"ovirtmachines.{infrastructure.GROUP}"


def _colliding_machine(env: CapiEnv, cluster: str, name: str) -> list[dict]:
    """A Cluster API Machine of `cluster` made by hand, with an OvirtMachine of `name`."""
    inst = env.sim.installation
    spec = {"template_name": KUBE_NODE_TEMPLATE_NAME, "cluster_id": inst.cluster_id, "memory_mb": 2048,
            "cpu": {"sockets": 1, "cores": 2, "threads": 1}, "os_disk": {"size_gb": 20}, "type": "server"}
    labels = {CLUSTER_NAME_LABEL: cluster}
    ovirt_machine = {"apiVersion": infrastructure.API_VERSION, "kind": "OvirtMachine",
                     "metadata": {"name": name, "namespace": env.namespace, "labels": labels}, "spec": spec}
    machine = {"apiVersion": CAPI_API_VERSION, "kind": "Machine",
               "metadata": {"name": name, "namespace": env.namespace, "labels": labels},
               "spec": {"clusterName": cluster, "version": KUBELET_VERSIONS[KUBE_NODE_TEMPLATE_NAME],
                        "bootstrap": {"dataSecretName": f"{cluster}-bootstrap"},
                        "infrastructureRef": {"apiGroup": infrastructure.GROUP, "kind": "OvirtMachine",
                                              "name": name}}}
    return [ovirt_machine, machine]


def _condition(obj: dict | None, kind: str) -> dict:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def test_an_ovirtmachine_named_like_another_namespaces_is_refused_and_its_deletion_leaves_that_vm(capi):
    capi.controller()
    first = capi.create_cluster(replicas=1)
    first.wait_running(1)
    [(taken, _)] = first.ovirt_machines().items()
    [vm] = first.vms()
    assert vm["name"] == taken

    other_ns = unique_name("e2e-capi-owner")
    capi.cluster.create_namespace(other_ns)
    other_env = copy.copy(capi)
    other_env.namespace = other_ns
    try:
        capi.menv.controller(namespace=other_ns, extra_args=(CONTROLLERS,)).wait_ready()
        second = other_env.create_cluster(replicas=0)
        other_env.apply(*_colliding_machine(other_env, second.name, taken))

        # Refused, with a condition naming the VM and whose it is; never provisioned, never failed for good.
        deadline = time.monotonic() + CONVERGE_S
        while True:
            ovirt_machine = other_env.get(OVIRT_MACHINES, taken)
            provisioned = _condition(ovirt_machine, "InstanceProvisioned")
            if vm["id"] in provisioned.get("message", ""):
                break
            assert time.monotonic() < deadline, (f"no refusal on {other_ns}/{taken}: "
                                                 f"{(ovirt_machine or {}).get('status')}\n{capi.logs()}")
            time.sleep(0.5)
        message = provisioned["message"]
        assert provisioned["status"] == "False" and f"OvirtMachine {capi.namespace}/{taken}" in message, message
        status = ovirt_machine.get("status") or {}
        assert not (status.get("initialization") or {}).get("provisioned") and not status.get("instanceId"), status
        assert not (ovirt_machine.get("spec") or {}).get("providerID"), ovirt_machine["spec"]
        assert [v["id"] for v in capi.sim.control.vms() if v["name"] == taken] == [vm["id"]]

        # Its deletion ends (no VM of its own to remove) and leaves the first tenant's VM as it was.
        other_env.k("-n", other_ns, "delete", "machines.cluster.x-k8s.io", taken, "--wait=false")
        deadline = time.monotonic() + CONVERGE_S
        while other_env.get(OVIRT_MACHINES, taken) is not None:
            assert time.monotonic() < deadline, f"{other_ns}/{taken} not deleted\n{capi.logs()}"
            time.sleep(0.5)
        after = capi.sim.control.vm(vm["id"])
        assert after is not None and after["status"] == "up", after
        first.wait_running(1, timeout=10.0)
        assert [v["id"] for v in first.vms()] == [vm["id"]]
    finally:
        release_namespace(other_env)
        capi.cluster.delete_namespace(other_ns)
