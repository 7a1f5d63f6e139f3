"""`make demo`, failover scene (docs/storage.md#failover-on-real-nodes): a StatefulSet pod keeps its oVirt disk and
its data through its node's failures, on real kubelets. Two workers of a MachineSet boot real nodes (a kubelet and
containerd each, hack/ovirtsim/real_guests.py) with the product's images; `config/storage/csi` runs on them; a
MachineHealthCheck watches them. Then, one after the other:

1. the host of the pod's VM stops answering: the health check opens a request, which waits, saying why; nothing is
   released and the pod is not moved; the host answers and all goes on as before;
2. the VM crashes: the request confirms it off, the out-of-service taint lets Kubernetes detach the disk, the VM is
   powered on, and the pod runs again (on the other node) with its data;
3. the VM of the pod's node crashes under a health check that replaces Machines: the Machine's deletion detaches the
   disk before the VM goes, and the pod runs on the replacement with its data.

Each step is a line of a live table: the VM, its Node, the health check's request, where the disk is attached and
mounted, and the pod. The scene needs a plane that notices a dead kubelet in seconds (PLANE_ARGS, SIM_TIMINGS);
with kube-controller-manager's default grace (50 s) every failure would take a minute longer.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Callable

import yaml
from kubernetes import client, config

from api.remediation import API_VERSION as REMEDIATION_API
from api.remediation import OUT_OF_SERVICE_TAINT_KEY
from hack import csi_bed, ovirt_install
from hack.controlplane.cluster import LocalControlPlane
from hack.controlplane.proxy import KubeProxy
from hack.demo.fencing import health_check, power_cycle_template
from hack.demo.storage import until
from hack.ovirtsim.testing import SimulatorHandle

# kube-controller-manager marks a Node whose kubelet went silent Unknown after 10 s (default 50 s), looking every
# 2 s (default 5 s). The real kubelets renew their Lease every 2.5 s (hack/controlplane/nodes.py), the simulated
# guests post their status every 2 s (SIM_TIMINGS), so no live node is taken for dead.
PLANE_ARGS = ("--node-monitor-grace-period=10s", "--node-monitor-period=2s")
SIM_TIMINGS = {"node_heartbeat": 2.0}
LABEL = "demo.ovirt.org/stateful"  # on the Nodes of the scene's Machines (nodelink copies it), a replacement's too
APP_NS = "demo-stateful"
TIMEOUT_S = 300.0


def _ready(node: dict | None) -> str:
    if not node:
        return "gone"
    return next((c["status"] for c in node["status"].get("conditions", []) if c["type"] == "Ready"), "?")


@dataclass
class _Look:
    """One look at everything the table shows."""
    machines: dict[str, dict]  # the set's Machines, by name
    nodes: dict[str, dict]
    pod: dict | None
    requests: dict[str, dict]  # OvirtRemediations, by Machine name
    vms: dict[str, dict]  # the simulator's view of the set's VMs, by id


@dataclass
class _Scene:
    """What the scene watches: the set's Machines and VMs, the pod, its disk."""
    api: client.ApiClient
    sim: SimulatorHandle
    namespace: str
    set_name: str
    say: Callable[[str], None]
    sampler: csi_bed.Exclusive | None = None
    disk_id: str = ""
    figures: dict[str, dict[str, float]] = field(default_factory=dict)

    def look(self) -> _Look:
        custom, core = client.CustomObjectsApi(self.api), client.CoreV1Api(self.api)
        machines = {m["metadata"]["name"]: m for m in custom.list_namespaced_custom_object(
            "machine.openshift.io", "v1beta1", self.namespace, "machines",
            label_selector=f"machine.openshift.io/cluster-api-machineset={self.set_name}")["items"]}
        group, version = REMEDIATION_API.split("/")
        # A request is named after its Machine (the health check's naming).
        requests = {r["metadata"]["name"]: r for r in custom.list_namespaced_custom_object(
            group, version, self.namespace, "ovirtremediations")["items"]}
        nodes = {n.metadata.name: self.api.sanitize_for_serialization(n)
                 for n in core.list_node(label_selector=LABEL).items}
        try:
            pod = self.api.sanitize_for_serialization(core.read_namespaced_pod("db-0", APP_NS))
        except client.ApiException as e:
            if e.status != 404:
                raise
            pod = None
        vms = {vm["id"]: vm for vm in self.sim.control.vms() if vm["name"].startswith(f"{self.set_name}-")}
        return _Look(machines, nodes, pod, requests, vms)

    def row(self, look: _Look) -> str:
        """The table's line for one look: each VM of the set, with its Node and request; the disk; the pod."""
        parts = []
        for name, m in sorted(look.machines.items()):
            vm_id = m["metadata"].get("annotations", {}).get("VmId", "")
            vm = look.vms.get(vm_id, {}).get("status", "removed" if vm_id else "-")
            node_name = ((m.get("status") or {}).get("nodeRef") or {}).get("name", "")
            node = look.nodes.get(node_name)
            taints = {t["key"] for t in (node or {}).get("spec", {}).get("taints", [])}
            marks = ("+out-of-service" if OUT_OF_SERVICE_TAINT_KEY in taints else "") + \
                    (" cordoned" if (node or {}).get("spec", {}).get("unschedulable") else "")
            request = look.requests.get(name)
            req = ""
            if request:
                status = request.get("status") or {}
                reason = next((c.get("reason") for c in status.get("conditions", [])
                               if c["type"] == "PowerOffConfirmed"), "")
                req = f" request {status.get('phase') or 'opened'}{'/' + reason if reason else ''}"
            deleting = " deleting" if m["metadata"].get("deletionTimestamp") else ""
            parts.append(f"{name[len(self.set_name) + 1:]}{deleting}: VM {vm}, Node "
                         f"{_ready(node) if node_name else 'none'}{marks}{req}")
        vm_names = {v["id"]: v["name"][len(self.set_name) + 1:] for v in look.vms.values()}
        if self.sampler is not None:
            parts.append(f"disk attached to {[vm_names.get(v, v) for v in self.sampler.attached] or '-'}, "
                         f"mounted on {[n[len(self.set_name) + 1:] for n in self.sampler.mounted] or '-'}")
        pod = look.pod
        if pod is None:
            parts.append("pod db-0: gone")
        else:
            state = "Terminating" if pod["metadata"].get("deletionTimestamp") else pod["status"].get("phase")
            ready = any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))
            on = (pod["spec"].get("nodeName") or "-")[len(self.set_name) + 1:]
            parts.append(f"pod db-0: {state}{' Ready' if ready else ''} on {on}")
        return " | ".join(parts)

    def follow(self, title: str, steps: dict[str, Callable[[_Look], bool]]) -> dict[str, float]:
        """The live table until every step has held once (in any order); the seconds at which each first held."""
        began, seen, last = time.monotonic(), {}, ""
        while len(seen) < len(steps):
            look = self.look()
            now = time.monotonic() - began
            for name, holds in steps.items():
                if name not in seen and holds(look):
                    seen[name] = now
                    print(f"  +{now:5.1f}s  ** {name}", flush=True)
            row = self.row(look)
            if row != last:
                print(f"  +{now:5.1f}s  {row}", flush=True)
                last = row
            if now > TIMEOUT_S:
                raise TimeoutError(f"{title}: not reached in {TIMEOUT_S:.0f} s: {sorted(set(steps) - set(seen))}")
            time.sleep(0.5)
        self.figures[title] = seen
        return seen


