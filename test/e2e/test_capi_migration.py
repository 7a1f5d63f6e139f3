"""Running Machine API workers, a standalone one and a MachineSet's two, converted to Cluster API (`python -m
machine_controller.migrate to-capi`) keep their VMs and Nodes, with Cluster API's own core controllers, and go back
(docs/cluster-api.md#migrating-from-the-machine-api). The Machine API side is handed over as OpenShift's migration
controller does it (docs/compatibility.md#authoritativeapi); the converted objects are applied; each OvirtMachine
takes its VM over by marking it (the only request the engine gets: no create, stop or start); the MachineDeployment
adopts the converted MachineSet, which adopts the set's Machines, and makes none; each Machine runs with the same Node
and providerID, and the Nodes never leave Ready. Given back, the Machine API copies resume with the same VMs. One
controller process serves both front ends."""

from __future__ import annotations

import json
import subprocess
import sys

import yaml

from api import keys
from api.infrastructure import GROUP as INFRA_GROUP
from capi_clusters import CONVERGE_S
from hack import ovirt_install
from machines import unique_name, wait_for

MACHINE = "machines.machine.openshift.io"
MACHINESET = "machinesets.machine.openshift.io"
BOTH_FRONT_ENDS = "--controllers=*,ovirtcluster,ovirtmachine,ovirtmachinetemplate"
WAIT_S = 30.0


def _vm_writes(menv) -> dict[str, int]:
    return {r: n for r, n in menv.sim.control.counts().items()
            if r.split(" ")[0] in ("POST", "PUT", "DELETE") and r.split(" ")[1].startswith("/vms")}


def _ready_since(menv, node: str) -> tuple[str, str]:
    obj = menv.cluster.read(f"/api/v1/nodes/{node}")
    ready = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
    return ready["status"], ready["lastTransitionTime"]


def _hand_over(menv, objects: list[tuple[str, str]], status: str, spec: str | None = None) -> None:
    """What OpenShift's migration controller writes to each (kind, name), then the Machine API's Paused condition
    it waits for."""
    k = menv.cluster.kubectl
    for kind, name in objects:
        if spec:
            k("-n", menv.namespace, "patch", kind, name, "--type=merge", "-p",
              json.dumps({"spec": {"authoritativeAPI": spec}}))
        k("-n", menv.namespace, "patch", kind, name, "--type=merge", "--subresource=status", "-p",
          json.dumps({"status": {"authoritativeAPI": status}}))
    paused = "False" if status == "MachineAPI" else "True"
    for kind, name in objects:
        def said(kind=kind, name=name) -> dict | None:
            obj = json.loads(k("-n", menv.namespace, "get", kind, name, "-o", "json").stdout)
            found = [c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == "Paused"]
            return obj if found and found[0]["status"] == paused else None
        wait_for(f"{kind} {name} Paused={paused} for {status}", said, WAIT_S)


def _machine_api_machines(menv, machineset: str) -> list[dict]:
    out = menv.cluster.kubectl("-n", menv.namespace, "get", MACHINE, "-l", f"{keys.LABEL_MACHINESET}={machineset}",
                               "-o", "json").stdout
    return json.loads(out)["items"]


def _vm_comment(menv, vm_id: str) -> str:
    conn = menv.sim.connection()
    try:
        return conn.system_service().vms_service().vm_service(vm_id).get().comment
    finally:
        conn.close()


