"""The FlexVolume driver as its DaemonSet installs it and as kubelet runs it, against the real API server (the
Node's providerID read with the driver's own ServiceAccount token, config/storage/driver/rbac.yaml) and the
simulated engine (the disk attached to and detached from the Node's VM)."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import ovirtsdk4.types as types
import pytest
import yaml

from hack.csi_host import LoopDisks, loop_devices_usable
from hack.flexvolume_host import FlexVolumeHost
from machine_controller.ovirt.client import OvirtClient
from machine_controller.ovirt.connection import ConnectionPool
from machine_controller.ovirt.credentials import OvirtCredentials
from machine_controller.storage.disks import GIB, DiskRequest, Disks

pytestmark = pytest.mark.e2e


def _wait(probe, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while not (value := probe()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return value


@pytest.fixture
def host(cluster, ovirt, tmp_path):
    """A Node whose providerID names a VM of the engine, a 1 GiB disk, and the driver installed for that cluster."""
    conn = ovirt.connection()
    system = conn.system_service()
    inst = ovirt.installation
    name = f"flex-{uuid.uuid4().hex[:6]}"
    vm = system.vms_service().add(types.Vm(name=name, cluster=types.Cluster(id=inst.cluster_id),
                                           template=types.Template(name=inst.template_name), memory=2 * GIB))
    vms = system.vms_service()
    _wait(lambda: vms.vm_service(vm.id).get().status == types.VmStatus.DOWN, "the VM to be down")
    conn.close()
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "spec": {"providerID": f"ovirt://{vm.id}"}}
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(node))

    pool = ConnectionPool(size=1)
    pool.set_credentials(OvirtCredentials(url=ovirt.url, username=ovirt.username, password=ovirt.password,
                                          ca_file=ovirt.ca_file))
    disks = Disks(OvirtClient(pool))
    disk = disks.create(DiskRequest(name=f"pvc-{name}", size_bytes=GIB, storage_domain="nfs-data"))
    disks.wait_ok(disk.id, timeout_s=30, interval_s=0.2)

    credentials = {"ovirt_url": ovirt.url, "ovirt_username": ovirt.username, "ovirt_password": ovirt.password,
                   "ovirt_insecure": "false", "ovirt_cafile": "", "ovirt_ca_bundle": Path(ovirt.ca_file).read_text()}
    flex = FlexVolumeHost(tmp_path, cluster.kubeconfig, lambda *a, **kw: cluster.kubectl(*a, **kw).stdout,
                          credentials)
    flex.install()
    yield {"flex": flex, "node": name, "vm": vm.id, "disk": disk, "disks": disks}
    disks.detach(vm.id, disk.id)
    disks.remove(disk.id)
    pool.close()
    cluster.kubectl("delete", "node", name, "--wait=false", check=False)


def options(h: dict, fs: str = "ext4") -> str:
    # What kubelet passes: the PV's flexVolume.options plus its own kubernetes.io/* keys.
    return json.dumps({"volumeID": h["disk"].id, "kubernetes.io/fsType": fs, "kubernetes.io/readwrite": "rw",
                       "kubernetes.io/pvOrVolumeName": h["disk"].name})


def test_installed_driver_attaches_to_the_nodes_vm_and_detaches(host):
    flex, node, vm_id, disk, disks = host["flex"], host["node"], host["vm"], host["disk"], host["disks"]
    assert flex.run("init")["capabilities"]["attach"] is True
    opts = options(host)
    assert flex.run("isattached", opts, node) == {"status": "Success", "attached": False}

    out = flex.run("attach", opts, node)
    assert out["status"] == "Success", out
    assert disk.id[:20] in out["device"]
    assert disks.attachments_of_disk(disk.id) == [vm_id]  # the Node's VM, found by its providerID
    for argv in (("isattached", opts, node), ("isattached", node, opts)):  # both argument orders
        assert flex.run(*argv) == {"status": "Success", "attached": True}

    assert flex.run("getvolumename", opts) == {"status": "Success", "volumeName": disk.name}
    assert flex.run("detach", disk.name, node)["status"] == "Success"
    assert disks.attachments_of_disk(disk.id) == []
    assert flex.run("detach", disk.name, node)["status"] == "Success"  # already detached
    assert disks.get(disk.id) is not None  # detach never removes the disk


def test_the_driver_reads_nodes_only_with_a_token_that_may(host, cluster, namespace):
    """Another ServiceAccount's token (no nodes get) is refused by the API server, and the driver says so."""
    flex, node = host["flex"], host["node"]
    cluster.kubectl("-n", namespace, "create", "serviceaccount", "nobody")
    flex.install(service_account=(namespace, "nobody"))
    out = flex.run("attach", options(host), node)
    assert out["status"] == "Failure" and "HTTP 403" in out["message"], out
    assert host["disks"].attachments_of_disk(host["disk"].id) == []


def test_a_node_without_an_ovirt_provider_id_is_refused(host, cluster):
    name = f"bare-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}))
    try:
        out = host["flex"].run("attach", options(host), name)
        assert out["status"] == "Failure" and "providerID" in out["message"], out
        out = host["flex"].run("attach", options(host), f"{name}-missing")
        assert out["status"] == "Failure" and "not found" in out["message"], out
    finally:
        cluster.kubectl("delete", "node", name, "--wait=false", check=False)


def test_kubelets_whole_sequence_on_the_hot_plugged_device(host, ovirt, tmp_path):
    """attach (masters) -> waitforattach -> mountdevice -> unmountdevice (node) -> detach (masters). The guest's
    kernel and udev are played by hack/csi_host.LoopDisks: the disk the engine attached to the VM shows up as a loop
    device with the by-id link of its short serial, and goes away when the engine detaches it."""
    reason = loop_devices_usable()
    if reason:
        pytest.skip(f"machine limitation: {reason}")
    flex, node, disk = host["flex"], host["node"], host["disk"]
    opts = options(host)
    with LoopDisks(ovirt.control, host["vm"], tmp_path / "guest") as guest:
        flex.by_id_dir = guest.by_id_dir
        device = flex.run("attach", opts, node)["device"]
        found = flex.run("waitforattach", device, opts)
        assert found["status"] == "Success" and found["device"].startswith("/dev/loop"), found
        mnt = tmp_path / "globalmount"
        assert flex.run("mountdevice", str(mnt), found["device"], opts) == {"status": "Success"}
        try:
            assert f" {mnt} " in Path("/proc/self/mountinfo").read_text()
            (mnt / "written").write_text("by a pod")
        finally:
            assert flex.run("unmountdevice", str(mnt)) == {"status": "Success"}
        assert f" {mnt} " not in Path("/proc/self/mountinfo").read_text()
        assert flex.run("detach", disk.name, node)["status"] == "Success"
        assert host["disks"].attachments_of_disk(disk.id) == []
        _wait(lambda: not any(disk.id[:20] in link.name for link in guest.by_id_dir.iterdir()),
              "the device to go with the detach")
