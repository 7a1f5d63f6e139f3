"""ovirt-csi-driver (docs/storage.md#csi-on-real-nodes) and the FlexVolume driver with the volume
provisioner (item 2; docs/storage.md#flexvolume-on-real-nodes) deployed as users deploy them: `config/storage/csi`
and `config/storage` applied to the local control plane, whose nodes are real guests of the simulated engine (real
kubelets and containerd in VMs' stead, hack/ovirtsim/real_guests.py). Each guest sees its VM id as SMBIOS UUID and
its attached disks under /dev/disk/by-id (hack/controlplane/guest_view.py), as an oVirt VM does.

What the test bed changes in the shipped manifests, and why, is in hack/csi_bed.py; for FlexVolume, the installer
writes into the plugin directory this plane's kubelets and controller-manager share
(hack/controlplane/host_python.py) instead of /usr/libexec's, as an overlay for OpenShift names its own.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from api.remediation import API_VERSION as REMEDIATION_API
from api.remediation import OUT_OF_SERVICE_TAINT_KEY
from hack import csi_bed
from hack.controlplane.host_python import volume_plugin_dir
from hack.csi_bed import CHECK, DRIVER, WRITER, absent, attached_to, disk_gone, on_nodes, pod_ready
from hack.images import product
from machine_controller.runtime.testing import wait_until
from machine_controller.storage.flexvolume import CONF_NAME, VOLUME_ID
from machine_controller.storage.flexvolume import DRIVER as FLEX_DRIVER
from machine_controller.storage.install import EXECUTABLE, VENDOR_DIR
from machines import MachineEnv, unique_name
from test_machinehealthcheck import REMEDIATOR_ROLE, _machines, _machineset, _mhc
from test_remediation import _counts, _events, _node, _ready, _remediation

# The product image is rebuilt after an edit (minutes).
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800), pytest.mark.long_module]

REPO = Path(__file__).resolve().parents[2]
NS = "openshift-machine-api"
PREFIX = "e2e-csireal-"
WAIT = (120.0, 0.3)
# The classes' filesystem: this machine's kernel refuses ext4's online resize ioctl even to root
# (docs/storage.md#csi-sanity), and a claim is grown online.
FSTYPE = "xfs"
BED_LABEL = "e2e.ovirt.org/csi-real-bed"  # on the Nodes of the bed's Machines, a replacement's too (nodelink)


def _real_node_ready(cluster, name: str) -> dict | None:
    node = cluster.read(f"/api/v1/nodes/{name}")
    if node is None:
        return None
    ready = [c for c in node["status"].get("conditions", []) if c["type"] == "Ready"]
    real = node["status"].get("nodeInfo", {}).get("containerRuntimeVersion", "").startswith("containerd://")
    return node if real and ready and ready[0]["status"] == "True" else None


def _csinode_drivers(cluster, name: str) -> list[dict]:
    csinode = cluster.read(f"/apis/storage.k8s.io/v1/csinodes/{name}")
    return (csinode["spec"].get("drivers") or []) if csinode is not None else []


class Bed:
    def __init__(self, menv: MachineEnv, conn, set_name: str, guests: dict[str, str], machines: dict[str, str]) -> None:
        self.menv, self.cluster, self.sim, self.conn = menv, menv.cluster, menv.sim, conn
        self.set_name = set_name
        self.guests = guests  # Node name -> VM id
        self.machines = machines  # Node name -> Machine name
        self.figures: dict[str, float] = {}


def _set_machines(menv: MachineEnv, set_name: str) -> list[dict]:
    """The set's Machines that are not being deleted."""
    return [m for m in _machines(menv, set_name) if not m["metadata"].get("deletionTimestamp")]


def _running_on_real_nodes(menv: MachineEnv, set_name: str, n: int) -> list[dict] | None:
    """The set's `n` Machines once each is Running with its real kubelet's Node Ready."""
    machines = _set_machines(menv, set_name)
    running = [m for m in machines if (m.get("status") or {}).get("phase") == "Running"
               and _real_node_ready(menv.cluster, m["status"]["nodeRef"]["name"])]
    return running if len(machines) == n and len(running) == n else None


