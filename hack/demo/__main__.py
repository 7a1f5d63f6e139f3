"""`make demo`: the main job on the embedded default. A local Kubernetes control plane and a simulated oVirt
engine, prepared like an OpenShift installation; the controller runs beside them as it would in the cluster,
and everything is shown with `kubectl`, as a cluster admin would see it.

Set DEMO_KEEP=1 to leave the control plane running afterwards (`python -m hack.controlplane env` tells how to
reach it; `python -m hack.controlplane down` stops it).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from hack import ovirt_install
from hack.controller_process import ControllerProcess
from hack.controlplane.build import Binaries
from hack.controlplane.cluster import LocalControlPlane
from hack.crds_established import wait_established
from hack.demo.capi import capi_scene
from hack.demo.failover import PLANE_ARGS, SIM_TIMINGS, failover_scene
from hack.demo.fencing import fencing_scene
from hack.demo.storage import storage_scene
from hack.ovirtsim.testing import running_simulator

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "openshift-machine-api"
INFRA_ID = "ocp-demo-x7k2p"


def _say(msg: str) -> None:
    print(f"\n==> {msg}", flush=True)


class Kubectl:
    def __init__(self, kubeconfig: Path):
        self.kubeconfig = kubeconfig
        self._base = [str(Binaries().path("kubectl")), f"--kubeconfig={kubeconfig}"]

    def __call__(self, *args: str, show: bool = True, stdin: str | None = None) -> str:
        if show:
            print("$ kubectl " + shlex.join(args), flush=True)
        out = subprocess.run([*self._base, *args], check=True, capture_output=True, text=True, input=stdin).stdout
        if show and out.strip():
            print(out.rstrip(), flush=True)
        return out

    def run(self, *args: str, check: bool = True, **run_args) -> subprocess.CompletedProcess[str]:
        """Unshown, the whole result: what hack/capi's classes take."""
        return subprocess.run([*self._base, *args], check=check, capture_output=True, text=True, **run_args)

    def apply(self, obj: dict, show_as: str) -> None:
        print(f"$ kubectl apply -f {show_as}", flush=True)
        print(self(*("apply", "-f", "-"), show=False, stdin=yaml.safe_dump(obj)).rstrip(), flush=True)

    def machines(self) -> list[dict]:
        # In full: once the Cluster API scene installs its core, `machines` means Cluster API's (docs/cluster-api.md).
        return json.loads(self("-n", NAMESPACE, "get", "machines.machine.openshift.io", "-o", "json",
                               show=False))["items"]


