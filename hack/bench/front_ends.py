"""The two front ends hack/bench/machines.py drives N Machines through (`--api`), on the same control plane, simulator
and controller program (docs/benchmarks.md#the-two-front-ends):

- `MachineApi`: OpenShift's Machine API. N Machines created at once (16 parallel POSTs), deleted at once; the
  controller runs its default controllers.
- `ClusterApi`: upstream Cluster API. Cluster API's own core manager (hack/capi/core.py) runs beside the
  controller, which runs only `ovirtcluster,ovirtmachine,ovirtmachinetemplate`; a Cluster, its OvirtCluster and the
  bed's control plane are made once (hack/capi), then N Machines come from ONE MachineDeployment of N replicas (an
  OvirtMachineTemplate, bootstrap data in the Secret its template names) and go with its deletion. Its VMs are the
  Machine API's (same size, thin disks, the same affinity group) from the cloud-init node image, whose guests
  register their Nodes with the providerID, so Cluster API's Machines reach Running with nodeRefs.

Each says which Machines to follow (`resource`, `namespace`), the controller's flags, and the processes beside the
controller whose CPU and API writes belong to it (`pids()` and `others`, the user agent of each, by one name).
"""

from __future__ import annotations

import json
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import yaml

from api import capi as capi_api
from api import infrastructure
from api.provider_spec import parse_provider_spec, vm_fields
from hack import ovirt_install
from hack.bench.options import CAPI, MAPI
from hack.capi import controlplane, manifests
from hack.capi.core import CapiCore
from hack.controlplane.build import Binaries
from hack.crds_established import wait_established
from hack.ovirtsim.seed import KUBE_NODE_TEMPLATE_NAME, KUBELET_VERSIONS
from machine_controller.controllers.infrastructure.resources import CAPI_MACHINES
from machine_controller.controllers.resources import MACHINES
from machine_controller.runtime.kube import Resource, Rest, load_api_client

NS = "openshift-machine-api"
CAPI_NS = "bench-capi"
INFRA_ID = "bench-x7k2p"
CLUSTER = "bench"
BOOTSTRAP = f"{CLUSTER}-bootstrap"  # the bootstrap data Secret every Machine's template names
# Cluster API's core manager names itself by its program's name in its user agent (remote.DefaultClusterAPIUserAgent).
CAPI_MANAGER_AGENT = "capi-manager"
READY_S = 120.0


class Kubectl:
    """The pinned kubectl on one kubeconfig: `kubectl(*args)` is its output (failing on an error), `run` the whole
    result, as hack/capi's classes take it."""

    def __init__(self, kubeconfig: Path):
        self.kubeconfig = kubeconfig
        self.base = [str(Binaries().path("kubectl")), f"--kubeconfig={kubeconfig}"]

    def run(self, *args: str, check: bool = True, **run_args: Any) -> subprocess.CompletedProcess[str]:
        """`input=` (subprocess's keyword, which hack/capi's classes give) is the standard input."""
        return subprocess.run([*self.base, *args], check=check, capture_output=True, text=True, **run_args)

    def __call__(self, *args: str, stdin: str | None = None) -> str:
        return self.run(*args, input=stdin).stdout


class FrontEnd(Protocol):
    key: str
    resource: Resource
    namespace: str
    controller_args: tuple[str, ...]
    others: dict[str, str]

    def before_controller(self) -> None: ...
    def after_controller(self) -> None: ...
    def pids(self) -> dict[str, int]: ...
    def create(self, n: int) -> None: ...
    def delete(self, n: int) -> None: ...
    def close(self) -> None: ...


def machine(inst: ovirt_install.Installation, name: str) -> dict:
    """A benchmark Machine. Small VMs, so a thousand fit on the simulator's hosts; thin disks (qcow2 overlays on the
    template's), so a thousand fit on its storage: 1000 clones of the 2.5 GiB RHCOS image would need 2.5 TB, its
    domain has 1 TiB."""
    return ovirt_install.machine_for(inst, NS, name, cpu={"sockets": 1, "cores": 2, "threads": 1}, memory_mb=4096,
                                     clone=False, affinity_groups_names=[f"{INFRA_ID}-compute"])


class MachineApi:
    key = MAPI
    resource = MACHINES
    namespace = NS
    controller_args: tuple[str, ...] = ()
    others: dict[str, str] = {}

    def __init__(self, kubeconfig: Path, inst: ovirt_install.Installation, concurrency: int = 16):
        self.rest = Rest(load_api_client(str(kubeconfig)))
        self.inst = inst
        self.concurrency = concurrency

    @staticmethod
    def names(n: int) -> list[str]:
        return [f"bench-{n}-{i:03d}" for i in range(n)]

    def before_controller(self) -> None:
        pass

    def after_controller(self) -> None:
        pass

    def pids(self) -> dict[str, int]:
        return {}

    def create(self, n: int) -> None:
        """All at once: `kubectl apply` of a thousand objects asks for each in turn (a GET, then a create) and takes
        minutes, so the controller would see them trickle in."""
        with ThreadPoolExecutor(self.concurrency) as pool:
            list(pool.map(lambda name: self.rest.create(MACHINES, machine(self.inst, name), NS), self.names(n)))

    def delete(self, n: int) -> None:
        """All at once: `kubectl delete --all` sends its DELETEs one after another, which took minutes of a loaded
        machine at N=1000 before the controller saw the last of them."""
        with ThreadPoolExecutor(self.concurrency) as pool:
            list(pool.map(lambda name: self.rest.delete(MACHINES, name, NS), self.names(n)))

    def close(self) -> None:
        pass


