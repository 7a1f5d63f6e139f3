"""The OpenShift path for real: machine-api-operator's own operator (release-4.13, the last that knows the oVirt
platform; hack/controlplane/mao_operator.py), installed as the cluster-version operator installs it
(hack/mao_install.py) and given the oVirt Infrastructure and an images ConfigMap naming this project's image as its
oVirt provider, renders `machine-api-controllers`; the pod runs on a real node, the image under MAO's name and
flags beside MAO's own controllers, holds the provider's Lease, and a MachineSet scales with VMs in the simulator
(docs/compatibility.md#the-operator-at-release-413).

One module-scoped set-up (a real control-plane node, the operator, its pod); the tests read what it produced.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from dataclasses import dataclass
from typing import Iterator

import pytest
import yaml

from hack import images, mao_install, ovirt_install
from hack.controlplane.mao_operator import SourceUnavailable
from hack.controlplane.nodes import RealNode, node_ip
from hack.images import go_programs, product
from hack.mao_controllers import install_openshift_config
from machines import INFRA_ID, MachineEnv, unique_name
from test_machinehealthcheck import _machines, _machineset
from test_remediation import _wait

# Building the product image (after an edit) and MAO's operator (first run) takes minutes on two shared cores.
pytestmark = pytest.mark.timeout(1800)

MASTER = "node-role.kubernetes.io/master"
KUBE_RBAC_PROXY_TAG = go_programs.OPENSHIFT_IMAGES[0].tag
MAO_TAG = go_programs.MAO_TAG
# The Go provider's Lease (docs/compatibility.md#deployment-on-openshift).
PROVIDER_LEASE = "cluster-api-provider-ovirt-leader"
CONTROLLERS = {"api": "clusterapi", "k8s-app": "controller"}  # the labels of MAO's machine-api-controllers pods
# MAO's common flags for every controller container (pkg/operator/sync.go at release-4.13).
MAO_FLAGS = ["--logtostderr=true", "--v=3", "--leader-elect=true", "--leader-elect-lease-duration=120s"]


@dataclass
class Mao:
    namespace: str
    node: RealNode
    provider: str  # the image reference images.json names for the oVirt provider
    menv: MachineEnv

    @property
    def cluster(self):
        return self.menv.cluster

    def kubectl(self, *args: str, **kw):
        return self.cluster.kubectl("-n", self.namespace, *args, **kw)

    def get(self, *args: str) -> dict:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def controllers_pod(self) -> dict | None:
        selector = ",".join(f"{k}={v}" for k, v in CONTROLLERS.items())
        pods = [p for p in self.get("pods", "-l", selector)["items"] if not p["metadata"].get("deletionTimestamp")]
        return pods[0] if len(pods) == 1 else None

    def controller_logs(self) -> str:  # what a failed wait (test_remediation._wait) prints
        return self.logs()

    def logs(self) -> str:
        out = self.kubectl("logs", "deployment/machine-api-operator", "-c", "machine-api-operator", "--tail=40",
                           check=False).stdout
        pod = self.controllers_pod()
        if pod is not None:
            out += self.kubectl("logs", pod["metadata"]["name"], "-c", "machine-controller", "--tail=60",
                                check=False).stdout
        return out


def _provider_reference() -> str:
    """This project's image under a tag of its content: `latest` would make the kubelet pull it (MAO sets no
    imagePullPolicy, and `latest` means Always), where a release payload names every image by digest."""
    return f"{product.NAME}:{product.key()[:12]}"


def _tag(node: RealNode, source: str, target: str) -> None:
    """A second name for an imported image, in the node's containerd (its CRI sees it at once)."""
    subprocess.run(["ctr", f"--address={node.containerd_socket}", "-n", "k8s.io", "images", "tag", "--force",
                    source, target], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def archives(real_node_images) -> tuple:
    """The node's images, built first: kube_proxy holds a machine-wide lock, not to be held across a build."""
    try:
        return (*real_node_images, images.archive(product.NAME),
                *(images.archive(i.name) for i in go_programs.OPENSHIFT_IMAGES))
    except SourceUnavailable as e:
        pytest.skip(f"machine-api-operator's release-4.13 source is out of reach: {e}")


@pytest.fixture(scope="module")
def mao(cluster, ovirt, archives, kube_proxy, tmp_path_factory) -> Iterator[Mao]:
    cluster.apply_crds()
    install_openshift_config(cluster.kubectl, INFRA_ID)
    namespace = f"e2e-mao-{uuid.uuid4().hex[:5]}"
    cluster.ensure_namespace(namespace)
    menv = MachineEnv(cluster, ovirt, namespace, tmp_path_factory.mktemp("mao"))
    # The credentials the cloud-credential-operator would write, in MAO's namespace, at the address a pod reaches.
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(ovirt_install.credentials_secret(
        ovirt.pod_url, ovirt.username, ovirt.password, ca_pem=open(ovirt.ca_file).read(), namespace=namespace)))
    node = RealNode(cluster.plane, "e2e-mao-master", taints=(f"{MASTER}:NoSchedule",))
    provider = _provider_reference()
    created: list[str] = []
    try:
        node.start(images=archives)
        _tag(node, product.REFERENCE, f"docker.io/library/{provider}")
        node.wait_ready()
        cluster.kubectl("label", "node", node.name, f"{MASTER}=")  # what MAO's pods select
        created = mao_install.install(
            cluster.kubectl, namespace,
            images={"quay.io/openshift/origin-machine-api-operator": MAO_TAG,
                    "quay.io/openshift/origin-kube-rbac-proxy": KUBE_RBAC_PROXY_TAG},
            provider_images=mao_install.images_json(MAO_TAG, KUBE_RBAC_PROXY_TAG, provider))
        yield Mao(namespace, node, provider, menv)
    finally:
        mao_install.uninstall(cluster.kubectl, namespace, created)
        node.stop()
        cluster.kubectl("delete", "node", node.name, "--wait=false", check=False)
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def _rendered(mao: Mao) -> dict | None:
    r = mao.kubectl("get", "deployment", "machine-api-controllers", "-o", "json", check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def test_the_operator_renders_machine_api_controllers_with_this_image_as_the_ovirt_provider(mao):
    deployment = _wait(lambda: _rendered(mao), "machine-api-controllers rendered", 180, mao)
    containers = {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}
    assert {name: c["image"] for name, c in containers.items()} == {
        "machineset-controller": MAO_TAG, "nodelink-controller": MAO_TAG, "machine-healthcheck-controller": MAO_TAG,
        "machine-controller": mao.provider,
        **{f"kube-rbac-proxy-{port}": KUBE_RBAC_PROXY_TAG for port in ("machineset-mtrc", "machine-mtrc", "mhc-mtrc")},
    }
    provider = containers["machine-controller"]
    assert provider["command"] == ["/machine-controller-manager"]
    assert provider["args"] == [*MAO_FLAGS, f"--namespace={mao.namespace}"]


def _ready_pod(mao: Mao) -> dict | None:
    pod = mao.controllers_pod()
    if pod is None or pod["status"].get("phase") != "Running":
        return None
    statuses = pod["status"].get("containerStatuses") or []
    return pod if len(statuses) == 7 and all(s["ready"] for s in statuses) else None


def test_the_pod_runs_ready_on_the_real_node_and_the_provider_holds_the_lease(mao):
    pod = _wait(lambda: _ready_pod(mao), "machine-api-controllers' 7 containers Ready", 300, mao)
    assert pod["spec"]["nodeName"] == mao.node.name
    # On the node's pod network, not the host's: it reaches the API server by the `kubernetes` Service.
    assert not pod["spec"].get("hostNetwork") and pod["status"]["podIP"] != node_ip()
    restarts = {s["name"]: s["restartCount"] for s in pod["status"]["containerStatuses"]}
    assert restarts["machine-controller"] == 0, (restarts, mao.logs())
    lease = _wait(lambda: mao.get("lease", PROVIDER_LEASE)["spec"].get("holderIdentity")
                  if mao.kubectl("get", "lease", PROVIDER_LEASE, check=False).returncode == 0 else None,
                  "the provider's Lease held", 120, mao)
    assert lease == pod["metadata"]["name"], lease


def _vm_names(mao: Mao) -> set[str]:
    return {vm["name"] for vm in mao.menv.sim.control.vms()}


def test_a_machineset_scales_up_and_down_with_vms_in_the_engine(mao):
    _wait(lambda: _ready_pod(mao), "machine-api-controllers Ready", 300, mao)
    name = unique_name("mao")
    _machineset(mao.menv, name, 2)

    def running() -> list[dict] | None:
        ms_ = _machines(mao.menv, name)
        ok = [m for m in ms_ if (m.get("status") or {}).get("phase") == "Running" and m["status"].get("nodeRef")]
        return ok if len(ms_) == len(ok) == 2 else None

    machines = _wait(running, "2 Running Machines linked to Nodes", 240, mao)
    names = {m["metadata"]["name"] for m in machines}
    assert names <= _vm_names(mao)
    # MAO's MachineSet controller made them, this image built their VMs (field managers, the writers' user agents).
    managers = {e["manager"] for m in machines for e in json.loads(mao.kubectl(
        "get", "machine", m["metadata"]["name"], "-o", "json", "--show-managed-fields").stdout)["metadata"]
        ["managedFields"]}
    assert {"machineset-controller", "ovirt-machine-controller"} <= managers, managers

    mao.kubectl("scale", "machineset", name, "--replicas=0")
    _wait(lambda: not _machines(mao.menv, name) and not names & _vm_names(mao) or None,
          "Machines and VMs gone", 240, mao)
