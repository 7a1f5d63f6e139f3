"""`kubectl apply -k config/` for real: the default entry point, as the README tells users (an
overlay that names the image, `kustomize edit set image`), applied to a control plane whose real node holds the
product image. The controller runs as two pods of that image (not hostNetwork: in-cluster config through the
`kubernetes` Service and kube-proxy) under its ServiceAccount and RBAC, passes its probes, one takes the Lease, and
its metrics answer through their Service. A MachineSet of the sample's shape, whose VMs the simulator boots as real
nodes, reaches Running with Ready Nodes; scaled down, it drains the removed node's pod and the Node goes.

The module runs its own control plane, simulator and kube-proxy: config/ is cluster-wide (CRDs, ClusterRoles, the
openshift-machine-api namespace, the Lease), and on the session's plane the Deployment's pods could be scheduled on
a simulated guest's Node, where no kubelet runs them.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from hack import images, ovirt_install
from hack.controlplane.build import Binaries, ensure_binaries
from hack.controlplane.cluster import LocalControlPlane
from hack.controlplane.nodes import PAUSE_IMAGE, RealNode
from hack.controlplane.proxy import KubeProxy
from hack.images import product
from hack.ovirtsim.testing import SimulatorHandle, running_simulator
from kube_cluster import REPO, Cluster
from machine_controller.runtime.testing import wait_until
from machines import INFRA_ID, MACHINE_API_NS
from test_deployment_manifests import MONITORING_CRDS, PROMETHEUS_OPERATOR, _module_dir
from test_real_guests import _ready_kubelet

pytestmark = [
    pytest.mark.skipif(bool(os.environ.get("KUBECONFIG")), reason="real nodes join the local control plane only"),
    # The set-up builds the product image when its inputs changed since `make images` (minutes on two cores).
    pytest.mark.timeout(1800),
    pytest.mark.long_module,
]

# The README's step before `kubectl apply -k config/`: name the image the cluster runs, here the product image under
# a tag of its own in the node's containerd (config/ names `:latest`, which kubelet always tries to pull, and no
# registry is reachable here).
IMAGE = "ovirt-machine-controller:e2e"
DEPLOYMENT = "ovirt-machine-controller"
LEASE = "cluster-api-provider-ovirt-leader"
METRICS_SERVICE = "ovirt-machine-controller-metrics"


@dataclass
class Deployed:
    cluster: Cluster
    sim: SimulatorHandle
    node: RealNode  # where the controller's pods run


def _kustomize_overlay(directory: Path) -> Path:
    """What `kustomize edit set image ovirt-machine-controller=ovirt-machine-controller:e2e` writes in an overlay of
    config/ (README, "Deploying")."""
    directory.mkdir(parents=True)
    name, _, tag = IMAGE.partition(":")
    (directory / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [os.path.relpath(REPO / "config", directory)],
        "images": [{"name": "ovirt-machine-controller", "newName": name, "newTag": tag}],
    }))
    return directory


def _install_monitoring_crds(cluster: Cluster) -> None:
    """config/ ships a ServiceMonitor and PrometheusRules: prometheus-operator's CRDs must be there, as
    kube-prometheus installs them (the same CRDs test_deployment_manifests validates against)."""
    for name, path in MONITORING_CRDS.items():
        cluster.kubectl("apply", "--server-side", "-f", str(_module_dir(PROMETHEUS_OPERATOR) / path))
        cluster.wait_established(name)


@pytest.fixture(scope="module")
def deployed(tmp_path_factory) -> Iterator[Deployed]:
    started = time.monotonic()
    tmp = tmp_path_factory.mktemp("cfg")  # short: the kubelet's unix sockets live under it (107 bytes at most)
    pause, image = images.archive("pause"), images.archive(product.NAME)
    binaries = ensure_binaries(Binaries())
    with ExitStack() as stack:
        plane = stack.enter_context(LocalControlPlane(tmp / "p"))
        cluster = Cluster(plane.kubeconfig("admin"), plane.kubeconfig("restricted"), binaries.path("kubectl"), plane)
        stack.enter_context(KubeProxy(plane))
        sim = stack.enter_context(running_simulator(tmp / "ovirt", kubeconfig=plane.kubeconfig("admin")))
        conn = sim.connection()
        try:
            sim.installation = ovirt_install.prepare(conn, INFRA_ID)
        finally:
            conn.close()
        # The sample MachineSet's VMs boot as real nodes (their kubelets import the pause image).
        sim.control.real_guests(plane.dir, [pause], vms=[f"{INFRA_ID}-worker-*"])

        node = RealNode(plane, "e2e-cfg")
        stack.callback(node.stop)
        node.start(images=(pause, image))
        # The image "pushed where the cluster pulls from": the node's own store, under the overlay's tag.
        subprocess.run(["ctr", f"--address={node.containerd_socket}", "-n", "k8s.io", "images", "tag",
                        f"docker.io/library/{product.TAG}", f"docker.io/library/{IMAGE}"], check=True,
                       capture_output=True)
        node.wait_ready()

        _install_monitoring_crds(cluster)
        cluster.kubectl("apply", "-k", str(_kustomize_overlay(tmp / "overlay")))
        secret = ovirt_install.credentials_secret(sim.pod_url, sim.username, sim.password,
                                                  ca_pem=Path(sim.ca_file).read_text())
        user_data = ovirt_install.sample("worker-user-data.yaml")
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([secret, user_data]))
        r = cluster.kubectl("-n", MACHINE_API_NS, "rollout", "status", f"deployment/{DEPLOYMENT}", "--timeout=300s",
                            check=False, timeout=330)
        assert r.returncode == 0, cluster.kubectl("-n", MACHINE_API_NS, "describe", "pods").stdout
        print(f"\n[figures] config/ applied, controller Deployment available {time.monotonic() - started:.0f} s "
              "after the set-up began")
        yield Deployed(cluster, sim, node)
        for name in _machine_nodes(cluster):  # the real guests' Nodes stop with the simulator
            cluster.kubectl("delete", "node", name, "--wait=false", check=False)


def _get(cluster: Cluster, *args: str) -> dict:
    return json.loads(cluster.kubectl(*args, "-o", "json").stdout)


def _controller_pods(cluster: Cluster) -> list[dict]:
    return _get(cluster, "-n", MACHINE_API_NS, "get", "pods", "-l",
                "app.kubernetes.io/name=ovirt-machine-controller")["items"]


def _machine_nodes(cluster: Cluster) -> list[str]:
    machines = _get(cluster, "-n", MACHINE_API_NS, "get", "machines")["items"]
    return [m["status"]["nodeRef"]["name"] for m in machines if m.get("status", {}).get("nodeRef")]


def test_the_controller_runs_as_pods_of_its_image(deployed):
    cluster = deployed.cluster
    pods = _controller_pods(cluster)
    assert len(pods) == 2, [p["metadata"]["name"] for p in pods]
    for pod in pods:
        assert pod["spec"]["nodeName"] == deployed.node.name
        assert not pod["spec"].get("hostNetwork")
        assert pod["spec"]["serviceAccountName"] == "machine-api-controllers"
        (container,) = pod["status"]["containerStatuses"]
        assert container["image"] == f"docker.io/library/{IMAGE}" and container["ready"], container
        assert container["restartCount"] == 0, container  # the liveness probe never failed
    # One replica leads: the Lease names a pod.
    lease = _get(cluster, "-n", MACHINE_API_NS, "get", "lease", LEASE)
    assert lease["spec"]["holderIdentity"] in {p["metadata"]["name"] for p in pods}, lease["spec"]
    # The metrics answer through config/monitoring's Service, from its ClusterIP (kube-proxy's rules).
    service = _get(cluster, "-n", MACHINE_API_NS, "get", "service", METRICS_SERVICE)
    url = f"http://{service['spec']['clusterIP']}:8081/metrics"
    answers: list[str] = []

    def scraped() -> bool:
        # kube-proxy writes a Service's rules once its endpoints are ready, which may follow the pods' readiness
        # by a sync period: until then the ClusterIP refuses the connection.
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                answers.append(resp.read().decode())
            return True
        except OSError as e:
            answers.append(str(e))
            return False

    assert wait_until(scraped, 60, 1.0), answers[-1]
    assert "mapi_mao_collector_up" in answers[-1], answers[-1][:2000]


def _worker_pod(node: str) -> str:
    return json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"on-{node}", "labels": {"app": "e2e-drain"}},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "pause", "image": PAUSE_IMAGE, "imagePullPolicy": "Never"}]},
    })


def _events_of(cluster: Cluster, name: str) -> list[tuple[str, str]]:
    events = _get(cluster, "-n", MACHINE_API_NS, "get", "events", "--field-selector",
                  f"involvedObject.kind=Machine,involvedObject.name={name}")["items"]
    return [(e["reason"], e.get("message", "")) for e in events]


def test_a_machineset_of_real_guests_runs_and_scales_down_by_draining(deployed):
    cluster, ns = deployed.cluster, MACHINE_API_NS
    started = time.monotonic()
    machineset = ovirt_install.machineset_for(deployed.sim.installation)
    machineset["spec"]["replicas"] = 2
    name = machineset["metadata"]["name"]
    cluster.kubectl("apply", "-f", "-", input=json.dumps(machineset))

    def running() -> list[dict] | None:
        machines = _get(cluster, "-n", ns, "get", "machines")["items"]
        ok = [m for m in machines if m.get("status", {}).get("phase") == "Running"
              and m["status"].get("nodeRef") and _ready_kubelet(cluster, m["status"]["nodeRef"]["name"])]
        return ok if len(ok) == 2 == len(machines) else None

    assert wait_until(running, 300, 1.0), cluster.kubectl("-n", ns, "get", "machines", "-o", "yaml").stdout
    machines = running()
    assert machines
    print(f"\n[figures] MachineSet of 2 real guests Running with Ready Nodes in {time.monotonic() - started:.0f} s")
    status = _get(cluster, "-n", ns, "get", "machineset", name)["status"]
    assert status.get("readyReplicas") == status.get("availableReplicas") == 2, status
    nodes = {m["metadata"]["name"]: m["status"]["nodeRef"]["name"] for m in machines}
    for node in nodes.values():
        cluster.kubectl("-n", "default", "apply", "-f", "-", input=_worker_pod(node))
    for node in nodes.values():
        cluster.kubectl("-n", "default", "wait", "--for=condition=Ready", f"pod/on-{node}", "--timeout=120s")
    pod_uids = {node: _get(cluster, "-n", "default", "get", "pod", f"on-{node}")["metadata"]["uid"]
                for node in nodes.values()}

    cluster.kubectl("-n", ns, "scale", "machineset", name, "--replicas=1")
    assert wait_until(lambda: len(_get(cluster, "-n", ns, "get", "machines")["items"]) == 1, 300, 1.0), \
        cluster.kubectl("-n", ns, "get", "machines", "-o", "yaml").stdout
    (kept,) = _get(cluster, "-n", ns, "get", "machines")["items"]
    (removed,) = [m for m in nodes if m != kept["metadata"]["name"]]
    gone, stays = nodes[removed], nodes[kept["metadata"]["name"]]
    # The removed Machine's node was drained: its pod evicted (the drain waited for it), then the Node deleted.
    events = _events_of(cluster, removed)
    assert ("DrainRequeued", "waiting for 1 pod(s) to terminate") in events, events
    assert ("Deleted", f"Node {gone!r} drained") in events, events
    assert cluster.kubectl("-n", "default", "get", "pod", f"on-{gone}", check=False).returncode != 0
    assert wait_until(lambda: cluster.kubectl("get", "node", gone, check=False).returncode != 0, 60, 0.5), gone
    # The other node and its pod were left alone.
    assert _get(cluster, "-n", "default", "get", "pod", f"on-{stays}")["metadata"]["uid"] == pod_uids[stays]
    assert _ready_kubelet(cluster, stays)
    assert not _get(cluster, "get", "node", stays)["spec"].get("unschedulable")
    print(f"\n[figures] MachineSet created, Running and scaled down in {time.monotonic() - started:.0f} s")
