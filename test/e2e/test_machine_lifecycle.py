"""A Machine becomes an oVirt VM of exactly the requested shape, reaches Running linked to its Node, and its
deletion leaves no VM but keeps data disks (docs/compatibility.md#machine-phases)."""

from __future__ import annotations

import functools
import json
import threading
from contextlib import contextmanager

import ovirtsdk4.types as types
import yaml

from machine_controller.runtime.testing import wait_until
from machines import machine_manifest, unique_name

GIB = 1024 ** 3


def test_installer_spec_machine_reaches_running_with_the_requested_vm(menv):
    ctl = menv.controller()
    name = menv.create_machine(unique_name())
    menv.wait_phase(name, "Running", timeout=90)
    # Its addresses may come a moment after Running: its Node may have registered before the guest agent reported
    # them (docs/compatibility.md#status).
    m = menv.wait_machine(name, lambda m: bool(m["status"].get("addresses")), "addressed")

    vm_id = m["metadata"]["annotations"]["VmId"]
    assert m["spec"]["providerID"] == f"ovirt://{vm_id}"
    assert m["metadata"]["annotations"]["machine.openshift.io/instance-state"] == "up"
    assert m["status"]["providerStatus"] == {"instanceId": vm_id, "instanceState": "up"}
    addresses = m["status"]["addresses"]
    assert addresses[0] == {"type": "InternalDNS", "address": name}
    ips = [a["address"] for a in addresses if a["type"] == "InternalIP"]
    assert ips and all(ip and not ip.startswith("fe80") and ip != "127.0.0.1" for ip in ips)
    assert m["status"]["nodeRef"]["name"] == name
    assert "machine.machine.openshift.io" in m["metadata"]["finalizers"]
    conditions = {c["type"]: c["status"] for c in m["status"]["conditions"]}
    assert conditions["InstanceExists"] == "True"

    def read_node() -> dict:
        return json.loads(menv.cluster.kubectl("get", "node", name, "-o", "json").stdout)
    # A Node registered before the Machine saw its VM up gets its providerID (with nodelink's part) right after the
    # Machine's own, which may be a moment after the Machine is Running (docs/compatibility.md#node-controllers).
    _wait("the Node's providerID", lambda: read_node()["spec"].get("providerID"))
    node = read_node()
    assert node["spec"]["providerID"] == m["spec"]["providerID"]  # byte-identical, for the autoscaler
    assert node["metadata"]["annotations"]["machine.openshift.io/machine"] == f"{menv.namespace}/{name}"

    # The engine's view of the VM: exactly what the installer's provider spec asked for.
    [vm] = menv.vms_named(name)
    assert vm["id"] == vm_id
    conn = menv.sim.connection()
    try:
        svc = conn.system_service().vms_service().vm_service(vm_id)
        full = svc.get()
        assert (full.cpu.topology.sockets, full.cpu.topology.cores, full.cpu.topology.threads) == (1, 4, 1)
        assert full.memory == 16348 * 1024 * 1024
        assert full.type == types.VmType.SERVER
        assert full.cluster.id == menv.inst.cluster_id
        assert full.initialization.custom_script == menv.ignition
        assert full.initialization.host_name == name
        boot = [a for a in svc.disk_attachments_service().list() if a.bootable]
        assert len(boot) == 1
        assert conn.system_service().disks_service().disk_service(boot[0].disk.id).get().provisioned_size == 120 * GIB
        assert [t.name for t in svc.tags_service().list()] == [menv.inst.infra_id]
        group = next(g for g in conn.system_service().clusters_service().cluster_service(menv.inst.cluster_id)
                     .affinity_groups_service().list() if g.name == f"{menv.inst.infra_id}-compute")
        members = conn.system_service().clusters_service().cluster_service(menv.inst.cluster_id) \
            .affinity_groups_service().group_service(group.id).vms_service().list()
        assert vm_id in {v.id for v in members}
    finally:
        conn.close()

    wide = menv.cluster.kubectl("-n", menv.namespace, "get", "machine", name, "-o", "wide").stdout
    assert "Running" in wide and f"ovirt://{vm_id}" in wide and name in wide
    assert ctl.proc.poll() is None



def _wait(what, probe, timeout=60.0):
    assert wait_until(probe, timeout=timeout, interval=0.3), f"timed out waiting for {what}"


def test_vm_removed_behind_our_back_fails_the_machine_and_deletes_its_node(menv):
    menv.controller()
    name = menv.create_machine(unique_name())
    m = menv.wait_phase(name, "Running", timeout=90)
    conn = menv.sim.connection()
    try:
        svc = conn.system_service().vms_service().vm_service(m["metadata"]["annotations"]["VmId"])
        svc.stop()
        _wait("the VM to stop", lambda: svc.get().status == types.VmStatus.DOWN)
        svc.remove()
    finally:
        conn.close()
    # MAO: a provisioned Machine whose instance vanished is Failed (docs/compatibility.md#machine-phases) ...
    failed = menv.wait_phase(name, "Failed", timeout=120)
    assert failed["status"]["errorMessage"] == "Can't find created instance."
    # ... and the node controller deletes the Node of a VM gone by id and by name
    # (docs/compatibility.md#node-controllers).
    _wait("the Node to be deleted", lambda: menv.cluster.kubectl("get", "node", name, check=False).returncode != 0)


