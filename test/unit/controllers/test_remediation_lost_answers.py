"""Power actions that reach the engine late (docs/fencing.md#requests-whose-answer-was-lost): the remediation
reconciler against `fakes.FakeApi`, a scripted PowerControl and an injected clock.

A stop whose answer was lost may still land until twice the client's timeout after it was sent: the VM is not
started before. A VM stopped after the start by such a stop of ours is started again in the same cycle. A start
whose answer was lost may land as late: the cycle does not give up on the start before. And what the events and
the status say is what was done."""

from __future__ import annotations

import datetime as dt

import pytest

from api.meta import format_time
from api.remediation import API_VERSION, FINALIZER
from fakes import FakeApi, FakePower, RecordingEvents
from machine_controller.controllers.provider import ActionRefused, ActuatorError, PowerState
from machine_controller.controllers.remediation.reconciler import RemediationReconciler, RemediationTiming
from machine_controller.controllers.resources import MACHINES, NODES, REMEDIATIONS
from machine_controller.runtime.informer import Store

NS = "openshift-machine-api"
NAME = "worker-0"
NODE = "node-0"
PID = "ovirt://9f1c2b7e-0000-4000-8000-000000000001"
T0 = dt.datetime(2026, 11, 28, 12, 0, 0, tzinfo=dt.UTC)
CLIENT_TIMEOUT_S = 60.0
LANDS_BY_S = 2 * CLIENT_TIMEOUT_S  # the bound docs/fencing.md decides


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> dt.datetime:
        return self.now

    def at(self, seconds: float) -> None:
        self.now = T0 + dt.timedelta(seconds=seconds)


class LostAnswer(ActuatorError):
    """The client's timeout passed with no answer: the engine may or may not have the request."""


def world(power: FakePower, status: dict | None = None, timeout_s: int = 600,
          power_off_timeout_s: int = 120) -> tuple[RemediationReconciler, FakeApi, RecordingEvents, Clock]:
    api = FakeApi()
    api.cache(REMEDIATIONS, Store())
    api.cache(MACHINES, Store())
    api.cache(NODES, Store())
    api.seed(MACHINES, {"metadata": {"name": NAME, "namespace": NS}, "spec": {"providerID": PID},
                        "status": {"nodeRef": {"name": NODE}}})
    api.seed(NODES, {"metadata": {"name": NODE}, "spec": {"providerID": PID},
                     "status": {"conditions": [{"type": "Ready", "status": "Unknown",
                                                "lastTransitionTime": format_time(T0)}]}})
    api.seed(REMEDIATIONS, {"apiVersion": API_VERSION, "kind": "OvirtRemediation",
                            "metadata": {"name": NAME, "namespace": NS, "finalizers": [FINALIZER]},
                            "spec": {"strategy": {"timeoutSeconds": timeout_s, "retryLimit": 1},
                                     "powerOffTimeoutSeconds": power_off_timeout_s, "cooldownSeconds": 0},
                            "status": status or {}})
    clock = Clock()
    events = RecordingEvents()
    reconciler = RemediationReconciler(api, api.cached(REMEDIATIONS), api.cached(MACHINES), api.cached(NODES), power,
                                       events, timing=RemediationTiming(request_timeout_s=CLIENT_TIMEOUT_S),
                                       clock=clock)
    return reconciler, api, events, clock


def status(api: FakeApi) -> dict:
    return api.object(REMEDIATIONS, NAME, NS).get("status") or {}


def run(reconciler: RemediationReconciler, passes: int = 6) -> None:
    """A few passes at the same instant, as the request's own status writes wake it; lost answers are the queue's."""
    for _ in range(passes):
        try:
            reconciler.reconcile(f"{NS}/{NAME}")
        except LostAnswer:
            pass


def node_ready(api: FakeApi, at: dt.datetime) -> None:
    api.touch(NODES, NODE, change={"status": {"conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": format_time(at)}]}})


