"""ovirt-csi-driver (issue 19, item 1; docs/storage.md#csi-on-real-nodes) and the FlexVolume driver with the volume
provisioner (item 2; docs/storage.md#flexvolume-on-real-nodes) deployed as users deploy them: `config/storage/csi`
and `config/storage` applied to the local control plane, whose nodes are real guests of the simulated engine (real
kubelets and containerd in VMs' stead, hack/ovirtsim/real_guests.py). Each guest sees its VM id as SMBIOS UUID and
its attached disks under /dev/disk/by-id (hack/controlplane/guest_view.py), as an oVirt VM does.

What the test bed changes in the shipped manifests, and why: `imagePullPolicy: Never` (no registry is reachable;
the images are imported from hack/images' archives); the pods other than the CSI node DaemonSet's are kept on this
module's real nodes (the session's simulated guests post Nodes too, but they have no kubelet to run a pod); and the
FlexVolume installer writes into the plugin directory this plane's kubelets and controller-manager share
(hack/controlplane/host_python.py) instead of /usr/libexec's, as an overlay for OpenShift names its own.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
import ovirtsdk4 as sdk
from ovirtsdk4 import types

from hack import images
from hack.controller_process import ControllerProcess
from hack.controlplane.host_python import volume_plugin_dir
from hack.images import go_programs, product
from machine_controller.runtime.testing import wait_until
from machine_controller.storage.flexvolume import CONF_NAME, VOLUME_ID
from machine_controller.storage.flexvolume import DRIVER as FLEX_DRIVER
from machine_controller.storage.install import EXECUTABLE, VENDOR_DIR

# The product image is rebuilt after an edit (minutes).
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800), pytest.mark.long_module]

REPO = Path(__file__).resolve().parents[2]
NS = "openshift-machine-api"
DRIVER = "csi.ovirt.org"
PREFIX = "e2e-csireal-"
IGNITION = json.dumps({"ignition": {"version": "3.2.0"}})
WAIT = (120.0, 0.3)


def _on_nodes(names: list[str]) -> dict:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": sorted(names)}]}]}}}


def _shipped(cluster, nodes: list[str]) -> list[dict[str, Any]]:
    """config/storage/csi as kustomize builds it, with the changes the offline test bed needs (module docstring)."""
    docs = list(yaml.safe_load_all(cluster.kubectl("kustomize", str(REPO / "config/storage/csi")).stdout))
    for doc in docs:
        if doc["kind"] in ("Deployment", "DaemonSet"):
            for c in doc["spec"]["template"]["spec"]["containers"]:
                c["imagePullPolicy"] = "Never"
        if doc["kind"] == "Deployment":
            doc["spec"]["template"]["spec"]["affinity"] = _on_nodes(nodes)
    return docs


def _boot_guest(conn, sim, name: str) -> str:
    vms = conn.system_service().vms_service()
    inst = sim.installation
    vm = vms.add(types.Vm(name=name, cluster=types.Cluster(id=inst.cluster_id),
                          template=types.Template(name=inst.template_name), memory=4 * 2**30,
                          cpu=types.Cpu(topology=types.CpuTopology(cores=2, sockets=1, threads=1)),
                          initialization=types.Initialization(custom_script=IGNITION, host_name=name)),
                 clone=True)
    svc = vms.vm_service(vm.id)
    assert wait_until(lambda: svc.get().status == types.VmStatus.DOWN, *WAIT), f"VM {name} created"
    svc.start()
    return vm.id


def _real_node_ready(cluster, name: str) -> dict | None:
    r = cluster.kubectl("get", "node", name, "-o", "json", check=False)
    if r.returncode != 0:
        return None
    node = json.loads(r.stdout)
    ready = [c for c in node["status"].get("conditions", []) if c["type"] == "Ready"]
    real = node["status"].get("nodeInfo", {}).get("containerRuntimeVersion", "").startswith("containerd://")
    return node if real and ready and ready[0]["status"] == "True" else None


def _csinode_drivers(cluster, name: str) -> list[dict]:
    r = cluster.kubectl("get", "csinode", name, "-o", "json", check=False)
    return json.loads(r.stdout)["spec"].get("drivers") or [] if r.returncode == 0 else []


class Bed:
    def __init__(self, cluster, sim, conn, guests: dict[str, str]) -> None:
        self.cluster, self.sim, self.conn = cluster, sim, conn
        self.guests = guests  # Node name -> VM id
        self.figures: dict[str, float] = {}


@pytest.fixture(scope="module")
def bed(cluster, ovirt, real_node_images) -> Iterator[Bed]:
    archives = [*real_node_images, images.archive(product.NAME), *(images.archive(i.name) for i in go_programs.IMAGES)]
    ovirt.control.real_guests(cluster.plane.dir, archives, vms=[f"{PREFIX}*"])
    conn = ovirt.connection()
    names = [f"{PREFIX}{uuid.uuid4().hex[:5]}" for _ in range(2)]
    guests: dict[str, str] = {}
    docs = _shipped(cluster, names)
    try:
        for name in names:
            guests[name] = _boot_guest(conn, ovirt, name)
        for name in names:
            # The simulator starts real guests one at a time, each importing the images (the product's 550 MB
            # archive among them): minutes when the machine is loaded.
            assert wait_until(lambda: _real_node_ready(cluster, name), 600, 0.5), \
                f"real Node {name}: {ovirt.control.real_nodes()}"
        cluster.ensure_namespace(NS)
        started = time.monotonic()
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
        bed = Bed(cluster, ovirt, conn, guests)
        bed.figures["applied"] = started
        yield bed
    finally:
        cluster.kubectl("delete", "-f", "-", "--ignore-not-found", "--wait=false", input=yaml.safe_dump_all(docs),
                        check=False)
        vms = conn.system_service().vms_service()
        for name, vm_id in guests.items():
            try:
                vms.vm_service(vm_id).stop()
            except Exception:  # noqa: BLE001 - already down
                pass
        for name in names:
            cluster.kubectl("delete", "node", name, "--wait=false", check=False)
        assert wait_until(lambda: not set(guests.values()) & set(ovirt.control.real_nodes()["nodes"]), *WAIT)
        for vm_id in guests.values():
            vms.vm_service(vm_id).remove()
        conn.close()


def test_each_real_node_registers_the_driver_with_its_kubelet(bed):
    """The node DaemonSet's driver registers itself (no node-driver-registrar): each kubelet lists csi.ovirt.org
    in its CSINode with the VM id as node id, which the driver read from the guest's SMBIOS UUID."""
    cluster = bed.cluster
    for name, vm_id in bed.guests.items():
        assert wait_until(lambda: _csinode_drivers(cluster, name), *WAIT), \
            cluster.kubectl("-n", NS, "get", "pods", "-o", "wide").stdout
        drivers = _csinode_drivers(cluster, name)
        assert [(d["name"], d["nodeID"]) for d in drivers] == [(DRIVER, vm_id)]
        assert _real_node_ready(cluster, name)["status"]["nodeInfo"]["systemUUID"] == vm_id
    bed.figures["registered"] = time.monotonic() - bed.figures["applied"]
    print(f"\nCSINode lists {DRIVER} on both nodes {bed.figures['registered']:.1f} s after the apply")

    # The driver serves its own liveness endpoint (no livenessprobe sidecar): the Probe and the registration pass.
    pods = json.loads(cluster.kubectl("-n", NS, "get", "pods", "-l", "app.kubernetes.io/name=ovirt-csi-node",
                                      "-o", "json").stdout)["items"]
    ours = [p for p in pods if p["spec"].get("nodeName") in bed.guests]
    assert len(ours) == 2
    for pod in ours:
        (status,) = pod["status"]["containerStatuses"]
        assert status["ready"] and status["restartCount"] == 0, status
        with urllib.request.urlopen(f"http://{pod['status']['podIP']}:9809/healthz?verbose", timeout=10) as r:
            body = r.read().decode()
        assert "[+]csi-probe ok" in body and "[+]kubelet-registration ok" in body, body


