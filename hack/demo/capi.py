"""`make demo`, Cluster API scene (docs/cluster-api.md): upstream Cluster API's own core controllers (v1.14.2, the
bed of hack/capi) run two workers on the oVirt engine through this project's infrastructure provider. A Cluster with
its OvirtCluster (the engine named by an identity Secret), an OvirtMachineTemplate and a MachineDeployment of two
replicas become two Running Machines, each with its VM and its Node; then a new template with more memory, named by
the MachineDeployment, rolls them one at a time (RollingUpdate, maxSurge 1, maxUnavailable 0): each change of a
Machine, the MachineDeployment and the engine's VMs is printed as it happens.

The provider runs as a second controller process, beside the demo's Machine API one: its controllers watch Cluster
API's Clusters and Machines, whose CRDs exist only once this scene installs Cluster API's core, and a real install
runs it as its own Deployment too (clusterctl's provider components, docs/cluster-api.md#running-it).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from api import capi as capi_api
from api import infrastructure
from hack.capi import controlplane, manifests
from hack.capi.core import CapiCore
from hack.controller_process import ControllerProcess
from hack.demo.storage import until
from hack.ovirtsim.seed import KUBE_NODE_TEMPLATE_NAME, KUBELET_VERSIONS
from machine_controller.config import CAPI_CONTROLLER_NAMES

NAMESPACE = "capi-demo"
CLUSTER = "demo"
DEPLOYMENT = f"{CLUSTER}-md-0"  # Cluster API's own examples name a Cluster's first MachineDeployment so
IDENTITY = f"{CLUSTER}-engine"
BOOTSTRAP = f"{CLUSTER}-md-0-bootstrap"
CONTROLLERS = f"--controllers={','.join(CAPI_CONTROLLER_NAMES)}"
# Its own Lease: the Machine API process holds the default one in the same namespace.
LEASE = "cluster-api-provider-ovirt-infrastructure-leader"
# With both front ends' CRDs served, `machines` alone means one group only (docs/cluster-api.md#running-it).
MACHINES = f"machines.{capi_api.GROUP}"
CLONED_FROM = f"{capi_api.GROUP}/cloned-from-name"  # what Cluster API writes on an OvirtMachine cloned from a template
TIMEOUT_S = 240.0
MIB = 2**20


@dataclass
class _Look:
    """One look at what the scene's table shows: the MachineDeployment's counts, its Machines, their templates, and
    the engine's VMs of the MachineDeployment."""

    deployment: dict[str, Any]
    machines: list[dict[str, Any]]
    templates: dict[str, str]  # OvirtMachine name -> the OvirtMachineTemplate it was cloned from
    vms: dict[str, Any]  # VM name -> the engine's VM (ovirtsdk4 type)

    def counts(self) -> dict[str, int]:
        st = self.deployment.get("status") or {}
        return {k: st.get(k, 0) for k in ("replicas", "readyReplicas", "availableReplicas", "upToDateReplicas")}

    def running(self, n: int, template: str, memory_mb: int) -> bool:
        """n Machines, Running with a Node, each from `template` with its VM up at `memory_mb`; no other VM of
        the MachineDeployment; the MachineDeployment counting n of each."""
        live = [m for m in self.machines if not m["metadata"].get("deletionTimestamp")]
        names = {m["spec"]["infrastructureRef"]["name"] for m in live}
        return (len(live) == n and set(self.vms) == names
                and all((m.get("status") or {}).get("phase") == "Running" and (m.get("status") or {}).get("nodeRef")
                        and self.templates.get(m["spec"]["infrastructureRef"]["name"]) == template for m in live)
                and all(vm.status.value == "up" and vm.memory == memory_mb * MIB for vm in self.vms.values())
                and all(v == n for v in self.counts().values()))

    def rows(self) -> dict[str, str]:
        """One line per object, as `kubectl get -w` prints one per change."""
        c = self.counts()
        rows = {f"machinedeployment/{DEPLOYMENT}": f"replicas={c['replicas']} ready={c['readyReplicas']} "
                                                   f"available={c['availableReplicas']} "
                                                   f"upToDate={c['upToDateReplicas']}"}
        for m in self.machines:
            status = m.get("status") or {}
            infra = m["spec"]["infrastructureRef"]["name"]
            phase = "Deleting" if m["metadata"].get("deletionTimestamp") else status.get("phase", "-")
            rows[f"machine/{m['metadata']['name']}"] = (
                f"{phase:<12} node={(status.get('nodeRef') or {}).get('name', '-')} "
                f"template={self.templates.get(infra, '-')}")
        for name, vm in self.vms.items():
            rows[f"vm/{name}"] = f"{vm.status.value:<12} {vm.memory // MIB} MiB  id={vm.id}"
        return rows