@pytest.fixture(scope="module")
def bed(cluster, ovirt, real_node_images, kube_proxy, tmp_path_factory) -> Iterator[Bed]:
    """Two real nodes, each the guest of a Machine of a MachineSet that this project's controller runs (every
    controller, health checks and fencing included), and config/storage/csi applied to them. kube-proxy runs
    first: the sidecars reach the API server through the `kubernetes` Service from their start (without it they
    crash and back off, which held the first claim for half a minute)."""
    ovirt.control.real_guests(cluster.plane.dir, csi_bed.archives(), vms=[f"{PREFIX}*"])
    cluster.apply_crds()
    namespace = f"{PREFIX}{uuid.uuid4().hex[:5]}"
    cluster.ensure_namespace(namespace)
    menv = MachineEnv(cluster, ovirt, namespace, tmp_path_factory.mktemp("csireal"))
    set_name = unique_name(PREFIX.rstrip("-"))
    conn = ovirt.connection()
    docs: list[dict[str, Any]] = []
    try:
        menv.controller()
        _machineset(menv, set_name, 2, node_labels={BED_LABEL: set_name})
        # The simulator starts real guests one at a time, each importing the images (the product's large archive
        # among them): minutes when the machine is loaded.
        assert wait_until(lambda: _running_on_real_nodes(menv, set_name, 2), 600, 0.5), \
            f"real Nodes of {set_name}: {ovirt.control.real_nodes()}\n{menv.controller_logs()}"
        machines = _running_on_real_nodes(menv, set_name, 2)
        guests = {m["status"]["nodeRef"]["name"]: m["metadata"]["annotations"]["VmId"] for m in machines}
        docs = csi_bed.shipped(cluster.kubectl("kustomize", str(csi_bed.CSI_CONFIG)).stdout, BED_LABEL, set_name)
        cluster.ensure_namespace(NS)
        started = time.monotonic()
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
        bed = Bed(menv, conn, set_name, guests,
                  {m["status"]["nodeRef"]["name"]: m["metadata"]["name"] for m in machines})
        bed.figures["applied"] = started
        yield bed
    finally:
        # The set's Machines go as users' do: drained, their VMs stopped and removed, their real nodes with them.
        cluster.kubectl("-n", namespace, "delete", "machineset", set_name, "--ignore-not-found", "--wait=false",
                        check=False)
        gone = wait_until(lambda: not _set_machines(menv, set_name), 240, 1.0)
        menv.stop_controllers()
        cluster.kubectl("delete", "-f", "-", "--ignore-not-found", "--wait=false", input=yaml.safe_dump_all(docs),
                        check=False)
        cluster.delete_namespace(namespace)
        conn.close()
        assert gone, f"Machines of {set_name} left after the bed: {menv.controller_logs()}"


def test_each_real_node_registers_the_driver_with_its_kubelet(bed):
    """The node DaemonSet's driver registers itself (no node-driver-registrar): each kubelet lists csi.ovirt.org
    in its CSINode with the VM id as node id, which the driver read from the guest's SMBIOS UUID."""
    cluster = bed.cluster
    for name, vm_id in bed.guests.items():
        assert wait_until(lambda name=name: _csinode_drivers(cluster, name), *WAIT), \
            cluster.kubectl("-n", NS, "get", "pods", "-o", "wide").stdout
        drivers = _csinode_drivers(cluster, name)
        assert [(d["name"], d["nodeID"]) for d in drivers] == [(DRIVER, vm_id)]
        assert _real_node_ready(cluster, name)["status"]["nodeInfo"]["systemUUID"] == vm_id
    bed.figures["registered"] = time.monotonic() - bed.figures["applied"]
    print(f"\nCSINode lists {DRIVER} on both nodes {bed.figures['registered']:.1f} s after the apply")

    # The driver serves its own liveness endpoint (no livenessprobe sidecar): the Probe and the registration pass.
    pods = json.loads(cluster.kubectl("-n", NS, "get", "pods", "-l", "app.kubernetes.io/name=ovirt-csi-node",
                                      "-o", "json").stdout)["items"]
    ours = [p for p in pods if p["spec"].get("nodeName") in bed.guests]
    assert len(ours) == 2
    for pod in ours:
        (status,) = pod["status"]["containerStatuses"]
        assert status["ready"] and status["restartCount"] == 0, status
        with urllib.request.urlopen(f"http://{pod['status']['podIP']}:9809/healthz?verbose", timeout=10) as r:
            body = r.read().decode()
        assert "[+]csi-probe ok" in body and "[+]kubelet-registration ok" in body, body


def _exec(cluster, ns: str, pod: str, script: str) -> str:
    return cluster.kubectl("-n", ns, "exec", pod, "--", "sh", "-c", script).stdout


