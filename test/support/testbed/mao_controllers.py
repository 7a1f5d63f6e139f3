"""Run machine-api-operator's own machineset, nodelink and machine-healthcheck controllers (built by
hack/controlplane/mao.py) against a cluster, as MAO's `machine-api-controllers` Deployment runs them on OpenShift,
so the end-to-end tests can prove the drop-in mode: this project's process runs only the actuator side beside them
(docs/architecture.md#deployment-modes)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Callable

from hack.controller_process import Process, free_port
from hack.controlplane.mao import MAO_COMMANDS, MaoBinaries, ensure_mao
from hack.crds_established import wait_established
from machine_controller.config import MAO_CONTROLLERS

# The actuator side (and the capacity annotations): what this project runs beside MAO's controllers
# (docs/architecture.md#deployment-modes), the same list as when MAO starts this image itself.
DROP_IN_CONTROLLERS = MAO_CONTROLLERS
CONFIG_CRDS = ("infrastructures.config.openshift.io", "dnses.config.openshift.io")


def install_openshift_config(kubectl: Callable[..., subprocess.CompletedProcess[str]], infra_id: str,
                             binaries: MaoBinaries | None = None, base_domain: str = "example.com") -> None:
    """The cluster-scoped config.openshift.io objects MAO's controllers read, as an oVirt installation leaves them:
    the CRDs from openshift/api, the Infrastructure `cluster` (platform oVirt, the cluster's infra ID) and the DNS
    `cluster`. `kubectl(*args, input=..., check=...)` runs the pinned kubectl as admin.

    A cluster that already has an Infrastructure `cluster` (an OpenShift cluster, or one set up by an earlier test)
    is left exactly as it is: its own configuration is never overwritten."""
    if kubectl("get", "infrastructures.config.openshift.io", "cluster", check=False).returncode == 0:
        return
    b = ensure_mao(binaries)
    kubectl("apply", "--server-side", "--force-conflicts", *(f"--filename={crd}" for crd in b.crds()))
    wait_established(lambda *args: kubectl(*args, check=False).stdout, *CONFIG_CRDS)
    infra = {"apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
             "spec": {"platformSpec": {"type": "oVirt"}}}
    dns = {"apiVersion": "config.openshift.io/v1", "kind": "DNS", "metadata": {"name": "cluster"},
           "spec": {"baseDomain": base_domain}}
    kubectl("apply", "--server-side", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                   "items": [infra, dns]}))
    status = {"status": {"infrastructureName": infra_id, "platform": "oVirt", "platformStatus": {"type": "oVirt"},
                         "controlPlaneTopology": "HighlyAvailable", "infrastructureTopology": "HighlyAvailable"}}
    kubectl("patch", "infrastructure", "cluster", "--subresource=status", "--type=merge", "-p", json.dumps(status))


class MaoControllers:
    """MAO's three controllers for one namespace, each a separate process with its own log."""

    def __init__(self, kubeconfig: Path, namespace: str, log_dir: Path, binaries: MaoBinaries | None = None):
        self.binaries = ensure_mao(binaries)
        # Leader election stays off (one replica each), and every listener is on a free loopback port (MAO's
        # defaults would clash with tests running in parallel).
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}  # the flag is the one source of truth
        common = [f"--kubeconfig={kubeconfig}", f"--namespace={namespace}", "--leader-elect=false", "--v=3"]
        self.processes: dict[str, Process] = {}
        for command in MAO_COMMANDS:
            args = [str(self.binaries.path(command)), *common]
            health = None
            if command != "nodelink-controller":  # nodelink serves neither health nor metrics
                health = free_port()
                args += [f"--health-addr=127.0.0.1:{health}", f"--metrics-bind-address=127.0.0.1:{free_port()}"]
            if command == "machineset":
                # Its admission webhooks need serving certificates and a webhook configuration; what is proven
                # here is the controllers.
                args.append("--webhook-enabled=false")
            self.processes[command] = Process(args, log_dir / f"mao-{command}.log", health, env=env)

    def start(self, timeout: float = 30.0) -> "MaoControllers":
        for p in self.processes.values():
            p.start()
        for p in self.processes.values():
            if p.health_port is not None:
                p.wait_ready(timeout)
        for p in self.processes.values():  # nodelink has no /readyz: at least it must not have exited
            if p.proc is not None and p.proc.poll() is not None:
                raise RuntimeError(f"{p.name} exited with {p.proc.returncode}; log: {p.log_path}")
        return self

    def stop(self) -> None:
        for p in self.processes.values():
            p.stop()

    def logs(self, tail: int = 6000) -> str:
        return "\n".join(f"--- {p.log_path.name}\n{p.log_text()[-tail:]}" for p in self.processes.values())
