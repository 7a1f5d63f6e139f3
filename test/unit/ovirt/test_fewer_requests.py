"""Requests the actuator no longer makes: a Machine woken by its own writes before its next look asks the engine
nothing, and a VM is added to its affinity group without listing the members first (the add is idempotent)."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import ovirtsdk4.types as types
import pytest

from engine_machines import delete_as_the_queue_would, machine_with_a_down_vm
from hack import ovirt_install
from machine_controller.controllers.provider import Progress
from machine_controller.ovirt.client import OvirtClient
from machine_controller.ovirt.cluster_vm_lists import WAKE_FALLBACK_S, ClusterVmLists, NotYet
from machine_controller.ovirt.errors import BadRequestError, OvirtError
from machine_controller.ovirt.tracker import Tracker
from machine_controller.ovirt.vm_list_reader import VmListReader
from vm_list_xml import answer


def test_a_call_before_the_planned_look_gets_the_last_answer_with_the_time_left():
    polls = Tracker(time.monotonic)
    said = Progress(done=False, requeue_after=5.0, waiting_for="the VM to boot", instance_id="vm1",
                    instance_state="powering_up", problem="no host can run it")
    assert polls.plan("provision", "ns/m1", said) is said
    early = polls.early("provision", "ns/m1", "vm1")
    assert early is not None and early.waiting_for == "the VM to boot" and early.instance_state == "powering_up"
    assert 4.5 < early.requeue_after <= 5.0
    assert early.problem is None  # reported once, at the look that found it
    # Another verb (the Machine was deleted meanwhile) and another VM look at once.
    assert polls.early("delete", "ns/m1", "vm1") is None
    assert polls.early("provision", "ns/m1", "vm2") is None
    # Another Machine naming the same VM (a copied manifest) is never told what this one was.
    assert polls.early("provision", "ns/m2", "vm1") is None
    polls.forget("ns/m1")
    assert polls.early("provision", "ns/m1", "vm1") is None


def test_once_the_planned_time_has_come_the_engine_is_asked_again():
    polls = Tracker(time.monotonic)
    polls.plan("delete", "ns/m1", Progress(done=False, requeue_after=0.05, instance_id="vm1"))
    time.sleep(0.06)
    assert polls.early("delete", "ns/m1", "vm1") is None
    polls.plan("provision", "ns/m1", Progress(done=False, requeue_after=5.0, instance_id="vm1"))
    polls.plan("provision", "ns/m1", Progress(done=True, instance_id="vm1"))  # done: nothing is awaited
    assert polls.early("provision", "ns/m1", "vm1") is None


def test_adding_a_member_twice_is_done_once_and_asks_no_member_list(sim_and_client):
    _add_twice(*sim_and_client)


def test_the_cluster_list_is_read_vm_by_vm_into_what_is_kept_and_faults_are_the_sdks(sim_and_client):
    sim, ovirt = sim_and_client
    conn = sim.connection()
    try:
        inst = ovirt_install.prepare(conn, "infra-1")
        vms = conn.system_service().vms_service()
        for name in ("w0", "w1"):
            vms.add(types.Vm(name=name, cluster=types.Cluster(id=inst.cluster_id),
                             template=types.Template(name=inst.template_name)))
        cluster = conn.system_service().clusters_service().cluster_service(inst.cluster_id).get().name
        # Both lists must see the same states: the new VMs' disks unlock a moment after the create.
        deadline = time.monotonic() + 30
        while any(v.status != types.VmStatus.DOWN for v in vms.list(search=f"cluster={cluster}")):
            assert time.monotonic() < deadline, "the new VMs' disks were not unlocked"
            time.sleep(0.1)
        by_sdk = {v.id: v for v in vms.list(search=f"cluster={cluster}",
                                            follow="reported_devices,tags,disk_attachments.disk")}
    finally:
        conn.close()
    kept = ovirt.cluster_vms(cluster, VmListReader)
    assert {v.id: (v.name, v.status) for v in kept} == {i: (v.name, v.status) for i, v in by_sdk.items()}
    disks = {v.id: [a.disk.provisioned_size for a in v.disk_attachments] for v in kept}
    assert disks == {i: [a.disk.provisioned_size for a in v.disk_attachments] for i, v in by_sdk.items()}
    assert all(v.reported_devices is not None and v.tags is not None for v in kept)
    assert all(not hasattr(v, "cpu") and not hasattr(v, "__dict__") for v in kept)  # only what is read
    sim.control.inject_fault("/vms", method="GET", status=400, detail="[Invalid search]", count=1)
    with pytest.raises(BadRequestError, match="Invalid search"):
        ovirt.cluster_vms(cluster, VmListReader)


def _add_twice(sim, ovirt: OvirtClient) -> None:
    conn = sim.connection()
    try:
        inst = ovirt_install.prepare(conn, "infra-1")
        vm = conn.system_service().vms_service().add(types.Vm(
            name="w0", cluster=types.Cluster(id=inst.cluster_id), template=types.Template(name=inst.template_name)))
        groups = conn.system_service().clusters_service().cluster_service(inst.cluster_id).affinity_groups_service()
        group = next(g for g in groups.list() if g.name == inst.affinity_groups[0])
        sim.control.reset_counts()
        ovirt.add_vm_to_affinity_group(inst.cluster_id, group.id, vm.id)
        ovirt.add_vm_to_affinity_group(inst.cluster_id, group.id, vm.id)  # a retry after a lost answer
        members = groups.group_service(group.id).vms_service().list()
    finally:
        conn.close()
    assert [m.id for m in members] == [vm.id]
    counts = sim.control.counts()
    assert counts.get("POST /clusters/{cluster}/affinitygroups/{group}/vms") == 2
    assert counts.get("GET /clusters/{cluster}/affinitygroups/{group}/vms") == 1  # the test's own list only


class _SlowList:
    """A cluster list that takes `cost` seconds of a fake clock, as a list of a thousand VMs does."""

    def __init__(self, clock: list[float], cost: float) -> None:
        self.clock, self.cost, self.lists = clock, cost, 0

    def cluster_vms(self, cluster_name: str, read) -> list:
        self.lists += 1
        self.clock[0] += self.cost
        return answer(read, [types.Vm(id="vm0", name="worker-0", status=types.VmStatus.DOWN)])


def test_a_costly_list_is_recent_for_longer_and_a_caller_that_can_wait_is_told_when_the_next_comes():
    now = [100.0]
    client = _SlowList(now, cost=2.0)
    snaps = ClusterVmLists(client, max_age_s=0.5, cost_factor=1.0, clock=lambda: now[0])
    snaps.by_id("Default", "vm0")  # started at 100, came at 102 after 2 s: recent until 104
    now[0] = 103.5
    assert snaps.by_id("Default", "vm0").status == types.VmStatus.DOWN and client.lists == 1
    acted = 103.6  # e.g. the VM was started after that list
    now[0] = 103.8
    with pytest.raises(NotYet) as wait:
        snaps.by_id("Default", "vm0", fresh_after=acted, may_defer=True)
    # Told to come back when the engine has rested as long as it listed: it lists for us at most half the time.
    assert wait.value.after_s == pytest.approx(0.2) and client.lists == 1
    # A caller that cannot wait (a status read) takes a new list at once.
    snaps.by_id("Default", "vm0", fresh_after=acted)
    assert client.lists == 2
    now[0] += 2.1
    snaps.by_id("Default", "vm0")
    assert client.lists == 3


def test_before_a_create_any_list_may_say_absent_but_a_vm_found_comes_from_a_recent_list():
    now = [100.0]
    client = _SlowList(now, cost=1.0)
    snaps = ClusterVmLists(client, max_age_s=0.5, cost_factor=1.0, clock=lambda: now[0])
    assert snaps.by_name("Default", "worker-1") == [] and client.lists == 1
    now[0] = 500.0  # long after: that list is stale
    assert snaps.by_name("Default", "worker-1", absent_may_be_stale=True) == [] and client.lists == 1
    # A VM of that name in the stale list is not trusted: it may have been removed since.
    assert snaps.by_name("Default", "worker-0", absent_may_be_stale=True)[0].id == "vm0" and client.lists == 2
    # Never for a look that may end in "gone" (a deletion): a stale absence there would leave a VM behind.
    now[0] = 900.0
    assert snaps.by_name("Default", "worker-1") == [] and client.lists == 3



def test_a_create_judged_by_a_stale_list_adopts_the_vm_the_engine_already_has(sim_and_client):
    """The look before a create may use an old list; a VM made since (by an attempt whose answer was lost) is then
    found by the engine's refusal of a second VM of that name and adopted, never duplicated."""
    from api.machine import Machine
    from machine_controller.ovirt.actuator import OvirtActuator

    sim, ovirt = sim_and_client
    conn = sim.connection()
    try:
        inst = ovirt_install.prepare(conn, "infra-1")
        machine = Machine.from_dict(ovirt_install.machine_for(inst, "ns", "worker-a", affinity_groups_names=None))
        now = [100.0]
        actuator = OvirtActuator(ovirt, user_data=lambda ns, name: '{"ignition": {"version": "3.2.0"}}',
                                 vm_lists=ClusterVmLists(ovirt, clock=lambda: now[0]))
        cluster = conn.system_service().clusters_service().cluster_service(inst.cluster_id).get().name
        assert actuator.vm_lists.by_name(cluster, "worker-a") == []  # the cluster's list, before the VM exists
        now[0] += 600.0  # long stale
        vms = conn.system_service().vms_service()
        earlier = vms.add(types.Vm(name="worker-a", cluster=types.Cluster(id=inst.cluster_id),
                                   template=types.Template(name=inst.template_name)))
        sim.control.reset_counts()
        progress = actuator.provision(machine)
        counts = sim.control.counts()
        assert progress.instance_id == earlier.id and not progress.done
        assert [v.id for v in vms.list(search="name=worker-a")] == [earlier.id]
        assert counts.get("POST /vms") == 1  # refused: the name is taken
        assert counts.get("GET /vms") == 1  # the search by name after the refusal; no new list of the cluster
    finally:
        conn.close()


