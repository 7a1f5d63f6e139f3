"""ovirt-csi-driver deployed as users deploy it (issue 19, item 1; docs/storage.md#csi-on-real-nodes):
`config/storage/csi` applied to the local control plane, whose nodes are real guests of the simulated engine
(real kubelets and containerd in VMs' stead, hack/ovirtsim/real_guests.py). Each guest sees its VM id as SMBIOS
UUID and its attached disks under /dev/disk/by-id (hack/controlplane/guest_view.py), as an oVirt VM does.

What the test bed changes in the shipped manifests, and why: `imagePullPolicy: Never` (no registry is reachable;
the images are imported from hack/images' archives), and the pods that are not the DaemonSet's are kept on this
module's real nodes. The session's simulated guests post Nodes too, but they have no kubelet to run a pod.
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
from hack.images import go_programs, product
from machine_controller.runtime.testing import wait_until

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
        attached = [vm_id for vm_id in bed.guests.values()
                    if any(a.id == disk_id for a in conn.system_service().vms_service().vm_service(vm_id)
                           .disk_attachments_service().list())]
        assert attached == [bed.guests[node]]
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
