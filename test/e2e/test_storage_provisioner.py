"""The volume provisioner against the real API server (kube-controller-manager binds) and the oVirt simulator."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import ovirtsdk4.types as types
import pytest
import yaml

from hack.controller_process import free_port

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
GIB = 2**30


class Provisioner:
    def __init__(self, kubeconfig: Path, log: Path):
        self.metrics_port, self.health_port = free_port(), free_port()
        self.args = [sys.executable, "-m", "machine_controller.storage.app", f"--kubeconfig={kubeconfig}",
                     "--bind-address=127.0.0.1", f"--metrics-port={self.metrics_port}",
                     f"--health-port={self.health_port}"]
        self.log = log
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Provisioner":
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        self.proc = subprocess.Popen(self.args, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT, cwd=REPO,
                                     env=env, start_new_session=True)
        return self

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def requests(self) -> float:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            text = r.read().decode()
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("ovirt_volume_ovirt_requests_total{"))


def wait_for(fn, timeout=60.0, interval=0.2, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


@pytest.fixture
def senv(cluster, ovirt, namespace, tmp_path):
    sc = f"ovirt-{uuid.uuid4().hex[:6]}"
    procs: list[Provisioner] = []
    conn = ovirt.connection()

    def storage_class(reclaim="Delete", **params):
        params = {"storageDomainName": "nfs-data", "thinProvisioning": "true", "fsType": "ext4", **params}
        name = f"{sc}-{reclaim.lower()}"
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump({
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": "ovirt-volume-provisioner", "reclaimPolicy": reclaim, "parameters": params}))
        return name

    def pvc(name, sc_name, size="3Gi", modes=("ReadWriteOnce",)):
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"storageClassName": sc_name, "accessModes": list(modes),
                     "resources": {"requests": {"storage": size}}}}))
        return json.loads(cluster.kubectl("get", "pvc", "-n", namespace, name, "-o", "json").stdout)

    def get(*args):
        r = cluster.kubectl("get", *args, "-o", "json", check=False)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def disks_named(name):
        return [d for d in conn.system_service().disks_service().list() if d.name == name]

    def start():
        p = Provisioner(cluster.kubeconfig, tmp_path / f"provisioner-{len(procs)}.log").start()
        procs.append(p)
        return p

    def events(name):
        ev = get("events", "-n", namespace, "--field-selector", f"involvedObject.name={name}")
        return [(e["reason"], e["message"]) for e in (ev or {}).get("items", [])]

    env = type("E", (), dict(storage_class=staticmethod(storage_class), pvc=staticmethod(pvc), get=staticmethod(get),
                              disks_named=staticmethod(disks_named), start=staticmethod(start), conn=conn,
                              events=staticmethod(events), ns=namespace, sc=sc))
    yield env
    for p in procs:
        p.stop()
    for reclaim in ("delete", "retain"):
        cluster.kubectl("delete", "storageclass", f"{sc}-{reclaim}", "--ignore-not-found", check=False)
    ovirt.control.clear_faults()
    conn.close()


def test_pvc_to_bound_pv_and_disk_then_delete(senv, cluster):
    prov = senv.start()
    sc = senv.storage_class("Delete")
    t0 = time.monotonic()
    claim = senv.pvc("data", sc)
    pv_name = f"pvc-{claim['metadata']['uid']}"
    wait_for(lambda: (senv.get("pvc", "-n", senv.ns, "data") or {}).get("status", {}).get("phase") == "Bound",
             what="PVC Bound")
    bound_s = time.monotonic() - t0
    pv = senv.get("pv", pv_name)
    disk_id = pv["spec"]["flexVolume"]["options"]["volumeID"]
    assert pv["spec"]["flexVolume"]["driver"] == "ovirt/ovirt-flexvolume-driver"
    assert pv["spec"]["flexVolume"]["fsType"] == "ext4"
    disk = senv.conn.system_service().disks_service().disk_service(disk_id).get()
    assert disk.name == pv_name and disk.provisioned_size == 3 * GIB and disk.sparse is True
    sd = senv.conn.system_service().storage_domains_service().storage_domain_service(
        disk.storage_domains[0].id).get()
    assert sd.name == "nfs-data"
    assert len(senv.disks_named(pv_name)) == 1
    per_volume = prov.requests()
    print(f"\nPVC->Bound {bound_s:.1f} s, {per_volume:.0f} oVirt requests for one volume")
    cluster.kubectl("delete", "pvc", "-n", senv.ns, "data")
    wait_for(lambda: not senv.disks_named(pv_name), what="disk removed")
    wait_for(lambda: senv.get("pv", pv_name) is None, what="PV deleted")


def test_retain_keeps_disk(senv, cluster):
    senv.start()
    sc = senv.storage_class("Retain")
    claim = senv.pvc("keep", sc, size="1Gi")
    pv_name = f"pvc-{claim['metadata']['uid']}"
    wait_for(lambda: (senv.get("pvc", "-n", senv.ns, "keep") or {}).get("status", {}).get("phase") == "Bound",
             what="PVC Bound")
    cluster.kubectl("delete", "pvc", "-n", senv.ns, "keep")
    wait_for(lambda: (senv.get("pv", pv_name) or {}).get("status", {}).get("phase") == "Released",
             what="PV Released")
    time.sleep(2)
    assert len(senv.disks_named(pv_name)) == 1
    cluster.kubectl("delete", "pv", pv_name)
    senv.conn.system_service().disks_service().disk_service(senv.disks_named(pv_name)[0].id).remove()


def test_rwx_refused_with_event(senv):
    senv.start()
    sc = senv.storage_class("Delete")
    claim = senv.pvc("shared", sc, size="1Gi", modes=("ReadWriteMany",))
    wait_for(lambda: any(r == "ProvisioningFailed" and "ReadWriteMany" in m for r, m in senv.events("shared")),
             what="ProvisioningFailed event")
    assert not senv.disks_named(f"pvc-{claim['metadata']['uid']}")


def test_kill_mid_provision_leaves_one_disk(senv, ovirt):
    before = ovirt.control.timings()
    ovirt.control.set_timings(disk_create=4.0)  # the disk stays locked long enough to kill the provisioner
    prov = senv.start()
    sc = senv.storage_class("Delete")
    claim = senv.pvc("killed", sc, size="2Gi")
    pv_name = f"pvc-{claim['metadata']['uid']}"
    wait_for(lambda: senv.disks_named(pv_name), what="disk created", interval=0.05)
    prov.kill()
    senv.start()
    wait_for(lambda: (senv.get("pvc", "-n", senv.ns, "killed") or {}).get("status", {}).get("phase") == "Bound",
             what="PVC Bound")
    assert len(senv.disks_named(pv_name)) == 1
    ovirt.control.set_timings(disk_create=before["disk_create"])


def test_full_storage_domain_event_then_success(senv, ovirt):
    sd = senv.conn.system_service().storage_domains_service().list(search="name=nfs-data")[0]
    ovirt.control.fill_storage_domain("nfs-data", 0)
    try:
        senv.start()
        sc = senv.storage_class("Delete")
        senv.pvc("full", sc, size="1Gi")
        wait_for(lambda: any(r == "ProvisioningFailed" for r, _ in senv.events("full")),
                 what="ProvisioningFailed event")
        assert (senv.get("pvc", "-n", senv.ns, "full") or {}).get("status", {}).get("phase") == "Pending"
    finally:
        ovirt.control.fill_storage_domain("nfs-data", sd.available)
    wait_for(lambda: (senv.get("pvc", "-n", senv.ns, "full") or {}).get("status", {}).get("phase") == "Bound",
             timeout=60, what="PVC Bound after space freed")


@pytest.mark.parametrize("fault", ["locked", "dropped"])
def test_engine_faults_never_half_made(senv, ovirt, fault):
    if fault == "locked":
        ovirt.control.inject_fault("/disks", method="POST", status=409, reason="Operation Failed",
                                   detail="[Cannot add Virtual Disk. Related operation is currently in progress. "
                                          "Please try again later.]", count=3)
    else:
        ovirt.control.drop_connection("/disks", method="POST", count=3)
    senv.start()
    sc = senv.storage_class("Delete")
    claim = senv.pvc("faulty", sc, size="1Gi")
    pv_name = f"pvc-{claim['metadata']['uid']}"
    wait_for(lambda: (senv.get("pvc", "-n", senv.ns, "faulty") or {}).get("status", {}).get("phase") == "Bound",
             timeout=90, what="PVC Bound after faults")
    assert len(senv.disks_named(pv_name)) == 1
    pv = senv.get("pv", pv_name)
    assert pv["spec"]["flexVolume"]["options"]["volumeID"] == senv.disks_named(pv_name)[0].id


def _refused(senv, claim_name: str, says: str) -> None:
    """A ProvisioningFailed event saying `says`, the claim Pending, and no disk made for it."""
    claim = senv.get("pvc", "-n", senv.ns, claim_name)
    msgs = wait_for(lambda: [m for r, m in senv.events(claim_name) if r == "ProvisioningFailed" and says in m],
                    what=f"ProvisioningFailed saying {says!r} for {claim_name}")
    assert msgs
    assert (senv.get("pvc", "-n", senv.ns, claim_name) or {}).get("status", {}).get("phase") == "Pending"
    assert not senv.disks_named(f"pvc-{claim['metadata']['uid']}")


@pytest.mark.parametrize("size, says", [
    ("1500m", "fractions of a byte"),  # a typo for 1500M: 1.5 bytes
    # The API server stores this as int64's largest value, which whole MiB would round beyond int64.
    ("8Ei", "largest"),
])
def test_sizes_out_of_range_are_refused_with_an_event(senv, size, says):
    """Never a crash or a silent Pending claim, nothing made."""
    senv.start()
    sc = senv.storage_class("Delete")
    senv.pvc("odd-size", sc, size=size)
    _refused(senv, "odd-size", says)


@pytest.mark.parametrize("what, extra, says", [
    ("selector", {"selector": {"matchLabels": {"tier": "gold"}}}, "Selector is not supported"),
    ("clone", {"dataSource": {"kind": "PersistentVolumeClaim", "name": "origin"}}, "cannot clone"),
    ("snapshot", {"dataSource": {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "snap"}},
     "restore a snapshot"),
    ("too-large", {"resources": {"requests": {"storage": "2Ti"}}}, "can ever hold"),  # nfs-data holds 1 TiB
])
def test_claims_the_provisioner_cannot_honour_are_refused(senv, cluster, what, extra, says):
    """A selector or a data source is not served with a new empty disk, nor a size larger than
    the whole storage domain (available + used); ProvisioningFailed says why and no disk is made."""
    senv.start()
    sc = senv.storage_class("Delete")
    spec = {"storageClassName": sc, "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
            **extra}
    cluster.kubectl("apply", "-n", senv.ns, "-f", "-", input=yaml.safe_dump({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": what}, "spec": spec}))
    _refused(senv, what, says)


@pytest.mark.parametrize("case", ["a VM's disk", "another claim's disk"])
def test_a_released_volume_naming_a_disk_not_made_for_it_keeps_the_disk(senv, cluster, case):
    """A PV written by hand (or copied) with this provisioner's annotation and reclaim policy
    Delete names a disk; the provisioner removes a disk only when the disk proves it made it for that PV's claim
    (its name is the PV's, pvc-<claim uid>, and its description names the claim). Otherwise VolumeFailedDelete,
    and disk and PV stay."""
    senv.start()
    other_uid = str(uuid.uuid4())
    if case == "a VM's disk":
        disk_name, description = f"precious-{other_uid[:6]}", "data of a VM"
    else:  # made by the provisioner for another claim, whose PV this one copies
        disk_name, description = f"pvc-{other_uid}", f"PVC {senv.ns}/other (uid {other_uid})"
    disk = senv.conn.system_service().disks_service().add(types.Disk(
        name=disk_name, description=description, provisioned_size=GIB, format=types.DiskFormat.RAW,
        storage_domains=[types.StorageDomain(name="nfs-data")]))
    pv_name = f"pvc-{uuid.uuid4()}"  # a name of the provisioner's form, for a claim that never was
    claim_uid = pv_name[len("pvc-"):]
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": pv_name, "annotations": {"pv.kubernetes.io/provisioned-by": "ovirt-volume-provisioner"}},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": "Delete",
                 "claimRef": {"namespace": senv.ns, "name": "gone", "uid": claim_uid},
                 "flexVolume": {"driver": "ovirt/ovirt-flexvolume-driver", "fsType": "ext4",
                                "options": {"volumeID": disk.id}}}}))
    try:
        def refused():
            ev = senv.get("events", "-A", "--field-selector", f"involvedObject.name={pv_name}") or {}
            return [e["message"] for e in ev.get("items", []) if e["reason"] == "VolumeFailedDelete"]

        msgs = wait_for(refused, what="VolumeFailedDelete for the PV naming a disk not made for it")
        assert any("was not made by ovirt-volume-provisioner" in m for m in msgs), msgs
        assert senv.disks_named(disk_name), "the disk was removed"
        assert senv.get("pv", pv_name) is not None
    finally:
        cluster.kubectl("delete", "pv", pv_name, "--ignore-not-found", check=False)
        for d in senv.disks_named(disk_name):
            senv.conn.system_service().disks_service().disk_service(d.id).remove()