def test_a_caller_that_can_wait_is_not_held_while_a_list_is_taken():
    gate, listing = threading.Event(), threading.Event()

    class _HeldList:
        lists = 0

        def cluster_vms(self, cluster_name, read):
            _HeldList.lists += 1
            listing.set()
            gate.wait(5)
            return answer(read, [types.Vm(id="vm0", name="worker-0", status=types.VmStatus.DOWN)])

    snaps = ClusterVmLists(_HeldList(), max_age_s=0.5)
    taker = threading.Thread(target=lambda: snaps.by_id("Default", "vm0"))
    taker.start()
    try:
        assert listing.wait(5)
        with pytest.raises(NotYet) as wait:
            snaps.by_id("Default", "vm0", may_defer=True)  # returns at once, told when the list should come
        assert 0 < wait.value.after_s <= 0.5
    finally:
        gate.set()
        taker.join(5)
    # Back then, it shares the list that came.
    assert snaps.by_id("Default", "vm0", may_defer=True).name == "worker-0" and _HeldList.lists == 1


def test_while_a_list_is_taken_the_one_before_it_still_serves_those_it_is_new_enough_for():
    gate, listing = threading.Event(), threading.Event()
    now = [100.0]

    class _Lists:
        lists = 0

        def cluster_vms(self, cluster_name, read):
            _Lists.lists += 1
            if _Lists.lists == 2:  # the second list is held until the test lets it go
                listing.set()
                gate.wait(5)
            return answer(read, [types.Vm(id="vm0", name="worker-0", status=types.VmStatus.DOWN)])

    snaps = ClusterVmLists(_Lists(), max_age_s=10.0, clock=lambda: now[0])
    snaps.by_id("Default", "vm0")  # the first list, at 100
    now[0] = 101.0
    # A status read that needs a list newer than its look at 100.5 takes the second one.
    taker = threading.Thread(target=lambda: snaps.by_id("Default", "vm0", fresh_after=100.5))
    taker.start()
    try:
        assert listing.wait(5)
        # A Machine that acted at 99 is served at once by the first list; one that acted at 100.8 waits for
        # the list being taken, which started after its action.
        assert snaps.by_id("Default", "vm0", fresh_after=99.0, may_defer=True).name == "worker-0"
        with pytest.raises(NotYet):
            snaps.by_id("Default", "vm0", fresh_after=100.8, may_defer=True)
    finally:
        gate.set()
        taker.join(5)
    assert _Lists.lists == 2