def _attached_to(conn, vm_ids, disk_id: str) -> list[str]:
    """The VMs among `vm_ids` that the disk is attached to."""
    return [vm_id for vm_id in vm_ids
            if any(a.id == disk_id for a in conn.system_service().vms_service().vm_service(vm_id)
                   .disk_attachments_service().list())]


def _disk_gone(conn, disk_id: str) -> bool:
    try:
        conn.system_service().disks_service().disk_service(disk_id).get()
    except sdk.NotFoundError:
        return True
    return False


def _exec(cluster, ns: str, pod: str, script: str) -> str:
    return cluster.kubectl("-n", ns, "exec", pod, "--", "sh", "-c", script).stdout


def _sample_class(name: str) -> dict:
    """config/storage/samples/storageclass-csi.yaml under a name of this test, with xfs: this machine's kernel
    refuses ext4's online resize ioctl even to root (docs/storage.md#csi-sanity), and the claim is grown online."""
    sc = yaml.safe_load((REPO / "config/storage/samples/storageclass-csi.yaml").read_text())
    sc["metadata"]["name"] = name
    sc["parameters"]["csi.storage.k8s.io/fstype"] = "xfs"
    return sc


# The pod writes its data once and keeps it: a file of random bytes and its checksum, checked on every start.
_WRITER = ("test -f /data/file || { head -c 1048576 /dev/urandom > /data/file && "
           "sha256sum /data/file > /data/file.sha256; }; sha256sum -c /data/file.sha256 && exec sleep 2147483647")


