"""The generated CRDs on a real API server: they install, accept what OpenShift accepts, reject what OpenShift's
schema rejects, serve the scale and status subresources and the printer columns (docs/compatibility.md#object-shapes),
and let the garbage collector remove Machines owned by a deleted MachineSet."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import pytest
import yaml

from api import infrastructure, keys
from api.capi import CLUSTER_NAME_LABEL
from api.infrastructure import OvirtMachine
from api.machine import Machine, MachineSpec
from api.machinehealthcheck import MachineHealthCheck
from api.machineset import MachineSet
from api.meta import EmbeddedObjectMeta, ObjectMeta, OwnerReference

REPO = Path(__file__).resolve().parents[2]
SAMPLE = yaml.safe_load((REPO / "config" / "samples" / "machineset.yaml").read_text())


@pytest.fixture
def crds(cluster):
    cluster.apply_crds()
    return cluster


def apply(cluster, doc: dict, check: bool = True):
    return cluster.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(doc), check=check)


def get(cluster, kind: str, name: str, namespace: str, *extra: str) -> dict:
    return json.loads(cluster.kubectl("get", kind, name, "-n", namespace, "-o", "json", *extra).stdout)


def sample_machineset(namespace: str, name: str = "ocp-demo-x7k2p-worker") -> dict:
    doc = copy.deepcopy(SAMPLE)
    doc["metadata"]["namespace"] = namespace
    doc["metadata"]["name"] = name
    return doc


def machine_from(machineset: dict, name: str, owner: dict | None = None) -> dict:
    """A Machine as the MachineSet controller would build it from the template, via the api types."""
    ms = MachineSet.from_dict(machineset)
    meta = ObjectMeta(
        name=name,
        namespace=ms.metadata.namespace,
        labels=dict(ms.spec.template.metadata.labels),
    )
    if owner is not None:
        meta.owner_references = [
            OwnerReference(
                api_version=keys.API_VERSION,
                kind="MachineSet",
                name=owner["metadata"]["name"],
                uid=owner["metadata"]["uid"],
                controller=True,
                block_owner_deletion=True,
            )
        ]
    spec = MachineSpec(metadata=EmbeddedObjectMeta(), provider_spec=ms.spec.template.spec.provider_spec)
    return Machine(metadata=meta, spec=spec).to_dict()


def test_crds_install_and_are_established(crds):
    for plural in ("machines", "machinesets", "machinehealthchecks"):
        crd = json.loads(crds.kubectl("get", "crd", f"{plural}.machine.openshift.io", "-o", "json").stdout)
        established = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert established["Established"] == "True" and established["NamesAccepted"] == "True"
    resources = crds.kubectl("api-resources", "--api-group=machine.openshift.io", "--no-headers").stdout
    assert any(line.split()[:2] == ["machinehealthchecks", "mhc,mhcs"] for line in resources.splitlines()), resources
    # Applying again is a no-op, not an error (the demo and each test session apply them).
    crds.kubectl("apply", "--server-side", "--force-conflicts", "-k", str(REPO / "config" / "crd"))


def test_valid_machineset_and_machine_are_accepted(crds, namespace):
    ms = sample_machineset(namespace)
    del ms["spec"]["replicas"]
    apply(crds, ms)
    stored = get(crds, "machineset", ms["metadata"]["name"], namespace)
    assert stored["spec"]["replicas"] == 1  # the CRD default
    assert stored["spec"]["template"]["spec"]["providerSpec"]["value"] == SAMPLE["spec"]["template"]["spec"][
        "providerSpec"
    ]["value"]  # preserved verbatim, unknown keys included

    machine = machine_from(ms, "ocp-demo-x7k2p-worker-abcde")
    apply(crds, machine)
    parsed = Machine.from_dict(get(crds, "machine", "ocp-demo-x7k2p-worker-abcde", namespace))
    assert parsed.cluster_id == "ocp-demo-x7k2p"
    assert parsed.spec.provider_spec.value["template_name"] == "ocp-demo-x7k2p-rhcos"


def test_machinehealthcheck_defaults_and_short_name(crds, namespace):
    mhc = MachineHealthCheck.from_dict(
        {
            "metadata": {"name": "workers", "namespace": namespace},
            "spec": {
                "selector": {"matchLabels": {keys.LABEL_MACHINE_ROLE: "worker"}},
                "unhealthyConditions": [{"type": "Ready", "status": "Unknown", "timeout": "300s"}],
            },
        }
    )
    apply(crds, mhc.to_dict())
    stored = MachineHealthCheck.from_dict(get(crds, "mhc", "workers", namespace))
    assert stored.spec.max_unhealthy == "100%"
    assert stored.spec.node_startup_timeout == "10m"
    apply(crds, {**mhc.to_dict(), "spec": {**mhc.to_dict()["spec"], "maxUnhealthy": 2, "nodeStartupTimeout": "0"}})
    stored = MachineHealthCheck.from_dict(get(crds, "mhcs", "workers", namespace))
    assert (stored.spec.max_unhealthy, stored.spec.node_startup_timeout) == (2, "0")


def _mhc(namespace: str, **spec) -> dict:
    base = {"unhealthyConditions": [{"type": "Ready", "status": "False", "timeout": "300s"}]}
    return {
        "apiVersion": keys.API_VERSION,
        "kind": "MachineHealthCheck",
        "metadata": {"name": "bad", "namespace": namespace},
        "spec": {**base, **spec},
    }


def _machineset(namespace: str, **spec) -> dict:
    doc = sample_machineset(namespace, "bad")
    doc["spec"].update(spec)
    for key in [k for k, v in spec.items() if v is None]:
        del doc["spec"][key]
    return doc


REJECTED = {
    "deletePolicy not in the enum": (
        lambda ns: _machineset(ns, deletePolicy="Largest"),
        'spec.deletePolicy: Unsupported value: "Largest": supported values: "Random", "Newest", "Oldest"',
    ),
    "deletePolicy empty string": (
        lambda ns: _machineset(ns, deletePolicy=""),
        'spec.deletePolicy: Unsupported value: "": supported values: "Random", "Newest", "Oldest"',
    ),
    "MachineSet without selector": (lambda ns: _machineset(ns, selector=None), "spec.selector: Required value"),
    "maxUnhealthy above 100%": (
        lambda ns: _mhc(ns, maxUnhealthy="101%"),
        "spec.maxUnhealthy in body should match '^((100|[0-9]{1,2})%|[0-9]+)$'",
    ),
    "maxUnhealthy not a number": (
        lambda ns: _mhc(ns, maxUnhealthy="some"),
        "spec.maxUnhealthy in body should match '^((100|[0-9]{1,2})%|[0-9]+)$'",
    ),
    "no unhealthyConditions": (
        lambda ns: _mhc(ns, unhealthyConditions=[]),
        "spec.unhealthyConditions: Invalid value: 0: spec.unhealthyConditions in body should have at least 1 items",
    ),
    "timeout without unit": (
        lambda ns: _mhc(ns, unhealthyConditions=[{"type": "Ready", "status": "False", "timeout": "300"}]),
        "spec.unhealthyConditions[0].timeout in body should match",
    ),
    "nodeStartupTimeout garbage": (
        lambda ns: _mhc(ns, nodeStartupTimeout="0xyz"),
        "spec.nodeStartupTimeout in body should match",
    ),
}


@pytest.mark.parametrize("build, message", REJECTED.values(), ids=REJECTED.keys())
def test_objects_openshift_rejects_are_rejected(crds, namespace, build, message):
    result = apply(crds, build(namespace), check=False)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr
    assert "is invalid" in result.stderr


def test_kubectl_scale_uses_the_scale_subresource(crds, namespace):
    ms = sample_machineset(namespace)
    apply(crds, ms)
    name = ms["metadata"]["name"]
    crds.kubectl("scale", "machineset", name, "-n", namespace, "--replicas=3")
    assert get(crds, "machineset", name, namespace)["spec"]["replicas"] == 3

    # The MachineSet controller publishes the selector in status; the scale subresource then reports it.
    selector = MachineSet.from_dict(ms).spec.selector.to_string()
    crds.kubectl(
        "patch", "machineset", name, "-n", namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"replicas": 2, "labelSelector": selector}}),
    )
    scale = get(crds, "machineset", name, namespace, "--subresource=scale")
    assert scale["kind"] == "Scale"
    assert scale["spec"]["replicas"] == 3
    assert scale["status"] == {"replicas": 2, "selector": selector}
    assert selector == (
        "machine.openshift.io/cluster-api-cluster=ocp-demo-x7k2p,"
        "machine.openshift.io/cluster-api-machineset=ocp-demo-x7k2p-worker"
    )
    # The selector string is one kubectl itself accepts for listing.
    crds.kubectl("get", "machines", "-n", namespace, "-l", selector)


def test_status_is_a_subresource_on_all_three(crds, namespace):
    ms = sample_machineset(namespace)
    ms["status"] = {"replicas": 5}
    apply(crds, ms)
    assert get(crds, "machineset", ms["metadata"]["name"], namespace).get("status", {}).get("replicas") is None
    machine = machine_from(ms, "m-status")
    machine["status"] = {"phase": "Running"}
    apply(crds, machine)
    assert get(crds, "machine", "m-status", namespace).get("status", {}).get("phase") is None
    mhc = _mhc(namespace)
    mhc["status"] = {"expectedMachines": 4}
    apply(crds, mhc)
    assert get(crds, "mhc", "bad", namespace).get("status", {}).get("expectedMachines") is None


def test_get_machines_wide_prints_phase_node_providerid_state(crds, namespace):
    ms = sample_machineset(namespace)
    machine = machine_from(ms, "ocp-demo-x7k2p-worker-x1y2z")
    machine["metadata"]["annotations"] = {keys.ANNOTATION_INSTANCE_STATE: "up"}
    machine["spec"]["providerID"] = "ovirt://0b0c3f1e-0000-4000-8000-000000000001"
    apply(crds, machine)
    status = {"phase": "Running", "nodeRef": {"kind": "Node", "name": "worker-node-1", "uid": "n-1"}}
    crds.kubectl(
        "patch", "machine", "ocp-demo-x7k2p-worker-x1y2z", "-n", namespace, "--subresource=status",
        "--type=merge", "-p", json.dumps({"status": status}),
    )
    wide = crds.kubectl("get", "machines", "-n", namespace, "-o", "wide").stdout.splitlines()
    assert wide[0].split() == ["NAME", "PHASE", "TYPE", "REGION", "ZONE", "AGE", "NODE", "PROVIDERID", "STATE"]
    row = wide[1].split()
    assert row[:2] == ["ocp-demo-x7k2p-worker-x1y2z", "Running"]
    assert row[-3:] == ["worker-node-1", "ovirt://0b0c3f1e-0000-4000-8000-000000000001", "up"]
    narrow = crds.kubectl("get", "machines", "-n", namespace).stdout.splitlines()
    assert narrow[0].split() == ["NAME", "PHASE", "TYPE", "REGION", "ZONE", "AGE"]


def test_get_machinesets_and_mhcs_print_openshift_columns(crds, namespace):
    apply(crds, sample_machineset(namespace))
    header = crds.kubectl("get", "machinesets", "-n", namespace).stdout.splitlines()[0].split()
    assert header == ["NAME", "DESIRED", "CURRENT", "READY", "AVAILABLE", "AGE"]
    apply(crds, _mhc(namespace, maxUnhealthy="40%"))
    lines = crds.kubectl("get", "mhc", "-n", namespace).stdout.splitlines()
    assert lines[0].split() == ["NAME", "MAXUNHEALTHY", "EXPECTEDMACHINES", "CURRENTHEALTHY"]
    assert lines[1].split()[:2] == ["bad", "40%"]


def test_deleting_a_machineset_garbage_collects_its_machines(crds, namespace):
    ms = sample_machineset(namespace)
    apply(crds, ms)
    owner = get(crds, "machineset", ms["metadata"]["name"], namespace)
    apply(crds, machine_from(ms, "owned-1", owner=owner))
    apply(crds, machine_from(ms, "orphan-1"))
    stored = Machine.from_dict(get(crds, "machine", "owned-1", namespace))
    assert stored.metadata.controller_ref().uid == owner["metadata"]["uid"]

    crds.kubectl("delete", "machineset", ms["metadata"]["name"], "-n", namespace)
    deadline = time.monotonic() + 60
    while True:
        names = crds.kubectl("get", "machines", "-n", namespace, "-o", "name").stdout.split()
        if "machine.machine.openshift.io/owned-1" not in names:
            break
        assert time.monotonic() < deadline, f"owned machine not garbage-collected: {names}"
        time.sleep(0.5)
    assert names == ["machine.machine.openshift.io/orphan-1"]


# --- Cluster API's infrastructure kinds ----------------------------------------------------------------------------

INFRA_KINDS = {"ovirtclusters": "OvirtCluster", "ovirtmachines": "OvirtMachine",
               "ovirtmachinetemplates": "OvirtMachineTemplate"}
VM_ID = "0b0c3f1e-0000-4000-8000-000000000001"
CLUSTER_ID = "0b0c3f1e-0000-4000-8000-0000000000c1"
VM = {"template_name": "ubuntu-2404-kube", "cluster_id": CLUSTER_ID, "memory_mb": 4096,
      "cpu": {"sockets": 1, "cores": 2, "threads": 1}, "os_disk": {"size_gb": 20}, "type": "server"}


@pytest.fixture
def infra_crds(crds):
    crds.wait_established(*(f"{plural}.{infrastructure.GROUP}" for plural in INFRA_KINDS))
    return crds


def infra(kind: str, name: str, namespace: str, spec: dict) -> dict:
    return {"apiVersion": infrastructure.API_VERSION, "kind": kind, "metadata": {
        "name": name, "namespace": namespace, "labels": {CLUSTER_NAME_LABEL: "c1"}}, "spec": spec}


def test_infrastructure_crds_carry_the_contract_label_cluster_api_reads(infra_crds):
    for plural, kind in INFRA_KINDS.items():
        served = json.loads(infra_crds.kubectl("get", "crd", f"{plural}.{infrastructure.GROUP}", "-o", "json").stdout)
        assert served["metadata"]["labels"][infrastructure.CONTRACT_LABEL] == infrastructure.VERSION
        assert [v["name"] for v in served["spec"]["versions"] if v["served"]] == [infrastructure.VERSION]
        assert served["spec"]["names"]["kind"] == kind


def test_a_cluster_api_set_of_ovirt_objects_is_accepted_with_status_as_a_subresource(infra_crds, namespace):
    cluster = infra("OvirtCluster", "c1", namespace, {
        "controlPlaneEndpoint": {"host": "api.c1.example", "port": 6443}, "identityRef": {"name": "c1-engine"},
        "clusterId": CLUSTER_ID, "failureDomains": [{"name": "fd-a", "clusterId": CLUSTER_ID, "controlPlane": True}]})
    template = infra("OvirtMachineTemplate", "c1-md-0-t1", namespace, {"template": {"spec": VM}})
    machine = infra("OvirtMachine", "c1-md-0-abcde", namespace, {**VM, "providerID": f"ovirt://{VM_ID}"})
    provisioned = {"initialization": {"provisioned": True}}
    for doc, status in ((cluster, provisioned), (template, {"capacity": {"cpu": "2"}}), (machine, provisioned)):
        apply(infra_crds, {**doc, "status": status})
    stored = OvirtMachine.from_dict(get(infra_crds, "ovirtmachine", "c1-md-0-abcde", namespace))
    assert stored.spec.provider_id == f"ovirt://{VM_ID}" and stored.spec.memory_mb == 4096
    for plural, name in (("ovirtclusters", "c1"), ("ovirtmachinetemplates", "c1-md-0-t1"),
                         ("ovirtmachines", "c1-md-0-abcde")):
        assert not get(infra_crds, plural, name, namespace).get("status"), plural


def test_get_ovirtmachines_prints_cluster_provisioned_state_providerid(infra_crds, namespace):
    apply(infra_crds, infra("OvirtMachine", "c1-md-0-abcde", namespace, {**VM, "providerID": f"ovirt://{VM_ID}"}))
    infra_crds.kubectl("patch", "ovirtmachine", "c1-md-0-abcde", "-n", namespace, "--subresource=status",
                       "--type=merge", "-p", json.dumps({"status": {"initialization": {"provisioned": True},
                                                                    "instanceState": "up", "instanceId": VM_ID}}))
    lines = infra_crds.kubectl("get", "ovirtmachines", "-n", namespace).stdout.splitlines()
    assert lines[0].split() == ["NAME", "CLUSTER", "PROVISIONED", "STATE", "PROVIDERID", "AGE"]
    assert lines[1].split()[:5] == ["c1-md-0-abcde", "c1", "true", "up", f"ovirt://{VM_ID}"]
    # Listed with Cluster API's own kinds.
    assert "ovirtmachine." in infra_crds.kubectl("get", "cluster-api", "-n", namespace, "-o", "name").stdout


@pytest.mark.parametrize("kind, spec, field", [
    ("OvirtCluster", {"identityRef": {"name": "e"}, "controlPlaneEndpoint": {"port": 70000}},
     "spec.controlPlaneEndpoint.port"),
    ("OvirtCluster", {"identityRef": {"name": "e"}, "clusterId": "Default"}, "spec.clusterId"),
    ("OvirtCluster", {"clusterId": CLUSTER_ID}, "spec.identityRef"),
    ("OvirtCluster", {"identityRef": {"name": "e"}, "failureDomains": [{"name": "fd-a"}]},
     "spec.failureDomains[0].clusterId"),
    ("OvirtMachine", {**VM, "memory_mb": "4096"}, "spec.memory_mb"),
    ("OvirtMachineTemplate", {}, "spec.template"),
])
def test_infrastructure_objects_their_schema_refuses(infra_crds, namespace, kind, spec, field):
    out = apply(infra_crds, infra(kind, "bad", namespace, spec), check=False)
    assert out.returncode != 0 and field in out.stderr, out.stderr
