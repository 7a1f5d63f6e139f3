"""The images hack/images builds run as pods on a real node (docs/images.md): the product image from the
Dockerfile, under its own entry point and under the name machine-api-operator starts it by, as its non-root user,
and the CSI sidecars' images; each imported from its docker archive, nothing pulled."""

from __future__ import annotations

import json
from typing import Iterator

import pytest

from hack import images
from hack.controlplane.nodes import RealNode, node_ip
from hack.images import go_programs, product

TAINT_KEY = "omc.test/images"
# The node fixture builds the product image when its inputs changed since `make images` (a plain pytest run after an
# edit): minutes on two shared cores, which the default 600 s per test does not cover.
pytestmark = pytest.mark.timeout(1800)


@pytest.fixture(scope="module")
def node(cluster, real_node_images) -> Iterator[RealNode]:
    archives = (*real_node_images, images.archive(product.NAME), *(images.archive(i.name) for i in go_programs.IMAGES))
    n = RealNode(cluster.plane, "e2e-images", taints=(f"{TAINT_KEY}=true:NoSchedule",))
    try:
        n.start(images=archives)
        n.wait_ready()
        yield n
    finally:
        n.stop()
        cluster.kubectl("delete", "node", n.name, "--wait=false", check=False)


def _run_to_completion(cluster, namespace: str, node: RealNode, name: str, containers: list[dict],
                       volumes: list[dict] | None = None) -> dict:
    """Run a pod of `containers` (one after the other, as init containers, and the last as the main one) to its
    end; return the pod once it Succeeded."""
    steps = [{"imagePullPolicy": "Never", **c} for c in containers]
    pod = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node.name},
            "tolerations": [{"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
            "restartPolicy": "Never", "initContainers": steps[:-1], "containers": steps[-1:], "volumes": volumes or [],
        },
    }
    cluster.kubectl("-n", namespace, "apply", "-f", "-", input=json.dumps(pod))
    r = cluster.kubectl("-n", namespace, "wait", "--for=jsonpath={.status.phase}=Succeeded", f"pod/{name}",
                        "--timeout=180s", check=False)
    assert r.returncode == 0, cluster.kubectl("-n", namespace, "describe", "pod", name).stdout
    return json.loads(cluster.kubectl("-n", namespace, "get", "pod", name, "-o", "json").stdout)


def _logs(cluster, namespace: str, pod: str, container: str) -> str:
    return cluster.kubectl("-n", namespace, "logs", pod, "-c", container).stdout


def test_the_product_image_runs_as_the_dockerfile_says(cluster, node, namespace):
    _run_to_completion(cluster, namespace, node, "product", [
        {"name": "entrypoint", "image": product.TAG, "args": ["--help"]},
        # machine-api-operator starts its provider container under this name (the Dockerfile's link).
        {"name": "mao-name", "image": product.TAG, "command": ["/machine-controller-manager", "--help"]},
        {"name": "user", "image": product.TAG, "command": ["id", "-u"]},
    ])
    assert _logs(cluster, namespace, "product", "entrypoint").startswith("usage: ovirt-machine-controller")
    assert "usage: " in _logs(cluster, namespace, "product", "mao-name")
    assert _logs(cluster, namespace, "product", "user").strip() == "65532"


# What the controller does first in its pod: in-cluster config (the `kubernetes` Service's ClusterIP, the mounted
# ServiceAccount token and CA), then a connection to the engine, verified against its CA.
_IN_CLUSTER = """
import os, kubernetes, ovirtsdk4
kubernetes.config.load_incluster_config()
print("api", kubernetes.client.VersionApi().get_code().git_version)
conn = ovirtsdk4.Connection(url=os.environ["OVIRT_URL"], username=os.environ["OVIRT_USERNAME"],
                            password=os.environ["OVIRT_PASSWORD"], ca_file="/ovirt/ca.pem")
conn.test(raise_exception=True)
print("engine", conn.system_service().get().product_info.name)
"""