def test_a_statefulset_pod_gets_its_disk_formatted_mounted_and_grown(bed, kube_proxy, namespace):
    cluster, conn = bed.cluster, bed.conn
    sc = f"ovirt-csi-{uuid.uuid4().hex[:5]}"
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(_sample_class(sc)))
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"}, "spec": {
        "serviceName": "db", "replicas": 1, "selector": {"matchLabels": {"app": "db"}},
        "template": {"metadata": {"labels": {"app": "db"}}, "spec": {
            "affinity": _on_nodes(list(bed.guests)), "terminationGracePeriodSeconds": 1,
            "securityContext": {"fsGroup": 65532},
            "containers": [{"name": "db", "image": product.TAG, "imagePullPolicy": "Never",
                            "command": ["sh", "-c", _WRITER],
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}},
        "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "storageClassName": sc,
            "resources": {"requests": {"storage": "1Gi"}}}}]}}
    try:
        started = time.monotonic()
        cluster.kubectl("-n", namespace, "apply", "-f", "-", input=json.dumps(sts))
        # The StatefulSet controller creates the pod a moment later; `wait --for=condition` on a pod not yet
        # created fails at once with NotFound.
        cluster.kubectl("-n", namespace, "wait", "--for=create", "pod/db-0", "--timeout=60s")
        r = cluster.kubectl("-n", namespace, "wait", "--for=condition=Ready", "pod/db-0", "--timeout=300s", check=False)
        assert r.returncode == 0, (cluster.kubectl("-n", namespace, "describe", "pod", "db-0").stdout,
                                   cluster.kubectl("-n", NS, "get", "pods", "-o", "wide").stdout)
        pod_start = time.monotonic() - started
        print(f"\nStatefulSet pod Ready with a new volume {pod_start:.1f} s after its creation")

        pod = json.loads(cluster.kubectl("-n", namespace, "get", "pod", "db-0", "-o", "json").stdout)
        node = pod["spec"]["nodeName"]
        pvc = json.loads(cluster.kubectl("-n", namespace, "get", "pvc", "data-db-0", "-o", "json").stdout)
        pv = json.loads(cluster.kubectl("get", "pv", pvc["spec"]["volumeName"], "-o", "json").stdout)
        assert pv["spec"]["csi"]["driver"] == DRIVER
        disk_id = pv["spec"]["csi"]["volumeHandle"]
        # The disk is attached to the VM of the pod's node, and to no other.
        assert _attached_to(conn, bed.guests.values(), disk_id) == [bed.guests[node]]
        # Staged, formatted (xfs, as the class asks) and mounted: the pod's file and checksum are on it.
        assert _exec(cluster, namespace, "db-0", "stat -f -c %T /data").strip() == "xfs"
        assert "file: OK" in _exec(cluster, namespace, "db-0", "cd / && sha256sum -c /data/file.sha256")
        before = int(_exec(cluster, namespace, "db-0", "df -B1 --output=size /data | tail -1"))

        # Online expansion: the engine's disk grows, the guest sees a bigger device, the pod a bigger filesystem.
        cluster.kubectl("-n", namespace, "patch", "pvc", "data-db-0", "--type=merge",
                        "-p", '{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}')
        assert wait_until(lambda: int(_exec(cluster, namespace, "db-0", "df -B1 --output=size /data | tail -1"))
                          > before + 2**29, 180, 1.0), \
            cluster.kubectl("-n", namespace, "describe", "pvc", "data-db-0").stdout
        assert conn.system_service().disks_service().disk_service(disk_id).get().provisioned_size == 2 * 2**30
        assert "file: OK" in _exec(cluster, namespace, "db-0", "cd / && sha256sum -c /data/file.sha256")
        assert pod["status"]["containerStatuses"][0]["restartCount"] == 0

        # The pod and the claim deleted: the disk is detached from the VM and removed from the engine.
        cluster.kubectl("-n", namespace, "delete", "statefulset", "db", "--wait=true", "--timeout=120s")
        cluster.kubectl("-n", namespace, "delete", "pvc", "data-db-0", "--wait=true", "--timeout=120s")
        assert wait_until(lambda: _disk_gone(conn, disk_id), 120, 1.0), f"disk {disk_id} still in the engine"
    finally:
        cluster.kubectl("-n", namespace, "delete", "statefulset", "db", "--wait=true", "--timeout=120s", check=False)
        cluster.kubectl("-n", namespace, "delete", "pvc", "--all", "--wait=false", check=False)
        cluster.kubectl("delete", "storageclass", sc, "--ignore-not-found", check=False)


