"""Power actions held in transit past the client's timeout
(docs/fencing.md#requests-whose-answer-was-lost): the engine sees nothing of such a request until it arrives
(`sim.control.delay`), then carries it out. A stop that lands late must not leave the repaired VM off, a start that
lands late must not end the cycle, and neither spends a retry or deletes the Machine. Real API server, simulator and
controller process; stops and starts are counted by the simulator."""

from __future__ import annotations

import time

import pytest

from test_power_actions import _paused, _stays_up
from test_remediation import (
    _counts,
    _events,
    _node,
    _not_ready,
    _phase,
    _ready,
    _remediation,
    _request,
    _running_machine,
    _state,
    _wait,
)

# The client's timeout (--ovirt-timeout) in these tests. Long enough that the stop sent again after it, and a start
# sent as soon as the engine's job of that stop ended, would come before the held stop lands, as they would with
# the default 60 s. A lost request may land until twice this after it was sent.
CLIENT_TIMEOUT_S = 20
LANDS_BY_S = 2 * CLIENT_TIMEOUT_S


def _ended(menv, name: str) -> dict:
    _wait(lambda: _phase(menv, name) in ("Succeeded", "Failed", "DeletingMachine"), "remediation ended", 180, menv)
    return _remediation(menv, name)["status"]


def _repaired_in_one_cycle(menv, name: str, vm_id: str, node: str, landed: float = 0.0) -> None:
    """The request Succeeded in its first cycle, and, once the held request has landed (`landed`, a monotonic
    time), the VM is up, its Node Ready and its Machine neither deleted nor replaced."""
    status = _ended(menv, name)
    time.sleep(max(0.0, landed - time.monotonic()))
    assert status["phase"] == "Succeeded", _state(menv)
    assert status["retryCount"] == 1  # no retry spent
    machine = menv.machine(name)
    assert machine is not None and not machine["metadata"].get("deletionTimestamp")
    assert machine["status"]["phase"] == "Running"
    assert _ready(_node(menv, node)) == "True"
    _stays_up(menv, vm_id, 3)


def test_a_stop_held_past_the_clients_timeout_lands_before_the_start(renv):
    """The client gives up on the stop, nothing shows at the engine, the stop is sent again and the VM goes down
    at once. The first stop is still on its way: it lands 35 s after it was sent, when a VM started as soon as the
    second stop's job ended would be up again. The start waits until the stop can no longer land (twice the
    client's timeout), so the held stop finds the VM down and the repaired VM stays up."""
    menv = renv
    menv.controller(extra_args=(f"--ovirt-timeout={CLIENT_TIMEOUT_S}",))
    name, vm_id, node = _paused(menv)
    stops, starts = _counts(menv, vm_id)
    held = LANDS_BY_S - 5
    menv.sim.control.delay(f"/vms/{vm_id}/stop", held, method="POST")

    began = time.monotonic()
    _request(menv, name)
    _repaired_in_one_cycle(menv, name, vm_id, node, landed=began + held + 1)
    assert _counts(menv, vm_id) == (stops + 2, starts + 1)
    assert _events(menv, name, "PowerOffLost")
    assert not _events(menv, name, "LatePowerOff")


def test_a_stop_held_past_every_bound_that_stops_the_repaired_vm_is_followed_by_a_start_in_the_same_cycle(renv):
    """A stop held longer than the controller waits for: it lands after the start and powers the repaired VM
    off. The engine's job for the stop's correlation id began after our start's, so the controller knows the
    VM was stopped by its own late request and starts it again within the cycle. The guest boots slowly here, so
    the stop lands before the Node is Ready."""
    menv = renv
    control = menv.sim.control
    menv.controller(extra_args=(f"--ovirt-timeout={CLIENT_TIMEOUT_S}",))
    name, vm_id, node = _paused(menv)
    stops, starts = _counts(menv, vm_id)
    boot = control.timings()["powering_up"]
    control.set_timings(powering_up=15.0)
    try:
        control.delay(f"/vms/{vm_id}/stop", LANDS_BY_S + 10, method="POST")
        _request(menv, name)
        _wait(lambda: _events(menv, name, "LatePowerOff"), "the late stop recognised", 90, menv)
        _repaired_in_one_cycle(menv, name, vm_id, node)
    finally:
        control.set_timings(powering_up=boot)
    assert _counts(menv, vm_id) == (stops + 2, starts + 2)


def test_a_start_held_past_the_clients_timeout_does_not_end_the_cycle(renv):
    """The cycle's timeout equals the client's: the client gives up on the start just as the cycle's timeout
    passes, and the held start lands a moment later. The cycle goes on until the start can no longer land, the
    start is sent again, and the Node returns in the same cycle: the Machine is not deleted."""
    menv = renv
    menv.controller(extra_args=(f"--ovirt-timeout={CLIENT_TIMEOUT_S}",))
    name, vm_id, node = _running_machine(menv)
    menv.sim.control.crash_vm(vm_id)
    _not_ready(menv, node)
    stops, starts = _counts(menv, vm_id)
    menv.sim.control.delay(f"/vms/{vm_id}/start", CLIENT_TIMEOUT_S + 2, method="POST")

    began = time.monotonic()
    _request(menv, name, strategy={"timeoutSeconds": CLIENT_TIMEOUT_S, "retryLimit": 1})
    _repaired_in_one_cycle(menv, name, vm_id, node, landed=began + CLIENT_TIMEOUT_S + 3)
    assert _counts(menv, vm_id)[0] == stops  # down already: nothing to stop
    assert not _events(menv, name, "RemediationRetry")


@pytest.mark.parametrize("sent", [True, False], ids=["sent-again", "under-way"])
def test_what_the_events_say_of_a_slow_stop_is_what_was_done(renv, sent):
    """The stop's answer is lost (the client's timeout) and powerOffTimeoutSeconds have passed with the VM not
    down. Held on its way, the engine shows nothing of it: the stop is sent again and the event says so. Taken
    by the engine and slow on its host, its job is under way: nothing is sent and the event says that. Either
    way with the seconds really waited (the client's timeout at least), not powerOffTimeoutSeconds."""
    menv = renv
    menv.controller(extra_args=(f"--ovirt-timeout={CLIENT_TIMEOUT_S}",))
    name, vm_id, node = _paused(menv)
    stops, _ = _counts(menv, vm_id)
    if sent:
        menv.sim.control.delay(f"/vms/{vm_id}/stop", CLIENT_TIMEOUT_S + 2, method="POST")
    else:
        menv.sim.control.slow(f"/vms/{vm_id}/stop", CLIENT_TIMEOUT_S + 2)
    _request(menv, name, powerOffTimeoutSeconds=5)
    assert _ended(menv, name)["phase"] == "Succeeded", _state(menv)
    message = _wait(lambda: _events(menv, name, "PowerOffSlow"), "a PowerOffSlow event", 30, menv)[0]["message"]
    assert "sending it again" not in message, message
    waited = int(message.split(" after the stop")[0].rsplit(" ", 1)[-1].rstrip("s"))
    assert waited >= CLIENT_TIMEOUT_S, message
    if sent:
        assert message.endswith("sent it again"), message
        assert _counts(menv, vm_id)[0] == stops + 2
    else:
        assert message.endswith("no other stop was sent"), message
        assert _counts(menv, vm_id)[0] == stops + 1