class ClusterApi:
    key = CAPI
    resource = CAPI_MACHINES
    namespace = CAPI_NS
    controller_args = ("--controllers=ovirtcluster,ovirtmachine,ovirtmachinetemplate",)
    others = {"capi-manager": CAPI_MANAGER_AGENT}

    def __init__(self, kubectl: Kubectl, sim, inst: ovirt_install.Installation, work: Path):
        self.k = kubectl
        self.sim = sim
        self.inst = inst
        self.core = CapiCore(kubectl.run, kubectl.kubeconfig, work)

    def before_controller(self) -> None:
        """Cluster API's CRDs, webhooks and core manager, and the bed's control plane kind: the controller's
        informers of Cluster API's kinds need the CRDs served."""
        self.k("create", "namespace", CAPI_NS)
        self.core.start()
        controlplane.install(self.k.run)
        wait_established(self.k, *(f"{plural}.{infrastructure.GROUP}"
                                   for plural in ("ovirtclusters", "ovirtmachines", "ovirtmachinetemplates")))

    def after_controller(self) -> None:
        """The Cluster, once: its OvirtCluster on the simulator's engine, the bed's control plane reported
        initialized, the bootstrap data Secret; ready when Cluster API sees its infrastructure provisioned."""
        plane = controlplane.ManagementControlPlane(self.k.run, self.k.kubeconfig, CAPI_NS, CLUSTER)
        engine = manifests.Engine(self.sim.url, self.sim.username, self.sim.password,
                                  Path(self.sim.ca_file).read_text())
        identity = f"{CLUSTER}-ovirt"
        docs = [manifests.identity_secret(CAPI_NS, identity, engine),
                manifests.bootstrap_secret(CAPI_NS, BOOTSTRAP, CLUSTER),
                manifests.ovirt_cluster(CAPI_NS, CLUSTER, identity, self.inst.cluster_id,
                                        controlplane.endpoint(self.k.kubeconfig)),
                *plane.manifests(), manifests.cluster(CAPI_NS, CLUSTER, controlplane.ref(plane.name))]
        self.k("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
        plane.report_initialized()
        deadline = time.monotonic() + READY_S
        while not self._infrastructure_provisioned():
            if time.monotonic() > deadline:
                raise RuntimeError(f"Cluster {CAPI_NS}/{CLUSTER}: infrastructure not provisioned after "
                                   f"{READY_S:.0f} s; see the controller's log")
            time.sleep(0.5)

    def _infrastructure_provisioned(self) -> bool:
        out = self.k.run("-n", CAPI_NS, "get", f"clusters.{capi_api.GROUP}", CLUSTER, "-o", "json", check=False)
        if out.returncode != 0:
            return False
        status = json.loads(out.stdout).get("status") or {}
        return bool((status.get("initialization") or {}).get("infrastructureProvisioned"))

    def pids(self) -> dict[str, int]:
        proc = self.core.process.proc
        return {"capi-manager": proc.pid} if proc else {}

    def vm_spec(self) -> dict:
        """The Machine API's benchmark VM (`machine`) as an OvirtMachine spec (one definition of the fields), from
        the cloud-init node image."""
        value = machine(self.inst, CLUSTER)["spec"]["providerSpec"]["value"]
        fields = {**vm_fields(parse_provider_spec(value)), "template_name": KUBE_NODE_TEMPLATE_NAME}
        return infrastructure.OvirtMachineSpec(**fields).to_dict()

    def create(self, n: int) -> None:
        """One MachineDeployment of n replicas and its OvirtMachineTemplate, applied together."""
        name = f"{CLUSTER}-{n}"
        docs = [manifests.machine_template(CAPI_NS, name, self.vm_spec()),
                manifests.machine_deployment(CAPI_NS, name, CLUSTER, n, name,
                                             KUBELET_VERSIONS[KUBE_NODE_TEMPLATE_NAME], BOOTSTRAP)]
        self.k("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))

    def delete(self, n: int) -> None:
        """The MachineDeployment: Cluster API deletes its MachineSet and Machines, each Machine its OvirtMachine
        (so its VM) and then its Node. The template goes with it; its Machines no longer need it."""
        name = f"{CLUSTER}-{n}"
        self.k("-n", CAPI_NS, "delete", f"machinedeployments.{capi_api.GROUP}", name, "--wait=false")
        self.k("-n", CAPI_NS, "delete", f"ovirtmachinetemplates.{infrastructure.GROUP}", name, "--wait=false")

    def close(self) -> None:
        self.core.stop()
