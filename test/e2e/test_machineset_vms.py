"""The whole controller process on a MachineSet, with VMs: `kubectl scale machineset` up, down and to zero
converges to exactly N Running Machines, N VMs and N Ready Nodes; scale-down removes the Machines the delete
annotation and policy choose, with their VMs and Nodes; a deleted Machine is replaced; deleting the MachineSet
removes every Machine and VM (docs/compatibility.md#machinesets). Each runs in both deployment modes:
this project's controllers alone, and its actuator side beside machine-api-operator's own controllers."""

from __future__ import annotations

import json
import time

import yaml

from hack import ovirt_install
from machines import both_modes, unique_name

CONVERGE_S = 150.0


class Scaler:
    def __init__(self, menv, name: str):
        self.menv = menv
        self.name = name
        self.k = menv.cluster.kubectl
        self.ns = menv.namespace

    def machines(self) -> list[dict]:
        out = self.k("-n", self.ns, "get", "machines", "-l", f"machine.openshift.io/cluster-api-machineset={self.name}",
                     "-o", "json").stdout
        return json.loads(out)["items"]

    def vms(self) -> list[dict]:
        return [vm for vm in self.menv.sim.control.vms() if vm["name"].startswith(self.name + "-")]

    def ready_nodes(self, names: set[str]) -> set[str]:
        nodes = json.loads(self.k("get", "nodes", "-o", "json").stdout)["items"]
        return {n["metadata"]["name"] for n in nodes if n["metadata"]["name"] in names and any(
            c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))}

    def wait_converged(self, n: int) -> list[dict]:
        deadline = time.monotonic() + CONVERGE_S
        while True:
            ms = self.machines()
            names = {m["metadata"]["name"] for m in ms}
            running = [m for m in ms if (m.get("status") or {}).get("phase") == "Running"
                       and not m["metadata"].get("deletionTimestamp")]
            vms = self.vms()
            if (len(ms) == n and len(running) == n and {v["name"] for v in vms} == names
                    and all(v["status"] == "up" for v in vms) and self.ready_nodes(names) == names):
                out = self.k("-n", self.ns, "get", "machineset", self.name, "-o", "json").stdout
                status = json.loads(out)["status"]
                if status.get("replicas") == n and status.get("readyReplicas", 0) == n:
                    return ms
            assert time.monotonic() < deadline, (
                f"not converged to {n}: "
                f"machines={[(m['metadata']['name'], (m.get('status') or {}).get('phase')) for m in ms]}"
                f" vms={[(v['name'], v['status']) for v in vms]}\n{self.menv.controller_logs()}")
            time.sleep(0.5)


def _machineset(menv, name: str, replicas: int, delete_policy: str = "Oldest") -> dict:
    ms = ovirt_install.machineset_for(menv.inst, menv.namespace, name)
    ms["spec"]["replicas"] = replicas
    ms["spec"]["deletePolicy"] = delete_policy
    return ms


@both_modes
def test_kubectl_scale_converges_up_down_and_to_zero_with_vms_and_nodes(menv):
    menv.controller()
    name = unique_name("ws")
    s = Scaler(menv, name)
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(_machineset(menv, name, 1)))
    s.wait_converged(1)

    menv.cluster.kubectl("-n", menv.namespace, "scale", "machineset", name, "--replicas=3")
    three = s.wait_converged(3)

    # Scale-down: the delete-annotated Machine goes first, then the policy (Oldest) chooses.
    by_age = sorted(three, key=lambda m: (m["metadata"]["creationTimestamp"], m["metadata"]["name"]))
    marked = by_age[-1]["metadata"]["name"]  # the newest: only the annotation can make it go first
    menv.cluster.kubectl("-n", menv.namespace, "annotate", "machine", marked,
                         "machine.openshift.io/delete-machine=2026-11-21T00:00:00Z")
    menv.cluster.kubectl("-n", menv.namespace, "scale", "machineset", name, "--replicas=2")
    two = s.wait_converged(2)
    assert marked not in {m["metadata"]["name"] for m in two}
    menv.cluster.kubectl("-n", menv.namespace, "scale", "machineset", name, "--replicas=1")
    [left] = s.wait_converged(1)
    # by_age[0] was created seconds before the other two (at replicas=1): the Oldest policy removes it.
    assert left["metadata"]["name"] == by_age[1]["metadata"]["name"]
    gone = {m["metadata"]["name"] for m in three} - {left["metadata"]["name"]}
    assert not any(v["name"] in gone for v in s.vms())
    listed = json.loads(menv.cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    nodes = {n["metadata"]["name"] for n in listed}
    assert not gone & nodes

    menv.cluster.kubectl("-n", menv.namespace, "scale", "machineset", name, "--replicas=0")
    s.wait_converged(0)
    assert s.vms() == []


@both_modes
def test_deleted_machine_is_replaced_and_deleting_the_set_removes_every_vm(menv):
    menv.controller()
    name = unique_name("ws")
    s = Scaler(menv, name)
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(_machineset(menv, name, 2)))
    before = {m["metadata"]["name"] for m in s.wait_converged(2)}
    victim = sorted(before)[0]
    menv.cluster.kubectl("-n", menv.namespace, "delete", "machine", victim, "--wait=false")
    after = {m["metadata"]["name"] for m in s.wait_converged(2)}
    assert victim not in after and len(after - before) == 1

    menv.cluster.kubectl("-n", menv.namespace, "delete", "machineset", name, "--wait=false")
    deadline = time.monotonic() + CONVERGE_S
    while s.machines() or s.vms():
        assert time.monotonic() < deadline, (s.machines(), s.vms())
        time.sleep(0.5)