def test_running_machine_api_workers_move_to_cluster_api_and_back_keeping_their_vms_and_nodes(capi):
    """A standalone worker and a MachineSet of two: converted, the MachineSet becomes a MachineDeployment that
    adopts the converted MachineSet, which adopts the converted Machines (none made again); given back, the Machine
    API copies resume with the same VMs."""
    menv = capi.menv
    k = menv.cluster.kubectl
    menv.controller(extra_args=(BOTH_FRONT_ENDS,)).wait_ready()
    wc = capi.create_cluster(replicas=0)
    standalone = menv.create_machine()
    set_name = unique_name("mig")
    ms = ovirt_install.machineset_for(menv.inst, menv.namespace, set_name)
    ms["spec"]["replicas"] = 2
    k("apply", "-f", "-", input=yaml.safe_dump(ms))
    menv.wait_phase(standalone, "Running", timeout=CONVERGE_S)
    def members() -> list[dict] | None:
        ms = _machine_api_machines(menv, set_name)
        running = [m for m in ms if (m.get("status") or {}).get("phase") == "Running"
                   and (m["status"].get("nodeRef") or {}).get("name")]
        return running if len(ms) == len(running) == 2 else None
    running = wait_for(f"MachineSet {set_name}'s two Machines Running", members, CONVERGE_S)
    workers = [standalone, *(m["metadata"]["name"] for m in running)]
    vms = {w: menv.vms_named(w)[0] for w in workers}
    assert all(vm["status"] == "up" for vm in vms.values())
    ready = {w: _ready_since(menv, w) for w in workers}
    assert all(r[0] == "True" for r in ready.values())

    objects = [(MACHINESET, set_name), *((MACHINE, w) for w in workers)]
    _hand_over(menv, objects, "MachineAPI")
    _hand_over(menv, objects, "Migrating", spec="ClusterAPI")
    _hand_over(menv, objects, "ClusterAPI")
    before = _vm_writes(menv)

    listed = k("-n", capi.namespace, "get", f"{MACHINESET}/{set_name}", *(f"{MACHINE}/{w}" for w in workers),
               "secret/worker-user-data", "-o", "yaml")
    converted = subprocess.run(
        [sys.executable, "-m", "machine_controller.migrate", "to-capi", "--cluster", wc.name, "--unpaused",
         "--no-ovirt-cluster"], input=listed.stdout, capture_output=True, text=True, timeout=60, check=False)
    assert converted.returncode == 0, converted.stderr
    k("apply", "-f", "-", input=converted.stdout)

    def taken_over() -> list[dict] | None:
        machines = [capi.get("machines.cluster.x-k8s.io", w) or {} for w in workers]
        infra = [capi.get(f"ovirtmachines.{INFRA_GROUP}", w) or {} for w in workers]
        for w, m, om in zip(workers, machines, infra, strict=True):
            st, om_st = m.get("status") or {}, om.get("status") or {}
            if not (st.get("phase") == "Running" and (st.get("nodeRef") or {}).get("name") == w
                    and om_st.get("instanceId") == vms[w]["id"]
                    and (om_st.get("initialization") or {}).get("provisioned")):
                return None
        md = (capi.get("machinedeployments.cluster.x-k8s.io", set_name) or {}).get("status") or {}
        if md.get("replicas") != 2 or md.get("readyReplicas") != 2:
            return None
        return machines
    try:
        machines = wait_for("the workers Running under Cluster API with their Nodes", taken_over, CONVERGE_S)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{wc.describe()}\n{capi.logs()}") from None

    # The MachineDeployment took the converted MachineSet, which took the set's Machines: none was made again.
    deployment_machines = capi.get("machines.cluster.x-k8s.io",
                                   selector=f"cluster.x-k8s.io/deployment-name={set_name}")
    assert sorted(m["metadata"]["name"] for m in deployment_machines) == sorted(workers[1:])
    machine_set = capi.get("machinesets.cluster.x-k8s.io", set_name)
    assert [(r["kind"], r["name"]) for r in machine_set["metadata"]["ownerReferences"]] == [
        ("MachineDeployment", set_name)]
    for m in machines:
        assert m["spec"]["providerID"] == f"ovirt://{vms[m['metadata']['name']]['id']}"
        owners = [(r["kind"], r["name"]) for r in m["metadata"].get("ownerReferences") or [] if r.get("controller")]
        assert owners == ([] if m["metadata"]["name"] == standalone else [("MachineSet", set_name)]), owners
    for w, vm in vms.items():
        [still] = menv.vms_named(w)
        assert (still["id"], still["status"]) == (vm["id"], "up")
        assert _vm_comment(menv, vm["id"]).startswith(f"ovirt-machine-controller owner: OvirtMachine "
                                                      f"{capi.namespace}/{w} uid ")
        assert _ready_since(menv, w) == ready[w]
    # The marks are the only requests the VMs got: never created again, stopped or started.
    after = _vm_writes(menv)
    assert {r for r, n in after.items() if n != before.get(r, 0)} == {"PUT /vms/{vm}"}, (before, after)

    # Back: Cluster API's copies paused (the whole Cluster), the Machine API's given back: they resume with the same
    # VMs, still up, and Nodes still Ready.
    k("-n", capi.namespace, "patch", "clusters.cluster.x-k8s.io", wc.name, "--type=merge", "-p",
      json.dumps({"spec": {"paused": True}}))
    marked = _vm_writes(menv)
    _hand_over(menv, objects, "Migrating", spec="MachineAPI")
    _hand_over(menv, objects, "MachineAPI")
    for w in workers:
        menv.wait_phase(w, "Running", timeout=WAIT_S)
    machineset = json.loads(k("-n", capi.namespace, "get", MACHINESET, set_name, "-o", "json").stdout)
    assert (machineset["status"]["replicas"], machineset["status"].get("readyReplicas")) == (2, 2)
    for w, vm in vms.items():
        assert [(v["id"], v["status"]) for v in menv.vms_named(w)] == [(vm["id"], "up")]
        assert _ready_since(menv, w) == ready[w]
    assert _vm_writes(menv) == marked
