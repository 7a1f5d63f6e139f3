"""`clusterctl move` (v1.14.2, built from the pinned module: hack/controlplane/capi.py) of a running Cluster from one
local control plane to another, each with Cluster API's real core manager and this project's controller
(docs/cluster-api.md#moving-a-cluster-clusterctl-move).

Plane A is the session's (the simulator's guests register their Nodes there, so it stays the workload cluster: the
Cluster's kubeconfig Secret, moved with it, still names it); plane B is a second LocalControlPlane for this module.
`clusterctl init` cannot run here (it stops at cert-manager: test_clusterctl.py), so each plane gets the inventory
init would leave, as init writes it: clusterctl's own CRD (the pinned module's cmd/clusterctl/config/manifest),
a `Provider` object per provider, and the clusterctl labels on the providers' CRDs (move discovers only kinds whose
CRD bears `clusterctl.cluster.x-k8s.io`).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import pytest
import yaml

from api.infrastructure import GROUP
from capi_clusters import CONTROLLERS, INFRA_CRDS, CapiEnv, WorkloadCluster
from hack import clusterctl_repo
from hack.capi import controlplane
from hack.capi.core import CapiCore
from hack.capi.manifests import MOVE_LABEL
from hack.controller_process import ControllerProcess
from hack.controlplane.build import Binaries, ensure_binaries
from hack.controlplane.capi import CAPI_VERSION, ensure_capi
from hack.controlplane.cluster import LocalControlPlane
from kube_cluster import Cluster
from machine_controller.ovirt.owner_mark import PREFIX
from machines import wait_for

CLUSTERCTL_LABEL = "clusterctl.cluster.x-k8s.io"
CORE_GROUP = "cluster.x-k8s.io"
STOP, START, CREATE = "POST /vms/{vm}/stop", "POST /vms/{vm}/start", "POST /vms"
# What `clusterctl init` records of each provider: (Provider name, namespace, providerName, type, version).
PROVIDERS = (("cluster-api", "capi-system", "cluster-api", "CoreProvider", CAPI_VERSION),
             (clusterctl_repo.PROVIDER, "capovirt-system", clusterctl_repo.NAME, clusterctl_repo.TYPE,
              clusterctl_repo.project_version()))


def _inventory(kubectl: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    """What `clusterctl init` leaves on a management cluster that `move` reads: its CRD, the Provider objects, and
    the providers' CRDs labelled for discovery (the bed's control plane kind as its provider's)."""
    kubectl("apply", "-f", str(clusterctl_repo.capi_module() / "cmd/clusterctl/config/manifest/clusterctl-api.yaml"))
    kubectl("wait", "--for=condition=Established", f"crd/providers.{CLUSTERCTL_LABEL}")
    docs: list[dict[str, Any]] = []
    for name, namespace, provider_name, type_, version in PROVIDERS:
        labels = {CLUSTERCTL_LABEL: "", clusterctl_repo.PROVIDER_LABEL: name}
        docs += [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                 {"apiVersion": f"{CLUSTERCTL_LABEL}/v1alpha3", "kind": "Provider",
                  "metadata": {"name": name, "namespace": namespace, "labels": labels},
                  "providerName": provider_name, "type": type_, "version": version}]
    kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    crds = kubectl("get", "crd", "-o", "name").stdout.split()
    core = [c for c in crds if c.endswith(f".{CORE_GROUP}")]
    for names, provider in ((core, "cluster-api"), ([f"crd/{c}" for c in INFRA_CRDS], clusterctl_repo.PROVIDER),
                            ([f"crd/{controlplane.PLURAL}.{controlplane.GROUP}"], "control-plane-bed")):
        kubectl("label", "--overwrite", *names, f"{CLUSTERCTL_LABEL}=", f"{clusterctl_repo.PROVIDER_LABEL}={provider}")


@pytest.fixture(scope="module")
def plane_b() -> Iterator[tuple[Cluster, CapiCore]]:
    """A second management cluster: its own control plane, Cluster API's core manager, the bed's control plane
    kind, this project's CRDs and clusterctl's inventory."""
    kubectl = ensure_binaries(Binaries()).path("kubectl")
    root = Path(os.environ.get("TMPDIR", "/tmp")) / f"omc-e2e-move-{os.getpid()}"
    with LocalControlPlane(root / "plane") as plane:
        b = Cluster(plane.kubeconfig("admin"), plane.kubeconfig("restricted"), kubectl, plane)
        core = CapiCore(b.kubectl, b.kubeconfig, root / "capi").start()
        try:
            controlplane.install(b.kubectl)
            b.apply_crds()
            _inventory(b.kubectl)
            yield b, core
        finally:
            core.stop()