def test_machine_metadata_and_taints_reach_the_node(menv):
    menv.controller()
    name = unique_name()
    manifest = machine_manifest(menv.inst, menv.namespace, name)
    manifest["spec"]["metadata"] = {"labels": {"node-role.kubernetes.io/infra": ""},
                                    "annotations": {"example.com/owner": "team-a"}}
    manifest["spec"]["taints"] = [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))
    menv.wait_phase(name, "Running", timeout=90)

    def node():
        return json.loads(menv.cluster.kubectl("get", "node", name, "-o", "json").stdout)
    _wait("the taint on the Node", lambda: any(t["key"] == "dedicated" for t in node()["spec"].get("taints", [])))
    got = node()
    assert got["metadata"]["labels"]["node-role.kubernetes.io/infra"] == ""
    assert got["metadata"]["annotations"]["example.com/owner"] == "team-a"
    assert {"key": "dedicated", "value": "infra", "effect": "NoSchedule"} in got["spec"]["taints"]


@contextmanager
def _watched(list_objects, name: str):
    """Every state of the object `name` as a watch through `list_objects` brings it, from now until the block ends
    (a Node as the client's model, a Machine as a dict)."""
    from kubernetes import watch

    seen: list = []
    stream = watch.Watch()
    stopped = threading.Event()

    def run() -> None:
        try:
            for ev in stream.stream(list_objects, field_selector=f"metadata.name={name}", timeout_seconds=120):
                seen.append(ev["object"])
        except Exception:
            if not stopped.is_set():  # after the test, the API server may go first
                raise

    threading.Thread(target=run, daemon=True).start()
    try:
        yield seen
    finally:
        stopped.set()
        stream.stop()


def _infra_machine(menv, name: str) -> None:
    manifest = machine_manifest(menv.inst, menv.namespace, name)
    manifest["spec"]["metadata"] = {"labels": {"node-role.kubernetes.io/infra": ""}}
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))


def _first_with_provider_id(menv, nodes: list, m: dict):
    """The Node as its first write with a providerID left it: that providerID and nodelink's part together."""
    with_pid = [n for n in nodes if n.spec.provider_id]
    assert with_pid, [n.metadata.resource_version for n in nodes]
    first = with_pid[0]
    assert first.spec.provider_id == m["spec"]["providerID"]
    machine_key = f"{menv.namespace}/{m['metadata']['name']}"
    assert (first.metadata.annotations or {}).get("machine.openshift.io/machine") == machine_key
    assert first.metadata.labels.get("node-role.kubernetes.io/infra") == ""
    return first


def test_a_node_registered_after_its_machine_is_provisioned_gets_its_provider_id_and_machine_in_one_write(menv):
    """On real hosts the kubelet registers its Node minutes after the VM is up and the Machine `Provisioned`: the
    Node's providerID and nodelink's annotation, labels and taints then come in one write
    (docs/compatibility.md#node-controllers)."""
    from kubernetes import client

    before = menv.sim.control.timings()
    # The guest (and so its kubelet) reports 15 s after the VM is up: the Machine is Provisioned long before, even on
    # a loaded machine.
    menv.sim.control.set_timings(guest_agent=15.0)
    name = unique_name()
    try:
        with _watched(client.CoreV1Api(menv.cluster.api_client()).list_node, name) as nodes:
            menv.controller()
            _infra_machine(menv, name)
            menv.wait_phase(name, "Provisioned", timeout=90)
            assert not nodes, "the Node registered before its Machine was Provisioned: the test proves nothing"
            m = menv.wait_phase(name, "Running", timeout=90)
            _wait("the Node's providerID", lambda: any(n.spec.provider_id for n in nodes))
    finally:
        menv.sim.control.set_timings(guest_agent=before["guest_agent"])
    _first_with_provider_id(menv, nodes, m)
    assert m["status"]["nodeRef"]["name"] == name


def test_a_node_registered_while_its_machine_is_provisioned_gets_both_in_one_write_and_the_machine_runs_in_one(menv):
    """On the simulator the guest registers its Node within a second of the VM being up, before the Machine controller
    sees it up: the Node waits for the Machine's providerID and gets it with nodelink's part in one write, and the
    Machine goes from Provisioning to Running with its nodeRef in one status write (docs/compatibility.md#nodelink,
    docs/compatibility.md#node-controllers). Once the VM is booting, the engine answers every list of VMs 4 s late, so
    that the guest registers before the controller sees its VM up, whatever the load."""
    from kubernetes import client

    api = menv.cluster.api_client()
    list_machines = functools.partial(client.CustomObjectsApi(api).list_namespaced_custom_object,
                                      "machine.openshift.io", "v1beta1", menv.namespace, "machines")
    name = unique_name()
    before = menv.sim.control.timings()
    menv.sim.control.set_timings(powering_up=3.0)  # a boot long enough to be seen
    late = None
    try:
        with _watched(client.CoreV1Api(api).list_node, name) as nodes, _watched(list_machines, name) as machines:
            menv.controller()
            _infra_machine(menv, name)
            _wait("the VM to boot", lambda: [vm.get("status") for vm in menv.vms_named(name)] == ["powering_up"],
                  timeout=90)
            late = menv.sim.control.delay("/vms", 4.0, method="GET", count=None)
            m = menv.wait_phase(name, "Running", timeout=90)
            _wait("the Node's providerID", lambda: any(n.spec.provider_id for n in nodes))
    finally:
        if late is not None:
            menv.sim.control.clear_faults(late)
        menv.sim.control.set_timings(powering_up=before["powering_up"])
    assert not nodes[0].spec.provider_id, "the Node registered with a providerID: the test proves nothing"
    _first_with_provider_id(menv, nodes, m)
    assert not any((n.metadata.annotations or {}).get("machine.openshift.io/machine") and not n.spec.provider_id
                   for n in nodes), "nodelink wrote its part before the providerID came"
    phases = [(x.get("status") or {}).get("phase") for x in machines]
    assert "Provisioned" not in phases and phases[-1] == "Running", phases
    assert m["status"]["nodeRef"]["name"] == name