def _node_of(look: _Look, machine: str) -> dict | None:
    node_name = ((look.machines.get(machine, {}).get("status") or {}).get("nodeRef") or {}).get("name", "")
    return look.nodes.get(node_name)


def failover_scene(kubectl, sim: SimulatorHandle, plane: LocalControlPlane, inst: ovirt_install.Installation,
                   namespace: str, say: Callable[[str], None]) -> None:
    set_name = f"{inst.infra_id}-db"
    say("Failover with storage: a MachineSet of two workers whose VMs boot real kubelets (containerd, the "
        "product's images), with kube-proxy for their pods' Services")
    sim.control.real_guests(plane.dir, csi_bed.archives(), vms=[f"{set_name}-*"])
    api = config.new_client_from_config(str(kubectl.kubeconfig))
    proxy = KubeProxy(plane).start()
    scene = _Scene(api, sim, namespace, set_name, say)
    try:
        ms = ovirt_install.machineset_for(inst, namespace, set_name, node_labels={LABEL: "true"})
        ms["spec"]["replicas"] = 2
        kubectl.apply(ms, f"{set_name}.yaml  # replicas: 2, its Nodes labelled {LABEL}")
        scene.follow("two real nodes", {"both Nodes Ready": lambda look: len(look.machines) == 2 and all(
            (m.get("status") or {}).get("phase") == "Running" and _ready(_node_of(look, name)) == "True"
            for name, m in look.machines.items())})
        kubectl("get", "nodes", "-l", LABEL, "-o", "wide")
        _deploy_csi(kubectl, scene)
        _stateful_pod(kubectl, scene)
        began = time.monotonic()
        _fence(kubectl, scene)
        _replace(kubectl, scene)
        _summary(scene, time.monotonic() - began)
        _tear_down(kubectl, scene)
    finally:
        if scene.sampler is not None:
            scene.sampler.stop()
        proxy.stop()
        api.close()