def _start_db(bed: Bed, namespace: str, sc: str) -> float:
    """The StatefulSet `db` created with a new claim; the seconds until its pod is Ready."""
    cluster = bed.cluster
    started = time.monotonic()
    db = csi_bed.statefulset(BED_LABEL, bed.set_name, sc)
    cluster.kubectl("-n", namespace, "apply", "-f", "-", input=json.dumps(db))
    # The StatefulSet controller creates the pod a moment later; `wait --for=condition` on a pod not yet
    # created fails at once with NotFound.
    cluster.kubectl("-n", namespace, "wait", "--for=create", "pod/db-0", "--timeout=60s")
    r = cluster.kubectl("-n", namespace, "wait", "--for=condition=Ready", "pod/db-0", "--timeout=300s", check=False)
    assert r.returncode == 0, (cluster.kubectl("-n", namespace, "describe", "pod", "db-0").stdout,
                               cluster.kubectl("-n", NS, "get", "pods", "-o", "wide").stdout)
    return time.monotonic() - started


def _volume(bed: Bed, namespace: str) -> tuple[str, str]:
    """The PV of db-0's claim and its disk id."""
    pvc = json.loads(bed.cluster.kubectl("-n", namespace, "get", "pvc", "data-db-0", "-o", "json").stdout)
    pv = json.loads(bed.cluster.kubectl("get", "pv", pvc["spec"]["volumeName"], "-o", "json").stdout)
    assert pv["spec"]["csi"]["driver"] == DRIVER
    return pv["metadata"]["name"], pv["spec"]["csi"]["volumeHandle"]


def test_a_statefulset_pod_gets_its_disk_formatted_mounted_and_grown(bed, kube_proxy, namespace):
    cluster, conn = bed.cluster, bed.conn
    sc = f"ovirt-csi-{uuid.uuid4().hex[:5]}"
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(csi_bed.sample_class(sc, FSTYPE)))
    try:
        pod_start = _start_db(bed, namespace, sc)
        print(f"\nStatefulSet pod Ready with a new volume {pod_start:.1f} s after its creation")

        pod = json.loads(cluster.kubectl("-n", namespace, "get", "pod", "db-0", "-o", "json").stdout)
        node = pod["spec"]["nodeName"]
        _, disk_id = _volume(bed, namespace)
        # The disk is attached to the VM of the pod's node, and to no other.
        assert attached_to(conn, bed.guests.values(), disk_id) == [bed.guests[node]]
        # Staged, formatted (xfs, as the class asks) and mounted: the pod's file and checksum are on it.
        assert _exec(cluster, namespace, "db-0", "stat -f -c %T /data").strip() == "xfs"
        assert "file: OK" in _exec(cluster, namespace, "db-0", CHECK)
        before = int(_exec(cluster, namespace, "db-0", "df -B1 --output=size /data | tail -1"))

        # Online expansion: the engine's disk grows, the guest sees a bigger device, the pod a bigger filesystem.
        grown = time.monotonic()
        cluster.kubectl("-n", namespace, "patch", "pvc", "data-db-0", "--type=merge",
                        "-p", '{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}')
        assert wait_until(lambda: int(_exec(cluster, namespace, "db-0", "df -B1 --output=size /data | tail -1"))
                          > before + 2**29, 180, 1.0), \
            cluster.kubectl("-n", namespace, "describe", "pvc", "data-db-0").stdout
        print(f"\nthe pod's filesystem grown {time.monotonic() - grown:.1f} s after the claim")
        assert conn.system_service().disks_service().disk_service(disk_id).get().provisioned_size == 2 * 2**30
        assert "file: OK" in _exec(cluster, namespace, "db-0", CHECK)
        assert pod["status"]["containerStatuses"][0]["restartCount"] == 0

        # The pod and the claim deleted: the disk is detached from the VM and removed from the engine.
        cluster.kubectl("-n", namespace, "delete", "statefulset", "db", "--wait=true", "--timeout=120s")
        cluster.kubectl("-n", namespace, "delete", "pvc", "data-db-0", "--wait=true", "--timeout=120s")
        assert wait_until(lambda: disk_gone(conn, disk_id), 120, 1.0), f"disk {disk_id} still in the engine"
    finally:
        cluster.kubectl("-n", namespace, "delete", "statefulset", "db", "--wait=true", "--timeout=120s", check=False)
        cluster.kubectl("-n", namespace, "delete", "pvc", "--all", "--wait=false", check=False)
        cluster.kubectl("delete", "storageclass", sc, "--ignore-not-found", check=False)


# --- FlexVolume ----------------------------------------------------------------------------------------------------

SHIPPED_PLUGIN_DIR = "/usr/libexec/kubernetes/kubelet-plugins/volume/exec"


