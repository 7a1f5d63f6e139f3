"""Cluster API's autoscaling from zero against a real API server: the `ovirtmachinetemplate` controller fills an
OvirtMachineTemplate's status.capacity and status.nodeInfo from its spec, as the cluster-autoscaler reads them,
`kubectl get` shows them, and a template whose size only the engine knows loses the values with a Warning saying
why (docs/compatibility.md#autoscaler). The controller never asks the engine, so no simulator runs here."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest

import machines
from api import infrastructure
from hack.controller_process import ControllerProcess

NAME = "workers-v1"
CLUSTER_ID = "0b0c3f1e-0000-4000-8000-0000000000c1"
INSTANCE_TYPE_ID = "00000003-0003-0003-0003-0000000000be"
SPEC = {"template_name": "ubuntu-2404-kube", "cluster_id": CLUSTER_ID, "memory_mb": 6144,
        "cpu": {"sockets": 1, "cores": 2, "threads": 2}, "os_disk": {"size_gb": 20}}
CONVERGE_S = 30.0


def wait_for(what: str, probe: Callable[[], Any], timeout: float = CONVERGE_S) -> Any:
    return machines.wait_for(what, probe, timeout)


@pytest.fixture
def controller(cluster, namespace: str, tmp_path, capi_core):
    """This project's controller running the template controller only, in the test's namespace. Cluster API's
    CRDs are installed (`capi_core`), as wherever Cluster API runs: the controller watches its templates' Clusters
    to honour their pausing."""
    cluster.apply_crds()
    cluster.wait_established(f"ovirtmachinetemplates.{infrastructure.GROUP}")
    proc = ControllerProcess(cluster.kubeconfig_for("admin"), tmp_path / "controller.log", namespace=namespace,
                             extra_args=("--controllers=ovirtmachinetemplate", "--log-level=debug"))
    with proc:
        proc.wait_ready()
        yield proc


def test_template_capacity_is_filled_from_its_spec_and_withdrawn_for_an_instance_type(cluster, namespace,
                                                                                       controller):
    def k(*args: str, **kw: Any) -> str:
        return cluster.kubectl("-n", namespace, *args, **kw).stdout

    def status() -> dict:
        return json.loads(k("get", "ovirtmachinetemplate", NAME, "-o", "json")).get("status") or {}

    template = {"apiVersion": infrastructure.API_VERSION, "kind": "OvirtMachineTemplate",
                "metadata": {"name": NAME, "namespace": namespace}, "spec": {"template": {"spec": SPEC}}}
    k("apply", "-f", "-", input=json.dumps(template))
    got = wait_for("status.capacity", lambda: status().get("capacity") and status())
    # Strings the autoscaler parses as quantities: 1 socket x 2 cores x 2 threads, 6144 MiB; the node it builds
    # from zero is linux/amd64.
    assert got == {"capacity": {"cpu": "4", "memory": "6144Mi"},
                   "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux"}}, controller.log_text()
    row = k("get", "ovirtmachinetemplate", NAME, "--no-headers", "-o",
            "custom-columns=CPU:.status.capacity.cpu,MEMORY:.status.capacity.memory").split()
    assert row == ["4", "6144Mi"]
    printed = k("get", "ovirtmachinetemplate", NAME)
    assert "CPU" in printed.splitlines()[0] and "6144Mi" in printed  # the CRD's printer columns

    # A bigger VM: the capacity follows the spec.
    k("patch", "ovirtmachinetemplate", NAME, "--type=merge", "-p",
      json.dumps({"spec": {"template": {"spec": {"memory_mb": 8192}}}}))
    wait_for("the new memory", lambda: (status().get("capacity") or {}).get("memory") == "8192Mi")

    # An oVirt instance type: only the engine knows the size, so the values go and a Warning says why.
    k("patch", "ovirtmachinetemplate", NAME, "--type=merge", "-p", json.dumps({"spec": {"template": {"spec": {
        "instance_type_id": INSTANCE_TYPE_ID, "cpu": None, "memory_mb": None}}}}))
    wait_for("capacity withdrawn", lambda: "capacity" not in status())
    assert status()["nodeInfo"] == {"architecture": "amd64", "operatingSystem": "linux"}

    def warnings() -> list[dict]:
        out = k("get", "events", "--field-selector", f"involvedObject.name={NAME},reason=CapacityUnknown",
                "-o", "json")
        return json.loads(out)["items"]

    events = wait_for("a CapacityUnknown Warning", warnings)
    assert events[0]["type"] == "Warning" and INSTANCE_TYPE_ID in events[0]["message"], events
    assert events[0]["involvedObject"]["kind"] == "OvirtMachineTemplate"