class _Scene:
    def __init__(self, kubectl, sim, say: Callable[[str], None]):
        self.kubectl = kubectl
        self.sim = sim
        self.say = say
        # An OvirtMachine's template, remembered: a Deleting Machine's line still names it once the OvirtMachine went.
        self.cloned_from: dict[str, str] = {}

    def get(self, kind: str, name: str | None = None) -> Any:
        out = self.kubectl("-n", NAMESPACE, "get", kind, *([name] if name else []), "-o", "json", show=False)
        return json.loads(out) if name else json.loads(out)["items"]

    def show_and_apply(self, obj: dict[str, Any], file: str, comment: str) -> None:
        """The manifest as the user writes it, then `kubectl apply` of it."""
        # Through JSON: the builders share one dict for the selector and the template's labels, which YAML would
        # print as an anchor and an alias; a user writes both out.
        text = yaml.safe_dump(json.loads(json.dumps(obj)), sort_keys=False).rstrip()
        print(f"$ cat {file}\n{text}", flush=True)
        self.kubectl.apply(obj, f"{file}  # {comment}")

    def vms(self) -> dict[str, Any]:
        """The engine's VMs of the MachineDeployment (each named after its OvirtMachine, `<deployment>-...`), as the
        engine's API lists them."""
        conn = self.sim.connection()
        try:
            return {vm.name: vm for vm in conn.system_service().vms_service().list()
                    if vm.name.startswith(f"{DEPLOYMENT}-")}
        finally:
            conn.close()

    def look(self) -> _Look:
        machines = [m for m in self.get(MACHINES)
                    if m["metadata"].get("labels", {}).get(manifests.DEPLOYMENT_NAME_LABEL) == DEPLOYMENT]
        self.cloned_from.update((om["metadata"]["name"], om["metadata"].get("annotations", {}).get(CLONED_FROM, "-"))
                                for om in self.get("ovirtmachines"))
        return _Look(self.get("machinedeployment", DEPLOYMENT), machines, dict(self.cloned_from), self.vms())

    def watch(self, done: Callable[[_Look], bool], what: str) -> list[_Look]:
        """Print each object's line when it appears, changes or goes, until `done`; every look, for the figures."""
        began = time.monotonic()
        deadline = began + TIMEOUT_S
        print(f"(every change of the MachineDeployment, its Machines and their VMs in the engine, until {what})")
        last: dict[str, str] = {}
        looks = []
        while True:
            look = self.look()
            looks.append(look)
            rows = look.rows()
            stamp = f"[{time.strftime('%H:%M:%S')}] +{time.monotonic() - began:>3.0f}s"
            for key, row in rows.items():
                if last.get(key) != row:
                    print(f"{stamp}  {key:<44} {row}", flush=True)
            for key in last.keys() - rows.keys():
                print(f"{stamp}  {key:<44} {'removed from the engine' if key.startswith('vm/') else 'deleted'}",
                      flush=True)
            last = rows
            if done(look):
                print(f"{what} after {time.monotonic() - began:.0f} s")
                return looks
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not reached in {TIMEOUT_S:.0f} s")
            time.sleep(0.5)

    def show_vms(self) -> None:
        for name, vm in sorted(self.vms().items()):
            print(f"  {name:<36} {vm.status.value:<6} {vm.memory // MIB} MiB  id={vm.id}")

    def cluster_ready(self) -> bool:
        init = (self.get("cluster", CLUSTER).get("status") or {}).get("initialization") or {}
        return bool(init.get("infrastructureProvisioned") and init.get("controlPlaneInitialized"))


def _template(cluster_id: str, name: str, memory_mb: int) -> dict[str, Any]:
    return manifests.machine_template(NAMESPACE, name, manifests.vm_spec(KUBE_NODE_TEMPLATE_NAME, cluster_id,
                                                                         memory_mb=memory_mb))


