"""ovirt-csi-driver on the local control plane's real nodes, as the failover tests
(test/e2e/test_storage_csi_real.py) and `make demo`'s failover scene (hack/demo/failover.py) deploy it, with the
stateful pod both follow through a node's failure (docs/storage.md#failover-on-real-nodes).

What the bed changes in the shipped manifests, and why: `imagePullPolicy: Never` (no registry is reachable; the
images are imported from hack/images' archives), and the CSI controller Deployment is kept on the bed's real nodes,
a replacement's too, by a label of their Nodes (the simulated guests post Nodes too, but they have no kubelet to
run a pod).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import ovirtsdk4 as sdk
import yaml

from hack import images
from hack.images import go_programs, product

REPO = Path(__file__).resolve().parents[1]
CSI_CONFIG = REPO / "config" / "storage" / "csi"
SAMPLE_CLASS = REPO / "config" / "storage" / "samples" / "storageclass-csi.yaml"
DRIVER = "csi.ovirt.org"

# The pod writes its data once and keeps it: a file of random bytes and its checksum, checked at every start.
WRITER = ("test -f /data/file || { head -c 1048576 /dev/urandom > /data/file && "
          "sha256sum /data/file > /data/file.sha256; }; sha256sum -c /data/file.sha256 && exec sleep 2147483647")
CHECK = "cd / && sha256sum -c /data/file.sha256"  # prints `/data/file: OK` when the data is intact


def archives() -> list[Path]:
    """The images a real node of the bed imports: the pause image, the product image (the CSI driver's, and the
    stateful pod's shell) and the CSI sidecars."""
    return [images.archive("pause"), images.archive(product.NAME),
            *(images.archive(i.name) for i in go_programs.IMAGES)]


def on_nodes(names: list[str]) -> dict:
    """A pod affinity to the named Nodes."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": sorted(names)}]}]}}}


def on_labelled(node_label: str, value: str) -> dict:
    """A pod's node affinity to the Nodes labelled `node_label=value`."""
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": node_label, "operator": "In", "values": [value]}]}]}}


def shipped(kustomized: str, node_label: str, value: str) -> list[dict[str, Any]]:
    """config/storage/csi as `kubectl kustomize` built it (`kustomized`), with the bed's changes (module docstring)
    for the real nodes labelled `node_label=value`."""
    docs = list(yaml.safe_load_all(kustomized))
    for doc in docs:
        if doc["kind"] in ("Deployment", "DaemonSet"):
            for c in doc["spec"]["template"]["spec"]["containers"]:
                c["imagePullPolicy"] = "Never"
        if doc["kind"] == "Deployment":
            doc["spec"]["template"]["spec"].setdefault("affinity", {})["nodeAffinity"] = on_labelled(node_label, value)
    return docs


def sample_class(name: str, fstype: str | None = None) -> dict:
    """config/storage/samples/storageclass-csi.yaml under the name `name`, with another filesystem if asked."""
    sc = yaml.safe_load(SAMPLE_CLASS.read_text())
    sc["metadata"]["name"] = name
    if fstype:
        sc["parameters"]["csi.storage.k8s.io/fstype"] = fstype
    return sc


def statefulset(node_label: str, value: str, storage_class: str, name: str = "db") -> dict:
    """A StatefulSet of one pod (`<name>-0`) on the Nodes labelled `node_label=value`, which keeps WRITER's data on
    a claim `data-<name>-0` of `storage_class`."""
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name}, "spec": {
        "serviceName": name, "replicas": 1, "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": {
            "affinity": {"nodeAffinity": on_labelled(node_label, value)},
            "terminationGracePeriodSeconds": 1, "securityContext": {"fsGroup": 65532},
            "containers": [{"name": name, "image": product.TAG, "imagePullPolicy": "Never",
                            "command": ["sh", "-c", WRITER],
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}},
        "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
            "resources": {"requests": {"storage": "1Gi"}}}}]}}


def pod_ready(pod: dict | None, other_than: str = "") -> bool:
    """Whether the pod (as read, None when absent) is Ready and not being deleted; if `other_than` (a uid) is
    given, only another pod of the name counts (the StatefulSet's new pod after a failover)."""
    return bool(pod) and not pod["metadata"].get("deletionTimestamp") and pod["metadata"]["uid"] != other_than \
        and any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


def attached_to(conn: sdk.Connection, vm_ids, disk_id: str) -> list[str]:
    """The VMs among `vm_ids` that the engine has the disk attached to (a VM removed meanwhile has none)."""
    attached = []
    for vm_id in vm_ids:
        try:
            attachments = conn.system_service().vms_service().vm_service(vm_id).disk_attachments_service().list()
        except sdk.NotFoundError:
            continue
        if any(a.id == disk_id for a in attachments):
            attached.append(vm_id)
    return attached


def absent(service) -> bool:
    """Whether the engine answers 404 for the object of an SDK service (a VM's, a disk's)."""
    try:
        service.get()
    except sdk.NotFoundError:
        return True
    return False


def disk_gone(conn: sdk.Connection, disk_id: str) -> bool:
    return absent(conn.system_service().disks_service().disk_service(disk_id))


def kubelet_mount_tables() -> dict[str, str]:
    """Each running real node's mount table (its kubelet's mount namespace, the guest's view), by Node name. A
    frozen kubelet's is read all the same; a stopped node has none."""
    tables: dict[str, str] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
            if Path(argv[0]).name != "kubelet":
                continue
            name = next(a.partition("=")[2] for a in argv if a.startswith("--hostname-override="))
            tables[name] = (proc / "mountinfo").read_text()
        except (OSError, StopIteration):
            continue  # gone meanwhile, or not a node's kubelet
    return tables


def mounted_on(pv_name: str) -> list[str]:
    """The real nodes whose kubelet has the PV mounted."""
    return sorted(n for n, table in kubelet_mount_tables().items() if f"/{pv_name}/" in table)


class Exclusive(threading.Thread):
    """Samples, twice a second until stopped, which VMs named like `vm_search` (an engine search, e.g. a
    MachineSet's `name=<set>-*`, a replacement's VM too) the disk is attached to (the engine's view) and which real
    nodes have its PV mounted (their mount tables): the disk must never be attached to two VMs nor mounted on two
    nodes at one moment."""

    def __init__(self, conn: sdk.Connection, vm_search: str, disk_id: str, pv_name: str) -> None:
        super().__init__(name="exclusive-sampler", daemon=True)
        self._conn = conn  # its own: an SDK connection is not shared between threads; closed at the end
        self._search, self._disk_id, self._pv = vm_search, disk_id, pv_name
        self._halt = threading.Event()
        self.samples = 0
        self.most_attached = self.most_mounted = 0
        self.attached: list[str] = []  # the last sample's
        self.mounted: list[str] = []

    def run(self) -> None:
        try:
            while not self._halt.wait(0.5):
                vms = self._conn.system_service().vms_service().list(search=self._search)
                attached = attached_to(self._conn, [vm.id for vm in vms], self._disk_id)
                mounted = mounted_on(self._pv)
                self.attached, self.mounted = attached, mounted
                self.most_attached = max(self.most_attached, len(attached))
                self.most_mounted = max(self.most_mounted, len(mounted))
                self.samples += 1
        finally:
            self._conn.close()

    def stop(self) -> "Exclusive":
        self._halt.set()
        self.join(timeout=30)
        return self
