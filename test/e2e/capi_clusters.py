"""Helpers of the Cluster API end-to-end tests: a Cluster on the simulated engine as a user writes it (Cluster,
OvirtCluster with its identity Secret, a MachineDeployment of OvirtMachines with bootstrap data given directly),
built with hack/capi/manifests.py (the objects the demo and the benchmark apply too), driven by Cluster API's own
core controllers (hack/capi/core.py) and this project's `ovirtcluster` and `ovirtmachine` controllers, and bounded
waits on what a user looks at (`kubectl get machines`, the engine's VMs, the Nodes)
(docs/architecture.md#the-test-bed).

The management cluster is also the workload cluster: the Cluster's control plane is the local API server, reported
by the bed's control plane provider (hack/capi/controlplane.py), and the simulator's guests of the cloud-init
node image register their Nodes there with the providerID the bootstrap cloud-config gives their kubelet
(hack/ovirtsim/cloud_config.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

import yaml

from api import capi as capi_api
from api import infrastructure
from hack.capi import controlplane, manifests
from hack.capi.core import CapiCore
from hack.capi.manifests import CLUSTER_NAME_LABEL, DEPLOYMENT_NAME_LABEL
from hack.ovirtsim.seed import KUBE_NODE_TEMPLATE_NAME, KUBELET_VERSIONS
from machines import MachineEnv, unique_name

CAPI_API_VERSION = capi_api.API_VERSION
CONTROLLERS = "--controllers=ovirtcluster,ovirtmachine,ovirtmachinetemplate"
CONVERGE_S = 90.0
INFRA_CRDS = tuple(f"{plural}.{infrastructure.GROUP}" for plural in ("ovirtclusters", "ovirtmachines",
                                                                      "ovirtmachinetemplates"))
# Every kind a test's Clusters leave in its namespace, the ones Cluster API's controllers hold by finalizers first.
KINDS = ("clusters.cluster.x-k8s.io", "machinedeployments.cluster.x-k8s.io", "machinesets.cluster.x-k8s.io",
         "machines.cluster.x-k8s.io", f"ovirtmachines.{infrastructure.GROUP}", f"ovirtclusters.{infrastructure.GROUP}",
         f"ovirtmachinetemplates.{infrastructure.GROUP}", f"{controlplane.PLURAL}.{controlplane.GROUP}")


class CapiEnv:
    """One test's view: its namespace, the simulated engine, Cluster API's core manager and this project's
    controller process for the Cluster API front end."""

    def __init__(self, menv: MachineEnv, core: CapiCore):
        self.menv = menv
        self.core = core
        self.cluster = menv.cluster
        self.sim = menv.sim
        self.namespace = menv.namespace
        self.k = menv.cluster.kubectl

    def controller(self) -> None:
        """This project's controller with the Cluster API front end only, once ready (informers synced)."""
        self.menv.controller(extra_args=(CONTROLLERS,)).wait_ready()

    def logs(self) -> str:
        return f"{self.menv.controller_logs()}\n{self.core.logs()}"

    def apply(self, *docs: dict[str, Any]) -> None:
        self.k("apply", "-f", "-", input=yaml.safe_dump_all(docs))

    def get(self, kind: str, name: str | None = None, selector: str | None = None) -> Any:
        args = ["-n", self.namespace, "get", kind, *([name] if name else []),
                *(["-l", selector] if selector else []), "-o", "json"]
        out = self.k(*args, check=name is None)
        if out.returncode != 0:
            return None
        doc = json.loads(out.stdout)
        return doc if name else doc["items"]

    # --- a Cluster ----------------------------------------------------------------------------------------------
    def create_cluster(self, replicas: int, memory_mb: int = 2048, name: str | None = None) -> "WorkloadCluster":
        """A Cluster with its OvirtCluster (credentials in its own Secret), the bed's control plane, the bootstrap
        data Secret, an OvirtMachineTemplate and a MachineDeployment of `replicas` workers (RollingUpdate,
        maxSurge 1, maxUnavailable 0)."""
        wc = WorkloadCluster(self, name or unique_name("capi"))
        plane = controlplane.ManagementControlPlane(self.k, self.cluster.kubeconfig, self.namespace, wc.name)
        sim, ns = self.sim, self.namespace
        engine = manifests.Engine(sim.pod_url, sim.username, sim.password, Path(sim.ca_file).read_text())
        identity = f"{wc.name}-ovirt"
        self.apply(manifests.identity_secret(ns, identity, engine),
                   manifests.bootstrap_secret(ns, wc.bootstrap, wc.name),
                   manifests.ovirt_cluster(ns, wc.name, identity, sim.installation.cluster_id,
                                           controlplane.endpoint(self.cluster.kubeconfig)),
                   *plane.manifests(), manifests.cluster(ns, wc.name, controlplane.ref(plane.name)))
        plane.report_initialized()
        self.apply(wc.machine_template(wc.template, memory_mb))
        self.apply(wc.machine_deployment(replicas, wc.template))
        return wc


