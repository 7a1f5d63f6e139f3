"""The demo's fencing scene: a worker's VM crashes, the MachineHealthCheck notices, the VM is power-cycled through
an OvirtRemediationTemplate, and its Node comes back; shown as a live table (docs/fencing.md)."""

from __future__ import annotations

import json
import time
from typing import Callable

from api.remediation import API_VERSION


def _node_ready(kubectl, name: str) -> str:
    node = json.loads(kubectl("get", "node", name, "-o", "json", show=False))
    return next((c["status"] for c in node["status"].get("conditions", []) if c["type"] == "Ready"), "?")


def power_cycle_template(kubectl, namespace: str) -> dict:
    """The OvirtRemediationTemplate `power-cycle` applied; what a health check's remediationTemplate names."""
    kubectl.apply({"apiVersion": API_VERSION, "kind": "OvirtRemediationTemplate",
                   "metadata": {"name": "power-cycle", "namespace": namespace},
                   "spec": {"template": {"spec": {"strategy": {"retryLimit": 1, "timeoutSeconds": 300}}}}},
                  "power-cycle.yaml  # OvirtRemediationTemplate")
    return {"apiVersion": API_VERSION, "kind": "OvirtRemediationTemplate", "name": "power-cycle"}


def health_check(kubectl, namespace: str, name: str, set_name: str, template: dict | None = None) -> None:
    """A MachineHealthCheck of the set's Machines: Ready Unknown or False for 5 s; its remediation is `template`'s
    (an OvirtRemediationTemplate reference), or the default one (the Machine deleted, the set replaces it)."""
    spec = {"selector": {"matchLabels": {"machine.openshift.io/cluster-api-machineset": set_name}},
            "unhealthyConditions": [{"type": "Ready", "status": s, "timeout": "5s"} for s in ("Unknown", "False")],
            "maxUnhealthy": 1}
    if template:
        spec["remediationTemplate"] = template
    kubectl.apply({"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineHealthCheck",
                   "metadata": {"name": name, "namespace": namespace}, "spec": spec},
                  f"{name}-mhc.yaml  # Ready Unknown/False for 5s -> "
                  + ("power-cycle" if template else "delete the Machine"))


def fencing_scene(kubectl, sim, namespace: str, ms_name: str, say: Callable[[str], None]) -> None:
    machine = next(m for m in kubectl.machines()
                   if m["metadata"].get("labels", {}).get("machine.openshift.io/cluster-api-machineset") == ms_name)
    name = machine["metadata"]["name"]
    node = machine["status"]["nodeRef"]["name"]
    vm_id = machine["metadata"]["annotations"]["VmId"]

    say("Fencing: a MachineHealthCheck whose remediation power-cycles the VM (OvirtRemediationTemplate)")
    template = power_cycle_template(kubectl, namespace)
    health_check(kubectl, namespace, "workers", ms_name, template)
    time.sleep(2)
    kubectl("-n", namespace, "get", "mhc")

    say(f"The VM of {name} crashes (the simulator kills its qemu process)")
    sim.control.crash_vm(vm_id)
    began = time.monotonic()
    last = ""
    seen_request = False
    deadline = began + 180
    while time.monotonic() < deadline:
        machines = kubectl("-n", namespace, "get", "machines", "-o", "wide", show=False).rstrip()
        remediations = kubectl("-n", namespace, "get", "ovirtremediations", show=False).rstrip()
        ready = _node_ready(kubectl, node)
        vm = sim.control.vm(vm_id)["status"]
        table = f"{machines}\n\nNode {node}: Ready={ready}   VM {name}: {vm}\n\n{remediations or 'no OvirtRemediation'}"
        if table != last:
            print(f"[{time.strftime('%H:%M:%S')}] +{time.monotonic() - began:.0f}s\n{table}\n", flush=True)
            last = table
        # A fast cycle can open and close the request between two polls: its events say it happened.
        seen_request = seen_request or bool(remediations) or "RemediationSucceeded" in kubectl(
            "-n", namespace, "get", "events", "--field-selector", f"involvedObject.name={name}",
            "-o", "custom-columns=R:.reason", "--no-headers", show=False)
        if seen_request and ready == "True" and not remediations:
            break
        time.sleep(1.0)
    else:
        raise TimeoutError("the Node did not come back within 180 s")
    print(f"Node {node} Ready again {time.monotonic() - began:.1f}s after the crash; the same Machine {name} "
          "(no replacement); the health check deleted its OvirtRemediation once the Node was healthy.")
    kubectl("-n", namespace, "get", "events", "--field-selector", f"involvedObject.name={name}",
            "--sort-by=.lastTimestamp", "-o", "custom-columns=REASON:.reason,MESSAGE:.message")
