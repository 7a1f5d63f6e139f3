"""One writer per object in each deployment mode (docs/architecture.md#deployment-modes).

Standalone, this project's process runs every controller; dropped in beside machine-api-operator (MAO), it runs
only the actuator side and the MachineSets' capacity annotations, and MAO's own machineset, nodelink and health-check
controllers (built from MAO's Go module, hack/controlplane/mao.py) do the rest. Either way no field of a MachineSet,
Machine, Node or MachineHealthCheck may be written by two processes (standalone, this project's nodelink and Machine
controller both write a Machine's phase, under the process's one field manager: docs/architecture.md#deployment-modes):
the API server records the writer of every field in `metadata.managedFields` (named after the writer's user agent),
sampled here all along a scale-up. The scenarios themselves (scaling, a deleted Machine replaced, a crashed VM
replaced or power-cycled) run in both modes in test_machineset_vms.py and test_machinehealthcheck.py.
"""

from __future__ import annotations

import json
from collections import defaultdict

from machine_controller.app import COMPONENT
from machine_controller.controllers.machineset.capacity import CAPACITY_ANNOTATIONS
from machine_controller.controllers.machineset.capacity_controller import CAPACITY_FIELD_MANAGER
from machines import STANDALONE, both_modes, unique_name
from test_machinehealthcheck import _machineset, _mhc, _mhc_status
from test_remediation import _wait

OURS = COMPONENT  # the process's user agent, so its field manager
# Field managers are named after MAO's binaries (docs/compatibility.md#machine-api-operators-own-controllers).
MAO_MACHINESET, MAO_NODELINK, MAO_MHC = "machineset", "nodelink-controller", "machine-healthcheck"
# Which controller writes what, dropped in beside MAO (docs/architecture.md#deployment-modes): MAO's MachineSet
# controller creates Machines and owns MachineSet status, its nodelink links Nodes and Machines, its health check
# owns MHC status; this project's process owns the Machine's lifecycle and the Node's providerID.
DROP_IN_WRITERS = {
    ("MachineSet", "status.replicas"): MAO_MACHINESET,
    ("Machine", "spec.providerSpec"): MAO_MACHINESET,
    ("Machine", "status.nodeRef"): MAO_NODELINK,
    ("Machine", "status.phase"): OURS,
    ("Machine", "spec.providerID"): OURS,
    ("Machine", "metadata.finalizers"): OURS,
    ("Node", "metadata.annotations.machine.openshift.io/machine"): MAO_NODELINK,
    ("Node", "spec.providerID"): OURS,
    ("MachineHealthCheck", "status.currentHealthy"): MAO_MHC,
}
# Field manager -> controller process: this project's capacity controller applies the capacity annotations under a
# manager of its own.
PROCESS = {CAPACITY_FIELD_MANAGER: OURS, OURS: OURS, MAO_MACHINESET: MAO_MACHINESET, MAO_NODELINK: MAO_NODELINK,
           MAO_MHC: MAO_MHC}
# A Machine's status.lastUpdated is written by the Machine controller and by nodelink, on OpenShift itself too
# (docs/compatibility.md#machine-api-operators-own-controllers).
SHARED_BY_DESIGN = {("Machine", "status.lastUpdated")}


def _paths(fields: dict) -> set[str]:
    """The fields a managedFields entry owns, as `status.nodeRef` or, in labels and annotations, down to the key
    (`metadata.annotations.machine.openshift.io/machine`); what is deeper counts as its parent."""
    out: set[str] = set()
    for top, sub in fields.items():
        for second, deeper in (sub or {}).items():
            if second == ".":
                continue
            path = f"{top[2:]}.{second[2:]}"
            if path in ("metadata.annotations", "metadata.labels"):
                out |= {f"{path}.{key[2:]}" for key in deeper if key != "."}
            else:
                out.add(path)
    return out


