"""Real guests: a VM the simulator was told to run for real (by template, or by name) boots as
a real node (hack/ovirtsim/real_guests.py): a kubelet v1.35.4 with its containerd registers the Node named after
the VM, runs pods, sees the VM's attached disks as block devices (loop devices under their by-id names), and stops
with its containers and disks when the VM crashes or is powered off; starting the VM again brings it back. A
Machine whose VM is a real guest reaches Running linked to the real kubelet's Node, and its deletion stops it."""

from __future__ import annotations

import json
import stat
import subprocess
import uuid
from pathlib import Path

import pytest
from ovirtsdk4 import types

from hack.controlplane.cluster import _alive
from hack.controlplane.nodes import CGROUP_V1, PAUSE_IMAGE
from hack.ovirtsim.testing import running_simulator
from machine_controller.runtime.testing import wait_until
from machines import unique_name

WAIT = (60.0, 0.3)  # wait_until's timeout and interval: a real node starts and stops in seconds

IGNITION = json.dumps({"ignition": {"version": "3.2.0"}})


@pytest.fixture
def real_sim(cluster, real_node_images, tmp_path):
    with running_simulator(tmp_path, kubeconfig=cluster.kubeconfig) as sim:
        sim.control.real_guests(cluster.plane.dir, list(real_node_images), ["rhcos"])
        conn = sim.connection()
        try:
            yield sim, conn
        finally:
            conn.close()


def _node(cluster, name: str) -> dict | None:
    return cluster.read(f"/api/v1/nodes/{name}")


def _ready_kubelet(cluster, name: str) -> dict | None:
    """The Node when a real kubelet posts it Ready (a simulated guest's would say cri-o and v1.29.5)."""
    node = _node(cluster, name)
    if not node or node["status"]["nodeInfo"]["kubeletVersion"] != "v1.35.4":
        return None
    ready = [c for c in node["status"].get("conditions", []) if c["type"] == "Ready"]
    return node if ready and ready[0]["status"] == "True" else None


def _node_processes(name: str) -> list[int]:
    """Processes of the node's containers, read from its cgroups."""
    return [int(p) for top in CGROUP_V1.glob(f"pids/omc-node*-{name}") for f in top.rglob("cgroup.procs")
            for p in f.read_text().split()]