def _machine_and_actuator(conn, ovirt, name: str):
    """The installer's objects in the engine, the Machine `name` of its sample (in no affinity group) as a dict,
    and an actuator."""
    from machine_controller.ovirt.actuator import OvirtActuator

    inst = ovirt_install.prepare(conn, "infra-1")
    raw = ovirt_install.machine_for(inst, "ns", name, affinity_groups_names=None)
    return raw, OvirtActuator(ovirt, user_data=lambda ns, name: '{"ignition": {"version": "3.2.0"}}')


def test_a_look_from_a_cache_without_the_vm_id_yet_finds_the_vm_just_created(sim_and_client):
    """The Machine's next look may read a cached copy older than the write that recorded its VM's id: the
    actuator remembers what it created, so it neither creates again nor meets the engine's 409."""
    from api.machine import Machine

    sim, ovirt = sim_and_client
    conn = sim.connection()
    try:
        as_cached, actuator = _machine_and_actuator(conn, ovirt, "worker-b")
        first = actuator.provision(Machine.from_dict(as_cached))
        time.sleep(first.requeue_after)
        again = actuator.provision(Machine.from_dict(as_cached))  # no VmId annotation: the cache is behind
        assert again.instance_id == first.instance_id
        assert sim.control.counts().get("POST /vms") == 1
        assert [v.id for v in conn.system_service().vms_service().list(search="name=worker-b")] == [first.instance_id]
    finally:
        conn.close()


