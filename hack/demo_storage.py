"""`make demo`, storage scene: a PVC of an ovirt-volume-provisioner StorageClass becomes a PV and an oVirt disk,
which is then attached to a worker's VM through the same disk layer the FlexVolume driver uses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from machine_controller.ovirt.client import OvirtClient
from machine_controller.ovirt.connection import ConnectionPool
from machine_controller.ovirt.credentials import OvirtCredentials
from machine_controller.storage.disks import Disks

REPO = Path(__file__).resolve().parents[1]


def storage_scene(kubectl, sim, namespace: str, say: Callable[[str], None]) -> None:
    kubeconfig = kubectl._base[1].split("=", 1)[1]
    say("Storage: a PVC becomes an oVirt disk and a PV (ovirt-volume-provisioner)")
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    proc = subprocess.Popen([sys.executable, "-m", "machine_controller.storage.app", f"--kubeconfig={kubeconfig}",
                             "--metrics-port=0", "--health-port=0"], cwd=REPO, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pool = ConnectionPool(size=1)
    try:
        kubectl.apply({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "ovirt"},
                       "provisioner": "ovirt-volume-provisioner", "reclaimPolicy": "Delete",
                       "parameters": {"storageDomainName": "nfs-data", "thinProvisioning": "true", "fsType": "ext4"}},
                      "storageclass.yaml  # config/storage/samples")
        kubectl.apply({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                       "metadata": {"name": "data", "namespace": namespace},
                       "spec": {"storageClassName": "ovirt", "accessModes": ["ReadWriteOnce"],
                                "resources": {"requests": {"storage": "3Gi"}}}}, "data-pvc.yaml  # 3Gi")
        t0 = time.monotonic()
        while json.loads(kubectl("-n", namespace, "get", "pvc", "data", "-o", "json", show=False))[
                "status"].get("phase") != "Bound":
            if time.monotonic() - t0 > 60:
                raise RuntimeError("PVC not Bound after 60 s")
            time.sleep(0.2)
        print(f"Bound after {time.monotonic() - t0:.1f} s")
        kubectl("-n", namespace, "get", "pvc", "data")
        pv = json.loads(kubectl("-n", namespace, "get", "pvc", "data", "-o", "json", show=False))["spec"]["volumeName"]
        kubectl("get", "pv", pv, "-o", "jsonpath={.spec.flexVolume}")
        print()
        pool.set_credentials(OvirtCredentials(url=sim.url, username=sim.username, password=sim.password,
                                              ca_file=sim.ca_file))
        disks = Disks(OvirtClient(pool))
        disk = disks.find_by_name(pv)
        print(f"oVirt disk {disk.name}: id {disk.id}, {disk.provisioned_size / 2**30:.0f} GiB, "
              f"{disk.format.value}, sparse={disk.sparse}, status {disk.status.value}")
        machine = next((m for m in kubectl.machines() if m.get("status", {}).get("nodeRef")), None)
        if machine is not None:
            vm_id = machine["metadata"]["annotations"]["VmId"]
            node = machine["status"]["nodeRef"]["name"]
            disks.attach(vm_id, disk.id)
            print(f"attached to VM {vm_id} (Node {node}, as the FlexVolume driver's attach does): "
                  f"{[a.id for a in OvirtClient(pool).disk_attachments(vm_id)]}")
            disks.detach(vm_id, disk.id)
        kubectl("-n", namespace, "delete", "pvc", "data")
        t0 = time.monotonic()
        while disks.find_by_name(pv) is not None and time.monotonic() - t0 < 60:
            time.sleep(0.3)
        print(f"disk {pv} removed from the engine: {disks.find_by_name(pv) is None}")
    finally:
        pool.close()
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