# --- FlexVolume (issue 19, item 2) ---------------------------------------------------------------------------------

SHIPPED_PLUGIN_DIR = "/usr/libexec/kubernetes/kubelet-plugins/volume/exec"


def _flexvolume_shipped(cluster, plugin_dir: Path, nodes: list[str]) -> list[dict[str, Any]]:
    """config/storage (the volume provisioner and the FlexVolume driver's installer DaemonSet) as kustomize builds
    it, with the offline test bed's changes (module docstring) and the plugin directory of this plane's kubelets
    and controller-manager (hack/controlplane/host_python.py) in the DaemonSet's hostPath and HOST_PLUGIN_DIR, as
    an overlay for OpenShift names /etc/kubernetes/kubelet-plugins/volume/exec (docs/compatibility.md#storage)."""
    docs = list(yaml.safe_load_all(cluster.kubectl("kustomize", str(REPO / "config/storage")).stdout))
    for doc in docs:
        if doc["kind"] not in ("Deployment", "DaemonSet"):
            continue
        spec = doc["spec"]["template"]["spec"]
        spec["affinity"] = _on_nodes(nodes)
        for c in spec["containers"]:
            c["imagePullPolicy"] = "Never"
            for env in c.get("env", []):
                if env["name"] == "HOST_PLUGIN_DIR":
                    assert env["value"] == SHIPPED_PLUGIN_DIR
                    env["value"] = str(plugin_dir)
        for volume in spec.get("volumes", []):
            if volume.get("hostPath", {}).get("path") == SHIPPED_PLUGIN_DIR:
                volume["hostPath"]["path"] = str(plugin_dir)
    assert any(d["kind"] == "DaemonSet" for d in docs) and any(d["kind"] == "Deployment" for d in docs)
    return docs


def _flex_class(name: str) -> dict:
    """config/storage/samples/storageclass.yaml under a name of this test."""
    sc = yaml.safe_load((REPO / "config/storage/samples/storageclass.yaml").read_text())
    sc["metadata"]["name"] = name
    return sc