def test_the_new_vm_id_is_given_to_record_in_the_status_once_and_found_by_it_from_then_on(sim_and_client):
    """The first step names the VM it created in `provider_status` (the controller writes it with the phase
    Provisioning, docs/architecture.md#from-a-machine-to-a-vm-and-back); a Machine whose status records it is
    told nothing new to record for a state the VM passes through, and its VM is the one of that id."""
    from api.machine import Machine
    from machine_controller.ovirt.actuator import vm_id_of

    sim, ovirt = sim_and_client
    conn = sim.connection()
    try:
        raw, actuator = _machine_and_actuator(conn, ovirt, "worker-c")
        first = actuator.provision(Machine.from_dict(raw))
        assert first.provider_status == {"instanceId": first.instance_id, "instanceState": first.instance_state}
        raw["status"] = {"phase": "Provisioning", "providerStatus": first.provider_status}
        recorded = Machine.from_dict(raw)
        assert vm_id_of(recorded) == first.instance_id
        time.sleep(first.requeue_after)
        again = actuator.provision(recorded)
        assert again.instance_id == first.instance_id and again.provider_status is None
        assert sim.control.counts().get("POST /vms") == 1
        raw["status"]["providerStatus"] = {"instanceId": "not-an-engine-id"}
        assert vm_id_of(Machine.from_dict(raw)) is None  # a value that is no engine id names nothing
    finally:
        conn.close()


class _LaterListsHeld:
    """A cluster's VM lists on the clock `now`: the first takes `first_s`, each later one is held while it is taken
    (it sets `listing`, then waits for `gate`)."""

    def __init__(self, now: list[float], first_s: float, listing: threading.Event, gate: threading.Event) -> None:
        self.now, self.first_s, self.listing, self.gate = now, first_s, listing, gate
        self.lists = 0

    def cluster_vms(self, cluster_name, read):
        self.lists += 1
        if self.lists == 1:
            self.now[0] += self.first_s
        else:
            self.listing.set()
            self.gate.wait(5)
        return answer(read, [types.Vm(id="vm0", name="worker-0", status=types.VmStatus.DOWN)])


@contextmanager
def _while_the_second_list_is_taken(first_s: float, second_from: float):
    """VM snapshots whose first list, from 100 on their clock, took `first_s`, while their second, from
    `second_from`, is being taken (until the block ends); yields them and their clock (a list of one to move)."""
    gate, listing = threading.Event(), threading.Event()
    now = [100.0]
    snaps = ClusterVmLists(_LaterListsHeld(now, first_s, listing, gate), max_age_s=0.5, cost_factor=1.0,
                        clock=lambda: now[0])
    snaps.by_id("Default", "vm0")
    now[0] = second_from
    taker = threading.Thread(target=lambda: snaps.by_id("Default", "vm0"))
    taker.start()
    try:
        assert listing.wait(5)
        yield snaps, now
    finally:
        gate.set()
        taker.join(5)


