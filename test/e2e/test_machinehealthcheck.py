"""MachineHealthCheck end to end: a MachineSet's VM crashes (or never joins), the check notices after its timeout,
and the Machine is replaced, or, with an OvirtRemediationTemplate, the same VM is power-cycled; with more unhealthy
Machines than maxUnhealthy nothing is touched. Real API server, simulator and controller process; the replacement
and the power cycle also with machine-api-operator's own health check driving this project's actuator side."""

from __future__ import annotations

import json
import time
import urllib.parse
from pathlib import Path

import yaml

from api import keys
from api.remediation import API_VERSION
from hack import ovirt_install
from machines import DROP_IN, STANDALONE, both_modes, unique_name
from test_remediation import _counts, _events, _node, _pod, _ready, _remediation, _wait

REPO = Path(__file__).resolve().parents[2]
# What an admin applies when installing this project's remediator (docs/architecture.md#acting-only-on-what-is-ours):
# the ClusterRole that registers OvirtRemediationTemplate/OvirtRemediation with the ext-remediation aggregation.
REMEDIATOR_ROLE = REPO / "config" / "rbac" / "remediation" / "ext_remediation_aggregate.yaml"

CONDITIONS = [{"type": "Ready", "status": "Unknown", "timeout": "5s"},
              {"type": "Ready", "status": "False", "timeout": "5s"}]


def _machineset(menv, name: str, replicas: int, node_labels: dict[str, str] | None = None, **value) -> None:
    """A MachineSet of the installer's shape; `node_labels` go to its Machines' Nodes (nodelink), `value` into the
    provider spec."""
    ms = ovirt_install.machineset_for(menv.inst, menv.namespace, name, node_labels)
    ms["spec"]["replicas"] = replicas
    ms["spec"]["template"]["spec"]["providerSpec"]["value"].update(value)
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(ms))


def _mhc(menv, name: str, set_name: str, **spec) -> None:
    doc = {"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineHealthCheck",
           "metadata": {"name": name, "namespace": menv.namespace},
           "spec": {"selector": {"matchLabels": {"machine.openshift.io/cluster-api-machineset": set_name}},
                    "unhealthyConditions": CONDITIONS, "nodeStartupTimeout": "10m", **spec}}
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))


def _machines(menv, set_name: str) -> list[dict]:
    selector = urllib.parse.quote(f"{keys.LABEL_MACHINESET}={set_name}")
    return menv.cluster.read(f"/apis/{keys.API_VERSION}/namespaces/{menv.namespace}/machines?labelSelector={selector}")[
        "items"]


def _running(menv, set_name: str, n: int) -> list[dict]:
    def ok():
        ms = [m for m in _machines(menv, set_name) if not m["metadata"].get("deletionTimestamp")]
        running = [m for m in ms if (m.get("status") or {}).get("phase") == "Running"
                   and _ready(_node(menv, m["status"]["nodeRef"]["name"])) == "True"]
        return running if len(ms) == n and len(running) == n else None
    return _wait(ok, f"{n} Running Machines with Ready Nodes", 180, menv)


def _mhc_status(menv, name: str) -> dict:
    out = menv.cluster.kubectl("-n", menv.namespace, "get", "mhc", name, "-o", "json").stdout
    return json.loads(out).get("status") or {}


@both_modes
def test_crashed_vm_is_replaced_by_default(menv):
    menv.controller()
    set_name = unique_name("mhcset")
    _machineset(menv, set_name, 2)
    victim = _running(menv, set_name, 2)[0]
    _mhc(menv, "check", set_name)
    _wait(lambda: _mhc_status(menv, "check").get("currentHealthy") == 2, "both healthy", 60, menv)

    began = time.monotonic()
    menv.sim.control.crash_vm(victim["metadata"]["annotations"]["VmId"])
    _wait(lambda: all(m["metadata"]["name"] != victim["metadata"]["name"] for m in _machines(menv, set_name)),
          "the crashed Machine gone", 120, menv)
    names = {m["metadata"]["name"] for m in _running(menv, set_name, 2)}
    print(f"crash to replacement Running: {time.monotonic() - began:.1f}s")
    assert victim["metadata"]["name"] not in names
    vms = [v for v in menv.sim.control.vms() if v["name"].startswith(set_name + "-")]
    assert sorted(v["name"] for v in vms) == sorted(names)
    assert _events(menv, victim["metadata"]["name"], "MachineDeleted")


