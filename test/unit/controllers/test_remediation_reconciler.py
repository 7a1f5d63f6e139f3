"""The remediation (fencing) reconciler, one phase transition per row, against `fakes.FakeApi`, a `FakePower` and
an injected clock (docs/fencing.md is what it implements).

Each row starts from one OvirtRemediation in a given status, its Machine, its Node (maybe Ready, maybe tainted,
maybe with pods) and a VM in a given power state, runs ONE pass at a given second after T0, and checks what a user
sees: the request's phase, conditions, message and status times, the Node's taints, the events, the power actions
sent and the Machine. The fencing-order rows (docs/fencing.md#the-safety-rules-the-code-keeps): no taint but
NoSchedule and no storage release before oVirt confirms the VM off; nothing sent and nothing released on
`unknown`; a stop whose answer was lost is looked at again, never re-sent blindly, and the start waits until it can
no longer land (docs/fencing.md#requests-whose-answer-was-lost); each timeout runs from its documented instant.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import pytest

from api import keys
from api.meta import format_time
from api.remediation import API_VERSION, FINALIZER, OUT_OF_SERVICE_TAINT_KEY, REMEDIATION_TAINT_KEY
from fakes import FakeApi, FakePower, RecordingEvents
from machine_controller.controllers.provider import ActionRefused, PowerState
from machine_controller.controllers.remediation.reconciler import RemediationReconciler, RemediationTiming
from machine_controller.controllers.resources import MACHINES, NODES, PODS, REMEDIATIONS, VOLUME_ATTACHMENTS
from machine_controller.runtime.controller import settle
from machine_controller.runtime.informer import Store

NS = "openshift-machine-api"
NAME = "worker-0"
KEY = f"{NS}/{NAME}"
NODE = "node-0"
PID = "ovirt://9f1c2b7e-0000-4000-8000-000000000001"
T0 = dt.datetime(2026, 11, 28, 12, 0, 0, tzinfo=dt.UTC)
NO_SCHEDULE = REMEDIATION_TAINT_KEY
OUT_OF_SERVICE = OUT_OF_SERVICE_TAINT_KEY
GONE = "<gone>"
ON, OFF, STOPPING, STARTING, UNKNOWN = (PowerState.ON, PowerState.OFF, PowerState.STOPPING, PowerState.STARTING,
                                        PowerState.UNKNOWN)


def t(seconds: float) -> str:
    return format_time(T0 + dt.timedelta(seconds=seconds))


def cond(type_: str, status: str, reason: str, at: float = 0) -> dict:
    return {"type": type_, "status": status, "reason": reason, "lastTransitionTime": t(at)}


def cycle(phase: str, retry: int = 1, **fields: Any) -> dict:
    """A request's status in `phase` of its `retry`-th cycle, begun at T0."""
    return {"phase": phase, "retryCount": retry, "nodeName": NODE, "lastRemediated": t(0), **fields}


def pod(name: str, volume: dict) -> dict:
    return {"metadata": {"name": name, "namespace": "app"},
            "spec": {"nodeName": NODE, "volumes": [{"name": "v", **volume}]}}


CLAIM = {"persistentVolumeClaim": {"claimName": "data"}}
SCRATCH = {"emptyDir": {}}
MACHINESET_OWNER = [{"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet", "name": "workers",
                     "uid": "ms-uid", "controller": True}]


@dataclass
class Row:
    id: str
    status: dict  # the request's status before the pass
    at: float = 0  # the pass runs this many seconds after T0
    power: PowerState | None = ON  # None: the VM no longer exists
    stop_under_way: bool = False  # a stop of ours the engine is still carrying out
    late_stop: bool = False  # a stop of ours reached the engine after our last start
    refuse: dict = field(default_factory=dict)
    vm_name: str | None = None  # the name the VM bears, when not the Machine's
    ready_since: float | None = None  # the Node is Ready since this second (None: not Ready)
    taints: tuple = ()  # on the Node before the pass
    pods: tuple = ()
    attachments: int = 0
    spec: dict = field(default_factory=dict)  # over the request's spec
    machine_owners: list = field(default_factory=list)
    machine_role: str = "worker"
    provider_id: str = PID
    finalizer: bool = True
    deleting: bool = False
    other_power_cycles: int = 0  # other requests with a VM off or being stopped
    # what a user sees after the pass
    phase: str | None = None  # GONE: the request itself is gone
    sent: list = field(default_factory=list)  # power actions that left
    taints_after: set = field(default_factory=set)
    events: set = field(default_factory=set)  # (type, reason) that must be among the events
    not_events: set = field(default_factory=set)
    conditions: dict = field(default_factory=dict)  # type -> (status, reason)
    status_has: dict = field(default_factory=dict)  # field -> value (None: absent)
    message_has: str = ""
    machine_deleted: bool = False
    pods_deleted: bool = False