class TargetEnv(CapiEnv):
    """The test's namespace as plane B serves it, with this project's controller there."""

    def __init__(self, env: CapiEnv, b: Cluster, core: CapiCore, controller: ControllerProcess):
        super().__init__(env.menv, core)
        self.cluster, self.k, self.ours = b, b.kubectl, controller

    def logs(self) -> str:
        return f"--- the controller on plane B\n{self.ours.log_text()[-6000:]}\n{self.core.logs()}"


class MovedCluster(WorkloadCluster):
    """The Cluster seen on plane B; its Nodes are still plane A's (the workload cluster)."""

    def __init__(self, env: CapiEnv, name: str, nodes_of: Cluster):
        super().__init__(env, name)
        self.nodes_of = nodes_of

    def nodes(self) -> dict[str, dict[str, Any]]:
        out = self.nodes_of.kubectl("get", "nodes", "-o", "json").stdout
        return {n["metadata"]["name"]: n for n in json.loads(out)["items"]}


def _paused(obj: dict[str, Any] | None) -> bool:
    return bool(obj and obj["spec"].get("paused"))


class _Watch:
    """`kubectl get --watch --output-watch-events -o json` of one kind on B, read as it prints, so the test can wait
    until the watch has shown what it needs before stopping it (a stopped watch may cut its last event short)."""

    def __init__(self, cluster: Cluster, namespace: str, kind: str) -> None:
        self._proc = subprocess.Popen([str(cluster.kubectl_path), f"--kubeconfig={cluster.kubeconfig}", "-n", namespace,
                                       "get", kind, "--watch", "--output-watch-events", "-o", "json"],
                                      stdout=subprocess.PIPE, text=True)
        self._chunks: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self._chunks.append(line)

    def events(self) -> list[dict[str, Any]]:
        """Every complete event printed so far (a document still being printed is not one yet)."""
        text, decoder, events, at = "".join(self._chunks), json.JSONDecoder(), [], 0
        while text[at:].strip():
            at += len(text[at:]) - len(text[at:].lstrip())
            try:
                event, at = decoder.raw_decode(text, at)
            except json.JSONDecodeError:
                break
            events.append(event)
        return events

    def stop(self) -> None:
        self._proc.kill()
        self._proc.wait()
        self._reader.join(timeout=5)


def _owners(obj: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(o["kind"], o["name"], o["uid"]) for o in obj["metadata"].get("ownerReferences") or []}


def _comments(capi: CapiEnv, vm_ids: Iterable[str]) -> dict[str, str]:
    conn = capi.sim.connection()
    try:
        vms = conn.system_service().vms_service()
        return {vm.name: vm.comment for vm in (vms.vm_service(i).get() for i in vm_ids)}
    finally:
        conn.close()