def _power_cycled_set(menv, prefix: str, **spec) -> tuple[str, dict]:
    """A MachineSet of one Running Machine under the health check `fence`, whose template power-cycles the VM with
    `spec` (the project's remediator registered as an admin installs it); the controller is started."""
    menv.cluster.wait_established("ovirtremediations.remediation.ovirt.org")
    menv.cluster.kubectl("apply", "-f", str(REMEDIATOR_ROLE))
    menv.controller()
    set_name = unique_name(prefix)
    _machineset(menv, set_name, 1)
    machine = _running(menv, set_name, 1)[0]
    template = {"apiVersion": API_VERSION, "kind": "OvirtRemediationTemplate",
                "metadata": {"name": "power-cycle", "namespace": menv.namespace},
                "spec": {"template": {"spec": spec}}}
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(template))
    _mhc(menv, "fence", set_name, remediationTemplate={"apiVersion": API_VERSION,
                                                       "kind": "OvirtRemediationTemplate", "name": "power-cycle"})
    return set_name, machine


@both_modes
def test_crashed_vm_is_power_cycled_with_the_ovirt_template(menv):
    set_name, machine = _power_cycled_set(menv, "fenceset", strategy={"timeoutSeconds": 120})
    name, vm_id = machine["metadata"]["name"], machine["metadata"]["annotations"]["VmId"]
    node = machine["status"]["nodeRef"]["name"]
    _wait(lambda: _mhc_status(menv, "fence").get("currentHealthy") == 1, "healthy", 60, menv)
    stops, starts = _counts(menv, vm_id)
    requests_before = sum(menv.sim.control.counts().values())

    began = time.monotonic()
    menv.sim.control.crash_vm(vm_id)
    request = _wait(lambda: _remediation(menv, name), "a remediation request named after the Machine", 60, menv)
    assert [o["uid"] for o in request["metadata"]["ownerReferences"]] == [machine["metadata"]["uid"]]
    # Beside MAO, its health check made the request (field manager named after its binary) and this project's
    # remediation controller acts on it (docs/compatibility.md#machine-api-operators-own-controllers).
    writers = {entry["manager"] for entry in request["metadata"]["managedFields"]}
    assert ("machine-healthcheck" in writers) == (menv.mode == DROP_IN), writers
    _wait(lambda: _ready(_node(menv, node)) == "True" and _remediation(menv, name) is None,
          "the Node Ready again and the request deleted", 120, menv)
    elapsed = time.monotonic() - began
    requests = sum(menv.sim.control.counts().values()) - requests_before
    print(f"crash to Node Ready again: {elapsed:.1f}s; oVirt requests meanwhile (all controllers): {requests}")
    assert _counts(menv, vm_id) == (stops, starts + 1)  # crashed: already down, so only a start
    current = _machines(menv, set_name)
    assert [m["metadata"]["name"] for m in current] == [name]  # the same Machine, not a replacement
    assert not _events(menv, name, "MachineDeleted")
    if menv.mode == STANDALONE:  # this project's health check says so in events; MAO's sends none for requests
        assert _events(menv, name, "ExternalRemediationRequested")
        assert _events(menv, name, "ExternalRemediationCompleted")


def _condition(menv, check: str, ctype: str) -> dict | None:
    return next((c for c in _mhc_status(menv, check).get("conditions", []) if c["type"] == ctype), None)


