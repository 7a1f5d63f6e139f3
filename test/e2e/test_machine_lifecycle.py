"""A Machine becomes an oVirt VM of exactly the requested shape, reaches Running linked to its Node, and its
deletion leaves no VM but keeps data disks (docs/compatibility.md#machine-phases)."""

from __future__ import annotations

import json
import threading

import ovirtsdk4.types as types
import yaml

from machine_controller.runtime.testing import wait_until
from machines import machine_manifest, unique_name

GIB = 1024 ** 3


def test_installer_spec_machine_reaches_running_with_the_requested_vm(menv):
    ctl = menv.controller()
    name = menv.create_machine(unique_name())
    m = menv.wait_phase(name, "Running", timeout=90)

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

    node = json.loads(menv.cluster.kubectl("get", "node", name, "-o", "json").stdout)
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
    # ... and the node controller deletes the Node of a VM gone by id and by name (docs/compatibility.md#node-controllers).
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


def test_a_node_registered_after_its_machine_is_provisioned_gets_its_provider_id_and_machine_in_one_write(menv):
    """On real hosts the kubelet registers its Node minutes after the VM is up and the Machine `Provisioned`: the
    Node's providerID and nodelink's annotation, labels and taints then come in one write
    (docs/compatibility.md#node-controllers)."""
    from kubernetes import client, watch

    before = menv.sim.control.timings()
    # The guest (and so its kubelet) reports 15 s after the VM is up: the Machine is Provisioned long before, even on
    # a loaded machine.
    menv.sim.control.set_timings(guest_agent=15.0)
    name = unique_name()
    events: list = []  # the Node as each watch event brought it
    stream = watch.Watch()

    stopped = threading.Event()

    def watch_node() -> None:
        try:
            for ev in stream.stream(client.CoreV1Api(menv.cluster.api_client()).list_node,
                                    field_selector=f"metadata.name={name}", timeout_seconds=120):
                events.append(ev["object"])
        except Exception:
            if not stopped.is_set():  # after the test, the API server may go first
                raise

    watcher = threading.Thread(target=watch_node, daemon=True)
    watcher.start()
    try:
        menv.controller()
        manifest = machine_manifest(menv.inst, menv.namespace, name)
        manifest["spec"]["metadata"] = {"labels": {"node-role.kubernetes.io/infra": ""}}
        menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))
        menv.wait_phase(name, "Provisioned", timeout=90)
        assert not events, "the Node registered before its Machine was Provisioned: the test proves nothing"
        m = menv.wait_phase(name, "Running", timeout=90)
    finally:
        menv.sim.control.set_timings(guest_agent=before["guest_agent"])
        stopped.set()
        stream.stop()
    with_pid = [n for n in events if n.spec.provider_id]
    assert with_pid, [n.metadata.resource_version for n in events]
    first = with_pid[0]
    assert first.spec.provider_id == m["spec"]["providerID"]
    assert (first.metadata.annotations or {}).get("machine.openshift.io/machine") == f"{menv.namespace}/{name}"
    assert first.metadata.labels.get("node-role.kubernetes.io/infra") == ""
    assert m["status"]["nodeRef"]["name"] == name