def _deploy_csi(kubectl, scene: _Scene) -> None:
    scene.say("The CSI driver as users deploy it: kubectl apply -k config/storage/csi (imagePullPolicy Never: the "
              "images were imported, no registry is reachable)")
    nodes = sorted(n for n in scene.look().nodes)
    docs = csi_bed.shipped(kubectl("kustomize", str(csi_bed.CSI_CONFIG), show=False), LABEL, "true")
    print(kubectl("apply", "-f", "-", show=False, stdin=yaml.safe_dump_all(docs)).rstrip())
    began = time.monotonic()

    def registered() -> bool:
        csinodes = json.loads(kubectl("get", "csinodes", "-o", "json", show=False))["items"]
        listing = {c["metadata"]["name"] for c in csinodes
                   if any(d["name"] == csi_bed.DRIVER for d in c["spec"].get("drivers") or [])}
        return listing >= set(nodes)
    until(f"{csi_bed.DRIVER} in both CSINodes", registered, TIMEOUT_S)
    print(f"each kubelet lists {csi_bed.DRIVER} in its CSINode {time.monotonic() - began:.1f} s after the apply")
    # The node DaemonSet's pods on the simulated workers stay Pending (they have no kubelet): only the real ones.
    table = kubectl("-n", scene.namespace, "get", "pods", "-o", "wide",
                    "-l", "app.kubernetes.io/name in (ovirt-csi-controller,ovirt-csi-node)", show=False).splitlines()
    print("\n".join(table[:1] + [line for line in table[1:] if any(n in line for n in nodes)]))


def _stateful_pod(kubectl, scene: _Scene) -> None:
    scene.say("A StatefulSet pod on a new oVirt disk of the sample class: it writes a file and its checksum once, "
              "and checks them at every start")
    kubectl("apply", "-f", str(csi_bed.SAMPLE_CLASS.relative_to(csi_bed.REPO)))
    kubectl("create", "namespace", APP_NS)
    began = time.monotonic()
    kubectl.apply(csi_bed.statefulset(LABEL, "true", "ovirt-csi") | {"metadata": {"name": "db", "namespace": APP_NS}},
                  "db.yaml  # 1 replica, a 1Gi claim of ovirt-csi, on the Nodes labelled " + LABEL)
    kubectl("-n", APP_NS, "wait", "--for=create", "pod/db-0", "--timeout=60s", show=False)
    kubectl("-n", APP_NS, "wait", "--for=condition=Ready", "pod/db-0", "--timeout=300s", show=False)
    print(f"pod Ready with its new disk {time.monotonic() - began:.1f} s after the StatefulSet was created")
    kubectl("-n", APP_NS, "get", "pod,pvc", "-o", "wide")
    kubectl("-n", APP_NS, "exec", "db-0", "--", "sh", "-c", csi_bed.CHECK)
    pvc = json.loads(kubectl("-n", APP_NS, "get", "pvc", "data-db-0", "-o", "json", show=False))
    pv = json.loads(kubectl("get", "pv", pvc["spec"]["volumeName"], "-o", "json", show=False))
    scene.disk_id = pv["spec"]["csi"]["volumeHandle"]
    scene.sampler = csi_bed.Exclusive(scene.sim.connection(), f"name={scene.set_name}-*", scene.disk_id,
                                      pv["metadata"]["name"])
    scene.sampler.start()
    print(f"PV {pv['metadata']['name']} is the engine's disk {pv['spec']['csi']['volumeHandle']}; from now on the "
          "disk's attachments (the engine's) and mounts (the kubelets') are sampled twice a second")


def _the_pods_machine(scene: _Scene) -> tuple[str, str]:
    look = scene.look()
    node = look.pod["spec"]["nodeName"]
    name = next(n for n, m in look.machines.items() if ((m.get("status") or {}).get("nodeRef") or {}).get("name")
                == node)
    return name, look.machines[name]["metadata"]["annotations"]["VmId"]


