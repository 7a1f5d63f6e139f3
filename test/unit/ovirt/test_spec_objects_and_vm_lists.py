"""The engine is asked less: lookups are kept (positive answers only, dropped on demand, expiring), and one list of
a cluster's VMs serves every waiting Machine unless it is older than the caller's last action."""

from __future__ import annotations

import threading

import ovirtsdk4.types as types

from machine_controller.ovirt.cluster_vm_lists import ClusterVmLists
from machine_controller.ovirt.spec_objects import SpecObjects
from manual_clock import ManualClock
from vm_list_xml import answer


class _Client:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.templates: dict[str, types.Template] = {}
        self.vms: list[types.Vm] = []

    def template_by_name(self, name: str, cluster_id: str) -> types.Template | None:
        self.calls.append(f"template {name}")
        return self.templates.get(name)

    def cluster_vms(self, cluster_name: str, read) -> list:
        self.calls.append(f"list {cluster_name}")
        return answer(read, self.vms)


def test_a_found_object_is_asked_once_and_again_after_forget_or_expiry():
    client, clock = _Client(), ManualClock()
    client.templates["rhcos"] = types.Template(id="t1", name="rhcos")
    lookups = SpecObjects(client, ttl_s=60, clock=clock)
    assert lookups.template("rhcos", "c1").id == "t1"
    assert lookups.template("rhcos", "c1").id == "t1"
    assert client.calls == ["template rhcos"]

    client.templates["rhcos"] = types.Template(id="t2", name="rhcos")  # recreated under the same name
    lookups.forget()  # what the actuator does when a request that used t1 answers 404
    assert lookups.template("rhcos", "c1").id == "t2"
    clock.t += 61
    lookups.template("rhcos", "c1")
    assert client.calls == ["template rhcos"] * 3


def test_a_missing_object_is_asked_every_time_so_a_new_one_is_seen_at_once():
    client = _Client()
    lookups = SpecObjects(client, clock=ManualClock())
    assert lookups.template("rhcos", "c1") is None
    client.templates["rhcos"] = types.Template(id="t1", name="rhcos")
    assert lookups.template("rhcos", "c1").id == "t1"
    assert len(client.calls) == 2


def test_workers_asking_together_share_one_lookup():
    client = _Client()
    client.templates["rhcos"] = types.Template(id="t1", name="rhcos")
    gate = threading.Event()
    original = client.template_by_name

    def slow(name: str, cluster_id: str) -> types.Template | None:
        gate.wait(2)
        return original(name, cluster_id)
    client.template_by_name = slow  # type: ignore[method-assign]
    lookups = SpecObjects(client, clock=ManualClock())
    threads = [threading.Thread(target=lookups.template, args=("rhcos", "c1")) for _ in range(8)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(5)
    assert client.calls == ["template rhcos"]


def test_one_list_serves_every_vm_of_the_cluster_while_it_is_recent():
    client, clock = _Client(), ManualClock()
    client.vms = [types.Vm(id=f"vm{i}", name=f"worker-{i}", status=types.VmStatus.DOWN) for i in range(3)]
    snaps = ClusterVmLists(client, max_age_s=0.5, clock=clock)
    assert [snaps.by_id("Default", f"vm{i}").name for i in range(3)] == ["worker-0", "worker-1", "worker-2"]
    assert snaps.by_name("Default", "worker-1")[0].id == "vm1"
    assert snaps.by_id("Default", "vm9") is None
    assert client.calls == ["list Default"]
    clock.t += 0.6
    snaps.by_id("Default", "vm0")
    assert client.calls == ["list Default"] * 2


def test_a_list_older_than_the_callers_last_action_is_not_used():
    """A VM started a moment ago must not be judged by a list taken before the start."""
    client, clock = _Client(), ManualClock()
    client.vms = [types.Vm(id="vm0", name="worker-0", status=types.VmStatus.DOWN)]
    snaps = ClusterVmLists(client, max_age_s=10, clock=clock)
    assert snaps.by_id("Default", "vm0").status == types.VmStatus.DOWN
    clock.t += 0.1
    acted = clock()  # the start
    client.vms = [types.Vm(id="vm0", name="worker-0", status=types.VmStatus.WAIT_FOR_LAUNCH)]
    clock.t += 0.1
    assert snaps.by_id("Default", "vm0", fresh_after=acted).status == types.VmStatus.WAIT_FOR_LAUNCH
    assert len(client.calls) == 2