def test_a_caller_that_acted_after_the_list_being_taken_started_comes_back_when_the_next_may_be_taken():
    """The list being taken started before the caller's action, so it will not do: the caller is told to come
    back when the list after it may be taken (the one being taken has come and been recent for as long as it
    took), not when that older list comes, which would only tell it to wait again."""
    # The first list: 100 -> 102, recent until 104; the second from 104.5.
    with _while_the_second_list_is_taken(2.0, 104.5) as (snaps, now):
        now[0] = 105.0
        with pytest.raises(NotYet) as older:
            snaps.by_id("Default", "vm0", fresh_after=104.8, may_defer=True)
        # It comes at about 106.5 and is recent until about 108.5: the next list may be taken then.
        assert older.value.after_s == pytest.approx(3.5)
        with pytest.raises(NotYet) as newer:
            snaps.by_id("Default", "vm0", fresh_after=104.0, may_defer=True)
        assert newer.value.after_s == pytest.approx(1.5)  # the list being taken will do: when it comes


def test_while_a_list_takes_longer_than_the_last_the_callers_that_wait_for_it_are_not_told_to_come_every_moment():
    # The first list: 100 -> 101, recent until 102; the second from 102.5, longer than 1 s.
    with _while_the_second_list_is_taken(1.0, 102.5) as (snaps, now):
        now[0] = 106.5  # 4 s into it
        with pytest.raises(NotYet) as wait:
            snaps.by_id("Default", "vm0", fresh_after=102.0, may_defer=True)
        assert wait.value.after_s == pytest.approx(1.0)  # a quarter of what it took so far, not a moment