ROWS = [
    # --- a new request --------------------------------------------------------------------------------------------
    Row("new request without the finalizer: the finalizer first, nothing else", {}, finalizer=False,
        phase=None, status_has={"phase": None}),
    Row("new request, Node Ready: Skipped, nothing tainted or sent", {}, ready_since=-60,
        phase="Skipped", events={("Normal", "NodeHealthy")}, conditions={"Succeeded": ("True", None)}),
    Row("new request, Node not Ready: the cycle begins, nothing tainted or sent before the VM is read", {},
        phase="PoweringOff", events={("Normal", "RemediationStarted")},
        conditions={"PowerOffConfirmed": ("False", "PowerOffPending"), "Processing": ("True", None)},
        status_has={"retryCount": 1, "nodeName": NODE, "lastRemediated": t(0)}),
    Row("another provider's Node: Skipped NotAnOvirtVM, nothing tainted or sent", {},
        provider_id="aws:///us-east-1a/i-0abc", phase="Skipped", events={("Warning", "NotAnOvirtVM")},
        conditions={"Succeeded": ("False", "NotAnOvirtVM")}),
    Row("a providerID naming a VM of another name: Skipped VMNotOwned, taints of the cycle removed",
        cycle("PoweringOff"), vm_name="worker-7", taints=(NO_SCHEDULE,), phase="Skipped",
        events={("Warning", "VMNotOwned")}, conditions={"Succeeded": ("False", "VMNotOwned")}),
    Row("the VM no longer exists: Failed VMGone, its Node not tainted", cycle("PoweringOff"), power=None,
        phase="Failed", events={("Warning", "VMGone")}, conditions={"Succeeded": ("False", "VMGone")}),

    # --- PoweringOff --------------------------------------------------------------------------------------------
    Row("VM on: NoSchedule taint and one stop, its intent and its landing bound recorded; no out-of-service taint",
        cycle("PoweringOff"), at=1, phase="PoweringOff", sent=["power_off"], taints_after={NO_SCHEDULE},
        status_has={"powerOffRequested": t(1)}, message_has="stop sent: oVirt took it"),
    Row("VM unknown: nothing sent, no storage released, PowerStateUnknown", cycle("PoweringOff"), power=UNKNOWN,
        phase="PoweringOff", taints_after={NO_SCHEDULE}, events={("Warning", "PowerStateUnknown")},
        conditions={"PowerOffConfirmed": ("False", "PowerStateUnknown")}),
    Row("VM unknown with a stop recorded: nothing sent again", cycle("PoweringOff", powerOffRequested=t(0)),
        at=200, power=UNKNOWN, phase="PoweringOff", taints_after={NO_SCHEDULE},
        events={("Warning", "PowerStateUnknown")}, not_events={("Normal", "PowerOffConfirmed")}),
    Row("VM down: PowerOffConfirmed, ReleasingStorage; the out-of-service taint waits for the next pass",
        cycle("PoweringOff", powerOffRequested=t(0)), at=5, power=OFF, phase="ReleasingStorage",
        taints_after={NO_SCHEDULE}, events={("Normal", "PowerOffConfirmed")},
        conditions={"PowerOffConfirmed": ("True", None)}),
    Row("VM powering down with no stop of ours recorded: recorded, none sent", cycle("PoweringOff"), power=STOPPING,
        phase="PoweringOff", taints_after={NO_SCHEDULE}, status_has={"powerOffRequested": t(0)}),
    Row("Node Ready again before the stop: Skipped, no stop, its taint removed", cycle("PoweringOff"),
        ready_since=-10, phase="Skipped", events={("Normal", "NodeHealthy")}),
    Row("VM back up from unknown: its Node is given a grace before any stop",
        cycle("PoweringOff", conditions=[cond("PowerOffConfirmed", "False", "PowerStateUnknown")]), at=3,
        phase="PoweringOff", taints_after={NO_SCHEDULE}, events={("Normal", "HostAnswersAgain")},
        conditions={"PowerOffConfirmed": ("False", "HostAnswersAgain")}),
    Row("VM back up from unknown, grace still running: no stop",
        cycle("PoweringOff", conditions=[cond("PowerOffConfirmed", "False", "HostAnswersAgain")]), at=29,
        phase="PoweringOff", taints_after={NO_SCHEDULE}),
    Row("VM back up from unknown, grace over and Node not Ready: the stop is sent",
        cycle("PoweringOff", conditions=[cond("PowerOffConfirmed", "False", "HostAnswersAgain")]), at=30,
        phase="PoweringOff", sent=["power_off"], taints_after={NO_SCHEDULE}),
    Row("every power slot taken: no stop, waits for one", cycle("PoweringOff"), other_power_cycles=3,
        phase="PoweringOff", taints_after={NO_SCHEDULE}, message_has="waiting for a power slot"),

    # --- a stop whose answer was lost: looked at again, never re-sent blindly ----------------------------------
    Row("stop recorded 9 s ago, VM on: not sent again (too recent to show)",
        cycle("PoweringOff", powerOffRequested=t(0)), at=9, phase="PoweringOff", taints_after={NO_SCHEDULE}),
    Row("stop recorded 10 s ago, VM on, no stop of ours at the engine: it never arrived, sent again (PowerOffLost)",
        cycle("PoweringOff", powerOffRequested=t(0)), at=10, phase="PoweringOff", sent=["power_off"],
        taints_after={NO_SCHEDULE}, events={("Warning", "PowerOffLost")}),
    Row("stop recorded 60 s ago, a stop of ours still under way at the engine: none sent",
        cycle("PoweringOff", powerOffRequested=t(0)), at=60, stop_under_way=True, phase="PoweringOff",
        taints_after={NO_SCHEDULE}, not_events={("Warning", "PowerOffLost"), ("Warning", "PowerOffSlow")}),
    Row("stop recorded 60 s ago, VM powering down: none sent",
        cycle("PoweringOff", powerOffRequested=t(0)), at=60, power=STOPPING, phase="PoweringOff",
        taints_after={NO_SCHEDULE}),
    Row("stop recorded 60 s ago, Node Ready meanwhile, stop under way: the stop is not re-judged as lost",
        cycle("PoweringOff", powerOffRequested=t(0)), at=60, stop_under_way=True, ready_since=30,
        phase="PoweringOff", taints_after={NO_SCHEDULE}),
    Row("stop still under way at powerOffTimeoutSeconds: PowerOffSlow, no other stop sent",
        cycle("PoweringOff", powerOffRequested=t(0)), at=120, stop_under_way=True, phase="PoweringOff",
        taints_after={NO_SCHEDULE}, events={("Warning", "PowerOffSlow")},
        message_has="a stop of ours is still under way at oVirt: no other stop was sent"),
    Row("VM still on at powerOffTimeoutSeconds, nothing under way: PowerOffSlow, sent again",
        cycle("PoweringOff", powerOffRequested=t(0)), at=120, phase="PoweringOff", sent=["power_off"],
        taints_after={NO_SCHEDULE}, events={("Warning", "PowerOffSlow")}),
    Row("a stop refused: PowerOffRefused, its intent cleared", cycle("PoweringOff"),
        refuse={"power_off": ActionRefused("VM is locked")}, phase="PoweringOff", sent=["power_off"],
        taints_after={NO_SCHEDULE}, events={("Warning", "PowerOffRefused")},
        status_has={"powerOffRequested": None}),

    # --- ReleasingStorage ---------------------------------------------------------------------------------------
    Row("VM confirmed down: the out-of-service taint goes on, the release is timed",
        cycle("ReleasingStorage", powerOffRequested=t(0)), at=5, power=OFF, taints=(NO_SCHEDULE,),
        phase="ReleasingStorage", taints_after={NO_SCHEDULE, OUT_OF_SERVICE}, status_has={"storageReleased": t(5)}),
    Row("ResourceDeletion: the Node's pods force-deleted, no out-of-service taint",
        cycle("ReleasingStorage", powerOffRequested=t(0)), at=5, power=OFF, taints=(NO_SCHEDULE,),
        spec={"remediationStrategy": "ResourceDeletion"}, pods=(pod("db-0", CLAIM),), phase="ReleasingStorage",
        taints_after={NO_SCHEDULE}, pods_deleted=True),
    Row("VM unknown before the release: nothing released, fenced again",
        cycle("ReleasingStorage", powerOffRequested=t(0)), at=5, power=UNKNOWN, taints=(NO_SCHEDULE,),
        phase="PoweringOff", taints_after={NO_SCHEDULE}, events={("Warning", "VMRunningAgain")},
        status_has={"powerOffRequested": None}),
    Row("VM running again before the release: nothing released, fenced again",
        cycle("ReleasingStorage", powerOffRequested=t(0)), at=5, power=ON, taints=(NO_SCHEDULE,),
        phase="PoweringOff", taints_after={NO_SCHEDULE}, conditions={"PowerOffConfirmed": ("False", "VMRunningAgain")}),
    Row("a pod with a claim is left: the start waits",
        cycle("ReleasingStorage", storageReleased=t(10)), at=20, power=OFF, taints=(NO_SCHEDULE, OUT_OF_SERVICE),
        pods=(pod("db-0", CLAIM),), phase="ReleasingStorage", taints_after={NO_SCHEDULE, OUT_OF_SERVICE},
        message_has="1 pod(s) with volumes"),
    Row("a volume attachment is left: the start waits",
        cycle("ReleasingStorage", storageReleased=t(10)), at=20, power=OFF, taints=(NO_SCHEDULE, OUT_OF_SERVICE),
        attachments=1, phase="ReleasingStorage", taints_after={NO_SCHEDULE, OUT_OF_SERVICE},
        message_has="1 volume attachment(s)"),
    Row("only node-local volumes left: the VM is powered on",
        cycle("ReleasingStorage", storageReleased=t(10)), at=20, power=OFF, taints=(NO_SCHEDULE, OUT_OF_SERVICE),
        pods=(pod("agent", SCRATCH),), phase="PoweringOn", taints_after={NO_SCHEDULE, OUT_OF_SERVICE},
        status_has={"poweringOnSince": t(20)}),
    Row("storage still held 300 s after the release: StorageReleaseSlow, powered on all the same",
        cycle("ReleasingStorage", storageReleased=t(10)), at=310, power=OFF, taints=(NO_SCHEDULE, OUT_OF_SERVICE),
        pods=(pod("db-0", CLAIM),), phase="PoweringOn", taints_after={NO_SCHEDULE, OUT_OF_SERVICE},
        events={("Warning", "StorageReleaseSlow")}),
    Row("a stop whose answer was lost may still land: the start waits for its bound",
        cycle("ReleasingStorage", storageReleased=t(70), powerOffMayLandUntil=t(120)), at=119, power=OFF,
        taints=(NO_SCHEDULE, OUT_OF_SERVICE), phase="ReleasingStorage", taints_after={NO_SCHEDULE, OUT_OF_SERVICE},
        message_has="may still reach oVirt until"),
    Row("the lost stop's bound has passed: PoweringOn, the start's timeout runs from now",
        cycle("ReleasingStorage", storageReleased=t(70), powerOffMayLandUntil=t(120)), at=120, power=OFF,
        taints=(NO_SCHEDULE, OUT_OF_SERVICE), phase="PoweringOn", taints_after={NO_SCHEDULE, OUT_OF_SERVICE},
        status_has={"poweringOnSince": t(120)}),

    # --- PoweringOn ---------------------------------------------------------------------------------------------
    Row("VM down: one start, its intent recorded", cycle("PoweringOn", poweringOnSince=t(100)), at=101, power=OFF,
        taints=(NO_SCHEDULE, OUT_OF_SERVICE), phase="PoweringOn", sent=["power_on"],
        taints_after={NO_SCHEDULE, OUT_OF_SERVICE}, status_has={"powerOnRequested": t(101)}),
    Row("a start recorded 5 s ago, VM still down: not sent again",
        cycle("PoweringOn", poweringOnSince=t(100), powerOnRequested=t(100)), at=105, power=OFF,
        phase="PoweringOn"),
    Row("a start refused: PowerOnRefused, its intent cleared", cycle("PoweringOn", poweringOnSince=t(100)), at=101,
        power=OFF, refuse={"power_on": ActionRefused("no host")}, phase="PoweringOn", sent=["power_on"],
        events={("Warning", "PowerOnRefused")}, status_has={"powerOnRequested": None}),
    Row("VM unknown: no start, PowerStateUnknown", cycle("PoweringOn", poweringOnSince=t(100)), at=101,
        power=UNKNOWN, phase="PoweringOn", events={("Warning", "PowerStateUnknown")}),
    Row("VM starting: WaitingForNode, the Node's timeout from now",
        cycle("PoweringOn", poweringOnSince=t(100), powerOnRequested=t(100)), at=130, power=STARTING,
        phase="WaitingForNode", status_has={"vmStartSeen": t(130), "powerOnRequested": t(100)}),
    Row("not started 599 s after poweringOnSince (the cycle began long before): the start is still tried",
        cycle("PoweringOn", poweringOnSince=t(1000), lastRemediated=t(0)), at=1599, power=OFF,
        spec={"strategy": {"timeoutSeconds": 600, "retryLimit": 2}}, phase="PoweringOn", sent=["power_on"],
        not_events={("Warning", "RemediationRetry")}),
    Row("not started timeoutSeconds after poweringOnSince: the next cycle",
        cycle("PoweringOn", poweringOnSince=t(1000)), at=1600, power=OFF,
        spec={"strategy": {"timeoutSeconds": 600, "retryLimit": 2}}, phase="PoweringOff",
        events={("Warning", "RemediationRetry")}, status_has={"retryCount": 2, "poweringOnSince": None}),
    Row("a start whose answer was lost may still land: the cycle does not give up before its bound",
        cycle("PoweringOn", poweringOnSince=t(0), powerOnRequested=t(500), message="the answer to the start was lost"),
        at=600, power=OFF, spec={"strategy": {"timeoutSeconds": 600, "retryLimit": 2}}, phase="PoweringOn",
        sent=["power_on"], not_events={("Warning", "RemediationRetry")}),
    Row("a start whose answer was lost and that can no longer land: the next cycle",
        cycle("PoweringOn", poweringOnSince=t(0), powerOnRequested=t(500)), at=620, power=OFF,
        spec={"strategy": {"timeoutSeconds": 600, "retryLimit": 2}}, phase="PoweringOff",
        events={("Warning", "RemediationRetry")}),

    # --- WaitingForNode -----------------------------------------------------------------------------------------
    Row("Node Ready since the start: Succeeded, both taints removed",
        cycle("WaitingForNode", powerOnRequested=t(100), vmStartSeen=t(105)), at=140, ready_since=130,
        taints=(NO_SCHEDULE, OUT_OF_SERVICE), phase="Succeeded", events={("Normal", "RemediationSucceeded")},
        conditions={"Succeeded": ("True", None)}),
    Row("Node Ready only from before the start (a stale status): still waiting, taints kept",
        cycle("WaitingForNode", powerOnRequested=t(100), vmStartSeen=t(105)), at=140, ready_since=50,
        taints=(NO_SCHEDULE, OUT_OF_SERVICE), phase="WaitingForNode", taints_after={NO_SCHEDULE, OUT_OF_SERVICE}),
    Row("Node not Ready timeoutSeconds after the start was sent but not after it was seen: still waiting",
        cycle("WaitingForNode", powerOnRequested=t(0), vmStartSeen=t(100)), at=699, taints=(NO_SCHEDULE,),
        phase="WaitingForNode", taints_after={NO_SCHEDULE}, not_events={("Warning", "RemediationEscalated")}),
    Row("a late stop of ours took the repaired VM down: started again, same cycle (LatePowerOff)",
        cycle("WaitingForNode", powerOnRequested=t(100), vmStartSeen=t(105)), at=140, power=OFF, late_stop=True,
        taints=(NO_SCHEDULE,), phase="PoweringOn", taints_after={NO_SCHEDULE}, events={("Warning", "LatePowerOff")},
        status_has={"retryCount": 1, "poweringOnSince": t(140), "powerOnRequested": None}),
    Row("the repaired VM down without a late stop of ours: judged at the timeout, not started again",
        cycle("WaitingForNode", powerOnRequested=t(100), vmStartSeen=t(105)), at=140, power=OFF,
        taints=(NO_SCHEDULE,), phase="WaitingForNode", taints_after={NO_SCHEDULE}),
    Row("timeout with a retry left, inside the cooldown: waits",
        cycle("WaitingForNode", powerOnRequested=t(0), vmStartSeen=t(100)), at=700, taints=(NO_SCHEDULE,),
        spec={"strategy": {"timeoutSeconds": 600, "retryLimit": 2}, "cooldownSeconds": 30},
        phase="WaitingForNode", taints_after={NO_SCHEDULE}, message_has="next power cycle after a cooldown"),
    Row("timeout with a retry left, cooldown over: the next cycle",
        cycle("WaitingForNode", powerOnRequested=t(0), vmStartSeen=t(100)), at=730, taints=(NO_SCHEDULE,),
        spec={"strategy": {"timeoutSeconds": 600, "retryLimit": 2}, "cooldownSeconds": 30},
        phase="PoweringOff", taints_after={NO_SCHEDULE}, events={("Warning", "RemediationRetry")},
        status_has={"retryCount": 2, "powerOffRequested": None, "vmStartSeen": None}),

    # --- escalation ---------------------------------------------------------------------------------------------
    Row("retries spent, a MachineSet's Machine: deleted so that it is replaced",
        cycle("WaitingForNode", powerOnRequested=t(0), vmStartSeen=t(100)), at=700, taints=(NO_SCHEDULE,),
        machine_owners=MACHINESET_OWNER, phase="DeletingMachine", taints_after={NO_SCHEDULE},
        events={("Warning", "RemediationEscalated")},
        conditions={"PermanentNodeDeletionExpected": ("True", None)}, machine_deleted=True),
    Row("retries spent, a Machine without a controller owner: Failed, kept",
        cycle("WaitingForNode", powerOnRequested=t(0), vmStartSeen=t(100)), at=700, taints=(NO_SCHEDULE,),
        phase="Failed", taints_after={NO_SCHEDULE}, events={("Warning", "RemediationFailed")},
        conditions={"Succeeded": ("False", "Exhausted")}, message_has="no controller owner"),
    Row("retries spent, a control-plane Machine: Failed, never deleted",
        cycle("WaitingForNode", powerOnRequested=t(0), vmStartSeen=t(100)), at=700, taints=(NO_SCHEDULE,),
        machine_owners=MACHINESET_OWNER, machine_role="master", phase="Failed", taints_after={NO_SCHEDULE},
        events={("Warning", "RemediationFailed")}, message_has="control-plane"),
    Row("retries spent, onExhaustion None: Failed, kept",
        cycle("WaitingForNode", powerOnRequested=t(0), vmStartSeen=t(100)), at=700, taints=(NO_SCHEDULE,),
        machine_owners=MACHINESET_OWNER, spec={"onExhaustion": "None"}, phase="Failed",
        taints_after={NO_SCHEDULE}, events={("Warning", "RemediationFailed")}),

    # --- the end of a request -----------------------------------------------------------------------------------
    Row("a request deleted mid-cycle: its finalizer removes both taints, then lets it go",
        cycle("ReleasingStorage", storageReleased=t(10)), at=20, power=OFF, deleting=True,
        taints=(NO_SCHEDULE, OUT_OF_SERVICE), phase=GONE),
    Row("a terminal request: nothing more is done", cycle("Succeeded"), at=20, taints=(NO_SCHEDULE,),
        phase="Succeeded", taints_after={NO_SCHEDULE}),
]


