"""ovirt-csi-driver with the real external-provisioner and external-attacher (built from their Go modules,
hack/controlplane/csi_tools.py) against the local control plane and the simulated engine: a PVC of a csi.ovirt.org
StorageClass becomes a PV and an oVirt disk, a VolumeAttachment attaches it to the Node's VM, and deleting them
detaches and removes the disk. The sidecars authenticate as the ServiceAccount of config/storage/csi/rbac.yaml, so
the shipped RBAC is what is tested. Beside them runs the FlexVolume provisioner: both provision from the same disk
layer, and neither removes the other's disks (docs/storage.md#coexistence)."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import ovirtsdk4.types as types
import pytest
import yaml

from hack.controlplane.csi_tools import CSI_ATTACHER, CSI_PROVISIONER, build_tool
from hack.csi_host import make_vm, running_driver, running_sidecars
from identities import token_kubeconfig
from machine_controller.ovirt.client import OvirtClient
from machine_controller.ovirt.connection import ConnectionPool
from machine_controller.ovirt.credentials import OvirtCredentials
from machine_controller.storage.disks import CSI_DESCRIPTION_PREFIX, GIB, Disks
from test_storage_provisioner import Provisioner, wait_for

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
RBAC = REPO / "config" / "storage" / "csi" / "rbac.yaml"
NS, ACCOUNT = "openshift-machine-api", "ovirt-csi-controller"
DRIVER = "csi.ovirt.org"


@pytest.fixture
def csi(cluster, ovirt, namespace, tmp_path):
    """The driver's controller side with both sidecars, a Node (and its CSINode, as a kubelet makes it)
    for a VM of the engine, and a csi.ovirt.org StorageClass."""
    binaries = {t.name: build_tool(t) for t in (CSI_PROVISIONER, CSI_ATTACHER)}
    cluster.ensure_namespace(NS)
    cluster.kubectl("apply", "-f", str(RBAC))
    kubeconfig = token_kubeconfig(cluster, NS, ACCOUNT, tmp_path / "sidecars.kubeconfig")
    vm_id = make_vm(ovirt)
    node = f"csi-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}, "spec": {"providerID": f"ovirt://{vm_id}"}},
        {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": node},
         "spec": {"drivers": [{"name": DRIVER, "nodeID": vm_id, "topologyKeys": None}]}}]))
    sc = f"ovirt-csi-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": sc}, "provisioner": DRIVER,
        "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate", "allowVolumeExpansion": True,
        "parameters": {"storageDomainName": "nfs-data", "thinProvisioning": "true",
                       "csi.storage.k8s.io/fstype": "ext4"}}))
    pool = ConnectionPool(size=1)
    pool.set_credentials(OvirtCredentials(url=ovirt.url, username=ovirt.username, password=ovirt.password,
                                          ca_file=ovirt.ca_file))
    with running_driver(tmp_path / "driver", ovirt, services="controller") as endpoint, \
            running_sidecars(tmp_path, endpoint, kubeconfig, {
                "csi-provisioner": [str(binaries["csi-provisioner"]), "--timeout=30s", "--default-fstype=ext4",
                                    "--leader-election=false", "--retry-interval-start=1s"],
                "csi-attacher": [str(binaries["csi-attacher"]), "--timeout=30s", "--leader-election=false",
                                 "--retry-interval-start=1s"]}):
        env = type("Csi", (), {})()
        env.sc, env.node, env.vm, env.ns, env.disks, env.log_dir = sc, node, vm_id, namespace, \
            Disks(OvirtClient(pool)), tmp_path
        yield env
    cluster.kubectl("delete", "storageclass", sc, "--ignore-not-found", check=False)
    cluster.kubectl("delete", "csinode,node", node, "--ignore-not-found", "--wait=false", check=False)
    pool.close()


def get(cluster, *args):
    r = cluster.kubectl("get", *args, "-o", "json", check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def claim(cluster, namespace, name, sc, size="1Gi"):
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
        "spec": {"storageClassName": sc, "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": size}}}}))


def bound_pv(cluster, namespace, name, timeout=90.0) -> dict:
    wait_for(lambda: (get(cluster, "pvc", "-n", namespace, name) or {}).get("status", {}).get("phase") == "Bound",
             timeout=timeout, what=f"PVC {name} Bound")
    return get(cluster, "pv", get(cluster, "pvc", "-n", namespace, name)["spec"]["volumeName"])


def test_pvc_to_disk_attach_detach_delete(csi, cluster, ovirt):
    ovirt.control.reset_counts()
    t0 = time.monotonic()
    claim(cluster, csi.ns, "data", csi.sc)
    pv = bound_pv(cluster, csi.ns, "data")
    bound_s = time.monotonic() - t0
    source = pv["spec"]["csi"]
    assert source["driver"] == DRIVER and source["fsType"] == "ext4"
    disk = csi.disks.get(source["volumeHandle"])
    assert disk is not None and disk.name == pv["metadata"]["name"] and disk.status == types.DiskStatus.OK
    assert disk.provisioned_size == GIB and disk.description.startswith(CSI_DESCRIPTION_PREFIX)

    va = f"csi-{uuid.uuid4().hex[:8]}"
    t1 = time.monotonic()
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump({
        "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": va},
        "spec": {"attacher": DRIVER, "nodeName": csi.node,
                 "source": {"persistentVolumeName": pv["metadata"]["name"]}}}))
    wait_for(lambda: (get(cluster, "volumeattachment", va) or {}).get("status", {}).get("attached"), timeout=60,
             what="VolumeAttachment attached")
    attached_s = time.monotonic() - t1
    att = csi.disks.attachment(csi.vm, disk.id)
    assert att is not None and att.active is True

    cluster.kubectl("delete", "volumeattachment", va, "--wait=false")
    wait_for(lambda: get(cluster, "volumeattachment", va) is None, timeout=60, what="VolumeAttachment gone")
    assert csi.disks.attachment(csi.vm, disk.id) is None
    assert csi.disks.get(disk.id) is not None  # detached, kept

    cluster.kubectl("delete", "pvc", "-n", csi.ns, "data", "--wait=false")
    wait_for(lambda: get(cluster, "pv", pv["metadata"]["name"]) is None, timeout=90, what="PV deleted")
    assert csi.disks.get(disk.id) is None
    counts = {k: v for k, v in ovirt.control.counts().items() if v}
    print(f"\nCSI: PVC->Bound {bound_s:.1f} s, VolumeAttachment->attached {attached_s:.1f} s, "
          f"{sum(counts.values())} oVirt requests for the lifecycle (create, attach, detach, delete; this test's own "
          f"5 checks and the logins included): {counts}")


def _forged_pv(name: str, claim_namespace: str, source: dict, provisioned_by: str) -> dict:
    # Bound to a claim that does not exist: kube-controller-manager marks it Released, and with reclaim policy
    # Delete its provisioner is asked to remove the disk it names.
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": provisioned_by}},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Delete",
                     "claimRef": {"namespace": claim_namespace, "name": f"gone-{name}", "uid": str(uuid.uuid4())},
                     **source}}


def test_flexvolume_and_csi_coexist_and_keep_to_their_own_disks(csi, cluster, ovirt):
    flex = Provisioner(cluster.kubeconfig, csi.log_dir / "flex-provisioner.log").start()
    flex_sc = f"ovirt-flex-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": flex_sc},
        "provisioner": "ovirt-volume-provisioner", "reclaimPolicy": "Delete",
        "parameters": {"storageDomainName": "nfs-data", "thinProvisioning": "true", "fsType": "ext4"}}))
    forged = []
    try:
        claim(cluster, csi.ns, "by-csi", csi.sc)
        claim(cluster, csi.ns, "by-flex", flex_sc)
        csi_pv, flex_pv = bound_pv(cluster, csi.ns, "by-csi"), bound_pv(cluster, csi.ns, "by-flex")
        assert "csi" in csi_pv["spec"] and "flexVolume" in flex_pv["spec"]  # each class served by its own
        csi_disk = csi.disks.get(csi_pv["spec"]["csi"]["volumeHandle"])
        flex_disk = csi.disks.get(flex_pv["spec"]["flexVolume"]["options"]["volumeID"])
        assert csi_disk.description.startswith(CSI_DESCRIPTION_PREFIX)
        assert not flex_disk.description.startswith(CSI_DESCRIPTION_PREFIX)

        # Each provisioner handed a released volume naming the other's disk: it refuses and the disk stays.
        a, b = f"forged-csi-{uuid.uuid4().hex[:6]}", f"forged-flex-{uuid.uuid4().hex[:6]}"
        forged += [a, b]
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([
            _forged_pv(a, csi.ns, {"csi": {"driver": DRIVER, "volumeHandle": flex_disk.id, "fsType": "ext4"}}, DRIVER),
            _forged_pv(b, csi.ns, {"flexVolume": {"driver": "ovirt/ovirt-flexvolume-driver", "fsType": "ext4",
                                                  "options": {"volumeID": csi_disk.id}}}, "ovirt-volume-provisioner")]))

        def refused(pv_name):
            ev = get(cluster, "events", "-A", "--field-selector", f"involvedObject.name={pv_name}") or {}
            return [e["message"] for e in ev.get("items", []) if e["reason"] == "VolumeFailedDelete"]

        msgs_a = wait_for(lambda: refused(a), timeout=60, what="external-provisioner refusing the FlexVolume disk")
        msgs_b = wait_for(lambda: refused(b), timeout=60, what="the volume provisioner refusing the CSI disk")
        assert any("not made by this driver" in m for m in msgs_a), msgs_a
        assert any("belongs to the CSI driver" in m for m in msgs_b), msgs_b
        assert csi.disks.get(flex_disk.id) is not None and csi.disks.get(csi_disk.id) is not None
        assert get(cluster, "pv", a) is not None and get(cluster, "pv", b) is not None

        # Their own volumes each remove, through the same disk layer.
        cluster.kubectl("delete", "pvc", "-n", csi.ns, "by-csi", "by-flex", "--wait=false")
        for pv in (csi_pv, flex_pv):
            wait_for(lambda pv=pv: get(cluster, "pv", pv["metadata"]["name"]) is None, timeout=90, what="PV deleted")
        assert csi.disks.get(csi_disk.id) is None and csi.disks.get(flex_disk.id) is None
    finally:
        for name in forged:
            cluster.kubectl("patch", "pv", name, "--type=merge", "-p",
                            '{"metadata":{"finalizers":null},"spec":{"persistentVolumeReclaimPolicy":"Retain"}}',
                            check=False)
            cluster.kubectl("delete", "pv", name, "--ignore-not-found", "--wait=false", check=False)
        cluster.kubectl("delete", "storageclass", flex_sc, "--ignore-not-found", check=False)
        flex.stop()


def test_shipped_manifests_are_accepted_by_the_api_server(cluster):
    cluster.ensure_namespace(NS)
    for target in ("config/storage/csi", "config/storage/samples/storageclass-csi.yaml"):
        flag = "-k" if not target.endswith(".yaml") else "-f"
        out = cluster.kubectl("apply", "--dry-run=server", flag, str(REPO / target)).stdout
        assert "created" in out or "configured" in out or "unchanged" in out, out
    built = list(yaml.safe_load_all(cluster.kubectl("kustomize", str(REPO / "config/storage/csi")).stdout))
    kinds = {(d["kind"], d["metadata"]["name"]) for d in built}
    assert {("CSIDriver", DRIVER), ("Deployment", "ovirt-csi-controller"), ("DaemonSet", "ovirt-csi-node")} <= kinds
    node = next(d for d in built if d["kind"] == "DaemonSet")
    # The driver registers itself with the kubelet (no node-driver-registrar: docs/storage.md), through the
    # kubelet's plugins_registry mounted where --registration-dir says.
    containers = node["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["driver"]
    assert f"--kubelet-registration-path=/var/lib/kubelet/plugins/{DRIVER}/csi.sock" in containers[0]["args"]
    assert {"name": "registration-dir", "mountPath": "/registration"} in containers[0]["volumeMounts"]
