"""Power actions are sent once and only to the target's own VM
(docs/fencing.md#the-safety-rules-the-code-keeps).

A stop whose answer is lost (the engine answers after the client's timeout) is never sent again blindly: the
controller looks at the VM, and at the engine's job for the stop's correlation id, before sending another; a late
first stop must not land on the VM after it was started again. A refused stop (409) is one request, reported once.
And a remediation whose providerID names a VM of another name stops nothing. Real API server, simulator and
controller process; the stops and starts are counted by the simulator.
"""

from __future__ import annotations

import json
import time

import pytest
import yaml

from api.remediation import OUT_OF_SERVICE_TAINT_KEY, REMEDIATION_TAINT_KEY
from machines import unique_name
from test_machine_ownership import _copy_of
from test_remediation import (
    _counts,
    _events,
    _node,
    _not_ready,
    _phase,
    _remediation,
    _request,
    _running_machine,
    _taint_keys,
    _wait,
)

# Short enough for a test, long enough for every other request of a loaded test machine.
CLIENT_TIMEOUT_S = 4


def _refusals(menv, name: str) -> int:
    """How many refused stops the controller reported (an Event's count grows when it repeats)."""
    return sum(e.get("count", 1) for e in _events(menv, name, "PowerOffRefused"))


def _paused(menv) -> tuple[str, str, str]:
    """A running Machine whose VM then hangs (paused): its Node goes not Ready and the VM must be stopped."""
    name, vm_id, node = _running_machine(menv)
    menv.sim.control.pause_vm(vm_id)
    _not_ready(menv, node)
    return name, vm_id, node


def _node_versions(menv, name: str, since: str) -> list[dict]:
    """Every version Node `name` had after resourceVersion `since`, replayed by a watch from it (the API server keeps
    the history until a compaction, minutes away)."""
    out = menv.cluster.kubectl("get", "--raw", f"/api/v1/nodes?watch=1&fieldSelector=metadata.name%3D{name}"
                                               f"&resourceVersion={since}&timeoutSeconds=1").stdout
    return [json.loads(line)["object"] for line in out.splitlines() if line.strip()]


