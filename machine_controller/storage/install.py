"""The driver DaemonSet's entry: installs `ovirt-flexvolume-driver` into the kubelet plugin directory and keeps its
configuration file current (oVirt credentials from the mounted Secret; the API server, token and CA paths for the
Node lookups), then sleeps and refreshes it (the projected token rotates).

Each file is written to a temporary name and renamed, since kubelet watches the directory and may probe at any
moment. The executable is a wrapper that runs the driver module with the host's python3 and this package copied
beside it (see docs/compatibility.md#storage for the host requirements).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import api
from machine_controller.storage.flexvolume import CONF_NAME

VENDOR_DIR = "ovirt~ovirt-flexvolume-driver"
EXECUTABLE = "ovirt-flexvolume-driver"  # the file kubelet runs: <plugin dir>/<VENDOR_DIR>/<EXECUTABLE>
# The project's packages the driver imports: machine_controller (this one's) and api.
PACKAGES = (Path(__file__).resolve().parents[1], Path(api.__file__).resolve().parent)
SA = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def _atomic_write(path: Path, data: str, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def install(plugin_dir: Path, host_plugin_dir: Path, creds_dir: Path, sa_dir: Path = SA,
            kube_server: str | None = None) -> None:
    """Write the driver, its package and its configuration into `plugin_dir` (the host's `host_plugin_dir`,
    mounted into the pod). `sa_dir` holds the pod's token and CA; `kube_server` defaults to the in-cluster
    address from KUBERNETES_SERVICE_HOST/PORT."""
    target = plugin_dir / VENDOR_DIR
    target.mkdir(parents=True, exist_ok=True)
    host_target = host_plugin_dir / VENDOR_DIR
    conf = {p.name: p.read_text() for p in creds_dir.iterdir() if p.is_file() and p.name.startswith("ovirt_")}
    if (sa_dir / "token").exists():
        _atomic_write(target / "token", (sa_dir / "token").read_text(), 0o600)
    if (sa_dir / "ca.crt").exists():
        _atomic_write(target / "kube-ca.crt", (sa_dir / "ca.crt").read_text(), 0o644)
    if kube_server is None:
        host, port = os.environ.get("KUBERNETES_SERVICE_HOST", ""), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        kube_server = f"https://{host}:{port}"
    conf.update(kube_server=kube_server, kube_token_file=str(host_target / "token"),
                kube_ca_file=str(host_target / "kube-ca.crt"))
    _atomic_write(target / CONF_NAME, json.dumps(conf), 0o600)
    lib = target / "lib"
    # The driver runs from this copy of the project's packages (the host's python3 brings the third-party ones
    # only, docs/compatibility.md#storage): every package it imports, api's types among them.
    for package in PACKAGES:
        shutil.copytree(package, lib / package.name, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    wrapper = (f"#!/bin/sh\nPYTHONPATH={host_target / 'lib'} OVIRT_FLEXDRIVER_CONF={host_target / CONF_NAME} "
               "exec python3 -m machine_controller.storage.flexvolume \"$@\"\n")
    _atomic_write(target / EXECUTABLE, wrapper, 0o755)


def main() -> int:
    plugin_dir = Path(os.environ.get("PLUGIN_DIR", "/flexmnt"))
    host_dir = Path(os.environ.get("HOST_PLUGIN_DIR", "/usr/libexec/kubernetes/kubelet-plugins/volume/exec"))
    creds = Path(os.environ.get("CREDENTIALS_DIR", "/etc/ovirt-credentials"))
    while True:
        install(plugin_dir, host_dir, creds)
        print("installed ovirt-flexvolume-driver", flush=True)
        time.sleep(300)


if __name__ == "__main__":
    sys.exit(main())