def _flexvolume_shipped(cluster, plugin_dir: Path, nodes: list[str]) -> list[dict[str, Any]]:
    """config/storage (the volume provisioner and the FlexVolume driver's installer DaemonSet) as kustomize builds
    it, with the offline test bed's changes (module docstring) and the plugin directory of this plane's kubelets
    and controller-manager (hack/controlplane/host_python.py) in the DaemonSet's hostPath and HOST_PLUGIN_DIR, as
    an overlay for OpenShift names /etc/kubernetes/kubelet-plugins/volume/exec (docs/compatibility.md#storage)."""
    docs = list(yaml.safe_load_all(cluster.kubectl("kustomize", str(REPO / "config/storage")).stdout))
    for doc in docs:
        if doc["kind"] not in ("Deployment", "DaemonSet"):
            continue
        spec = doc["spec"]["template"]["spec"]
        spec["affinity"] = on_nodes(nodes)
        for c in spec["containers"]:
            c["imagePullPolicy"] = "Never"
            for env in c.get("env", []):
                if env["name"] == "HOST_PLUGIN_DIR":
                    assert env["value"] == SHIPPED_PLUGIN_DIR
                    env["value"] = str(plugin_dir)
        for volume in spec.get("volumes", []):
            if volume.get("hostPath", {}).get("path") == SHIPPED_PLUGIN_DIR:
                volume["hostPath"]["path"] = str(plugin_dir)
    assert any(d["kind"] == "DaemonSet" for d in docs) and any(d["kind"] == "Deployment" for d in docs)
    return docs


def _flex_class(name: str) -> dict:
    """config/storage/samples/storageclass.yaml under a name of this test."""
    sc = yaml.safe_load((REPO / "config/storage/samples/storageclass.yaml").read_text())
    sc["metadata"]["name"] = name
    return sc