def _kubelet_and_containerd(sim, vm_id: str) -> list[int]:
    """The real node's kubelet and containerd, found by the node directory in their command lines."""
    name = sim.control.real_nodes()["nodes"].get(vm_id)
    if name is None:
        return []
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                argv = (proc / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if f"-node-{name}/" in argv and Path(argv.split("\0")[0]).name in ("kubelet", "containerd"):
                out.append(int(proc.name))
    return out


def _attach_disk(conn, vm_id: str, name: str) -> str:
    system = conn.system_service()
    sd = next(s for s in system.storage_domains_service().list() if s.type == types.StorageDomainType.DATA)
    disk = system.disks_service().add(types.Disk(name=name, provisioned_size=2**30, format=types.DiskFormat.COW,
                                                 sparse=True, storage_domains=[types.StorageDomain(id=sd.id)]))
    disk_svc = system.disks_service().disk_service(disk.id)
    assert wait_until(lambda: disk_svc.get().status == types.DiskStatus.OK, *WAIT), "disk OK"
    system.vms_service().vm_service(vm_id).disk_attachments_service().add(types.DiskAttachment(
        disk=types.Disk(id=disk.id), interface=types.DiskInterface.VIRTIO_SCSI, bootable=False, active=True))
    return disk.id


def test_a_real_guest_runs_pods_and_stops_with_its_vm(cluster, real_sim, namespace):
    sim, conn = real_sim
    name = f"real-{uuid.uuid4().hex[:6]}"
    vms = conn.system_service().vms_service()
    vm = vms.add(types.Vm(name=name, cluster=types.Cluster(name="Default"), template=types.Template(name="rhcos"),
                          memory=4 * 2**30, cpu=types.Cpu(topology=types.CpuTopology(cores=2, sockets=1, threads=1)),
                          initialization=types.Initialization(custom_script=IGNITION, host_name=name)),
                 clone=True)
    svc = vms.vm_service(vm.id)
    try:
        assert wait_until(lambda: svc.get().status == types.VmStatus.DOWN, *WAIT), "VM created"
        svc.start()
        assert wait_until(lambda: _ready_kubelet(cluster, name), *WAIT), f"real Node {name} not Ready"
        node = _ready_kubelet(cluster, name)
        assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
        assert sim.control.vm(vm.id)["node_name"] == name

        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "on-guest"},
               "spec": {"nodeSelector": {"kubernetes.io/hostname": name}, "terminationGracePeriodSeconds": 1,
                        "containers": [{"name": "pause", "image": PAUSE_IMAGE, "imagePullPolicy": "Never"}]}}
        cluster.kubectl("-n", namespace, "apply", "-f", "-", input=json.dumps(pod))
        cluster.kubectl("-n", namespace, "wait", "--for=condition=Ready", "pod/on-guest", "--timeout=90s")
        containers = _node_processes(name)
        daemons = _kubelet_and_containerd(sim, vm.id)
        assert containers and len(daemons) == 2

        # A disk attached to the VM is a block device of the node, under the by-id name the guest's udev makes.
        disk_id = _attach_disk(conn, vm.id, f"{name}-data")
        by_id = Path(sim.control.real_nodes()["by_id"][vm.id])
        link = by_id / f"scsi-0QEMU_QEMU_HARDDISK_{disk_id[:20]}"
        assert wait_until(link.exists, *WAIT), "the attached disk's by-id link on the node"
        assert stat.S_ISBLK(link.stat().st_mode) and link.resolve().name.startswith("loop")
        loop = link.resolve()

        # The qemu process dies: the kubelet, containerd and every container of the guest go with it.
        sim.control.crash_vm(vm.id)
        assert wait_until(lambda: vm.id not in sim.control.real_nodes()["nodes"], *WAIT), \
            "real node stopped after the crash"
        for pid in (*containers, *daemons):
            assert not _alive(pid), pid  # gone, or a zombie its parent has yet to reap
        assert list(CGROUP_V1.glob(f"*/omc-node*-{name}")) == []
        assert not link.exists()
        assert str(loop) not in subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout

        # Started again, the guest boots its node again; a power-off stops it.
        assert wait_until(lambda: svc.get().status == types.VmStatus.DOWN, *WAIT), "VM down after the crash"
        svc.start()
        assert wait_until(lambda: vm.id in sim.control.real_nodes()["nodes"], *WAIT), "real node started again"
        assert wait_until(lambda: _kubelet_and_containerd(sim, vm.id), *WAIT), \
            "kubelet and containerd of the rebooted guest"
        daemons = _kubelet_and_containerd(sim, vm.id)
        svc.stop()
        assert wait_until(lambda: vm.id not in sim.control.real_nodes()["nodes"], *WAIT), \
            "real node stopped after the power-off"
        for pid in daemons:
            assert not _alive(pid), pid  # gone, or a zombie its parent has yet to reap
        assert sim.control.real_nodes()["errors"] == {}
    finally:
        cluster.kubectl("delete", "node", name, "--wait=false", check=False)


def test_a_machine_of_a_real_guest_runs_on_a_real_node(cluster, real_node_images, menv):
    # Only this test's VMs are real among the session simulator's guests.
    menv.sim.control.real_guests(cluster.plane.dir, list(real_node_images), vms=["e2e-realguest-*"])
    menv.controller()
    name = menv.create_machine(unique_name("e2e-realguest"))
    try:
        m = menv.wait_phase(name, "Running", timeout=120)
        vm_id = m["metadata"]["annotations"]["VmId"]
        assert menv.sim.control.real_nodes()["nodes"][vm_id] == name
        assert wait_until(lambda: _ready_kubelet(cluster, name), *WAIT), f"real Node {name} not Ready"
        node = _ready_kubelet(cluster, name)
        assert node["spec"]["providerID"] == m["spec"]["providerID"] == f"ovirt://{vm_id}"
        assert m["status"]["nodeRef"]["name"] == name
        daemons = _kubelet_and_containerd(menv.sim, vm_id)
        assert len(daemons) == 2

        cluster.kubectl("-n", menv.namespace, "delete", "machine", name, "--wait=false")
        menv.wait_gone(name, timeout=120)
        assert wait_until(lambda: vm_id not in menv.sim.control.real_nodes()["nodes"], *WAIT), \
            "real node stopped with its VM"
        for pid in daemons:
            assert not _alive(pid), pid  # gone, or a zombie its parent has yet to reap
    finally:
        cluster.kubectl("delete", "node", name, "--wait=false", check=False)