def test_a_stop_whose_answer_was_lost_holds_the_start_until_it_can_no_longer_land():
    power = FakePower(PowerState.ON)
    power.answers["power_off"] = [LostAnswer("no answer within the client's timeout")]
    reconciler, api, events, clock = world(power)
    run(reconciler)
    assert power.verbs == ["power_off"]
    sent_at = T0

    # The client gave up; 11 s later nothing shows at the engine, so the stop is sent again and taken at once.
    clock.at(CLIENT_TIMEOUT_S + 11)
    run(reconciler)
    assert power.verbs == ["power_off", "power_off"]
    power.state = PowerState.OFF
    clock.at(CLIENT_TIMEOUT_S + 12)
    run(reconciler)
    assert status(api)["phase"] == "ReleasingStorage"
    assert "power_on" not in power.verbs  # the first stop may still be on its way: it would kill the repaired VM
    assert "may still reach oVirt" in status(api)["message"], status(api)["message"]

    clock.at(LANDS_BY_S - 1)
    run(reconciler)
    assert "power_on" not in power.verbs
    clock.now = sent_at + dt.timedelta(seconds=LANDS_BY_S)
    run(reconciler)
    assert power.verbs.count("power_on") == 1
    assert status(api)["retryCount"] == 1


def repaired() -> tuple[FakePower, RemediationReconciler, FakeApi, RecordingEvents, Clock]:
    """A cycle whose stop and start were taken at once: the VM is up again 5 s in, its Node not yet Ready."""
    power = FakePower(PowerState.ON)
    reconciler, api, events, clock = world(power)
    run(reconciler)
    power.state = PowerState.OFF
    clock.at(3)
    run(reconciler)
    power.state = PowerState.ON
    clock.at(5)
    run(reconciler)
    assert status(api)["phase"] == "WaitingForNode"
    assert power.verbs == ["power_off", "power_on"]
    return power, reconciler, api, events, clock


def test_a_stop_answered_at_once_does_not_hold_the_start():
    power, _, api, _, _ = repaired()
    assert power.verbs == ["power_off", "power_on"]
    assert "powerOffMayLandUntil" not in status(api)  # the engine answered: nothing of ours is on its way


def test_a_vm_stopped_by_our_own_late_stop_after_the_start_is_started_again_in_the_same_cycle():
    power, reconciler, api, events, clock = repaired()

    # A stop of ours, held in transit past every bound, lands on the repaired VM.
    power.state, power.late_stop = PowerState.OFF, True
    clock.at(40)
    run(reconciler, passes=2)
    assert ("Warning", "LatePowerOff") in events.reasons()
    power.late_stop = False  # the start sent again is the last action of ours now
    run(reconciler)
    assert power.verbs == ["power_off", "power_on", "power_on"]
    power.state = PowerState.ON
    clock.at(45)
    run(reconciler)
    node_ready(api, clock.now + dt.timedelta(seconds=20))
    clock.at(70)
    run(reconciler)
    assert status(api)["phase"] == "Succeeded"
    assert status(api)["retryCount"] == 1
    assert ("Warning", "RemediationRetry") not in events.reasons()


def test_a_vm_down_after_the_start_without_a_late_stop_of_ours_is_not_started_again_early():
    """A crash of the new incarnation is the cycle's failure to judge at its timeout, not a late stop."""
    power, reconciler, api, events, clock = repaired()
    power.state = PowerState.OFF
    clock.at(40)
    run(reconciler)
    assert status(api)["phase"] == "WaitingForNode"
    assert power.verbs == ["power_off", "power_on"]


def test_a_start_whose_answer_was_lost_does_not_end_the_cycle_before_it_can_land():
    """The cycle's timeout equals the client's: the start is held in transit, the client gives up just as the
    timeout passes. The cycle waits until the start can no longer land, and the Node's timeout runs from when the
    VM was seen starting."""
    power = FakePower(PowerState.OFF)
    power.answers["power_on"] = [LostAnswer("no answer within the client's timeout")]
    reconciler, api, events, clock = world(power, timeout_s=int(CLIENT_TIMEOUT_S))
    run(reconciler)
    assert power.verbs == ["power_on"]
    clock.at(CLIENT_TIMEOUT_S + 0.5)
    run(reconciler, passes=1)
    assert status(api)["phase"] == "PoweringOn", status(api)
    assert ("Warning", "RemediationRetry") not in events.reasons()
    assert ("Warning", "RemediationEscalated") not in events.reasons()
    # The held start lands.
    power.state = PowerState.STARTING
    clock.at(CLIENT_TIMEOUT_S + 5)
    run(reconciler)
    assert status(api)["phase"] == "WaitingForNode"
    clock.at(CLIENT_TIMEOUT_S + 40)
    run(reconciler)
    assert status(api)["phase"] == "WaitingForNode"  # the Node has its timeoutSeconds from the start that landed
    node_ready(api, clock.now)
    run(reconciler)
    assert status(api)["phase"] == "Succeeded"
    assert status(api)["retryCount"] == 1


