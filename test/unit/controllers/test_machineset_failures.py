"""A MachineSet's creation guard (machineset_failures.py): a template whose Machines fail as invalid makes nothing
until it changes; other failures of new Machines back creation off; a Machine that gets a Node resets it.

The guard is fed Machine watch events (old, new) as the informer hands them over, with a clock the test moves."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from api import keys
from fakes import RecordingEvents
from machine_controller.controllers.machineset.failures import FIRST_DELAY_S, MAX_DELAY_S, CreationGuard, template_hash
from machine_controller.controllers.machineset.reconciler import MachineSetReconciler
from machine_controller.runtime.informer import Store
from test_machineset_expectations import KEY, NS, SAMPLE, FakeRest

SET = "ns/workers"
CURRENT = "aaaaaaaaaa"
INVALID = {"phase": "Failed", "errorReason": "InvalidConfiguration",
           "errorMessage": "spec.providerSpec.value.os_disk.size_gb: Invalid value: 10: must be at least 120 GiB"}
NODE = {"phase": "Running", "nodeRef": {"kind": "Node", "name": "worker-0"}}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def machine(name: str, stamp: str | None = CURRENT, status: dict | None = None, deleting: bool = False) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if stamp is not None:
        meta["annotations"] = {keys.ANNOTATION_TEMPLATE_HASH: stamp}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": dict(status or {})}


def guard() -> tuple[CreationGuard, Clock]:
    clock = Clock()
    return CreationGuard(clock=clock), clock


def test_an_invalid_machine_of_the_current_template_holds_creation_until_the_template_changes():
    g, clock = guard()
    g.observe(SET, CURRENT, machine("m1"), machine("m1", status=INVALID))
    hold = g.hold(SET, CURRENT)
    assert hold is not None and hold.invalid and hold.machine == "m1" and "os_disk.size_gb" in hold.reason
    clock.now += 10 * MAX_DELAY_S
    assert g.hold(SET, CURRENT) is not None  # no time heals it
    g.observe(SET, CURRENT, machine("m2"), machine("m2", status=NODE))
    assert g.hold(SET, CURRENT) is not None  # nor a Machine that runs
    g.observe(SET, CURRENT, machine("m3", None), machine("m3", None, status={"phase": "Failed", "errorMessage": "x"}))
    hold = g.hold(SET, CURRENT)
    assert hold.machine == "m1" and "os_disk.size_gb" in hold.reason  # the proof stays what the set says
    assert g.hold(SET, "bbbbbbbbbb") is None  # a new template does


@pytest.mark.parametrize("stamp", [None, "0123456789"], ids=["unstamped (MAO's or adopted)", "an older template"])
def test_an_invalid_machine_not_of_the_current_template_proves_nothing_of_it(stamp):
    g, clock = guard()
    g.observe(SET, CURRENT, machine("m1", stamp), machine("m1", stamp, status=INVALID))
    hold = g.hold(SET, CURRENT)
    if stamp is None:  # a new Machine that failed all the same: it delays
        assert hold is not None and not hold.invalid and hold.delay_s == FIRST_DELAY_S
        clock.now += FIRST_DELAY_S
    assert g.hold(SET, CURRENT) is None


def test_failures_back_creation_off_exponentially_up_to_the_cap():
    g, clock = guard()
    delays = []
    for i in range(8):
        failed = {"phase": "Failed", "errorReason": "CreateError", "errorMessage": "no host"}
        g.observe(SET, CURRENT, machine(f"m{i}"), machine(f"m{i}", status=failed))
        hold = g.hold(SET, CURRENT)
        assert hold is not None and not hold.invalid and hold.failures == i + 1
        delays.append(hold.delay_s)
    assert delays == [10, 20, 40, 80, 160, 300, 300, 300] and FIRST_DELAY_S == 10 and MAX_DELAY_S == 300
    for i in range(8, 1100):  # days of failures: the back-off stays at its cap
        g.observe(SET, CURRENT, None, machine(f"m{i}", status={"phase": "Failed"}))
    assert g.hold(SET, CURRENT).delay_s == MAX_DELAY_S
    clock.now += 299
    assert g.hold(SET, CURRENT).delay_s == pytest.approx(1)
    clock.now += 1
    assert g.hold(SET, CURRENT) is None


def test_a_failed_machine_is_counted_once_however_many_events_show_it():
    g, _ = guard()
    failed = machine("m1", status=INVALID)
    g.observe(SET, CURRENT, machine("m1"), failed)
    g.observe(SET, CURRENT, failed, failed)  # a resync
    g.observe(SET, CURRENT, failed, machine("m1", status=INVALID, deleting=True))  # the health check deletes it
    g.observe(SET, CURRENT, machine("m1", status=INVALID, deleting=True), None)
    assert g.hold(SET, CURRENT).failures == 1


def test_a_new_machine_deleted_by_someone_else_delays_the_next_but_one_the_set_deletes_does_not():
    g, _ = guard()
    g.chose(SET, "victim")
    g.observe(SET, CURRENT, machine("victim"), machine("victim", deleting=True))
    g.observe(SET, CURRENT, machine("victim", deleting=True), None)
    assert g.hold(SET, CURRENT) is None
    g.observe(SET, CURRENT, machine("nofinalizer"), None)  # gone at once, by a user
    hold = g.hold(SET, CURRENT)
    assert hold is not None and hold.reason == "deleted before it got a node" and not hold.invalid


def test_a_machine_that_had_a_node_is_no_new_machine_failing():
    g, _ = guard()
    ran = machine("m1", status=NODE)
    g.observe(SET, CURRENT, ran, machine("m1", status={**NODE, "phase": "Failed", "errorReason": "CreateError"}))
    g.observe(SET, CURRENT, ran, machine("m1", status=NODE, deleting=True))
    assert g.hold(SET, CURRENT) is None


def test_a_machine_listed_already_deleting_after_a_restart_is_not_counted():
    g, _ = guard()
    g.observe(SET, CURRENT, None, machine("m1", deleting=True))
    assert g.hold(SET, CURRENT) is None


def test_a_machine_that_gets_a_node_resets_the_back_off():
    g, _ = guard()
    g.observe(SET, CURRENT, machine("m1"), machine("m1", status={"phase": "Failed", "errorReason": "CreateError"}))
    assert g.hold(SET, CURRENT) is not None
    g.observe(SET, CURRENT, machine("m2", status={"phase": "Provisioned"}), machine("m2", status=NODE))
    assert g.hold(SET, CURRENT) is None


def test_news_says_each_count_of_failures_once():
    g, _ = guard()
    g.observe(SET, CURRENT, machine("m1"), machine("m1", status={"phase": "Failed"}))
    hold = g.hold(SET, CURRENT)
    assert g.news(SET, hold) and not g.news(SET, g.hold(SET, CURRENT))
    g.observe(SET, CURRENT, machine("m2"), machine("m2", status={"phase": "Failed"}))
    assert g.news(SET, g.hold(SET, CURRENT))


def test_the_template_hash_follows_the_template_only():
    ms = copy.deepcopy(SAMPLE)
    same = copy.deepcopy(ms)
    same["spec"]["replicas"] = 7
    same["status"] = {"replicas": 3}
    assert template_hash(ms) == template_hash(same)
    same["spec"]["template"]["spec"]["providerSpec"]["value"]["memory_mb"] = 1
    assert template_hash(ms) != template_hash(same)


def test_the_default_authority_the_api_server_adds_leaves_the_template_hash_as_it_was():
    ms = copy.deepcopy(SAMPLE)
    defaulted = copy.deepcopy(ms)
    defaulted["spec"]["template"]["spec"]["authoritativeAPI"] = "MachineAPI"
    assert template_hash(ms) == template_hash(defaulted)
    defaulted["spec"]["template"]["spec"]["authoritativeAPI"] = "ClusterAPI"
    assert template_hash(ms) != template_hash(defaulted)


# --- the reconciler with its guard ------------------------------------------------------------------------------


class StatusRest(FakeRest):
    """FakeRest that also keeps the status the reconciler writes."""

    def __init__(self) -> None:
        super().__init__()
        self.status: dict[str, Any] = {}

    def merge_patch(self, resource, name, patch, namespace=None, subresource=None, **kw) -> dict:
        if subresource == "status":
            self.status.update(patch["status"])
        return super().merge_patch(resource, name, patch, namespace, subresource=subresource, **kw)


def reconciler(replicas: int) -> tuple[MachineSetReconciler, StatusRest, Store, Store, RecordingEvents]:
    ms = copy.deepcopy(SAMPLE)
    ms["metadata"].update(namespace=NS, uid="ms-uid", generation=1, resourceVersion="1")
    ms["spec"]["replicas"] = replicas
    machinesets, machines = Store(), Store()
    machinesets.put(ms)
    rest, events = StatusRest(), RecordingEvents()
    return MachineSetReconciler(rest, machinesets, machines, Store(), events), rest, machinesets, machines, events


def created_and_gone(r: MachineSetReconciler, rest: StatusRest, machines: Store) -> dict:
    """The set creates its one Machine, its cache shows it, then the Machine is gone (what its watch saw of it is
    for the test to tell the reconciler)."""
    r.reconcile(KEY)
    (created,) = rest.created
    machines.put(created)
    r.reconcile(KEY)
    machines.remove(f"{NS}/{created['metadata']['name']}")
    return created


def condition(rest: StatusRest) -> dict:
    return next(c for c in rest.status["conditions"] if c["type"] == "TemplateValid")


def test_the_set_stamps_its_machines_and_stops_on_an_invalid_one_until_its_template_changes():
    r, rest, machinesets, machines, events = reconciler(replicas=1)
    created = created_and_gone(r, rest, machines)
    assert created["metadata"]["annotations"][keys.ANNOTATION_TEMPLATE_HASH] == template_hash(machinesets.get(KEY))
    assert condition(rest)["status"] == "True"
    failed = copy.deepcopy(created)
    failed["status"] = dict(INVALID)
    r.observe_machine(created, failed)  # the watch saw it fail before the health check deleted it

    assert r.reconcile(KEY) is None  # nothing to wait for: only a change of the template helps
    assert len(rest.created) == 1
    assert condition(rest)["status"] == "False" and condition(rest)["reason"] == "InvalidConfiguration"
    assert "os_disk.size_gb" in condition(rest)["message"]
    assert [(e.type, e.reason) for e in events.recorded if e.reason != "SuccessfulCreate"] == [
        ("Warning", "InvalidTemplate")]

    fixed = copy.deepcopy(machinesets.get(KEY))
    fixed["spec"]["template"]["spec"]["providerSpec"]["value"]["os_disk"] = {"size_gb": 130}
    fixed["status"] = dict(rest.status)
    machinesets.put(fixed)
    r.reconcile(KEY)
    assert len(rest.created) == 2 and condition(rest)["status"] == "True"


def test_the_set_backs_off_after_a_new_machine_fails_and_says_so_once():
    r, rest, _, machines, events = reconciler(replicas=1)
    created = created_and_gone(r, rest, machines)
    failed = copy.deepcopy(created)
    failed["status"] = {"phase": "Failed", "errorReason": "CreateError", "errorMessage": "no host can run it"}
    r.observe_machine(created, failed)
    r.observe_machine(failed, None)  # deleted: the health check's work

    for _ in range(2):
        result = r.reconcile(KEY)
        assert result is not None and 0 < result.requeue_after <= FIRST_DELAY_S
    assert len(rest.created) == 1 and condition(rest)["status"] == "True"
    backoffs = [e for e in events.recorded if e.reason == "CreateBackoff"]
    assert len(backoffs) == 1 and "no host can run it" in backoffs[0].message


def test_a_machine_of_another_set_of_the_same_name_is_not_this_sets():
    r, rest, _, machines, _ = reconciler(replicas=1)
    created = created_and_gone(r, rest, machines)
    stranger = copy.deepcopy(created)
    stranger["metadata"]["ownerReferences"][0]["uid"] = "another-uid"  # a set deleted and made again
    stranger["status"] = dict(INVALID)
    r.observe_machine(None, stranger)
    r.reconcile(KEY)
    assert len(rest.created) == 2