def test_a_pod_writes_to_a_flexvolume_disk_the_kubelet_and_controller_manager_attach(bed, kube_proxy, namespace):
    """The FlexVolume driver as users deploy it: its DaemonSet installs it into the kubelets' plugin directory,
    kube-controller-manager runs its attach and detach, each kubelet its waitforattach, mountdevice and mount; the
    provisioner's PV names the disk. The driver finds a Node's VM by the Node's providerID, which the bed's
    controller (its ovirt-nodes part) writes (a real kubelet sets none), and by its name."""
    cluster, conn = bed.cluster, bed.conn
    plugin_dir = volume_plugin_dir(cluster.plane.dir)
    nodes = list(bed.guests)
    docs = _flexvolume_shipped(cluster, plugin_dir, nodes)
    sc = f"ovirt-flex-{uuid.uuid4().hex[:5]}"
    try:
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([*docs, _flex_class(sc)]))
        for name, vm_id in bed.guests.items():
            assert wait_until(lambda name=name, vm_id=vm_id: (_real_node_ready(cluster, name) or {}).get(
                "spec", {}).get("providerID") == f"ovirt://{vm_id}", *WAIT), bed.menv.controller_logs()
        installed = plugin_dir / VENDOR_DIR
        assert wait_until(lambda: (installed / EXECUTABLE).exists() and (installed / CONF_NAME).exists(), *WAIT), \
            cluster.kubectl("-n", NS, "logs", "-l", "app.kubernetes.io/name=ovirt-flexvolume-driver", "--tail=20",
                            check=False).stdout

        claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "storageClassName": sc, "resources": {"requests": {"storage": "1Gi"}}}}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "db"}, "spec": {
            "affinity": on_nodes(nodes[:1]), "terminationGracePeriodSeconds": 1,
            "securityContext": {"fsGroup": 65532},
            "containers": [{"name": "db", "image": product.TAG, "imagePullPolicy": "Never",
                            "command": ["sh", "-c", WRITER],
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}}
        started = time.monotonic()
        cluster.kubectl("-n", namespace, "apply", "-f", "-", input=yaml.safe_dump_all([claim, pod]))
        r = cluster.kubectl("-n", namespace, "wait", "--for=condition=Ready", "pod/db", "--timeout=300s", check=False)
        assert r.returncode == 0, (cluster.kubectl("-n", namespace, "describe", "pod", "db").stdout,
                                   cluster.kubectl("-n", NS, "get", "pods", "-o", "wide").stdout)
        print(f"\n[figures] FlexVolume: pod Ready with a new disk {time.monotonic() - started:.1f} s after its "
              "creation")

        pvc = json.loads(cluster.kubectl("-n", namespace, "get", "pvc", "data", "-o", "json").stdout)
        pv = json.loads(cluster.kubectl("get", "pv", pvc["spec"]["volumeName"], "-o", "json").stdout)
        assert pv["spec"]["flexVolume"]["driver"] == FLEX_DRIVER
        disk_id = pv["spec"]["flexVolume"]["options"][VOLUME_ID]
        # Attached by the controller-manager to the VM of the pod's node and to no other; formatted as the class
        # says; the pod's file and checksum on it.
        assert attached_to(conn, bed.guests.values(), disk_id) == [bed.guests[nodes[0]]]
        assert _exec(cluster, namespace, "db", "stat -f -c %T /data").strip() == "ext2/ext3"
        assert "file: OK" in _exec(cluster, namespace, "db", CHECK)

        # The pod gone: the kubelet unmounts, the controller-manager detaches; the claim gone: the disk is removed.
        cluster.kubectl("-n", namespace, "delete", "pod", "db", "--wait=true", "--timeout=120s")
        assert wait_until(lambda: not attached_to(conn, bed.guests.values(), disk_id), 120, 1.0), \
            f"disk {disk_id} still attached"
        cluster.kubectl("-n", namespace, "delete", "pvc", "data", "--wait=true", "--timeout=120s")
        assert wait_until(lambda: disk_gone(conn, disk_id), 120, 1.0), f"disk {disk_id} still in the engine"
    finally:
        cluster.kubectl("-n", namespace, "delete", "pod", "db", "--wait=true", "--timeout=120s", check=False)
        cluster.kubectl("-n", namespace, "delete", "pvc", "--all", "--wait=false", check=False)
        cluster.kubectl("delete", "-f", "-", "--ignore-not-found", "--wait=false", input=yaml.safe_dump_all(docs),
                        check=False)
        cluster.kubectl("delete", "storageclass", sc, "--ignore-not-found", check=False)


# --- Fencing with storage (docs/storage.md#failover-on-real-nodes) ----------------------------------------------

# Ready Unknown or False for 10 s: the health checks' conditions.
CONDITIONS = [{"type": "Ready", "status": status, "timeout": "10s"} for status in ("Unknown", "False")]


def _pod_obj(cluster, namespace: str, name: str) -> dict | None:
    r = cluster.kubectl("-n", namespace, "get", "pod", name, "-o", "json", check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def _condition(request: dict | None, ctype: str) -> dict:
    return next((c for c in ((request or {}).get("status") or {}).get("conditions", []) if c["type"] == ctype), {})


def _power_cycling_health_check(bed: Bed) -> None:
    """The set's Machines under a MachineHealthCheck whose OvirtRemediationTemplate power-cycles (the remediator
    registered as an admin installs it, docs/fencing.md)."""
    menv = bed.menv
    menv.cluster.wait_established("ovirtremediations.remediation.ovirt.org")
    menv.cluster.kubectl("apply", "-f", str(REMEDIATOR_ROLE))
    template = {"apiVersion": REMEDIATION_API, "kind": "OvirtRemediationTemplate",
                "metadata": {"name": "power-cycle", "namespace": menv.namespace},
                "spec": {"template": {"spec": {"strategy": {"timeoutSeconds": 300}}}}}
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(template))
    _mhc(menv, "fence", bed.set_name, unhealthyConditions=CONDITIONS,
         remediationTemplate={"apiVersion": REMEDIATION_API, "kind": "OvirtRemediationTemplate",
                              "name": "power-cycle"})


def _moments(wanted: dict[str, Any], timeout: float, why: Any) -> dict[str, float]:
    """Poll the named predicates together until all have held once; the seconds at which each first held."""
    began, seen = time.monotonic(), {}
    while len(seen) < len(wanted):
        for name, holds in wanted.items():
            if name not in seen and holds():
                seen[name] = time.monotonic() - began
        assert time.monotonic() - began < timeout, f"not reached in {timeout:.0f}s: " \
            f"{sorted(set(wanted) - set(seen))} (reached: {seen})\n{why()}"
        time.sleep(0.5)
    return seen


def test_a_stateful_pod_keeps_its_disk_and_data_through_an_unanswering_host_and_a_crash(bed, kube_proxy,
                                                                                         namespace):
    """Fencing with storage on real kubelets, one StatefulSet pod through two failures of its node's VM.

    1. The VM's host stops answering: the engine says `unknown`, the guest runs on, cut off (its kubelet frozen,
       hack/ovirtsim/real_guests.py). The health check opens a request; nothing is stopped or released and the pod
       is not moved (the Warning says why) until the host answers; then the Node is Ready again and the request
       ends without a power cycle. The pod's container ran all along.
    2. The VM crashes: the request powers it off (already down: confirmed), only then the out-of-service taint lets
       Kubernetes delete the pod and detach the disk, the VM is powered on; the pod comes back (on the other node,
       or on its own once back) with the same disk, its file and checksum intact.
    Throughout, the disk is never attached to two VMs nor mounted on two nodes."""
    cluster, control = bed.cluster, bed.sim.control
    sc = f"ovirt-csi-{uuid.uuid4().hex[:5]}"
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(csi_bed.sample_class(sc, FSTYPE)))
    _power_cycling_health_check(bed)
    sampler: csi_bed.Exclusive | None = None
    host = ""
    try:
        pod_start = _start_db(bed, namespace, sc)
        pod = _pod_obj(cluster, namespace, "db-0")
        node = pod["spec"]["nodeName"]
        vm_id, machine = bed.guests[node], bed.machines[node]
        pv_name, disk_id = _volume(bed, namespace)
        sampler = csi_bed.Exclusive(bed.sim.connection(), f"name={bed.set_name}-*", disk_id, pv_name)
        sampler.start()
        assert wait_until(lambda: sampler.samples > 0 and sampler.mounted == [node], *WAIT), sampler.mounted
        container = pod["status"]["containerStatuses"][0]["containerID"]

        def state() -> str:
            return "\n".join([f"request: {json.dumps((_remediation(bed.menv, machine) or {}).get('status'))}",
                              f"attached to {sampler.attached}, mounted on {sampler.mounted}",
                              cluster.kubectl("-n", namespace, "get", "pods", "-o", "wide").stdout,
                              cluster.kubectl("get", "nodes", *bed.guests, "-o", "wide").stdout,
                              bed.menv.controller_logs()[-4000:]])

        # 1. The host stops answering.
        host = control.vm(vm_id)["host"]
        other_hosts = {control.vm(v)["host"] for n, v in bed.guests.items() if n != node}
        assert host not in other_hosts, "the two VMs share a host: the other node would be cut off too"
        stops, starts = _counts(bed.menv, vm_id)
        control.set_host_status(host, "non_responsive")
        cut = _moments({
            "Node Unknown": lambda: _ready(_node(bed.menv, node)) == "Unknown",
            "request waits on the unknown VM": lambda: _condition(_remediation(bed.menv, machine), "PowerOffConfirmed")
            .get("reason") == "PowerStateUnknown",
        }, 180, state)
        warnings = _events(bed.menv, machine, "PowerStateUnknown")
        assert warnings and warnings[0]["type"] == "Warning" and "may still be running" in warnings[0]["message"]
        time.sleep(10)  # a while longer cut off: nothing may happen, so there is no moment to wait for
        assert vm_id in control.real_nodes()["cut_off"]
        assert OUT_OF_SERVICE_TAINT_KEY not in {t["key"] for t in _node(bed.menv, node)["spec"].get("taints", [])}
        held = _pod_obj(cluster, namespace, "db-0")
        assert held["metadata"]["uid"] == pod["metadata"]["uid"] and not held["metadata"].get("deletionTimestamp")
        assert sampler.attached == [vm_id] and sampler.mounted == [node]
        assert _counts(bed.menv, vm_id) == (stops, starts)

        control.set_host_status(host, "up")
        host = ""
        back = _moments({"Node Ready": lambda: _ready(_node(bed.menv, node)) == "True",
                         # The health check deletes the request once the Node is healthy, maybe before the request
                         # records its end (NodeHealthy): the request gone is the end.
                         "request ended": lambda: _remediation(bed.menv, machine) is None}, 120, state)
        assert wait_until(lambda: pod_ready(_pod_obj(cluster, namespace, "db-0")), *WAIT), state()
        kept = _pod_obj(cluster, namespace, "db-0")
        assert kept["metadata"]["uid"] == pod["metadata"]["uid"] and kept["spec"]["nodeName"] == node
        (status,) = kept["status"]["containerStatuses"]
        assert status["containerID"] == container and status["restartCount"] == 0  # it ran all along
        assert _counts(bed.menv, vm_id) == (stops, starts)  # never power-cycled
        assert "file: OK" in _exec(cluster, namespace, "db-0", CHECK)
        print(f"\n[figures] host not answering: Node Unknown after {cut['Node Unknown']:.1f} s, the request waiting "
              f"on the unknown VM after {cut['request waits on the unknown VM']:.1f} s; host back: Node Ready after "
              f"{back['Node Ready']:.1f} s, no power cycle, the pod never moved")

        # 2. The VM crashes.
        requests_before = sum(control.counts().values())
        control.crash_vm(vm_id)
        moved = {}

        def pod_back() -> bool:
            p = _pod_obj(cluster, namespace, "db-0")
            if pod_ready(p, other_than=pod["metadata"]["uid"]):
                moved["node"] = p["spec"]["nodeName"]
                return True
            return False
        seen: set[str] = set()

        def detected() -> bool:
            if _ready(_node(bed.menv, node)) != "True":
                seen.add("detected")
            return "detected" in seen

        def once(step: str, holds: bool) -> bool:
            """A step that counts only after the crash was detected (the Node and the VM start up and Ready)."""
            if holds and "detected" in seen:
                seen.add(step)
            return step in seen

        steps = _moments({
            "detected (Node not Ready)": detected,
            "request opened": lambda: _remediation(bed.menv, machine) is not None,
            "power-off confirmed": lambda: _events(bed.menv, machine, "PowerOffConfirmed"),
            "disk detached": lambda: vm_id not in sampler.attached,
            "pod Running with its data": pod_back,
            "VM powered on": lambda: once("on", control.vm(vm_id)["status"] == "up"),
            # The health check deletes the request once the Node is healthy, maybe before the request records
            # its success: the request gone with the Node Ready is the end.
            "Node Ready again, request closed": lambda: once("back", _ready(_node(bed.menv, node))
                                                            == "True" and _remediation(bed.menv, machine) is None),
        }, 600, state)
        requests = sum(control.counts().values()) - requests_before
        assert _counts(bed.menv, vm_id) == (stops, starts + 1)  # crashed: already down, so only a start
        assert "file: OK" in _exec(cluster, namespace, "db-0", CHECK)
        assert _volume(bed, namespace) == (pv_name, disk_id)  # the same claim and disk
        assert sampler.attached == [bed.guests[moved["node"]]]
        order = sorted(steps, key=steps.get)
        print("\n[figures] VM crash to the pod Running again with its data: "
              + ", ".join(f"{step} {steps[step]:.1f} s" for step in order)
              + f"; the pod came back on {'its own node' if moved['node'] == node else 'the other node'}; "
              f"{requests} engine requests meanwhile (all controllers, the CSI driver's included); "
              f"pod start with a new volume {pod_start:.1f} s")
        # Kubernetes released the disk only after the VM was confirmed off.
        assert steps["power-off confirmed"] <= steps["disk detached"], steps
        _assert_controller_replicas_apart(cluster)
    finally:
        if host:
            control.set_host_status(host, "up")
        if sampler is not None:
            sampler.stop()
        cluster.kubectl("-n", bed.menv.namespace, "delete", "mhc", "fence", "--ignore-not-found", check=False)
        cluster.kubectl("-n", namespace, "delete", "statefulset", "db", "--wait=true", "--timeout=120s", check=False)
        cluster.kubectl("-n", namespace, "delete", "pvc", "--all", "--wait=false", check=False)
        cluster.kubectl("delete", "storageclass", sc, "--ignore-not-found", check=False)
    assert sampler.samples > 100 and sampler.most_attached == 1 and sampler.most_mounted == 1, \
        (sampler.samples, sampler.most_attached, sampler.most_mounted)