def test_a_pod_reaches_the_api_server_and_the_engine_as_in_a_cluster(cluster, node, namespace, ovirt, kube_proxy):
    """Not hostNetwork: the pod is on its node's bridge and finds the API server by the `kubernetes` Service
    (kube-proxy) and the simulated engine at the machine's address, as the controller's Deployment needs."""
    cluster.kubectl("-n", namespace, "create", "configmap", "ovirt-ca", f"--from-file=ca.pem={ovirt.ca_file}")
    pod = _run_to_completion(cluster, namespace, node, "in-cluster", [{
        "name": "client", "image": product.TAG, "command": ["python", "-c", _IN_CLUSTER],
        "env": [{"name": "OVIRT_URL", "value": ovirt.pod_url}, {"name": "OVIRT_USERNAME", "value": ovirt.username},
                {"name": "OVIRT_PASSWORD", "value": ovirt.password}],
        "volumeMounts": [{"name": "ca", "mountPath": "/ovirt"}],
    }], volumes=[{"name": "ca", "configMap": {"name": "ovirt-ca"}}])
    assert not pod["spec"].get("hostNetwork") and pod["status"]["podIP"] != node_ip()
    out = _logs(cluster, namespace, "in-cluster", "client").split("\n")
    assert out[0] == "api v1.35.4", out
    assert out[1].startswith("engine "), out


# What ovirt-csi-driver's node service runs, as the image's own user on files instead of disks: the stubs it loads
# (generated at build time into $OVIRT_CSI_STUBS: no Go in the image), blkid through the driver's own current_fs,
# mkfs of both filesystems it makes (flexvolume.format_and_mount's commands), resize2fs (NodeExpandVolume, ext4),
# and the tools that need a mount or root, asked only for their version: xfs_growfs, mount, umount.
_TOOLS = """
import os, re, subprocess
from machine_controller.storage.csi import spec
from machine_controller.storage.flexvolume import current_fs, must_run
pb2, pb2_grpc = spec.load()
print("stubs", os.path.dirname(pb2.__file__), hasattr(pb2_grpc, "NodeServicer"))
for fs, mib, mkfs in (("ext4", 64, ["mkfs.ext4", "-F", "-q"]), ("xfs", 320, ["mkfs.xfs", "-f"])):
    image = f"/work/{fs}.img"
    with open(image, "wb") as f:
        f.truncate(mib << 20)
    assert current_fs(image) == "", current_fs(image)
    must_run([*mkfs, image])
    print(fs, current_fs(image))
os.truncate("/work/ext4.img", 128 << 20)
must_run(["resize2fs", "/work/ext4.img"])
head = subprocess.run(["dumpe2fs", "-h", "/work/ext4.img"], capture_output=True, text=True, check=True).stdout
count, size = (int(re.search(rf"^Block {k}:\\s+(\\d+)", head, re.M).group(1)) for k in ("count", "size"))
print("resized MiB", count * size >> 20)
for tool in (["xfs_growfs", "-V"], ["mount", "--version"], ["umount", "--version"]):
    must_run(tool)
print("tools run")
"""


def test_the_product_image_carries_the_csi_drivers_stubs_and_filesystem_tools(cluster, node, namespace):
    _run_to_completion(cluster, namespace, node, "tools", [{
        "name": "tools", "image": product.TAG, "command": ["python", "-c", _TOOLS],
        "volumeMounts": [{"name": "work", "mountPath": "/work"}],
    }], volumes=[{"name": "work", "emptyDir": {}}])
    assert _logs(cluster, namespace, "tools", "tools").splitlines() == [
        "stubs /opt/csi-stubs True", "ext4 ext4", "xfs xfs", "resized MiB 128", "tools run"]


def test_the_sidecar_images_run_their_programs(cluster, node, namespace):
    steps = [{"name": i.name, "image": i.tag, "args": ["--version"]} for i in go_programs.IMAGES]
    _run_to_completion(cluster, namespace, node, "sidecars", steps)
    for image in go_programs.IMAGES:
        assert _logs(cluster, namespace, "sidecars", image.name).startswith(f"/{image.name} "), image.name
