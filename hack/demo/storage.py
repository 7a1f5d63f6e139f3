"""`make demo`, storage scene: a PVC of the sample ovirt-volume-provisioner StorageClass becomes an oVirt disk and a
bound PV; the FlexVolume driver, installed as its DaemonSet installs it, attaches the disk to a worker's VM and
detaches it as kube-controller-manager would; deleting the claim removes the disk (docs/compatibility.md#storage)."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import yaml

from hack.flexvolume_host import FlexVolumeHost
from machine_controller.ovirt.client import OvirtClient
from machine_controller.ovirt.connection import ConnectionPool
from machine_controller.ovirt.credentials import OvirtCredentials
from machine_controller.storage.disks import Disks

REPO = Path(__file__).resolve().parents[2]
SAMPLE_CLASS = REPO / "config" / "storage" / "samples" / "storageclass.yaml"


def until(what: str, probe: Callable[[], object], timeout: float = 60.0) -> None:
    """Poll `probe` until it holds; TimeoutError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached in {timeout:.0f}s")
        time.sleep(0.2)


def storage_scene(kubectl, sim, namespace: str, work: Path, say: Callable[[str], None]) -> None:
    say("Storage: a PVC becomes an oVirt disk and a bound PV (ovirt-volume-provisioner)")
    work.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    proc = subprocess.Popen([sys.executable, "-m", "machine_controller.storage.app",
                             f"--kubeconfig={kubectl.kubeconfig}", "--metrics-port=0", "--health-port=0"],
                            cwd=REPO, env=env, start_new_session=True,
                            stdout=open(work / "provisioner.log", "ab"), stderr=subprocess.STDOUT)
    pool = ConnectionPool(size=1)
    pool.set_credentials(OvirtCredentials(url=sim.url, username=sim.username, password=sim.password,
                                          ca_file=sim.ca_file))
    try:
        kubectl("apply", "-f", str(SAMPLE_CLASS.relative_to(REPO)))
        kubectl.apply({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                       "metadata": {"name": "data", "namespace": namespace},
                       "spec": {"storageClassName": "ovirt", "accessModes": ["ReadWriteOnce"],
                                "resources": {"requests": {"storage": "3Gi"}}}}, "data-pvc.yaml  # 3Gi, RWO")
        t0 = time.monotonic()
        until("PVC Bound", lambda: json.loads(kubectl("-n", namespace, "get", "pvc", "data", "-o", "json",
                                                       show=False))["status"].get("phase") == "Bound")
        print(f"Bound after {time.monotonic() - t0:.1f} s")
        kubectl("-n", namespace, "get", "pvc", "data")
        pv_name = json.loads(kubectl("-n", namespace, "get", "pvc", "data", "-o", "json", show=False))["spec"][
            "volumeName"]
        pv = json.loads(kubectl("get", "pv", pv_name, "-o", "json", show=False))
        print(f"PV {pv_name} flexVolume: {json.dumps(pv['spec']['flexVolume'])}")

        disks = Disks(OvirtClient(pool))
        disk = disks.find_by_name(pv_name)
        print(f"the engine's disk {disk.name}: id {disk.id}, {disk.provisioned_size / 2**30:.0f} GiB, "
              f"{disk.format.value}, sparse={disk.sparse}, status {disk.status.value}")

        machine = next((m for m in kubectl.machines() if (m.get("status") or {}).get("nodeRef")), None)
        if machine is not None:
            node = machine["status"]["nodeRef"]["name"]
            say(f"The FlexVolume driver attaches it to Node {node}'s VM, as kube-controller-manager runs it")
            flex = FlexVolumeHost(work, kubectl.kubeconfig, lambda *a, **kw: kubectl(*a, show=False, **kw),
                                  _secret_values(kubectl, namespace))
            flex.install()
            print(f"installed {flex.executable} (config/storage/driver: its own ServiceAccount token, no kubeconfig)")
            options = json.dumps({**pv["spec"]["flexVolume"].get("options", {}),
                                  "kubernetes.io/fsType": pv["spec"]["flexVolume"].get("fsType", "ext4"),
                                  "kubernetes.io/readwrite": "rw", "kubernetes.io/pvOrVolumeName": pv_name})
            for argv in (("attach", options, node), ("isattached", options, node)):
                print(f"$ ovirt-flexvolume-driver {argv[0]} '<options>' {node}\n{json.dumps(flex.run(*argv))}")
            vm_id = machine["metadata"]["annotations"]["VmId"]
            print(f"VM {vm_id} now has disks: {[a.id for a in OvirtClient(pool).disk_attachments(vm_id)]}")
            print(f"$ ovirt-flexvolume-driver detach {pv_name} {node}\n"
                  f"{json.dumps(flex.run('detach', pv_name, node))}")

        say("Deleting the claim: the Released PV's disk is removed from the engine (reclaimPolicy: Delete)")
        kubectl("-n", namespace, "delete", "pvc", "data")
        until("disk removed", lambda: disks.find_by_name(pv_name) is None)
        print(f"disk {pv_name} is gone from the engine")
    finally:
        pool.close()
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def _secret_values(kubectl, namespace: str) -> dict[str, str]:
    """The credentials Secret's keys in plain text: what the driver DaemonSet mounts."""
    secret = yaml.safe_load(kubectl("-n", namespace, "get", "secret", "ovirt-credentials", "-o", "yaml", show=False))
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
