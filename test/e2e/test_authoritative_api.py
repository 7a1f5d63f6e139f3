"""A Running Machine API worker and its MachineSet handed to Cluster API are left alone by the whole controller
process, and resume when given back (docs/compatibility.md#authoritativeapi): the test plays OpenShift's migration
controller, moving `status.authoritativeAPI` through `Migrating` and waiting for the `Paused` condition, as the
enhancement's hand-over does. While Cluster API owns them, a scale-up creates nothing, a deletion waits with its
finalizer, the engine gets no VM request and the Node stays Ready; given back, the deletion goes through and the
set reaches its replicas."""

from __future__ import annotations

import json

import yaml

from api import keys
from hack import ovirt_install
from machines import unique_name, wait_for
from test_machineset_vms import Scaler

MACHINE = "machines.machine.openshift.io"
MACHINESET = "machinesets.machine.openshift.io"
WAIT_S = 30.0


class Migration:
    """What OpenShift's migration controller writes, and what a user reads back with kubectl."""

    def __init__(self, menv, machineset: str, machine: str):
        self.menv = menv
        self.objects = ((MACHINESET, "machinesets", machineset), (MACHINE, "machines", machine))

    def read(self, plural: str, name: str) -> dict | None:
        return self.menv.cluster.read(f"/apis/{keys.API_VERSION}/namespaces/{self.menv.namespace}/{plural}/{name}")

    def patch(self, kind: str, name: str, body: dict, status: bool = False, check: bool = True) -> str:
        """The error kubectl printed, when `check` is False."""
        return self.menv.cluster.kubectl("-n", self.menv.namespace, "patch", kind, name, "--type=merge", "-p",
                                         json.dumps(body), *(["--subresource=status"] if status else []),
                                         check=check).stderr

    def move(self, status: str, spec: str | None = None) -> None:
        """Set the status (and spec) of both objects, then wait until each says `Paused` as the Machine API's
        controllers must: True while the status is not MachineAPI, with MAO's reason and message."""
        for kind, _, name in self.objects:
            if spec:
                self.patch(kind, name, {"spec": {"authoritativeAPI": spec}})
            self.patch(kind, name, {"status": {"authoritativeAPI": status}}, status=True)
        want = ({"status": "False", "reason": "AuthoritativeAPIMachineAPI", "severity": "Info"}
                if status == "MachineAPI" else {"status": "True", "reason": "AuthoritativeAPINotMachineAPI"})
        want["message"] = f"The AuthoritativeAPI status is set to '{status}'"
        for _, plural, name in self.objects:
            def said(plural=plural, name=name) -> dict | None:
                obj = self.read(plural, name) or {}
                found = [c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == "Paused"]
                return obj if found and all(found[0].get(k) == v for k, v in want.items()) else None
            wait_for(f"{plural}/{name} Paused {want['status']} for {status}", said, WAIT_S)


def vm_writes(menv) -> int:
    """The requests that create, change, start, stop or remove a VM, the engine's counters (per template)."""
    return sum(n for request, n in menv.sim.control.counts().items()
               if request.split(" ")[0] in ("POST", "PUT", "DELETE") and request.split(" ")[1].startswith("/vms"))


def ready_since(menv, node: str) -> tuple[str, str]:
    obj = menv.cluster.read(f"/api/v1/nodes/{node}")
    ready = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
    return ready["status"], ready["lastTransitionTime"]


def test_a_running_worker_handed_to_cluster_api_is_left_alone_and_resumes_when_given_back(menv):
    menv.controller()
    name = unique_name("aa")
    ms = ovirt_install.machineset_for(menv.inst, menv.namespace, name)
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(ms))
    scaler = Scaler(menv, name)
    [machine] = scaler.wait_converged(1)
    worker = machine["metadata"]["name"]
    [vm] = menv.vms_named(worker)
    node_ready = ready_since(menv, worker)
    migration = Migration(menv, name, worker)

    # As the migration controller first records the authority of an object that has none; then the hand-over.
    migration.move("MachineAPI")
    migration.move("Migrating", spec="ClusterAPI")
    migration.move("ClusterAPI")
    writes = vm_writes(menv)

    # What Cluster API's controllers would now do is theirs to do: the Machine API's do nothing of it.
    menv.cluster.kubectl("-n", menv.namespace, "scale", MACHINESET, name, "--replicas=2")
    menv.cluster.kubectl("-n", menv.namespace, "delete", MACHINE, worker, "--wait=false")
    # The CRD holds OpenShift's rule: no direct move back, only through Migrating.
    refused = migration.patch(MACHINESET, name, {"status": {"authoritativeAPI": "MachineAPI"}}, status=True,
                              check=False)
    assert "It must transition through Migrating" in refused, refused
    # The hand-back begins: each controller's Paused write for `Migrating` comes from a pass that saw the scale
    # and the deletion, so whatever they would have started has started by then.
    migration.move("Migrating", spec="MachineAPI")
    machines = scaler.machines()
    assert [m["metadata"]["name"] for m in machines] == [worker]
    [deleting] = machines
    assert deleting["metadata"].get("deletionTimestamp")
    assert keys.MACHINE_FINALIZER in deleting["metadata"]["finalizers"]
    assert deleting["status"]["phase"] == "Running"
    [still] = menv.vms_named(worker)
    assert (still["id"], still["status"]) == (vm["id"], "up")
    assert vm_writes(menv) == writes, "the engine got a VM request while Cluster API owned the worker"
    assert ready_since(menv, worker) == node_ready

    # Given back: the deletion goes through (VM and Node removed) and the set makes its two replicas.
    migration.objects = migration.objects[:1]  # the Machine is being deleted: only the set says Paused=False
    migration.patch(MACHINE, worker, {"status": {"authoritativeAPI": "MachineAPI"}}, status=True)
    migration.move("MachineAPI")
    menv.wait_gone(worker, timeout=90)
    assert menv.vms_named(worker) == []
    replaced = scaler.wait_converged(2)
    assert worker not in {m["metadata"]["name"] for m in replaced}
