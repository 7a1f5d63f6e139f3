"""`make demo`: the main job on the embedded default (a local control plane, and the oVirt simulator as the
controllers arrive). It shows what a cluster admin would see with `kubectl`.

Set DEMO_KEEP=1 to leave the control plane running afterwards (`python -m hack.controlplane env` prints how to
reach it; `python -m hack.controlplane down` stops it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hack.controlplane.build import Binaries
from hack.controlplane.cluster import LocalControlPlane

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "openshift-machine-api"


def _say(msg: str) -> None:
    print(f"\n==> {msg}", flush=True)


class Kubectl:
    def __init__(self, kubeconfig: Path):
        self._base = [str(Binaries().path("kubectl")), f"--kubeconfig={kubeconfig}"]

    def __call__(self, *args: str, show: bool = True) -> str:
        if show:
            print("$ kubectl " + " ".join(args), flush=True)
        out = subprocess.run([*self._base, *args], check=True, capture_output=True, text=True).stdout
        if show:
            print(out.rstrip(), flush=True)
        return out


def main() -> int:
    plane = LocalControlPlane()
    _say("Starting the local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)")
    plane.up()
    try:
        kubectl = Kubectl(plane.kubeconfig())
        _say("Installing the Machine API CRDs")
        kubectl("apply", "-k", str(REPO / "config" / "crd"))
        kubectl("wait", "--for=condition=Established", "--timeout=60s",
                "crd/machines.machine.openshift.io", "crd/machinesets.machine.openshift.io",
                "crd/machinehealthchecks.machine.openshift.io")
        _say(f"Applying the samples (credentials, user data, a worker MachineSet) in {NAMESPACE}")
        kubectl("create", "namespace", NAMESPACE)
        kubectl("apply", "-k", str(REPO / "config" / "samples"))
        _say("What a cluster admin sees")
        kubectl("-n", NAMESPACE, "get", "machinesets,machines", "-o", "wide")
        _say("Scaling the MachineSet through the scale subresource")
        ms = kubectl("-n", NAMESPACE, "get", "machinesets", "-o", "name", show=False).split()[0]
        kubectl("-n", NAMESPACE, "scale", ms, "--replicas=3")
        kubectl("-n", NAMESPACE, "get", ms)
        print("\n(No controller runs yet: Current stays empty until the MachineSet controller lands.)")
    finally:
        if os.environ.get("DEMO_KEEP"):
            _say(f"Leaving the control plane running: eval $({sys.executable} -m hack.controlplane env)")
        else:
            _say("Stopping the control plane")
            plane.down()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