class WorkloadCluster:
    """One Cluster and its MachineDeployment (named after it)."""

    def __init__(self, env: CapiEnv, name: str):
        self.env = env
        self.name = name
        self.template = f"{name}-t1"
        self.bootstrap = f"{name}-bootstrap"

    def machine_template(self, name: str, memory_mb: int) -> dict[str, Any]:
        spec = manifests.vm_spec(KUBE_NODE_TEMPLATE_NAME, self.env.sim.installation.cluster_id, memory_mb)
        return manifests.machine_template(self.env.namespace, name, spec)

    def machine_deployment(self, replicas: int, template: str) -> dict[str, Any]:
        return manifests.machine_deployment(self.env.namespace, self.name, self.name, replicas, template,
                                            KUBELET_VERSIONS[KUBE_NODE_TEMPLATE_NAME], self.bootstrap)

    # --- what a user looks at -------------------------------------------------------------------------------------
    def machines(self) -> list[dict[str, Any]]:
        return self.env.get("machines.cluster.x-k8s.io", selector=f"{DEPLOYMENT_NAME_LABEL}={self.name}")

    def ovirt_machines(self) -> dict[str, dict[str, Any]]:
        return {m["metadata"]["name"]: m for m in self.env.get(f"ovirtmachines.{infrastructure.GROUP}",
                                                               selector=f"{CLUSTER_NAME_LABEL}={self.name}")}

    def vms(self) -> list[dict[str, Any]]:
        """The engine's VMs named like this Cluster's OvirtMachines (`<deployment>-...`)."""
        return [vm for vm in self.env.sim.control.vms() if vm["name"].startswith(self.name + "-")]

    def nodes(self) -> dict[str, dict[str, Any]]:
        return {n["metadata"]["name"]: n for n in json.loads(self.env.k("get", "nodes", "-o", "json").stdout)["items"]}

    def deployment(self) -> dict[str, Any]:
        return self.env.get("machinedeployments.cluster.x-k8s.io", self.name)

    def describe(self) -> str:
        """The statuses a user would read first when a Cluster does not converge."""
        cluster = self.env.get("clusters.cluster.x-k8s.io", self.name) or {}
        ovirt_cluster = self.env.get(f"ovirtclusters.{infrastructure.GROUP}", self.name) or {}
        infra = {n: m.get("status") for n, m in self.ovirt_machines().items()}
        return (f"Cluster status: {json.dumps(cluster.get('status'))}\n"
                f"OvirtCluster status: {json.dumps(ovirt_cluster.get('status'))}\n"
                f"OvirtMachines' status: {json.dumps(infra)}")

    def wait_running(self, n: int, timeout: float = CONVERGE_S,
                     also: Callable[[list[dict[str, Any]]], bool] = lambda vms: True,
                     on_poll: Callable[[list[dict[str, Any]]], None] = lambda vms: None) -> list[dict[str, Any]]:
        """Until exactly `n` Machines, all Running with a nodeRef, each with the VM named after its OvirtMachine,
        up, whose id is in the providerID that the Machine, its OvirtMachine and its Node all carry; no other VM of
        this Cluster; the MachineDeployment reporting `n` ready, available and up to date; and `also` of the
        Cluster's VMs. `on_poll` sees the Cluster's VMs at every look."""
        deadline = time.monotonic() + timeout
        while True:
            problems = self._not_running(n, also, on_poll)
            if not problems:
                return self.machines()
            if time.monotonic() > deadline:
                raise AssertionError(f"Cluster {self.name} not at {n} Running Machines after {timeout}s: "
                                     f"{problems}\n{self.describe()}\n{self.env.logs()}")
            time.sleep(0.5)

    def _not_running(self, n: int, also: Callable[..., bool], on_poll: Callable[..., None]) -> list[str]:
        machines = [m for m in self.machines() if not m["metadata"].get("deletionTimestamp")]
        infra, vms, nodes = self.ovirt_machines(), self.vms(), self.nodes()
        on_poll(vms)
        vm_by_name = {vm["name"]: vm for vm in vms}
        problems = []
        if len(machines) != n:
            problems.append(f"{len(machines)} Machines")
        for m in machines:
            name, status = m["metadata"]["name"], m.get("status") or {}
            node_name = (status.get("nodeRef") or {}).get("name")
            infra_name = m["spec"]["infrastructureRef"]["name"]
            om, vm = infra.get(infra_name), vm_by_name.get(infra_name)
            pid = m["spec"].get("providerID")
            if status.get("phase") != "Running" or not node_name:
                problems.append(f"{name}: phase {status.get('phase')}, nodeRef {node_name}")
            elif vm is None or vm["status"] != "up":
                problems.append(f"{name}: VM {infra_name} {vm and vm['status']}")
            elif not (pid == f"ovirt://{vm['id']}" == (om or {}).get("spec", {}).get("providerID")
                      == nodes.get(node_name, {}).get("spec", {}).get("providerID")):
                problems.append(f"{name}: providerIDs differ (Machine {pid}, VM {vm['id']}, Node {node_name})")
        if len(vms) != n:
            problems.append(f"VMs {sorted((v['name'], v['status']) for v in vms)}")
        st = (self.deployment() or {}).get("status") or {}
        counts = {k: st.get(k) for k in ("replicas", "readyReplicas", "availableReplicas", "upToDateReplicas")}
        if any(v != n for v in counts.values()):
            problems.append(f"MachineDeployment {counts}")
        if not problems and not also(vms):
            problems.append("the test's own condition")
        return problems

    def vm_memory(self, vm_id: str) -> int:
        conn = self.env.sim.connection()
        try:
            return conn.system_service().vms_service().vm_service(vm_id).get().memory
        finally:
            conn.close()

    def scale(self, replicas: int) -> None:
        self.env.k("-n", self.env.namespace, "scale", "machinedeployments.cluster.x-k8s.io", self.name,
                   f"--replicas={replicas}")

    def delete(self) -> None:
        self.env.k("-n", self.env.namespace, "delete", "clusters.cluster.x-k8s.io", self.name, "--wait=false")

    def wait_deleted(self, timeout: float = CONVERGE_S) -> None:
        deadline = time.monotonic() + timeout
        while self.env.get("clusters.cluster.x-k8s.io", self.name) is not None:
            if time.monotonic() > deadline:
                phases = [(m["metadata"]["name"], (m.get("status") or {}).get("phase")) for m in self.machines()]
                raise AssertionError(f"Cluster {self.name} still there after {timeout}s: machines {phases} "
                                     f"VMs {[(v['name'], v['status']) for v in self.vms()]}\n{self.env.logs()}")
            time.sleep(0.5)


def release_namespace(env: CapiEnv) -> None:
    """Before the test's namespace goes (its controllers stopped): delete what its Clusters left and drop the
    finalizers the stopped controllers would have removed, so the namespace does not stay Terminating for the rest
    of the session (docs/architecture.md#the-test-bed). Its VMs stay in the simulator, as the Machine tests' do."""
    env.menv.stop_controllers()
    kinds = ",".join(KINDS)
    env.k("-n", env.namespace, "delete", kinds, "--all", "--wait=false", check=False)
    for obj in json.loads(env.k("-n", env.namespace, "get", kinds, "-o", "json").stdout)["items"]:
        if obj["metadata"].get("finalizers"):
            kind = f"{obj['kind'].lower()}s.{obj['apiVersion'].split('/')[0]}"
            env.k("-n", env.namespace, "patch", kind, obj["metadata"]["name"], "--type=merge",
                  "-p", '{"metadata":{"finalizers":null}}', check=False)
