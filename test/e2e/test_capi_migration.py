"""A Running Machine API worker converted to Cluster API (`python -m machine_controller.migrate to-capi`) keeps its
VM and its Node, with Cluster API's own core controllers (docs/cluster-api.md#migrating-from-the-machine-api): the
Machine API side is handed over as OpenShift's migration controller does it (docs/compatibility.md#authoritativeapi),
the converted Machine and OvirtMachine are applied, the OvirtMachine takes the VM over by marking it (the only
request the engine gets: no create, stop or start), Cluster API's Machine runs with the same Node and providerID, and
the Node never leaves Ready. One controller process serves both front ends."""

from __future__ import annotations

import json
import subprocess
import sys

from api import keys
from api.infrastructure import GROUP as INFRA_GROUP
from capi_clusters import CONVERGE_S
from machines import wait_for

MACHINE = "machines.machine.openshift.io"
BOTH_FRONT_ENDS = "--controllers=*,ovirtcluster,ovirtmachine,ovirtmachinetemplate"
WAIT_S = 30.0


def _vm_writes(menv) -> dict[str, int]:
    return {r: n for r, n in menv.sim.control.counts().items()
            if r.split(" ")[0] in ("POST", "PUT", "DELETE") and r.split(" ")[1].startswith("/vms")}


def _ready_since(menv, node: str) -> tuple[str, str]:
    obj = menv.cluster.read(f"/api/v1/nodes/{node}")
    ready = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
    return ready["status"], ready["lastTransitionTime"]


def _hand_over(menv, worker: str, status: str, spec: str | None = None) -> None:
    """What OpenShift's migration controller writes, then the Machine API's Paused condition it waits for."""
    k = menv.cluster.kubectl
    if spec:
        k("-n", menv.namespace, "patch", MACHINE, worker, "--type=merge", "-p",
          json.dumps({"spec": {"authoritativeAPI": spec}}))
    k("-n", menv.namespace, "patch", MACHINE, worker, "--type=merge", "--subresource=status", "-p",
      json.dumps({"status": {"authoritativeAPI": status}}))
    paused = "False" if status == "MachineAPI" else "True"

    def said() -> dict | None:
        m = menv.machine(worker) or {}
        found = [c for c in (m.get("status") or {}).get("conditions") or [] if c["type"] == "Paused"]
        return m if found and found[0]["status"] == paused else None
    wait_for(f"Machine {worker} Paused={paused} for {status}", said, WAIT_S)


def test_a_running_machine_api_worker_converted_to_cluster_api_keeps_its_vm_and_node(capi):
    menv = capi.menv
    menv.controller(extra_args=(BOTH_FRONT_ENDS,)).wait_ready()
    wc = capi.create_cluster(replicas=0)
    worker = menv.create_machine()
    menv.wait_phase(worker, "Running", timeout=CONVERGE_S)
    [vm] = menv.vms_named(worker)
    assert vm["status"] == "up"
    node_ready = _ready_since(menv, worker)
    assert node_ready[0] == "True"

    _hand_over(menv, worker, "MachineAPI")
    _hand_over(menv, worker, "Migrating", spec="ClusterAPI")
    _hand_over(menv, worker, "ClusterAPI")
    before = _vm_writes(menv)

    listed = capi.k("-n", capi.namespace, "get", f"{MACHINE}/{worker}", "secret/worker-user-data", "-o", "yaml")
    converted = subprocess.run(
        [sys.executable, "-m", "machine_controller.migrate", "to-capi", "--cluster", wc.name, "--unpaused",
         "--no-ovirt-cluster"], input=listed.stdout, capture_output=True, text=True, timeout=60, check=False)
    assert converted.returncode == 0, converted.stderr
    capi.k("apply", "-f", "-", input=converted.stdout)

    def taken_over() -> dict | None:
        m = capi.get("machines.cluster.x-k8s.io", worker) or {}
        om = capi.get(f"ovirtmachines.{INFRA_GROUP}", worker) or {}
        st, om_st = m.get("status") or {}, om.get("status") or {}
        done = (st.get("phase") == "Running" and (st.get("nodeRef") or {}).get("name") == worker
                and om_st.get("instanceId") == vm["id"] and (om_st.get("initialization") or {}).get("provisioned"))
        return m if done else None
    try:
        machine = wait_for(f"Cluster API Machine {worker} Running with its Node", taken_over, CONVERGE_S)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{wc.describe()}\n{capi.logs()}") from None

    assert machine["spec"]["providerID"] == f"ovirt://{vm['id']}"
    [still] = menv.vms_named(worker)
    assert (still["id"], still["status"]) == (vm["id"], "up")
    conn = menv.sim.connection()
    try:
        comment = conn.system_service().vms_service().vm_service(vm["id"]).get().comment
    finally:
        conn.close()
    assert comment == f"ovirt-machine-controller owner: OvirtMachine {capi.namespace}/{worker} uid " \
                      f"{capi.get(f'ovirtmachines.{INFRA_GROUP}', worker)['metadata']['uid']}"
    # The mark is the only request the VM got: never created again, stopped or started.
    after = _vm_writes(menv)
    assert {r for r, n in after.items() if n != before.get(r, 0)} == {"PUT /vms/{vm}"}, (before, after)
    assert _ready_since(menv, worker) == node_ready
    # The Machine API copy stays, paused: given back later, its name is still the proof of its VM.
    assert menv.machine(worker)["status"]["authoritativeAPI"] == "ClusterAPI"
    assert keys.MACHINE_FINALIZER in menv.machine(worker)["metadata"]["finalizers"]