class Writers:
    """Every controller seen owning each field of each kind, accumulated over samples of managedFields."""

    def __init__(self, menv, set_name: str):
        self.menv = menv
        self.set_name = set_name
        self.seen: dict[tuple[str, str], set[str]] = defaultdict(set)

    def _objects(self) -> list[dict]:
        k, ns = self.menv.cluster.kubectl, self.menv.namespace
        kinds = "machinesets,machines,machinehealthchecks"
        items = json.loads(k("-n", ns, "get", kinds, "-o", "json", "--show-managed-fields").stdout)["items"]
        nodes = {((m.get("status") or {}).get("nodeRef") or {}).get("name") for m in items if m["kind"] == "Machine"}
        all_nodes = json.loads(k("get", "nodes", "-o", "json", "--show-managed-fields").stdout)["items"]
        return items + [n for n in all_nodes if n["metadata"]["name"] in nodes]

    def sample(self) -> None:
        for obj in self._objects():
            for entry in obj["metadata"].get("managedFields") or []:
                if entry["manager"] in PROCESS:  # not kubectl, the simulated kubelets or kube-controller-manager
                    for path in _paths(entry.get("fieldsV1") or {}):
                        self.seen[(obj["kind"], path)].add(PROCESS[entry["manager"]])

    def shared(self) -> dict[tuple[str, str], set[str]]:
        return {field: who for field, who in self.seen.items() if len(who) > 1 and field not in SHARED_BY_DESIGN}

    def writer(self, kind: str, path: str) -> str | None:
        who = self.seen.get((kind, path), set())
        return next(iter(who)) if len(who) == 1 else None


def _capacity_writers(menv, set_name: str) -> dict[str, tuple[str | None, set[str]]]:
    """Each capacity annotation of the set: its value, and the field managers that own it."""
    ms = json.loads(menv.cluster.kubectl("-n", menv.namespace, "get", "machineset", set_name, "-o", "json",
                                         "--show-managed-fields").stdout)["metadata"]
    owners: dict[str, set[str]] = defaultdict(set)
    for entry in ms.get("managedFields") or []:
        for key in ((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:annotations") or {}:
            owners[key[2:]].add(entry["manager"])
    return {k: ((ms.get("annotations") or {}).get(k), owners.get(k, set())) for k in CAPACITY_ANNOTATIONS}


def _converged(menv, writers: Writers, n: int) -> bool:
    writers.sample()
    k, ns = menv.cluster.kubectl, menv.namespace
    machines = json.loads(k("-n", ns, "get", "machines", "-o", "json").stdout)["items"]
    running = [m for m in machines if (m.get("status") or {}).get("phase") == "Running"
               and (m["status"].get("nodeRef") or {}).get("name")]
    ms = json.loads(k("-n", ns, "get", "machineset", writers.set_name, "-o", "json").stdout).get("status") or {}
    return (len(machines) == len(running) == n and _mhc_status(menv, "check").get("currentHealthy") == n
            and ms.get("readyReplicas") == n)


@both_modes
def test_every_field_has_exactly_one_writer(menv):
    ours = menv.controller()
    set_name = unique_name("writers")
    _machineset(menv, set_name, 1)
    _mhc(menv, "check", set_name)
    writers = Writers(menv, set_name)
    _wait(lambda: _converged(menv, writers, 1), "1 Running Machine, linked, healthy", 60, menv)
    menv.cluster.kubectl("-n", menv.namespace, "scale", "machineset", set_name, "--replicas=2")
    _wait(lambda: _converged(menv, writers, 2), "2 Running Machines, linked, healthy", 60, menv)

    assert writers.shared() == {}
    # Scale from zero needs the capacity annotations: beside MAO's MachineSet controller, which does not write them,
    # as in standalone, this project's capacity controller writes them, and it alone (docs/compatibility.md#autoscaler).
    capacity = _capacity_writers(menv, set_name)
    assert all(value and owners == {CAPACITY_FIELD_MANAGER} for value, owners in capacity.values()), capacity
    if menv.mode == STANDALONE:
        assert {w for who in writers.seen.values() for w in who} == {OURS}
    else:
        assert {field: writers.writer(*field) for field in DROP_IN_WRITERS} == DROP_IN_WRITERS, dict(writers.seen)
        # This project's process runs no work queue of the controllers MAO runs.
        queues = {line.split('name="', 1)[1].split('"', 1)[0] for line in ours.metrics().splitlines()
                  if line.startswith("workqueue_adds_total{")}
        assert "machineset-capacity" in queues and not queues & {"machineset", "nodelink", "machinehealthcheck"}, \
            queues