def _until(done, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_a_caller_that_names_itself_is_woken_when_a_list_that_does_for_it_comes_not_told_a_time():
    """At a thousand Machines being deleted, callers told when the list should come came back two dozen times per
    Machine, most of them to be told to wait again (hack/bench/machines.py); woken, they come once."""
    woken: list[str] = []
    # The first list: 100 -> 101, recent until 102; the second from 102.5.
    with _while_the_second_list_is_taken(1.0, 102.5) as (snaps, now):
        snaps.wake_with(woken.extend)
        now[0] = 103.0
        with pytest.raises(NotYet) as wait:
            snaps.by_id("Default", "vm0", fresh_after=102.0, may_defer=True, waiter="ns/worker-0")
        assert wait.value.woken and wait.value.after_s == WAKE_FALLBACK_S  # only in case the wake is lost
        # One that acted after the list being taken started is woken by the list after it.
        with pytest.raises(NotYet) as later:
            snaps.by_id("Default", "vm0", fresh_after=102.8, may_defer=True, waiter="ns/worker-1")
        assert later.value.woken
        assert woken == []  # not before the list has come
    assert woken == ["ns/worker-0"]
    assert snaps.by_id("Default", "vm0", fresh_after=102.0, may_defer=True, waiter="ns/worker-0").name == "worker-0"
    # The second list came at 103 (it took 0.5 s), and is recent until 103.5: the lister takes the next then.
    time.sleep(0.2)
    assert woken == ["ns/worker-0"]
    now[0] = 103.6
    assert _until(lambda: woken == ["ns/worker-0", "ns/worker-1"])
    assert snaps.by_id("Default", "vm0", fresh_after=102.8, may_defer=True, waiter="ns/worker-1").name == "worker-0"


class _TimedLists:
    """A cluster's VM lists (one VM, up) on the clock `now`, each recorded by when it was taken (`at`); the n-th moves
    the clock by `costs[n]` while it is taken; with `fail` set, they fail."""

    def __init__(self, now: list[float], costs: dict[int, float] | None = None) -> None:
        self.now, self.costs = now, costs or {}
        self.at: list[float] = []
        self.fail = threading.Event()

    def cluster_vms(self, cluster_name, read):
        self.at.append(self.now[0])
        if self.fail.is_set():
            raise OvirtError("the engine did not answer")
        self.now[0] += self.costs.get(len(self.at), 0.0)
        return answer(read, [types.Vm(id="vm0", name="worker-0", status=types.VmStatus.UP)])


def _snapshots_that_wake(costs: dict[int, float] | None = None):
    """VM snapshots on a clock at 100 whose callers are woken (into the returned list), and their lists."""
    now = [100.0]
    lists = _TimedLists(now, costs)
    snaps = ClusterVmLists(lists, max_age_s=0.5, clock=lambda: now[0])
    woken: list[str] = []
    snaps.wake_with(woken.extend)
    return snaps, now, lists, woken


def test_a_caller_woken_by_the_first_list_after_a_moment_is_not_looked_at_before():
    """A VM just started is looked at after its poll interval: its Machine asks ahead to be woken by the first list
    taken after then, which the lister takes once that moment has come and the recent list's time is over; before,
    the Machine came back at its poll only to find the recent list too old and ask to be woken."""
    assert ClusterVmLists(_TimedLists([100.0])).wake_by_list("Default", "ns/worker-0", 100.0, 101.0) is None  # no wake
    snaps, now, lists, woken = _snapshots_that_wake()
    snaps.by_id("Default", "vm0")  # a list at 100, recent until 100.5
    fallback = snaps.wake_by_list("Default", "ns/worker-0", 100.0, 101.0)
    assert fallback == pytest.approx(1.0 + WAKE_FALLBACK_S)  # when its list should have come, and the fallback
    now[0] = 100.8
    time.sleep(0.2)
    assert lists.at == [100.0] and woken == []  # its moment has not come
    now[0] = 101.0
    assert _until(lambda: woken == ["ns/worker-0"])
    assert lists.at == [100.0, 101.0]
    assert snaps.by_id("Default", "vm0", fresh_after=101.0, may_defer=True, waiter="ns/worker-0").name == "worker-0"


def test_a_woken_caller_is_served_by_the_list_that_woke_it_though_its_recent_time_is_over():
    """A list wakes hundreds of Machines at a thousand, the last of them seconds later through the work queue: they
    look at the list taken for them, instead of finding it too old and waiting for the next; once, and not for
    ever."""
    snaps, now, lists, woken = _snapshots_that_wake()
    snaps.by_id("Default", "vm0")  # 100, recent until 100.5
    snaps.wake_by_list("Default", "ns/worker-0", 100.0, 100.6)
    snaps.wake_by_list("Default", "ns/worker-1", 100.0, 100.6)
    now[0] = 100.6
    assert _until(lambda: woken == ["ns/worker-0", "ns/worker-1"]) and lists.at == [100.0, 100.6]
    now[0] = 103.0  # its recent time is over
    assert snaps.by_id("Default", "vm0", fresh_after=100.5, may_defer=True, waiter="ns/worker-0").name == "worker-0"
    assert lists.at == [100.0, 100.6]
    # Its second look is judged as any other's: that list is too old, and it takes one.
    snaps.by_id("Default", "vm0", fresh_after=100.5, may_defer=True, waiter="ns/worker-0")
    assert lists.at == [100.0, 100.6, 103.0]
    now[0] = 103.0 + WAKE_FALLBACK_S + 1  # one woken that comes later than the fallback takes a new list too
    snaps.by_id("Default", "vm0", fresh_after=100.5, may_defer=True, waiter="ns/worker-1")
    assert lists.at == [100.0, 100.6, 103.0, 114.0]


def test_the_lister_asleep_is_woken_only_by_a_waiter_due_before_it_would_look_again():
    """A thousand Machines created register a thousand waits; waking the lister at each would make it go through
    all the waiters each time, a cost that grows with the square of the Machines waiting."""
    snaps, now, lists, woken = _snapshots_that_wake()
    notified: list[bool] = []

    class Counting(threading.Condition):
        def wait(self, timeout: float | None = None) -> bool:
            came = super().wait(timeout)
            if came:
                notified.append(came)
            return came
    snaps._due = Counting(snaps._guard)  # before the lister first sleeps on it
    snaps.by_id("Default", "vm0")  # 100, recent until 100.5
    snaps.wake_by_list("Default", "ns/worker-0", 100.0, 105.0)  # the lister starts, and naps until 101
    time.sleep(0.1)
    for i in range(1, 50):
        snaps.wake_by_list("Default", f"ns/worker-{i}", 100.0, 105.0 + i / 100)
    time.sleep(0.1)
    assert notified == [], "waiters due after the lister's own next look woke it"
    snaps.wake_by_list("Default", "ns/early", 100.0, 100.6)  # due before 101: the lister must plan for it
    assert _until(lambda: notified == [True])
    now[0] = 100.6
    assert _until(lambda: woken == ["ns/early"]) and lists.at == [100.0, 100.6]


def test_a_list_that_came_after_a_waiters_moment_wakes_it_whoever_took_it():
    """A status read may take a list just before a waiter's moment: that list started after the waiter's action and
    came after its moment, so it wakes the waiter, which would otherwise wait for that list's recent time to be over
    before the lister may take the next (seconds at a thousand VMs)."""
    snaps, now, lists, woken = _snapshots_that_wake(costs={2: 0.3})  # the status read's list takes 0.3 s
    snaps.by_id("Default", "vm0")  # 100, recent until 100.5
    snaps.wake_by_list("Default", "ns/worker-0", 100.2, 101.0)  # acted at 100.2, looks again from 101
    now[0] = 100.9
    snaps.by_id("Default", "vm0")  # a status read: from 100.9, came at 101.2
    assert _until(lambda: woken == ["ns/worker-0"])
    time.sleep(0.2)
    assert lists.at == [100.0, 100.9]  # and the lister took none for it


def test_a_list_the_lister_fails_to_take_wakes_its_waiters_who_meet_the_failure_in_their_own_look():
    snaps, now, lists, woken = _snapshots_that_wake()
    snaps.by_id("Default", "vm0")
    lists.fail.set()
    snaps.wake_by_list("Default", "ns/worker-0", 100.0, 101.0)
    now[0] = 101.0
    assert _until(lambda: woken == ["ns/worker-0"])
    with pytest.raises(OvirtError):  # its look takes the list itself: the failure goes to its queue's backoff
        snaps.by_id("Default", "vm0", fresh_after=101.0, may_defer=True, waiter="ns/worker-0")


def test_a_list_that_fails_wakes_its_waiters_too_so_they_meet_the_failure_themselves():
    gate, listing = threading.Event(), threading.Event()
    woken: list[str] = []

    class _Failing:
        def cluster_vms(self, cluster_name, read):
            listing.set()
            gate.wait(5)
            raise OvirtError("the engine did not answer")

    snaps = ClusterVmLists(_Failing(), max_age_s=0.5)
    snaps.wake_with(woken.extend)
    failures: list[Exception] = []

    def take() -> None:
        try:
            snaps.by_id("Default", "vm0")
        except OvirtError as e:
            failures.append(e)

    taker = threading.Thread(target=take)
    taker.start()
    try:
        assert listing.wait(5)
        with pytest.raises(NotYet) as wait:
            snaps.by_id("Default", "vm0", may_defer=True, waiter="ns/worker-0")
        assert wait.value.woken
    finally:
        gate.set()
        taker.join(5)
    assert failures and woken == ["ns/worker-0"]


def test_without_a_name_or_a_wake_a_caller_is_told_when_to_come_back():
    with _while_the_second_list_is_taken(1.0, 102.5) as (snaps, now):
        now[0] = 103.0
        with pytest.raises(NotYet) as unnamed_wake:
            snaps.by_id("Default", "vm0", fresh_after=102.0, may_defer=True, waiter="ns/worker-0")  # no wake_with
        snaps.wake_with(lambda keys: None)
        with pytest.raises(NotYet) as unnamed:
            snaps.by_id("Default", "vm0", fresh_after=102.0, may_defer=True)
    assert not unnamed_wake.value.woken and not unnamed.value.woken
    assert unnamed.value.after_s == pytest.approx(0.5)  # when the list being taken should come


def test_a_machine_woken_by_its_list_looks_at_it_rather_than_being_told_its_last_answer_again():
    from machine_controller.ovirt.actuator import OvirtActuator

    woken: list[str] = []
    with _while_the_second_list_is_taken(1.0, 102.5) as (snaps, now):
        actuator = OvirtActuator(None, user_data=lambda ns, name: "{}", vm_lists=snaps)
        actuator.wake_with(woken.append)
        # What the Machine was told at its last look: the list being taken, in (the fallback) 10 s.
        actuator.tracker.plan("delete", "ns/worker-0", Progress(done=False, requeue_after=WAKE_FALLBACK_S,
                                                                instance_id="vm0"))
        assert actuator.tracker.early("delete", "ns/worker-0", "vm0") is not None
        now[0] = 103.0
        with pytest.raises(NotYet):
            snaps.by_id("Default", "vm0", fresh_after=102.0, may_defer=True, waiter="ns/worker-0")
    assert woken == ["ns/worker-0"]
    assert actuator.tracker.early("delete", "ns/worker-0", "vm0") is None  # its next pass looks


def test_a_fresh_status_sees_a_vm_removed_since_the_recent_list(sim_and_client):
    """The Machine controller asks for its instance `fresh` when the Machine's Node vanished or left Ready: the VM
    may have been removed a moment ago, after the list that still serves everyone else was taken."""
    from machine_controller.ovirt.actuator import OvirtActuator

    sim, ovirt = sim_and_client
    conn = sim.connection()
    try:
        machine, vm, vms = machine_with_a_down_vm(conn, "worker-f")
        actuator = OvirtActuator(ovirt, user_data=lambda ns, name: "{}",
                                 vm_lists=ClusterVmLists(ovirt, max_age_s=60.0))  # a list stays recent for a minute
        assert actuator.status(machine).instance_id == vm.id
        vms.vm_service(vm.id).remove()
        assert actuator.status(machine).instance_id == vm.id  # the recent list, taken before the removal
        assert actuator.status(machine, fresh=True) is None
    finally:
        conn.close()


def test_a_deletion_ends_in_the_pass_that_removed_the_vm_once_the_engine_says_it_is_gone(sim_and_client):
    """The engine drops a VM's row before it answers its removal: asked for that id at once it says 404, so the
    Machine's deletion ends in the same pass, without waiting for a list of the cluster taken after the removal."""
    from machine_controller.ovirt.actuator import OvirtActuator

    sim, ovirt = sim_and_client
    conn = sim.connection()
    try:
        machine, vm, vms = machine_with_a_down_vm(conn, "worker-d")
        actuator = OvirtActuator(ovirt, user_data=lambda ns, name: "{}")
        sim.control.reset_counts()
        progress = actuator.delete(machine)
        assert progress.done
        counts = sim.control.counts()
        assert counts.get("DELETE /vms/{vm}") == 1 and counts.get("GET /vms/{vm}") == 1
        assert counts.get("GET /vms") == 1  # the list that found it down, taken after the deletion began
        assert vms.list(search="name=worker-d") == []
    finally:
        conn.close()


def test_a_failed_ask_after_the_removal_leaves_it_to_the_next_list(sim_and_client):
    """The removal is done when the engine accepted it: a failed look at the removed VM is no error of the deletion,
    which ends when a list taken after the removal no longer has the VM."""
    from machine_controller.ovirt.actuator import OvirtActuator

    sim, ovirt = sim_and_client
    conn = sim.connection()
    try:
        machine, vm, vms = machine_with_a_down_vm(conn, "worker-e")
        actuator = OvirtActuator(ovirt, user_data=lambda ns, name: "{}")
        sim.control.inject_fault(f"/vms/{vm.id}", method="GET", status=400, count=None)
        progress = actuator.delete(machine)
        assert not progress.done and progress.waiting_for == "the VM to be gone"
        assert vms.list(search="name=worker-e") == []
        sim.control.reset_counts()
        delete_as_the_queue_would(actuator, machine, progress)
        assert "GET /vms" in sim.control.counts()  # the list that said it is gone
    finally:
        conn.close()


def test_a_machine_that_acted_is_woken_by_the_first_list_after_its_poll_and_not_looked_at_before(sim_and_client):
    """The step after a create needs a list taken after it: the Machine is woken by one taken after its poll
    interval, which serves its next look, instead of coming back at the poll to ask to be woken."""
    from api.machine import Machine

    sim, ovirt = sim_and_client
    conn = sim.connection()
    try:
        raw, actuator = _machine_and_actuator(conn, ovirt, "worker-w")
        woken: list[str] = []
        actuator.wake_with(woken.append)
        first = actuator.provision(Machine.from_dict(raw))
        assert first.waiting_for == "the new VM's disks to be copied"
        assert first.requeue_after >= WAKE_FALLBACK_S  # only in case the wake is lost
        assert _until(lambda: woken == ["ns/worker-w"])
        lists = sim.control.counts().get("GET /vms", 0)
        assert lists >= 1
        raw["status"] = {"phase": "Provisioning", "providerStatus": first.provider_status}
        again = actuator.provision(Machine.from_dict(raw))
        assert again.instance_id == first.instance_id and again.waiting_for != "the next list of the VMs"
        assert sim.control.counts().get("GET /vms", 0) == lists  # served by the list that woke it
    finally:
        conn.close()