def test_move_keeps_every_vm_and_resumes_on_the_target(capi, plane_b, tmp_path):
    b, core_b = plane_b
    _inventory(capi.k)
    capi.controller()
    wc = capi.create_cluster(2)
    wc.wait_running(2)
    ns = capi.namespace
    provider_ids = {m["metadata"]["name"]: m["spec"]["providerID"] for m in wc.machines()}
    vm_ids = {vm["name"]: vm["id"] for vm in wc.vms()}
    vm_count, counts = len(capi.sim.control.vms()), capi.sim.control.counts()

    ours_b = ControllerProcess(b.kubeconfig, tmp_path / "controller-b.log", namespace=ns,
                               extra_args=("--backoff-base=0.2", "--backoff-cap=5", "--log-level=debug", CONTROLLERS))
    ours_b.start().wait_ready()
    env_b = TargetEnv(capi, b, core_b, ours_b)
    moved = MovedCluster(env_b, wc.name, capi.cluster)
    # Every version of the Cluster and of the OvirtMachines that B's API server stores, from their creation on.
    watches = [_Watch(b, ns, kind) for kind in ("clusters.cluster.x-k8s.io", f"ovirtmachines.{GROUP}")]
    try:
        out = subprocess.run(
            [str(ensure_capi().path("clusterctl")), "move", "--kubeconfig", str(capi.cluster.kubeconfig),
             "--to-kubeconfig", str(b.kubeconfig), "--namespace", ns, "-v", "3"],
            env={**{k: v for k, v in os.environ.items() if k != "KUBECONFIG"},
                 "XDG_CONFIG_HOME": str(tmp_path / "clusterctl-home"), "CLUSTERCTL_DISABLE_VERSIONCHECK": "true"},
            capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, f"clusterctl move: {out.stdout}{out.stderr}"

        # Gone from A: move deletes there what it created on B.
        for kind in ("clusters.cluster.x-k8s.io", "machinedeployments.cluster.x-k8s.io", "machines.cluster.x-k8s.io",
                     f"ovirtclusters.{GROUP}", f"ovirtmachines.{GROUP}", f"ovirtmachinetemplates.{GROUP}"):
            assert capi.get(kind) == [], kind
        assert capi.get("secret", f"{wc.name}-ovirt") is None
        # On B: the identity Secret (by its move label), the kubeconfig Secret, and the Cluster resumed.
        for secret in (f"{wc.name}-ovirt", wc.bootstrap):
            assert MOVE_LABEL in (env_b.get("secret", secret) or {}).get("metadata", {}).get("labels", {}), secret
        assert env_b.get("secret", f"{wc.name}-kubeconfig") is not None
        wait_for("the Cluster unpaused on B", lambda: not _paused(env_b.get("clusters.cluster.x-k8s.io", wc.name)), 30)
        # B's watches have printed the resume, and both OvirtMachines' creation before it.
        wait_for("B's watch showing the Cluster resumed",
                 lambda: any(not _paused(e["object"]) for e in watches[0].events()), 30)
        wait_for("B's watch showing both OvirtMachines created",
                 lambda: sum(e["type"] == "ADDED" for e in watches[1].events()) >= 2, 30)
        clusters, infra = (watch.events() for watch in watches)
        # It arrived paused (created so) and was resumed by move only once every object was there.
        assert clusters[0]["type"] == "ADDED" and _paused(clusters[0]["object"]), clusters[0]
        resumed = next(e for e in clusters if not _paused(e["object"]))
        resumed_at = int(resumed["object"]["metadata"]["resourceVersion"])
        # Pause honoured: the OvirtMachines arrived without status (move does not carry it), and before the Cluster
        # was resumed this project's controller on B wrote only the contract's Paused condition, never looked for
        # the VM. One API server's resourceVersions are its etcd revisions, so they order writes of different kinds.
        added = [int(e["object"]["metadata"]["resourceVersion"]) for e in infra if e["type"] == "ADDED"]
        assert len(added) == 2 and max(added) < resumed_at, (added, resumed_at)
        early = [e["object"].get("status") or {} for e in infra
                 if int(e["object"]["metadata"]["resourceVersion"]) < resumed_at]
        assert all(set(st) <= {"conditions"} and all(c["type"] == "Paused" and c["status"] == "True"
                                                     for c in st.get("conditions", [])) for st in early), early
        # The bed's control plane kind has no controller: its provider on B reports it again, as a real one does
        # (move does not carry status).
        controlplane.ManagementControlPlane(b.kubectl, capi.cluster.kubeconfig, ns, wc.name).report_initialized()

        moved.wait_running(2)
        assert {m["metadata"]["name"]: m["spec"]["providerID"] for m in moved.machines()} == provider_ids
        infra_b = moved.ovirt_machines()
        for name, om in infra_b.items():
            assert (om.get("status") or {}).get("initialization", {}).get("provisioned") is True, (name, om)
        # The owner references that linked the provider's objects to the Cluster's, rewritten to their new uids.
        for m in moved.machines():
            om = infra_b[m["spec"]["infrastructureRef"]["name"]]
            assert _owners(om) >= {("Machine", m["metadata"]["name"], m["metadata"]["uid"])}, om["metadata"]
        cluster_b = env_b.get("clusters.cluster.x-k8s.io", wc.name)
        ovirt_cluster_b = env_b.get(f"ovirtclusters.{GROUP}", wc.name)
        assert _owners(ovirt_cluster_b) >= {("Cluster", wc.name, cluster_b["metadata"]["uid"])}, ovirt_cluster_b
        # Every VM untouched: the same ids, up, never stopped or started, and none created.
        assert {vm["name"]: vm["id"] for vm in moved.vms()} == vm_ids
        assert all(vm["status"] == "up" for vm in moved.vms())
        after = capi.sim.control.counts()
        assert {k: after.get(k, 0) - counts.get(k, 0) for k in (STOP, START, CREATE)} == {STOP: 0, START: 0,
                                                                                           CREATE: 0}
        # No write reached any VM: the owner mark, which names the OvirtMachine's namespace and name (the same on
        # B), already proves each VM the moved object's own (docs/architecture.md#acting-only-on-what-is-ours).
        writes = {k: n - counts.get(k, 0) for k, n in after.items()
                  if "/vms" in k and not k.startswith("GET ") and n != counts.get(k, 0)}
        assert writes == {}, writes
        for name, comment in _comments(capi, vm_ids.values()).items():
            assert comment.startswith(f"{PREFIX} OvirtMachine {ns}/{name} uid "), comment
        assert len(capi.sim.control.vms()) == vm_count
    finally:
        for watch in watches:
            watch.stop()
        # What moved to B stays there until B stops with the module: its controllers stopped, nothing acts on it.
        ours_b.stop()