def watch_until(kubectl: Kubectl, done, what: str, timeout: float = 180.0) -> None:
    """A live table, like `kubectl get machines -o wide -w`, until `done(machines)`."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        table = kubectl("-n", NAMESPACE, "get", "machines.machine.openshift.io", "-o", "wide", show=False)
        if table != last:
            print(f"[{time.strftime('%H:%M:%S')}]\n{table.rstrip()}", flush=True)
            last = table
        if done(kubectl.machines()):
            return
        time.sleep(1.0)
    raise TimeoutError(f"machines never became {what} in {timeout:.0f}s")


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="omc-demo-"))
    plane = LocalControlPlane(controller_manager_args=PLANE_ARGS)  # the failover scene's short grace period
    _say("Starting the local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)")
    plane.up()
    controller = None
    try:
        kubectl = Kubectl(plane.kubeconfig())
        _say("Installing the Machine API CRDs, RBAC and namespace (kubectl apply -k config/crd -k config/rbac)")
        kubectl("apply", "-f", str(REPO / "config" / "manager" / "namespace.yaml"))
        kubectl("apply", "-k", str(REPO / "config" / "crd"))
        kubectl("apply", "-k", str(REPO / "config" / "rbac"))
        wait_established(lambda *args: kubectl(*args, show=False), "machines.machine.openshift.io",
                         "machinesets.machine.openshift.io", "machinehealthchecks.machine.openshift.io",
                         "ovirtremediations.remediation.ovirt.org", "ovirtremediationtemplates.remediation.ovirt.org")

        _say("Starting the oVirt engine simulator (HTTPS; its guests join the cluster as RHCOS nodes would)")
        with running_simulator(work / "ovirt", kubeconfig=plane.kubeconfig(), tls=True, timings=SIM_TIMINGS) as sim:
            print(f"engine API: {sim.url} (started in {sim.startup_seconds:.2f}s)")
            conn = sim.connection()
            try:
                inst = ovirt_install.prepare(conn, INFRA_ID)
            finally:
                conn.close()
            print(f"installer objects: tag {inst.infra_id!r}, affinity groups {list(inst.affinity_groups)}, "
                  f"template {inst.template_name!r} in cluster {inst.cluster_id}")
            # The engine at the machine's address (pod_url): the CSI controller's pods on real nodes reach it too,
            # where loopback would be the pod's own.
            kubectl.apply(ovirt_install.credentials_secret(sim.pod_url, sim.username, sim.password,
                                                           ca_pem=Path(sim.ca_file).read_text()),
                          "ovirt-credentials.yaml  # the six keys of OpenShift's secret")
            kubectl("apply", "-f", str(REPO / "config" / "samples" / "worker-user-data.yaml"))

            _say("Starting ovirt-machine-controller as the machine-api-controllers ServiceAccount (config/rbac)")
            controller = ControllerProcess(plane.kubeconfig("restricted"), work / "controller.log",
                                           leader_elect=True).start()
            controller.wait_ready()
            print(f"ready; logs: {controller.log_path}, metrics: http://127.0.0.1:{controller.metrics_port}/metrics")

            _say("Creating two standalone worker Machines with the installer's provider spec")
            names = [f"{INFRA_ID}-worker-a", f"{INFRA_ID}-worker-b"]
            for name in names:
                kubectl.apply(ovirt_install.machine_for(inst, NAMESPACE, name), f"{name}.yaml")
            watch_until(kubectl, lambda ms: len(ms) == 2 and all(
                (m.get("status") or {}).get("phase") == "Running" for m in ms), "Running")

            _say("The Nodes the guests registered, linked to their Machines by providerID")
            kubectl("get", "nodes", "-o", "custom-columns=NODE:.metadata.name,PROVIDERID:.spec.providerID,"
                    "MACHINE:.metadata.annotations.machine\\.openshift\\.io/machine")
            _say("The VMs in the engine")
            for vm in sim.control.vms():
                print(f"  {vm['name']:<28} {vm['status']:<6} id={vm['id']}")

            _say("Deleting one Machine: drain, stop, remove the VM, delete the Node")
            kubectl("-n", NAMESPACE, "delete", "machine", names[1], "--wait=false")
            watch_until(kubectl, lambda ms: len(ms) == 1, "deleted")
            left = [vm["name"] for vm in sim.control.vms()]
            print(f"VMs left in the engine: {left}")

            _say("A MachineSet (the installer's worker set), scaled with kubectl scale")
            ms = ovirt_install.machineset_for(inst, NAMESPACE)
            ms["spec"]["replicas"] = 0
            ms_name = ms["metadata"]["name"]
            kubectl.apply(ms, f"{ms_name}.yaml  # replicas: 0")

            def members(ms_: list[dict]) -> list[dict]:
                return [m for m in ms_ if m["metadata"].get("labels", {}).get(
                    "machine.openshift.io/cluster-api-machineset") == ms_name]

            def converged(n: int):
                return lambda all_: len(members(all_)) == n and all(
                    (m.get("status") or {}).get("phase") == "Running" for m in members(all_))

            kubectl("-n", NAMESPACE, "scale", "machineset", ms_name, "--replicas=3")
            watch_until(kubectl, converged(3), "3 Running")
            kubectl("-n", NAMESPACE, "get", "machineset", ms_name)
            print("scale-from-zero capacity the autoscaler reads:")
            annotations = json.loads(kubectl("-n", NAMESPACE, "get", "machineset", ms_name, "-o", "json",
                                             show=False))["metadata"].get("annotations", {})
            for key in sorted(k for k in annotations if "capacity" in k or k.endswith(("vCPU", "memoryMb", "maxPods"))):
                print(f"  {key}: {annotations[key]}")

            _say("Scaling down to 1 (the delete policy picks the Machines; their VMs and Nodes go too)")
            kubectl("-n", NAMESPACE, "scale", "machineset", ms_name, "--replicas=1")
            watch_until(kubectl, converged(1), "1 Running")
            kubectl("-n", NAMESPACE, "get", "machineset", ms_name)

            fencing_scene(kubectl, sim, NAMESPACE, ms_name, _say)
            storage_scene(kubectl, sim, NAMESPACE, work / "storage", _say)
            failover_scene(kubectl, sim, plane, inst, NAMESPACE, _say)
            capi_scene(kubectl, sim, plane.kubeconfig("restricted"), inst.cluster_id, work / "capi", _say)

            _say("Summary")
            counts = sim.control.counts()
            vms = sim.control.vms()
            nodes = kubectl("get", "nodes", "-o", "name", show=False).split()
            print(f"Machines: 2 standalone created, 1 deleted; MachineSet {ms_name} scaled 0 -> 3 -> 1; its crashed "
                  "worker power-cycled back by the health check; a 3Gi PVC became an oVirt disk, attached to a "
                  "worker's VM by the FlexVolume driver and removed with its claim; a StatefulSet pod on a CSI disk "
                  "kept its data on real kubelets through a host that stopped answering, a crash fenced by a power "
                  "cycle and a crash that replaced its Machine; upstream Cluster API's MachineDeployment of two "
                  "workers rolled to a bigger OvirtMachineTemplate one VM at a time.")
            print(f"Now: {len(kubectl.machines())} Machine API Machines Running, {len(vms)} VMs in the engine "
                  f"({', '.join(sorted(v['name'] for v in vms))}), {len(nodes)} Nodes.")
            print(f"{sum(counts.values())} oVirt API requests in all; the controller ran with only the RBAC of "
                  f"config/rbac (as the machine-api-controllers ServiceAccount), elected leader on its Lease.")
            controller.stop()
    finally:
        if controller:
            controller.stop()
        if os.environ.get("DEMO_KEEP"):
            _say(f"Leaving the control plane running: eval $({sys.executable} -m hack.controlplane env)")
        else:
            _say("Stopping the control plane")
            plane.down()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
