"""A host of the FlexVolume driver for tests and the demo: the driver installed the way its DaemonSet installs it
(machine_controller/storage/install.py, with a real ServiceAccount token of config/storage/driver/rbac.yaml) and
run the way kubelet and kube-controller-manager run it: the installed executable, kubelet's argv, one JSON reply.

The installed wrapper runs the host's `python3` (docs/compatibility.md#storage); here that is this virtualenv's
interpreter, put first on PATH, since the host must provide the driver's dependencies.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path
from typing import Callable

import yaml

from hack.controlplane.host_python import host_python_path
from machine_controller.storage.install import EXECUTABLE, VENDOR_DIR, install

REPO = Path(__file__).resolve().parents[1]
DRIVER_RBAC = REPO / "config" / "storage" / "driver" / "rbac.yaml"
DRIVER_SA = ("openshift-machine-api", "ovirt-flexvolume-driver")


def _kubeconfig_cluster(kubeconfig: Path) -> tuple[str, bytes]:
    """The API server address and CA of the kubeconfig's current context."""
    cfg = yaml.safe_load(kubeconfig.read_text())
    ctx = next(c["context"] for c in cfg["contexts"] if c["name"] == cfg["current-context"])
    cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
    if "certificate-authority-data" in cluster:
        ca = base64.b64decode(cluster["certificate-authority-data"])
    else:
        ca = Path(cluster["certificate-authority"]).read_bytes()
    return cluster["server"], ca


class FlexVolumeHost:
    """`kubectl(*args) -> str` runs kubectl as cluster-admin against the cluster of `kubeconfig`."""

    def __init__(self, root: Path, kubeconfig: Path, kubectl: Callable[..., str], ovirt_credentials: dict[str, str]):
        self.root = root
        self.plugin_dir = root / "volume-exec"
        self.kubeconfig = kubeconfig
        self.kubectl = kubectl
        self.credentials = ovirt_credentials  # the six keys of the credentials Secret, plain text
        self.by_id_dir = root / "dev-disk-by-id"

    @property
    def executable(self) -> Path:
        return self.plugin_dir / VENDOR_DIR / EXECUTABLE

    def install(self, service_account: tuple[str, str] = DRIVER_SA) -> None:
        """Grant the driver's RBAC, take a token of its ServiceAccount and install as the DaemonSet does."""
        self.kubectl("apply", "-f", str(DRIVER_RBAC))
        namespace, name = service_account
        token = self.kubectl("-n", namespace, "create", "token", name, "--duration=1h").strip()
        server, ca = _kubeconfig_cluster(self.kubeconfig)
        sa_dir, creds_dir = self.root / "sa", self.root / "credentials"
        for d in (sa_dir, creds_dir, self.by_id_dir):
            d.mkdir(parents=True, exist_ok=True)
        (sa_dir / "token").write_text(token)
        (sa_dir / "ca.crt").write_bytes(ca)
        for key, value in self.credentials.items():
            (creds_dir / key).write_text(value)
        install(self.plugin_dir, self.plugin_dir, creds_dir, sa_dir=sa_dir, kube_server=server)

    def run(self, *argv: str) -> dict:
        """One call as kubelet makes it; the reply must be exactly one JSON object and stderr must stay empty."""
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "PYTHONPATH")}
        env.update(PATH=host_python_path(self.root / "host-bin", env.get("PATH", "")),
                   OVIRT_FLEXDRIVER_BY_ID_DIR=str(self.by_id_dir))
        proc = subprocess.run([str(self.executable), *argv], capture_output=True, text=True, env=env, timeout=120,
                              cwd=self.root)
        if proc.stderr:
            raise AssertionError(f"driver wrote to stderr: {proc.stderr!r}")
        reply = json.loads(proc.stdout)
        if proc.returncode != (0 if reply.get("status") == "Success" else 1):
            raise AssertionError(f"exit code {proc.returncode} does not match {reply}")
        return reply