def _fence(kubectl, scene: _Scene) -> None:
    ns, control = scene.namespace, scene.sim.control
    scene.say("A MachineHealthCheck whose remediation power-cycles the VM (the OvirtRemediationTemplate of the "
              "fencing scene)")
    health_check(kubectl, ns, "db", scene.set_name, power_cycle_template(kubectl, ns))
    machine, vm_id = _the_pods_machine(scene)
    look = scene.look()
    pod_uid = look.pod["metadata"]["uid"]
    host = control.vm(vm_id)["host"]
    if any(control.vm(v)["host"] == host for v in look.vms if v != vm_id):
        raise RuntimeError("the two workers' VMs share a host: the other node would be cut off too")

    scene.say(f"The host of {machine}'s VM stops answering the engine (non_responsive): the VM is `unknown`, its "
              "guest runs on, cut off (its kubelet frozen), and keeps the disk")
    control.set_host_status(host, "non_responsive")
    scene.follow("host not answering", {
        "Node Unknown": lambda look: _ready(_node_of(look, machine)) == "Unknown",
        "the request waits: the VM may still be running": lambda look: any(
            c.get("reason") == "PowerStateUnknown" for c in ((look.requests.get(machine) or {}).get("status") or {})
            .get("conditions", []))})
    kubectl("-n", ns, "get", "events", "--field-selector", f"involvedObject.name={machine},reason=PowerStateUnknown",
            "-o", "custom-columns=TYPE:.type,REASON:.reason,MESSAGE:.message")
    time.sleep(5)
    print(f"5 s later: still attached to its VM and mounted on its node: {scene.sampler.attached == [vm_id]}, "
          f"the pod not moved: {scene.look().pod['metadata']['uid'] == pod_uid}")
    scene.say("The host answers again: the kubelet goes on; nothing was released, stopped or moved")
    control.set_host_status(host, "up")
    scene.follow("host back", {
        "Node Ready": lambda look: _ready(_node_of(look, machine)) == "True",
        "request closed, no power cycle": lambda look: machine not in look.requests})
    pod = scene.look().pod
    print(f"the same pod (uid kept: {pod['metadata']['uid'] == pod_uid}), its container restarted "
          f"{pod['status']['containerStatuses'][0]['restartCount']} times")

    scene.say(f"{machine}'s VM crashes (the simulator kills its qemu process; its kubelet and containers die)")
    control.crash_vm(vm_id)
    detected: list[bool] = []

    def after_detection(holds: Callable[[_Look], bool]) -> Callable[[_Look], bool]:
        return lambda look: bool(detected) and holds(look)

    def not_ready(look: _Look) -> bool:
        if _ready(_node_of(look, machine)) != "True":
            detected.append(True)
        return bool(detected)
    scene.follow("VM crash, power-cycled", {
        "Node not Ready": not_ready,
        "request opened": lambda look: machine in look.requests,
        "out-of-service taint (VM confirmed off)": lambda look: OUT_OF_SERVICE_TAINT_KEY in {
            t["key"] for t in (_node_of(look, machine) or {}).get("spec", {}).get("taints", [])},
        "disk detached from the dead VM": lambda look: vm_id not in scene.sampler.attached,
        "VM powered on": after_detection(lambda look: look.vms.get(vm_id, {}).get("status") == "up"),
        "pod Running again": lambda look: csi_bed.pod_ready(look.pod, pod_uid)})
    kubectl("-n", APP_NS, "exec", "db-0", "--", "sh", "-c", csi_bed.CHECK)
    kubectl("-n", APP_NS, "get", "pod", "db-0", "-o", "wide")
    scene.say(f"{machine}'s guest boots again; the request ends when its Node is Ready")
    scene.follow("fenced node back", {
        "Node Ready again, request closed": lambda look: _ready(_node_of(look, machine)) == "True"
        and machine not in look.requests})
    kubectl("-n", ns, "delete", "mhc", "db")


