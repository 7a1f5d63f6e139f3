"""Real nodes in the test bed: a kubelet and a containerd of hack/controlplane/nodes.py join the
local control plane, go Ready, run pods from a locally built image (on the node's network and on the pod network),
serve `kubectl logs` and `kubectl exec` to the API server only, and leave nothing behind when stopped.

Two nodes run side by side, as the real guests of the simulator will: each has its own containerd, bridge and
subnet. They carry a taint, so that only these tests' pods land on them, never another test's.
"""

from __future__ import annotations

import ipaddress
import json
import os
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from hack.controlplane.cluster import _alive
from hack.controlplane.nodes import CGROUP_V1, CNI_RESULTS, CONTAINER_LOG_LINKS, PAUSE_IMAGE, RealNode, node_ip

TAINT_KEY = "omc.test/real-node"
NODE_NAMES = ("e2e-real-a", "e2e-real-b")


@pytest.fixture(scope="module")
def real_nodes(cluster, real_node_images) -> Iterator[list[RealNode]]:
    nodes = [RealNode(cluster.plane, name, taints=(f"{TAINT_KEY}=true:NoSchedule",)) for name in NODE_NAMES]
    try:
        for node in nodes:
            node.start(images=real_node_images)
        for node in nodes:
            ready_s = node.wait_ready()
            print(f"\n[figures] node {node.name} Ready {ready_s:.1f} s after its kubelet started")
        yield nodes
    finally:
        for node in nodes:
            node.stop()
            cluster.kubectl("delete", "node", node.name, "--wait=false", check=False)


def _pod(name: str, node: str, host_network: bool) -> str:
    return json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {
            "hostNetwork": host_network,
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": [{"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
            "restartPolicy": "Never",
            # The pause binary prints its version and exits when given -v: a container with something to log.
            "initContainers": [{"name": "version", "image": PAUSE_IMAGE, "imagePullPolicy": "Never",
                                "command": ["/pause", "-v"]}],
            "containers": [{"name": "pause", "image": PAUSE_IMAGE, "imagePullPolicy": "Never"}],
            "terminationGracePeriodSeconds": 1,
        },
    })


def _start_pod(cluster, namespace: str, name: str, node: str, host_network: bool) -> dict:
    cluster.kubectl("-n", namespace, "apply", "-f", "-", input=_pod(name, node, host_network))
    started = time.monotonic()
    r = cluster.kubectl("-n", namespace, "wait", "--for=condition=Ready", f"pod/{name}", "--timeout=90s",
                        check=False)
    assert r.returncode == 0, cluster.kubectl("-n", namespace, "describe", "pod", name).stdout
    print(f"\n[figures] pod {name} Ready {time.monotonic() - started:.1f} s after it was created")
    return json.loads(cluster.kubectl("-n", namespace, "get", "pod", name, "-o", "json").stdout)