def capi_scene(kubectl, sim, controller_kubeconfig: Path, cluster_id: str, work: Path,
               say: Callable[[str], None]) -> None:
    """`kubectl` the demo's (admin), `controller_kubeconfig` the controllers' ServiceAccount, `cluster_id` the oVirt
    cluster the VMs go to."""
    scene = _Scene(kubectl, sim, say)
    work.mkdir(parents=True, exist_ok=True)
    say("Cluster API: installing its core (CRDs, webhooks, the core manager v1.14.2), as `clusterctl init` does")
    print("(the core manager runs as a process on this machine, its webhooks served on 127.0.0.1: hack/capi/core.py)")
    core = CapiCore(kubectl.run, kubectl.kubeconfig, work)
    controller = None
    try:
        core.start()
        controlplane.install(kubectl.run)
        kubectl("api-resources", f"--api-group={capi_api.GROUP}")
        kubectl("get", "crds", "-l", infrastructure.CONTRACT_LABEL, "-o",
                "custom-columns=CRD:.metadata.name,CONTRACT:.metadata.labels.cluster\\.x-k8s\\.io/v1beta2")
        print("(this project's infrastructure CRDs were applied with config/crd at the start; each says which "
              "version of its kind implements Cluster API's contract v1beta2)")

        say("Starting ovirt-machine-controller's Cluster API front end: a second process, as the same "
            "ServiceAccount (config/rbac/infrastructure)")
        controller = ControllerProcess(controller_kubeconfig, work / "capi-controller.log", namespace="",
                                       leader_elect=True, extra_args=(CONTROLLERS, f"--leader-election-id={LEASE}"))
        print(f"$ ovirt-machine-controller {CONTROLLERS} --namespace= --leader-election-id={LEASE}")
        controller.start()
        controller.wait_ready(60.0)
        print(f"ready; logs: {controller.log_path}")

        say(f"A Cluster on the engine: its OvirtCluster, the engine's credentials in a Secret of {NAMESPACE}")
        kubectl("create", "namespace", NAMESPACE)
        engine = manifests.Engine(sim.pod_url, sim.username, sim.password, Path(sim.ca_file).read_text())
        kubectl.apply(manifests.identity_secret(NAMESPACE, IDENTITY, engine),
                      f"{IDENTITY}.yaml  # Secret: url, username, password, ca.crt")
        scene.show_and_apply(manifests.ovirt_cluster(NAMESPACE, CLUSTER, IDENTITY, cluster_id,
                                                     controlplane.endpoint(kubectl.kubeconfig)),
                             f"{CLUSTER}-ovirtcluster.yaml", "the oVirt cluster its VMs go to")
        # The management cluster is also the workload cluster: the bed plays the control plane provider of the
        # API server that already runs (hack/capi/controlplane.py says why Cluster API needs one).
        plane = controlplane.ManagementControlPlane(kubectl.run, kubectl.kubeconfig, NAMESPACE, CLUSTER)
        plane_obj, kubeconfig_secret = plane.manifests()
        kubectl.apply(plane_obj, f"{plane.name}.yaml  # the bed's control plane: this cluster's own API server")
        kubectl.apply(kubeconfig_secret, f"{CLUSTER}-kubeconfig.yaml  # how Cluster API reaches the Nodes")
        scene.show_and_apply(manifests.cluster(NAMESPACE, CLUSTER, controlplane.ref(plane.name)),
                             f"{CLUSTER}-cluster.yaml", "Cluster")
        plane.report_initialized()
        until("the Cluster's infrastructure provisioned", scene.cluster_ready, TIMEOUT_S)
        kubectl("-n", NAMESPACE, "get", "cluster,ovirtcluster")

        say("A MachineDeployment of two workers from an OvirtMachineTemplate (2 cores, 2048 MiB)")
        v1, v2 = f"{DEPLOYMENT}-v1", f"{DEPLOYMENT}-v2"
        kubectl.apply(manifests.bootstrap_secret(NAMESPACE, BOOTSTRAP, CLUSTER),
                      f"{BOOTSTRAP}.yaml  # bootstrap data (cloud-config), as a bootstrap provider writes it")
        scene.show_and_apply(_template(cluster_id, v1, 2048), f"{v1}.yaml", "OvirtMachineTemplate")
        scene.show_and_apply(manifests.machine_deployment(NAMESPACE, DEPLOYMENT, CLUSTER, 2, v1,
                                                          KUBELET_VERSIONS[KUBE_NODE_TEMPLATE_NAME], BOOTSTRAP),
                             f"{DEPLOYMENT}.yaml", "2 replicas, RollingUpdate maxSurge 1, maxUnavailable 0")
        first = scene.watch(lambda look: look.running(2, v1, 2048), "2 Machines Running")[-1]
        kubectl("-n", NAMESPACE, "get", f"cluster,machinedeployment,{MACHINES},ovirtmachines")
        kubectl("get", "nodes", *sorted(m["status"]["nodeRef"]["name"] for m in first.machines), "-o",
                "custom-columns=NODE:.metadata.name,PROVIDERID:.spec.providerID,VERSION:.status.nodeInfo.kubeletVersion")
        say("The VMs in the engine")
        scene.show_vms()

        say("A template change: a new OvirtMachineTemplate with 3072 MiB, and the MachineDeployment pointed at it")
        scene.show_and_apply(_template(cluster_id, v2, 3072), f"{v2}.yaml", "the same spec, memory_mb: 3072")
        kubectl("-n", NAMESPACE, "get", "ovirtmachinetemplates", "-o", "custom-columns=NAME:.metadata.name,"
                "CPU:.status.capacity.cpu,MEMORY:.status.capacity.memory")
        old_ids = {vm.id for vm in first.vms.values()}
        patch = {"spec": {"template": {"spec": {"infrastructureRef": {"name": v2}}}}}
        kubectl("-n", NAMESPACE, "patch", "machinedeployment", DEPLOYMENT, "--type=merge", "-p", json.dumps(patch))
        looks = scene.watch(lambda look: look.running(2, v2, 3072), "2 Machines Running from the new template")
        most = max(len(look.vms) for look in looks)
        fewest_up = min(sum(vm.status.value == "up" for vm in look.vms.values()) for look in looks)
        left = old_ids & {vm.id for vm in looks[-1].vms.values()}
        print(f"Rolled one at a time: at most {most} VMs seen at once (maxSurge 1), never fewer than {fewest_up} up "
              f"(maxUnavailable 0); old VMs left in the engine: {len(left)}.")

        say("The end state")
        kubectl("-n", NAMESPACE, "get", f"cluster,machinedeployment,machinesets.{capi_api.GROUP},{MACHINES},"
                "ovirtmachines")
        scene.show_vms()
    finally:
        if controller:
            controller.stop()
        core.stop()