def test_a_start_the_engine_never_takes_still_ends_the_cycle():
    """Refusals are answers: nothing is on its way, and the cycle ends at its own timeout."""
    power = FakePower(PowerState.OFF)
    power.answers["power_on"] = [ActionRefused("no host") for _ in range(100)]
    reconciler, api, events, clock = world(power, timeout_s=30)
    for second in range(0, 40, 3):
        clock.at(second)
        try:
            run(reconciler, passes=2)
        except ActionRefused:
            pass
    assert status(api)["phase"] in ("Failed", "DeletingMachine"), status(api)


def test_a_stop_already_under_way_at_the_engine_is_reported_as_not_sent_with_the_real_wait():
    power = FakePower(PowerState.ON)
    reconciler, api, events, clock = world(power, power_off_timeout_s=30)
    run(reconciler)
    assert power.verbs == ["power_off"]
    power.stop_under_way = True
    power.answers["power_off"] = [False, False]
    clock.at(47)
    run(reconciler, passes=1)
    assert power.verbs == ["power_off"]
    slow = [r for r in events.recorded if r.reason == "PowerOffSlow"]
    assert slow, events.reasons()
    assert "47s" in slow[-1].message and "sending it again" not in slow[-1].message, slow[-1].message
    assert "not sent" in slow[-1].message or "no other stop" in slow[-1].message, slow[-1].message
    assert status(api)["message"] != "stop sent", status(api)["message"]


def test_the_stop_sent_again_after_the_power_off_timeout_says_so_with_the_real_wait():
    power = FakePower(PowerState.ON)
    reconciler, api, events, clock = world(power, power_off_timeout_s=30)
    run(reconciler)
    clock.at(52)
    run(reconciler, passes=1)
    assert power.verbs == ["power_off", "power_off"]
    slow = [r for r in events.recorded if r.reason == "PowerOffSlow"]
    assert slow and "52s" in slow[-1].message and "sent it again" in slow[-1].message, [r.message for r in slow]


@pytest.mark.parametrize("value", [0, -1])
def test_the_client_timeout_the_timing_is_given_is_range_checked(value):
    with pytest.raises(ValueError, match="request_timeout_s"):
        RemediationTiming(request_timeout_s=value)


def test_a_node_ready_again_loses_the_taint_put_on_in_the_same_pass():
    """A request whose stop was recorded but never reached the engine (a controller killed before sending it):
    the next pass taints the Node, then finds it Ready again and ends Skipped. The taint it put on a moment before
    is not in the informer's cache yet, so the Node is read afresh for its removal: a Node left NoSchedule after a
    request that did nothing was seen in an e2e run (docs/fencing.md#the-safety-rules-the-code-keeps)."""
    power = FakePower(PowerState.ON)
    reconciler, api, events, clock = world(power, status={
        "phase": "PoweringOff", "retryCount": 1, "nodeName": NODE, "lastRemediated": format_time(T0),
        "powerOffRequested": format_time(T0)})
    api.touch(NODES, NODE, change={"status": {"conditions": [{"type": "Ready", "status": "True",
                                                              "lastTransitionTime": format_time(T0)}]}})
    api.freeze_cache(NODES)  # the cache lags: it never sees the taint this pass writes
    clock.at(60)
    run(reconciler, passes=1)
    assert status(api)["phase"] == "Skipped", status(api)
    assert power.verbs == []
    assert not (api.object(NODES, NODE)["spec"].get("taints") or []), api.object(NODES, NODE)["spec"]