def _stays_up(menv, vm_id: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status = menv.sim.control.vm(vm_id)["status"]
        assert status in ("wait_for_launch", "powering_up", "up"), f"the started VM went {status}"
        time.sleep(0.5)


def test_a_stop_answered_after_the_client_timeout_is_sent_once_and_never_lands_on_the_started_vm(renv):
    menv = renv
    menv.controller(extra_args=(f"--ovirt-timeout={CLIENT_TIMEOUT_S}",))
    name, vm_id, node = _paused(menv)
    stops, starts = _counts(menv, vm_id)
    late = 2.5 * CLIENT_TIMEOUT_S
    menv.sim.control.slow(f"/vms/{vm_id}/stop", late)

    _request(menv, name)
    _wait(lambda: _phase(menv, name) == "Succeeded", "remediation Succeeded", 120, menv)
    assert _counts(menv, vm_id) == (stops + 1, starts + 1)
    # A second stop, had one been sent while the first hung, would land now on the repaired VM.
    _stays_up(menv, vm_id, late)
    assert _counts(menv, vm_id) == (stops + 1, starts + 1)


def test_a_stop_still_running_at_the_engine_is_not_sent_again_when_the_power_off_timeout_passes(renv):
    """The engine took the stop (its job is `started`) but its host is slow to carry it out, longer than the
    request's powerOffTimeoutSeconds: the job says a stop is under way, so no second one is sent."""
    menv = renv
    menv.controller(extra_args=(f"--ovirt-timeout={CLIENT_TIMEOUT_S}",))
    name, vm_id, node = _paused(menv)
    stops, starts = _counts(menv, vm_id)
    menv.sim.control.slow(f"/vms/{vm_id}/stop", 15.0)

    _request(menv, name, powerOffTimeoutSeconds=5)
    _wait(lambda: _phase(menv, name) == "Succeeded", "remediation Succeeded", 120, menv)
    assert _counts(menv, vm_id) == (stops + 1, starts + 1)
    _stays_up(menv, vm_id, 3)


def test_a_refused_stop_is_one_request_and_each_refusal_is_reported(renv):
    """A 409 is the engine's answer, not a lost one: retrying it at once in the client only tripled the refused
    requests and hid them from the remediation, which reports each and tries again on its own schedule."""
    menv = renv
    control = menv.sim.control
    menv.controller()
    name, vm_id, node = _paused(menv)
    stops, _ = _counts(menv, vm_id)
    refused = 3
    rule = control.inject_fault(f"/vms/{vm_id}/stop", method="POST", status=409, count=refused,
                                detail="[Cannot stop VM. Related operation is currently in progress.]")

    _request(menv, name)
    _wait(lambda: _phase(menv, name) == "Succeeded", "remediation Succeeded", 120, menv)
    fired = next(f["fired"] for f in control.faults() if f["id"] == rule)
    assert fired == refused
    assert _counts(menv, vm_id)[0] == stops + refused + 1  # every refused stop, then the one that was taken
    _wait(lambda: _refusals(menv, name) >= refused, f"{refused} refusals reported", 30, menv)
    assert _refusals(menv, name) == refused  # one request per refusal the controller saw, not three


@pytest.mark.parametrize("named_by", ["Machine", "Node"])
def test_a_remediation_whose_provider_id_names_another_vm_stops_nothing(renv, named_by):
    """A Machine copied from another (or a Node, for NodeHealthCheck's requests named after Nodes) carries the other
    one's providerID: the VM found by that id bears another name, so it is not the target's and nothing is sent."""
    menv = renv
    owner_proc = menv.controller()
    owner, owner_vm, owner_node = _running_machine(menv)
    impostor = unique_name("impostor")
    if named_by == "Machine":
        # Only the remediation controller runs: the Machine controller would drop the copied providerID first.
        owner_proc.stop()
        menv.controller(extra_args=("--controllers=remediation",))
        menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(_copy_of(menv, owner, impostor)))
        assert menv.machine(impostor)["spec"]["providerID"] == f"ovirt://{owner_vm}"
    else:
        menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": impostor},
             "spec": {"providerID": f"ovirt://{owner_vm}"}}))
        created = _node(menv, impostor)["metadata"]["resourceVersion"]
    stops, starts = _counts(menv, owner_vm)
    try:
        if named_by == "Machine":
            _request(menv, impostor)
        else:
            menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(
                {"apiVersion": "remediation.ovirt.org/v1alpha1", "kind": "OvirtRemediation",
                 "metadata": {"name": impostor, "namespace": menv.namespace},
                 "spec": {"strategy": {"timeoutSeconds": 60, "retryLimit": 1}, "cooldownSeconds": 0}}))
        _wait(lambda: _phase(menv, impostor) == "Skipped", "remediation Skipped", 60, menv)
        warnings = _wait(lambda: _events(menv, impostor, "VMNotOwned"), "a VMNotOwned event", 30, menv)
        assert warnings[0]["type"] == "Warning"
        assert owner_vm in warnings[0]["message"] and owner in warnings[0]["message"], warnings[0]["message"]
        status = _remediation(menv, impostor)["status"]
        assert owner_vm in status["message"], status
        assert _counts(menv, owner_vm) == (stops, starts)
        assert menv.sim.control.vm(owner_vm)["status"] == "up"
        assert not _taint_keys(_node(menv, owner_node))
        if named_by == "Node":
            # Not even for a moment: no version the impostor Node had since it was made bore a remediation taint
            # (the node lifecycle controller's own taints on a Node without a kubelet are not ours to judge).
            ours = {REMEDIATION_TAINT_KEY, OUT_OF_SERVICE_TAINT_KEY}
            versions = _node_versions(menv, impostor, created)
            assert not any(_taint_keys(n) & ours for n in versions), [sorted(_taint_keys(n)) for n in versions]
    finally:
        if named_by == "Node":
            menv.cluster.kubectl("delete", "node", impostor, "--wait=false", check=False)