def test_a_template_of_a_kind_no_remediator_registers_is_refused_and_touches_nothing(menv):
    """A PodTemplate as remediation template: the controller's own rights (it deletes Pods when it fences) must not
    be lent to it. Nothing of the derived kind is created or deleted, the check says why, and the crashed Machine
    is left as it is (docs/architecture.md#acting-only-on-what-is-ours)."""
    menv.controller()
    set_name = unique_name("podtplset")
    _machineset(menv, set_name, 1)
    machine = _running(menv, set_name, 1)[0]
    name = machine["metadata"]["name"]
    template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "not-a-remediator",
                                                                        "namespace": menv.namespace},
                "template": {"spec": {"containers": [{"name": "c", "image": "registry.invalid/none"}]}}}
    # Pending for good (no Node has the label): no kubelet or eviction has a say in whether it survives.
    bystander = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": menv.namespace},
                 "spec": {"nodeSelector": {"e2e.example.com/nowhere": "true"},
                          "containers": [{"name": "c", "image": "registry.invalid/none"}]}}
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([template, bystander]))
    uid = _pod(menv, name)["metadata"]["uid"]
    _mhc(menv, "podtpl", set_name, remediationTemplate={"apiVersion": "v1", "kind": "PodTemplate",
                                                        "name": "not-a-remediator"})

    def refused():
        c = _condition(menv, "podtpl", "RemediationAllowed")
        return c if c and c["status"] == "False" and c["reason"] == "RemediationTemplateNotRegistered" else None
    cond = _wait(refused, "RemediationAllowed=False naming the unregistered template", 60, menv)
    assert "PodTemplate" in cond["message"], cond
    assert _events(menv, "podtpl", "RemediationTemplateRefused")

    menv.sim.control.crash_vm(machine["metadata"]["annotations"]["VmId"])
    _wait(lambda: _ready(_node(menv, machine["status"]["nodeRef"]["name"])) != "True", "the Node not Ready", 60,
          menv)
    # Nothing may happen, so there is no condition to wait on: wait past the 5 s condition timeout, after which a
    # request would have been made, and look.
    time.sleep(8)
    pod = _pod(menv, name)
    assert pod is not None and pod["metadata"]["uid"] == uid and not pod["metadata"].get("deletionTimestamp")
    pods = json.loads(menv.cluster.kubectl("-n", menv.namespace, "get", "pods", "-o", "json").stdout)["items"]
    assert [p["metadata"]["name"] for p in pods] == [name]
    assert [m["metadata"]["name"] for m in _machines(menv, set_name)] == [name]
    assert not _events(menv, name, "ExternalRemediationRequested")
    assert refused()


def test_too_many_unhealthy_short_circuits_and_says_why(menv):
    menv.controller()
    set_name = unique_name("shortset")
    _machineset(menv, set_name, 2)
    machines = _running(menv, set_name, 2)
    _mhc(menv, "strict", set_name, maxUnhealthy=0)
    _wait(lambda: _mhc_status(menv, "strict").get("currentHealthy") == 2, "both healthy", 60, menv)
    menv.sim.control.crash_vm(machines[0]["metadata"]["annotations"]["VmId"])

    def restricted():
        conds = {c["type"]: c for c in _mhc_status(menv, "strict").get("conditions", [])}
        c = conds.get("RemediationAllowed")
        return c if c and c["status"] == "False" and c["reason"] == "TooManyUnhealthy" else None
    cond = _wait(restricted, "RemediationAllowed=False", 60, menv)
    assert "unhealthy: 1" in cond["message"]
    assert _events(menv, "strict", "RemediationRestricted")
    # Nothing may happen, so there is no condition to wait on: wait past the 5 s condition timeout, after which a
    # remediation would have been made, and look.
    time.sleep(8)
    assert {m["metadata"]["name"] for m in _machines(menv, set_name)} == {m["metadata"]["name"] for m in machines}
    assert _mhc_status(menv, "strict")["remediationsAllowed"] == 0


def test_machine_without_a_node_after_the_startup_timeout_is_replaced(menv):
    menv.controller()
    broken = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "broken-user-data",
                                                                 "namespace": menv.namespace},
              "stringData": {"userData": '{"ignition": {"version": "banana"}}'}}
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(broken))
    set_name = unique_name("nojoin")
    _machineset(menv, set_name, 1, userDataSecret={"name": "broken-user-data"})
    _mhc(menv, "startup", set_name, nodeStartupTimeout="15s")
    first = _wait(lambda: _machines(menv, set_name), "a Machine", 60, menv)[0]["metadata"]["name"]

    _wait(lambda: first not in {m["metadata"]["name"] for m in _machines(menv, set_name)} and _machines(
        menv, set_name), "the node-less Machine replaced", 120, menv)
    assert _events(menv, first, "MachineDeleted")
    menv.cluster.kubectl("-n", menv.namespace, "delete", "mhc", "startup")
    menv.cluster.kubectl("-n", menv.namespace, "delete", "machineset", set_name, "--wait=false")