def test_nodes_join_and_go_ready(cluster, real_nodes):
    for node in real_nodes:
        doc = json.loads(cluster.kubectl("get", "node", node.name, "-o", "json").stdout)
        assert doc["status"]["nodeInfo"]["kubeletVersion"] == "v1.35.4"
        assert doc["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
        assert {"type": "InternalIP", "address": node_ip()} in doc["status"]["addresses"]
        assert doc["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] == node.kubelet_port
        assert {"key": TAINT_KEY, "value": "true", "effect": "NoSchedule"} in doc["spec"]["taints"]


def test_pods_run_on_the_host_network_and_on_the_pod_network(cluster, real_nodes, namespace):
    a, b = real_nodes
    host = _start_pod(cluster, namespace, "host", a.name, host_network=True)
    assert host["spec"]["nodeName"] == a.name
    assert host["status"]["podIP"] == node_ip()
    pods = {node.name: _start_pod(cluster, namespace, f"net-{node.name}", node.name, host_network=False)
            for node in real_nodes}
    for node in real_nodes:
        pod = pods[node.name]
        assert pod["spec"]["nodeName"] == node.name
        assert node.net is not None
        assert ipaddress.ip_address(pod["status"]["podIP"]) in node.net.subnet, (pod["status"]["podIP"], node.name)
    assert a.net and b.net and a.net.subnet != b.net.subnet


def test_logs_and_exec_through_the_api_server(cluster, real_nodes, namespace):
    node = real_nodes[0]
    _start_pod(cluster, namespace, "tools", node.name, host_network=False)
    logs = cluster.kubectl("-n", namespace, "logs", "tools", "-c", "version")
    assert logs.stdout.startswith("omc-pause "), logs.stdout
    out = cluster.kubectl("-n", namespace, "exec", "tools", "-c", "pause", "--", "/pause", "-v")
    assert out.stdout.startswith("omc-pause "), out.stdout


def test_the_kubelet_refuses_callers_without_credentials(real_nodes):
    """Webhook authentication on the kubelet, not AlwaysAllow: only the API server's client certificate (or a
    token the API server vouches for) reaches the kubelet's API."""
    node = real_nodes[0]
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"https://{node_ip()}:{node.kubelet_port}/pods", context=ctx, timeout=10)
    assert err.value.code == 401


def test_a_kubelet_is_its_own_node_only(cluster, real_nodes):
    """The kubelet's credential is a node identity (system:node:<name> in system:nodes): the Node authorizer and
    NodeRestriction let it change its own Node and refuse it any other."""
    a, b = real_nodes
    as_a = [str(cluster.kubectl_path), f"--kubeconfig={a.dir / 'kubelet.kubeconfig'}"]
    own = subprocess.run([*as_a, "annotate", "node", a.name, "omc.test/touched=yes", "--overwrite"],
                         capture_output=True, text=True)
    assert own.returncode == 0, own.stderr
    other = subprocess.run([*as_a, "annotate", "node", b.name, "omc.test/touched=yes", "--overwrite"],
                           capture_output=True, text=True)
    assert other.returncode != 0 and "forbidden" in other.stderr.lower(), other.stderr


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmdline:
                found.append(f"{proc.name}: {cmdline}")
    return found


def test_a_stopped_node_leaves_nothing_behind(cluster, real_node_images, namespace):
    """A node with a running pod on each network is stopped: no kubelet, containerd, shim or container is left,
    no mount under its directory, no cgroup, no bridge, no directory."""
    node = RealNode(cluster.plane, "e2e-real-stop", taints=(f"{TAINT_KEY}=true:NoSchedule",))
    try:
        node.start(images=real_node_images)
        node.wait_ready()
        _start_pod(cluster, namespace, "host", node.name, host_network=True)
        _start_pod(cluster, namespace, "net", node.name, host_network=False)
        pids = dict(node.pids)
        assert node.net
        bridge, directory, socket = node.net.bridge, node.dir, str(node.containerd_socket)
        cri = node.dir / "containerd" / "root" / "io.containerd.grpc.v1.cri"
        sandboxes = [p.name for p in (cri / "sandboxes").iterdir()]
        ids = [*sandboxes, *(p.name for p in (cri / "containers").iterdir())]
        # The pod-network pod's sandbox has CNI results (a hostNetwork sandbox has none).
        assert len(sandboxes) == 2 and [s for s in sandboxes if any(CNI_RESULTS.glob(f"*-{s}-*"))]
        containers = [int(p) for procs in (CGROUP_V1 / "pids" / node.cgroup.lstrip("/")).rglob("cgroup.procs")
                      for p in procs.read_text().split()]
        assert len(containers) >= 4  # two pause containers, two sandboxes
    finally:
        node.stop()
        cluster.kubectl("delete", "node", node.name, "--wait=false", check=False)
    for pid in (*pids.values(), *containers):
        assert not _alive(pid), pid  # gone, or a zombie its parent has yet to reap
    assert _processes_mentioning(str(directory)) == []
    assert _processes_mentioning(socket) == []  # the shims
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(directory) not in mounts
    assert node.cgroup and [d for d in CGROUP_V1.glob(f"*{node.cgroup}")] == []
    assert subprocess.run(["ip", "link", "show", bridge], capture_output=True).returncode != 0
    assert not directory.exists()
    # Nor in the machine-wide places the kubelet and containerd write: CNI results, container log links.
    assert [f for i in ids for d in (CNI_RESULTS, CONTAINER_LOG_LINKS) for f in d.glob(f"*{i}*")] == []