def _replace(kubectl, scene: _Scene) -> None:
    ns, control = scene.namespace, scene.sim.control
    scene.say("Replacement: a MachineHealthCheck without a template deletes an unhealthy Machine, and the MachineSet "
              "replaces it. The other node is cordoned, so the pod's only place is the replacement")
    health_check(kubectl, ns, "db-replace", scene.set_name)
    machine, vm_id = _the_pods_machine(scene)
    look = scene.look()
    pod_uid = look.pod["metadata"]["uid"]
    others = [((m.get("status") or {}).get("nodeRef") or {}).get("name") for n, m in look.machines.items()
              if n != machine]
    for node in others:
        kubectl("cordon", node)
    old = set(look.machines)

    def replacement_ready(look: _Look) -> bool:
        return any(_ready(_node_of(look, n)) == "True" for n in look.machines if n not in old)
    scene.say(f"{machine}'s VM crashes")
    control.crash_vm(vm_id)
    scene.follow("VM crash, Machine replaced", {
        "Node not Ready": lambda look: _ready(_node_of(look, machine)) != "True",
        "Machine deleting": lambda look: bool(look.machines.get(machine, {}).get("metadata", {})
                                              .get("deletionTimestamp")) or machine not in look.machines,
        "disk detached from the dead VM": lambda look: vm_id not in scene.sampler.attached,
        "VM removed": lambda look: vm_id not in look.vms,
        "replacement's Node Ready": replacement_ready,
        "pod Running on the replacement": lambda look: csi_bed.pod_ready(look.pod, pod_uid)})
    kubectl("-n", APP_NS, "exec", "db-0", "--", "sh", "-c", csi_bed.CHECK)
    kubectl("-n", APP_NS, "get", "pod", "db-0", "-o", "wide")
    pv = json.loads(kubectl("-n", APP_NS, "get", "pvc", "data-db-0", "-o", "json", show=False))["spec"]["volumeName"]
    print(f"the claim keeps PV {pv}: the disk survived its VM's removal (it was detached first)")
    for node in others:
        kubectl("uncordon", node)


def _tear_down(kubectl, scene: _Scene) -> None:
    scene.say("Deleting the StatefulSet; once the disk is detached, its claim (the disk goes from the engine); then "
              "the MachineSet (its VMs, and the real nodes with them)")
    pv = json.loads(kubectl("-n", APP_NS, "get", "pvc", "data-db-0", "-o", "json", show=False))["spec"]["volumeName"]
    kubectl("-n", APP_NS, "delete", "statefulset", "db", "--wait=true")
    kubectl("-n", APP_NS, "wait", "--for=delete", "pod/db-0", "--timeout=120s")
    # The CSI controller runs on these workers: the claim goes while it can still detach and delete the disk.
    until(f"no VolumeAttachment of {pv}", lambda: pv not in kubectl(
        "get", "volumeattachments", "-o", "jsonpath={.items[*].spec.source.persistentVolumeName}", show=False),
        TIMEOUT_S)
    kubectl("-n", APP_NS, "delete", "pvc", "data-db-0", "--wait=true", "--timeout=120s")
    until(f"PV {pv} gone", lambda: not kubectl("get", "pv", pv, "--ignore-not-found", show=False), TIMEOUT_S)
    conn = scene.sim.connection()
    try:
        print(f"PV {pv} deleted; the engine's disk {scene.disk_id}: "
              f"{'gone' if csi_bed.disk_gone(conn, scene.disk_id) else 'still there'}")
    finally:
        conn.close()
    kubectl("-n", scene.namespace, "delete", "mhc", "db-replace")
    kubectl("-n", scene.namespace, "delete", "machineset", scene.set_name, "--wait=false")
    scene.follow("the set deleted", {"its Machines, VMs and real nodes gone": lambda look: not look.machines})


def _summary(scene: _Scene, took: float) -> None:
    scene.say("Failover with storage, seconds after each failure")
    for title in ("host not answering", "host back", "VM crash, power-cycled", "fenced node back",
                  "VM crash, Machine replaced"):
        steps = scene.figures[title]
        print(f"  {title}: " + ", ".join(f"{s} {t:.1f}" for s, t in sorted(steps.items(), key=lambda kv: kv[1])))
    s = scene.sampler
    to_pod = sum(max(scene.figures[t].values()) for t in ("host not answering", "host back", "VM crash, power-cycled",
                                                           "VM crash, Machine replaced"))
    print(f"  {to_pod:.0f} s of failures until the pod ran again, {took:.0f} s from the host's silence to the pod "
          f"Running on the replacement with the scene's own commands and waits; {s.samples} samples: "
          f"the disk attached to at most {s.most_attached} VM and mounted on at most {s.most_mounted} node at once")