def world(row: Row) -> tuple[RemediationReconciler, FakeApi, RecordingEvents, FakePower]:
    api = FakeApi()
    for resource in (REMEDIATIONS, MACHINES, NODES):
        api.cache(resource, Store())
    labels = {keys.LABEL_MACHINE_ROLE: row.machine_role}
    api.seed(MACHINES, {"metadata": {"name": NAME, "namespace": NS, "labels": labels,
                                     "ownerReferences": row.machine_owners},
                        "spec": {"providerID": row.provider_id}, "status": {"nodeRef": {"name": NODE}}})
    ready = ({"type": "Ready", "status": "True", "lastTransitionTime": t(row.ready_since)}
             if row.ready_since is not None else {"type": "Ready", "status": "Unknown", "lastTransitionTime": t(-300)})
    taints = [{"key": k, "effect": "NoSchedule" if k == NO_SCHEDULE else "NoExecute"} for k in row.taints]
    api.seed(NODES, {"metadata": {"name": NODE}, "spec": {"providerID": row.provider_id, "taints": taints},
                     "status": {"conditions": [ready]}})
    for p in row.pods:
        api.seed(PODS, p)
    for i in range(row.attachments):
        api.seed(VOLUME_ATTACHMENTS, {"metadata": {"name": f"csi-{i}"}, "spec": {"nodeName": NODE}})
    spec = {"strategy": {"type": "Reboot", "timeoutSeconds": 600, "retryLimit": 1},
            "remediationStrategy": "OutOfServiceTaint", "powerOffTimeoutSeconds": 120, "cooldownSeconds": 0,
            "onExhaustion": "DeleteMachine", **row.spec}
    meta: dict[str, Any] = {"name": NAME, "namespace": NS, "finalizers": [FINALIZER] if row.finalizer else [],
                            "ownerReferences": [{"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
                                                 "name": NAME, "uid": "m-uid"}]}
    if row.deleting:
        meta["deletionTimestamp"] = t(row.at - 1)
    api.seed(REMEDIATIONS, {"apiVersion": API_VERSION, "kind": "OvirtRemediation", "metadata": meta, "spec": spec,
                            "status": row.status})
    for i in range(row.other_power_cycles):
        api.seed(REMEDIATIONS, {"apiVersion": API_VERSION, "kind": "OvirtRemediation",
                                "metadata": {"name": f"other-{i}", "namespace": NS, "finalizers": [FINALIZER]},
                                "spec": spec, "status": cycle("PoweringOff", powerOffRequested=t(0))})
    power = FakePower(row.power, owner=row.vm_name)
    power.stop_under_way, power.late_stop, power.refuse = row.stop_under_way, row.late_stop, dict(row.refuse)
    events = RecordingEvents()
    reconciler = RemediationReconciler(api, api.cached(REMEDIATIONS), api.cached(MACHINES), api.cached(NODES), power,
                                       events, timing=RemediationTiming(request_timeout_s=60.0),
                                       clock=lambda: T0 + dt.timedelta(seconds=row.at))
    return reconciler, api, events, power


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_remediation_phase_transition(row: Row):
    reconciler, api, events, power = world(row)
    try:
        settle(reconciler.reconcile, KEY)
    except ActionRefused:
        pass  # the engine's refusal goes back to the queue, which owns the backoff

    request = api.object(REMEDIATIONS, NAME, NS)
    status = (request or {}).get("status") or {}
    assert (GONE if request is None else status.get("phase")) == row.phase, status
    assert [verb for verb, _ in power.sent] == row.sent, power.sent
    node_taints = {t_["key"] for t_ in api.object(NODES, NODE)["spec"].get("taints") or []}
    assert node_taints == row.taints_after, node_taints
    seen = set(events.reasons())
    assert row.events <= seen, seen
    assert not row.not_events & seen, seen
    by_type = {c["type"]: c for c in status.get("conditions") or []}
    for type_, (expected, reason) in row.conditions.items():
        assert type_ in by_type, by_type
        assert by_type[type_]["status"] == expected, by_type[type_]
        if reason is not None:
            assert by_type[type_].get("reason") == reason, by_type[type_]
    for name, value in row.status_has.items():
        assert status.get(name) == value, (name, status)
    assert row.message_has in (status.get("message") or ""), status.get("message")
    assert (api.object(MACHINES, NAME, NS) is None) == row.machine_deleted
    if row.pods_deleted:
        assert all(api.object(PODS, p["metadata"]["name"], "app") is None
                   or api.object(PODS, p["metadata"]["name"], "app")["metadata"].get("deletionTimestamp")
                   for p in row.pods)
    if request is not None and not row.finalizer:
        assert request["metadata"]["finalizers"] == [FINALIZER]