def _assert_controller_replicas_apart(cluster) -> None:
    """The CSI controller's scheduled replicas are on different nodes (config/storage/csi/controller.yaml's
    anti-affinity): one node's failure never takes both, and with them every attach and detach."""
    pods = json.loads(cluster.kubectl("-n", NS, "get", "pods", "-l", "app.kubernetes.io/name=ovirt-csi-controller",
                                      "-o", "json").stdout)["items"]
    nodes = [p["spec"]["nodeName"] for p in pods
             if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")]
    assert len(nodes) == len(set(nodes)), nodes


def _vm_gone(conn, vm_id: str) -> bool:
    return absent(conn.system_service().vms_service().vm_service(vm_id))


def test_a_replaced_machine_leaves_its_stateful_pods_disk_to_the_replacement(bed, kube_proxy, namespace):
    """Replacement with storage: the health check's default remediation deletes the Machine of
    the node whose VM crashed while it held the pod's disk. The Machine's deletion detaches the disk before the VM is
    removed, so the disk survives; the MachineSet's replacement joins, and the pod runs there with its data. The
    bed's other node is cordoned, so that the replacement is the only place for the pod."""
    cluster, control, conn = bed.cluster, bed.sim.control, bed.conn
    menv = bed.menv
    sc = f"ovirt-csi-{uuid.uuid4().hex[:5]}"
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(csi_bed.sample_class(sc, FSTYPE)))
    sampler: csi_bed.Exclusive | None = None
    cordoned: list[str] = []
    try:
        _start_db(bed, namespace, sc)
        pod = _pod_obj(cluster, namespace, "db-0")
        node = pod["spec"]["nodeName"]
        machines = {m["status"]["nodeRef"]["name"]: m for m in _set_machines(menv, bed.set_name)}
        victim = machines[node]
        vm_id = victim["metadata"]["annotations"]["VmId"]
        cordoned = [n for n in machines if n != node]
        for other in cordoned:
            cluster.kubectl("cordon", other)
        pv_name, disk_id = _volume(bed, namespace)
        _mhc(menv, "replace", bed.set_name, unhealthyConditions=CONDITIONS)  # default remediation: deletion
        sampler = csi_bed.Exclusive(bed.sim.connection(), f"name={bed.set_name}-*", disk_id, pv_name)
        sampler.start()
        assert wait_until(lambda: sampler.samples > 0 and sampler.mounted == [node], *WAIT), sampler.mounted
        replacement: dict[str, str] = {}

        def replacement_ready() -> bool:
            fresh = [m for m in _set_machines(menv, bed.set_name) if m["metadata"]["name"] not in
                     {v["metadata"]["name"] for v in machines.values()}
                     and (m.get("status") or {}).get("nodeRef")]
            ready = [m for m in fresh if _real_node_ready(cluster, m["status"]["nodeRef"]["name"])]
            if ready:
                replacement["node"] = ready[0]["status"]["nodeRef"]["name"]
                replacement["vm"] = ready[0]["metadata"]["annotations"]["VmId"]
            return bool(ready)

        def pod_back() -> bool:
            p = _pod_obj(cluster, namespace, "db-0")
            return pod_ready(p, other_than=pod["metadata"]["uid"])

        def state() -> str:
            return "\n".join([f"attached to {sampler.attached}, mounted on {sampler.mounted}",
                              cluster.kubectl("-n", menv.namespace, "get", "machines", "-o", "wide").stdout,
                              cluster.kubectl("-n", namespace, "get", "pods", "-o", "wide").stdout,
                              cluster.kubectl("-n", namespace, "describe", "pod", "db-0", check=False).stdout[-2000:],
                              menv.controller_logs()[-4000:]])

        control.crash_vm(vm_id)
        steps = _moments({
            "detected (Node not Ready)": lambda: _ready(_node(bed.menv, node)) != "True",
            "Machine deleted by the health check": lambda: menv.machine(victim["metadata"]["name"]) is None,
            "disk detached from the dead VM": lambda: vm_id not in sampler.attached,
            "VM removed": lambda: _vm_gone(conn, vm_id),
            "replacement's Node Ready": replacement_ready,
            "pod Running with its data": pod_back,
        }, 600, state)
        # The engine removes a VM with the disks still attached to it: the disk's survival shows that the
        # Machine's deletion detached it before it removed the VM.
        assert not disk_gone(conn, disk_id), "the disk went with the VM"
        back = _pod_obj(cluster, namespace, "db-0")
        assert back["spec"]["nodeName"] == replacement["node"]
        assert sampler.attached == [replacement["vm"]] and sampler.mounted == [replacement["node"]]
        assert "file: OK" in _exec(cluster, namespace, "db-0", CHECK)
        assert _volume(bed, namespace) == (pv_name, disk_id)
        assert _events(bed.menv, victim["metadata"]["name"], "MachineDeleted")  # the health check's remediation
        _assert_controller_replicas_apart(cluster)
        print("\n[figures] replacement with storage, from the VM crash: "
              + ", ".join(f"{step} {steps[step]:.1f} s" for step in sorted(steps, key=steps.get)))
    finally:
        if sampler is not None:
            sampler.stop()
        for other in cordoned:
            cluster.kubectl("uncordon", other, check=False)
        cluster.kubectl("-n", menv.namespace, "delete", "mhc", "replace", "--ignore-not-found", check=False)
        cluster.kubectl("-n", namespace, "delete", "statefulset", "db", "--wait=true", "--timeout=120s", check=False)
        cluster.kubectl("-n", namespace, "delete", "pvc", "--all", "--wait=false", check=False)
        cluster.kubectl("delete", "storageclass", sc, "--ignore-not-found", check=False)
    assert sampler.most_attached == 1 and sampler.most_mounted == 1, (sampler.most_attached, sampler.most_mounted)
