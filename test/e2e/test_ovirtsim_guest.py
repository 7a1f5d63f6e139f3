"""The simulated guest joins a real API server like an RHCOS node: Node named after the host name, InternalIP,
Ready while up; Ready=False after a guest shutdown, Unknown once silent after a power-off or a crash; an invalid
Ignition payload never joins."""

from __future__ import annotations

import json
import time
import uuid

import kubernetes
import pytest
from kubernetes.utils import parse_quantity
from ovirtsdk4 import types

from hack.ovirtsim.seed import KUBELET_VERSIONS
from hack.ovirtsim.testing import running_simulator

IGNITION = json.dumps({"ignition": {"version": "3.2.0"}})


def _wait(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(0.2)


@pytest.fixture
def guest_env(cluster, tmp_path):
    core = kubernetes.client.CoreV1Api(cluster.api_client())
    created: list[str] = []
    with running_simulator(tmp_path, kubeconfig=cluster.kubeconfig,
                           timings={"node_heartbeat": 1.0, "node_unknown_after": 2.0}) as sim:
        conn = sim.connection()
        yield sim, conn, core, created
        conn.close()
    for name in created:
        try:
            core.delete_node(name)
        except kubernetes.client.ApiException:
            pass


def _start_vm(conn, name: str, ignition: str | None, template: str = "rhcos") -> types.Vm:
    vms = conn.system_service().vms_service()
    vm = vms.add(types.Vm(name=name, cluster=types.Cluster(name="Default"), template=types.Template(name=template),
                          memory=4 * 2**30, cpu=types.Cpu(topology=types.CpuTopology(cores=2, sockets=1, threads=1)),
                          initialization=types.Initialization(custom_script=ignition, host_name=name)),
                 clone=True)
    svc = vms.vm_service(vm.id)
    _wait(lambda: svc.get().status == types.VmStatus.DOWN)
    svc.start()
    _wait(lambda: svc.get().status == types.VmStatus.UP)
    return vm


def _node(core, name):
    try:
        return core.read_node(name)
    except kubernetes.client.ApiException as err:
        if err.status == 404:
            return None
        raise


def _ready(node) -> str | None:
    for cond in node.status.conditions or []:
        if cond.type == "Ready":
            return cond.status
    return None


def test_guest_with_ignition_joins_and_follows_the_vm_lifecycle(guest_env):
    sim, conn, core, created = guest_env
    name = f"worker-{uuid.uuid4().hex[:6]}"
    created.append(name)
    vm = _start_vm(conn, name, IGNITION)
    node = _wait(lambda: (lambda n: n if n is not None and _ready(n) == "True" else None)(_node(core, name)))

    ips = {ip.address for d in conn.system_service().vms_service().vm_service(vm.id).reported_devices_service().list()
           if d.name == "eth0" for ip in d.ips if ip.version == types.IpVersion.V4}
    addresses = {(a.type, a.address) for a in node.status.addresses}
    assert ("InternalIP", ips.pop()) in addresses and ("Hostname", name) in addresses
    assert node.spec.provider_id is None  # the providerID controller's job, not the kubelet's
    assert node.status.node_info.system_uuid == vm.id
    assert parse_quantity(node.status.capacity["cpu"]) == 2
    assert parse_quantity(node.status.capacity["memory"]) == 4 * 2**30

    first_beat = next(c.last_heartbeat_time for c in node.status.conditions if c.type == "Ready")
    _wait(lambda: next(c.last_heartbeat_time for c in _node(core, name).status.conditions
                       if c.type == "Ready") > first_beat, timeout=10)

    svc = conn.system_service().vms_service().vm_service(vm.id)
    svc.shutdown()
    _wait(lambda: _ready(_node(core, name)) == "False")
    # The kubelet says NotReady as the shutdown begins; the engine refuses a start until the VM is down (409).
    _wait(lambda: svc.get().status == types.VmStatus.DOWN)
    svc.start()
    _wait(lambda: _ready(_node(core, name)) == "True")

    svc.stop()  # power off: the kubelet cannot post; the Node goes silent, then Unknown (never False)
    seen = []
    _wait(lambda: seen.append(_ready(_node(core, name))) or seen[-1] == "Unknown")
    assert "False" not in seen
    svc.start()
    _wait(lambda: _ready(_node(core, name)) == "True")

    sim.control.crash_vm(vm.id)
    _wait(lambda: _ready(_node(core, name)) == "Unknown")


def test_invalid_ignition_never_joins(guest_env):
    sim, conn, core, created = guest_env
    good, bad = f"good-{uuid.uuid4().hex[:6]}", f"bad-{uuid.uuid4().hex[:6]}"
    created += [good, bad]
    _start_vm(conn, bad, '{"ignition": {"version": "banana"}}')
    _start_vm(conn, good, IGNITION)
    _wait(lambda: _node(core, good) is not None)  # by now the bad guest had as long to join as the good one
    time.sleep(1.0)
    assert _node(core, bad) is None
    bad_vm = next(v for v in sim.control.vms() if v["name"] == bad)
    assert bad_vm["status"] == "up" and bad_vm["ips"] == [] and bad_vm["provisioned"] is False


def test_a_guest_the_api_server_refuses_does_not_hold_back_the_others(guest_env):
    """Each guest's kubelet is on its own: a Node name the API server refuses is reported for that VM, and the
    guests started after it still join (before, the first refusal ended every pass of the Node sync)."""
    sim, conn, core, created = guest_env
    suffix = uuid.uuid4().hex[:6]
    bad, good = f"Bad_Name_{suffix}", f"good-{suffix}"  # a valid VM name, an invalid Node name
    created += [bad, good]
    bad_vm = _start_vm(conn, bad, IGNITION)
    _wait(lambda: next(v for v in sim.control.vms() if v["id"] == bad_vm.id)["node_error"])
    _start_vm(conn, good, IGNITION)
    node = _wait(lambda: (lambda n: n if n is not None and _ready(n) == "True" else None)(_node(core, good)))
    assert node.status.node_info.system_uuid != bad_vm.id
    report = sim.control.vm(bad_vm.id)
    assert report["status"] == "up" and report["provisioned"] is True and report["node_name"] == bad
    assert "is invalid" in report["node_error"] and bad in report["node_error"]
    assert report["node_error"] in sim.log_file.read_text()  # reported once in the simulator's log
    assert _node(core, bad) is None


# A Cluster API bootstrap cloud-config shared by every Machine: the kubelet's provider ID from the instance id.
CLOUD_CONFIG = """## template: jinja
#cloud-config
write_files:
- path: /etc/default/kubelet
  content: |
    KUBELET_EXTRA_ARGS="--node-labels=role=worker --provider-id=ovirt://{{ v1.instance_id }}"
"""


def test_cloud_init_node_image_joins_with_the_provider_id_its_cloud_config_gives_the_kubelet(guest_env):
    sim, conn, core, created = guest_env
    joined, rhcos, no_config = (f"{p}-{uuid.uuid4().hex[:6]}" for p in ("ci", "ci-rhcos", "ci-none"))
    created += [joined, rhcos, no_config]
    _start_vm(conn, rhcos, CLOUD_CONFIG)  # RHCOS runs Ignition only: a cloud-config leaves it unprovisioned
    _start_vm(conn, no_config, "#!/bin/sh\necho not a cloud-config", template="ubuntu-2404-kube")
    vm = _start_vm(conn, joined, CLOUD_CONFIG, template="ubuntu-2404-kube")
    node = _wait(lambda: (lambda n: n if n is not None and _ready(n) == "True" else None)(_node(core, joined)))
    assert node.spec.provider_id == f"ovirt://{vm.id}"
    assert node.status.node_info.system_uuid == vm.id
    assert node.status.node_info.kubelet_version == KUBELET_VERSIONS["ubuntu-2404-kube"] != KUBELET_VERSIONS["rhcos"]
    time.sleep(2)  # two heartbeats of this simulator: the others would have joined by now
    assert _node(core, rhcos) is None and _node(core, no_config) is None