def test_a_pod_writes_to_a_flexvolume_disk_the_kubelet_and_controller_manager_attach(bed, kube_proxy, namespace,
                                                                                    tmp_path):
    """The FlexVolume driver as users deploy it: its DaemonSet installs it into the kubelets' plugin directory,
    kube-controller-manager runs its attach and detach, each kubelet its waitforattach, mountdevice and mount; the
    provisioner's PV names the disk. The driver finds a Node's VM by the Node's providerID, which this project's
    ovirt-nodes controller writes (a real kubelet sets none), and by its name."""
    cluster, conn = bed.cluster, bed.conn
    plugin_dir = volume_plugin_dir(cluster.plane.dir)
    nodes = list(bed.guests)
    cluster.apply_crds()
    controller = ControllerProcess(cluster.kubeconfig, tmp_path / "ovirt-nodes.log", namespace=NS,
                                   extra_args=("--controllers=ovirt-nodes",)).start()
    docs = _flexvolume_shipped(cluster, plugin_dir, nodes)
    sc = f"ovirt-flex-{uuid.uuid4().hex[:5]}"
    try:
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([*docs, _flex_class(sc)]))
        for name, vm_id in bed.guests.items():
            assert wait_until(lambda: (_real_node_ready(cluster, name) or {}).get("spec", {}).get("providerID")
                              == f"ovirt://{vm_id}", *WAIT), controller.log_text()[-3000:]
        installed = plugin_dir / VENDOR_DIR
        assert wait_until(lambda: (installed / EXECUTABLE).exists() and (installed / CONF_NAME).exists(), *WAIT), \
            cluster.kubectl("-n", NS, "logs", "-l", "app.kubernetes.io/name=ovirt-flexvolume-driver", "--tail=20",
                            check=False).stdout

        claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "storageClassName": sc, "resources": {"requests": {"storage": "1Gi"}}}}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "db"}, "spec": {
            "affinity": _on_nodes(nodes[:1]), "terminationGracePeriodSeconds": 1,
            "securityContext": {"fsGroup": 65532},
            "containers": [{"name": "db", "image": product.TAG, "imagePullPolicy": "Never",
                            "command": ["sh", "-c", _WRITER],
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}}
        started = time.monotonic()
        cluster.kubectl("-n", namespace, "apply", "-f", "-", input=yaml.safe_dump_all([claim, pod]))
        r = cluster.kubectl("-n", namespace, "wait", "--for=condition=Ready", "pod/db", "--timeout=300s", check=False)
        assert r.returncode == 0, (cluster.kubectl("-n", namespace, "describe", "pod", "db").stdout,
                                   cluster.kubectl("-n", NS, "get", "pods", "-o", "wide").stdout)
        print(f"\n[figures] FlexVolume: pod Ready with a new disk {time.monotonic() - started:.1f} s after its "
              "creation")

        pvc = json.loads(cluster.kubectl("-n", namespace, "get", "pvc", "data", "-o", "json").stdout)
        pv = json.loads(cluster.kubectl("get", "pv", pvc["spec"]["volumeName"], "-o", "json").stdout)
        assert pv["spec"]["flexVolume"]["driver"] == FLEX_DRIVER
        disk_id = pv["spec"]["flexVolume"]["options"][VOLUME_ID]
        # Attached by the controller-manager to the VM of the pod's node and to no other; formatted as the class
        # says; the pod's file and checksum on it.
        assert _attached_to(conn, bed.guests.values(), disk_id) == [bed.guests[nodes[0]]]
        assert _exec(cluster, namespace, "db", "stat -f -c %T /data").strip() == "ext2/ext3"
        assert "file: OK" in _exec(cluster, namespace, "db", "cd / && sha256sum -c /data/file.sha256")

        # The pod gone: the kubelet unmounts, the controller-manager detaches; the claim gone: the disk is removed.
        cluster.kubectl("-n", namespace, "delete", "pod", "db", "--wait=true", "--timeout=120s")
        assert wait_until(lambda: not _attached_to(conn, bed.guests.values(), disk_id), 120, 1.0), \
            f"disk {disk_id} still attached"
        cluster.kubectl("-n", namespace, "delete", "pvc", "data", "--wait=true", "--timeout=120s")
        assert wait_until(lambda: _disk_gone(conn, disk_id), 120, 1.0), f"disk {disk_id} still in the engine"
    finally:
        cluster.kubectl("-n", namespace, "delete", "pod", "db", "--wait=true", "--timeout=120s", check=False)
        cluster.kubectl("-n", namespace, "delete", "pvc", "--all", "--wait=false", check=False)
        cluster.kubectl("delete", "-f", "-", "--ignore-not-found", "--wait=false", input=yaml.safe_dump_all(docs),
                        check=False)
        cluster.kubectl("delete", "storageclass", sc, "--ignore-not-found", check=False)
        controller.stop()