def test_the_sent_stop_records_until_when_a_lost_answer_may_land_then_clears_it_once_answered():
    """The intent's write carries the bound (a controller killed waiting for the answer keeps it); once the engine
    answers, nothing of ours is on its way and it goes (docs/fencing.md#requests-whose-answer-was-lost)."""
    row = Row("", cycle("PoweringOff"), at=1)
    reconciler, api, _, power = world(row)
    bounds = []
    original = api.merge_patch

    def watching(resource, name, patch, namespace=None, subresource=None):
        if resource is REMEDIATIONS:
            bounds.append((patch.get("status") or {}).get("powerOffMayLandUntil", "-"))
        return original(resource, name, patch, namespace, subresource=subresource)

    api.merge_patch = watching  # type: ignore[method-assign]
    settle(reconciler.reconcile, KEY)
    assert power.sent == [("power_off", NAME)]
    assert t(121) in bounds and bounds.index(t(121)) < bounds.index(None), bounds
    assert "powerOffMayLandUntil" not in api.object(REMEDIATIONS, NAME, NS)["status"]


@pytest.mark.parametrize("status, power_state", [
    (cycle("PoweringOff"), ON),
    (cycle("PoweringOn", poweringOnSince=t(0)), OFF),
], ids=["stop", "start"])
def test_a_power_action_whose_intent_could_not_be_recorded_is_not_sent(status, power_state):
    """Crash safety (docs/fencing.md#the-safety-rules-the-code-keeps): the intent is written, guarded by the
    request's resourceVersion, before the action leaves. A write that meets a newer version of the request ends the
    pass with a short requeue and nothing sent: the next pass decides from the newer request."""
    reconciler, api, _, power = world(Row("", status, at=1, power=power_state))
    api.fail("PATCH", REMEDIATIONS, 409, name=NAME, reason="Conflict", message="the object has been modified")
    result = settle(reconciler.reconcile, KEY)
    assert power.sent == []
    assert result is not None and 0 < result.requeue_after <= 1, result
    assert "powerOffRequested" not in api.object(REMEDIATIONS, NAME, NS)["status"]
    assert "powerOnRequested" not in api.object(REMEDIATIONS, NAME, NS)["status"]


def test_a_pass_over_a_version_its_own_write_replaced_does_nothing():
    """The informer may hand back the version of the request the controller's own write just replaced (the watch
    event of that write not yet in). Acting on it again would redo what was decided: here taint the Node of a
    request that already ended Skipped, and say NodeHealthy twice (docs/fencing.md#the-safety-rules-the-code-keeps)."""
    reconciler, api, events, power = world(Row("", cycle("PoweringOff"), at=1, ready_since=-60))
    api.freeze_cache(REMEDIATIONS)
    reconciler.reconcile(KEY)
    assert api.object(REMEDIATIONS, NAME, NS)["status"]["phase"] == "Skipped"
    writes, said = list(api.writes()), list(events.recorded)

    assert reconciler.reconcile(KEY) is None  # the cache still has the PoweringOff version
    assert api.writes() == writes and events.recorded == said and power.sent == []
    assert not {t_["key"] for t_ in api.object(NODES, NODE)["spec"].get("taints") or []}
