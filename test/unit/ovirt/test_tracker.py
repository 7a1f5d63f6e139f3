"""What the oVirt actuator remembers of a Machine and its VM (ovirt/tracker.py), and that every path that ends what
an entry is for leaves nothing of it behind."""

from __future__ import annotations

from engine_machines import delete_as_the_queue_would, machine_with_a_down_vm
from machine_controller.controllers.provider import Progress
from machine_controller.ovirt.actuator import OvirtActuator
from machine_controller.ovirt.cluster_vm_lists import ClusterVmLists
from machine_controller.ovirt.errors import OvirtError
from machine_controller.ovirt.tracker import Tracker


def _remembered(tracker: Tracker, *names: str) -> dict[str, set[str]]:
    """The entries that still name any of `names` (Machine keys or VM ids)."""
    return {entry: kept & set(names) for entry, kept in tracker.kept().items() if kept & set(names)}


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _everything_for(tracker: Tracker, key: str, vm_id: str) -> None:
    """Every entry the tracker keeps, written for the Machine `key` and its VM `vm_id` as the actuator's passes do."""
    tracker.created(key, vm_id)
    tracker.acted_on(key, vm_id)
    tracker.looks_in_state(key, vm_id, "image_locked")
    tracker.mark_configured(key, vm_id)
    tracker.mark_os_disk_ok(key, vm_id)
    tracker.seen_without_ip(key, vm_id)
    tracker.plan("provision", key, Progress(done=False, requeue_after=60.0, instance_id=vm_id))
    tracker.plan("delete", key, Progress(done=False, requeue_after=60.0, instance_id=vm_id))
    tracker.deletion_began(key)
    tracker.removal_accepted(key, vm_id)


def _all_entries(tracker: Tracker) -> set[str]:
    return {entry for entry, kept in tracker.kept().items() if kept}


def test_every_entry_is_written_by_the_passes_of_a_machine():
    tracker = Tracker(_Clock())
    _everything_for(tracker, "ns/a", "vm-a")
    # Each entry the tracker has is named here: a new one must be added to `_everything_for` and to `forget`.
    assert _all_entries(tracker) == set(tracker.kept())


def test_forget_leaves_nothing_of_the_machine_nor_of_any_vm_it_acted_on_and_keeps_the_others():
    tracker = Tracker(_Clock())
    _everything_for(tracker, "ns/a", "vm-a")
    tracker.acted_on("ns/a", "vm-a-old")  # a VM the Machine acted on before (one removed behind its back)
    _everything_for(tracker, "ns/b", "vm-b")
    before_b = _remembered(tracker, "ns/b", "vm-b")
    tracker.forget("ns/a")
    assert _remembered(tracker, "ns/a", "vm-a", "vm-a-old") == {}
    assert _remembered(tracker, "ns/b", "vm-b") == before_b
    assert tracker.early("provision", "ns/b", "vm-b") is not None
    tracker.forget("ns/b")
    assert _all_entries(tracker) == set()


def test_forget_of_a_machine_never_seen_is_harmless():
    tracker = Tracker(_Clock())
    tracker.forget("ns/never")
    assert _all_entries(tracker) == set()


def test_provisioned_drops_what_only_provisioning_needed_and_keeps_what_the_status_reads():
    tracker = Tracker(_Clock())
    _everything_for(tracker, "ns/a", "vm-a")
    tracker.provisioned("ns/a", "vm-a")
    assert _all_entries(tracker) == set(tracker.kept()) - {"looks", "configured", "os_disk_ok", "planned"}
    assert not tracker.configured("vm-a") and not tracker.os_disk_ok("vm-a")
    assert tracker.early("provision", "ns/a", "vm-a") is None
    assert tracker.looks_in_state("ns/a", "vm-a", "image_locked") == 0  # counted afresh
    # A status is judged by lists newer than the start, and than a look that found no address.
    assert tracker.acted_at("vm-a") == 100.0 and tracker.without_ip_since("vm-a") == 100.0
    # The created id goes once the Machine records one, as before.
    assert tracker.vm_id_for("ns/a", None) == "vm-a"
    assert tracker.vm_id_for("ns/a", "vm-a") == "vm-a" and "ns/a" not in tracker.kept()["created"]
    tracker.forget("ns/a")
    assert _all_entries(tracker) == set()


def test_each_entry_dropped_on_its_own_path():
    clock = _Clock()
    tracker = Tracker(clock)
    tracker.seen_without_ip("ns/a", "vm-a")
    tracker.seen_with_ip("vm-a")
    assert tracker.without_ip_since("vm-a") is None
    tracker.plan("delete", "ns/a", Progress(done=False, requeue_after=60.0, instance_id="vm-a"))
    tracker.plan("delete", "ns/a", Progress(done=True))
    assert tracker.early("delete", "ns/a", "vm-a") is None and tracker.kept()["planned"] == set()
    tracker.plan("delete", "ns/a", Progress(done=False, requeue_after=60.0, instance_id="vm-a"))
    tracker.plan("provision", "ns/a", Progress(done=False, requeue_after=60.0, instance_id="vm-a"))
    tracker.unplan("ns/a")  # a list that does for it came: its next pass looks at the engine
    assert tracker.kept()["planned"] == set()


def test_deletion_began_is_the_first_look_and_the_removed_vm_is_the_machines_own():
    clock = _Clock()
    tracker = Tracker(clock)
    assert tracker.deletion_began("ns/a") == 100.0
    clock.now = 105.0
    assert tracker.deletion_began("ns/a") == 100.0 and tracker.deleting_since("ns/a") == 100.0
    tracker.removal_accepted("ns/a", "vm-a")
    assert tracker.removed("ns/a", "vm-a") and not tracker.removed("ns/b", "vm-a")
    assert tracker.vm_id_for("ns/a", None) == "vm-a"  # its next look waits for a list newer than the removal
    assert tracker.vm_id_for("ns/b", None) is None


def _removal_answer_lost(sim, conn, ovirt, name: str):
    """A Machine `name` that records no VM id (its VM was made by an earlier process whose writes were lost), an
    actuator, and its first deletion step: the VM, found by its name, removed, and the engine's answer to the ask
    after the removal lost. The list of the cluster's VMs that found it stays recent for 2 s, longer than the wait
    for the next look. Returns the actuator, the Machine, its VM, the engine's VMs service and that step."""
    machine, vm, vms = machine_with_a_down_vm(conn, name, annotated=False)
    actuator = OvirtActuator(ovirt, user_data=lambda ns, name: "{}", vm_lists=ClusterVmLists(ovirt, max_age_s=2.0))
    sim.control.inject_fault(f"/vms/{vm.id}", method="GET", status=400, count=None)
    progress = actuator.delete(machine)
    assert not progress.done and progress.waiting_for == "the VM to be gone"
    return actuator, machine, vm, vms, progress


def test_a_deletion_ended_by_a_list_leaves_nothing_of_the_vm_found_by_its_name(sim_and_client):
    """A Machine that records no VM id (its VM was made by an earlier process whose writes were lost) finds its VM by
    its name. When the engine's answer after the removal is lost, the deletion ends with a list that no longer has
    the VM: nothing of the Machine nor of that VM is kept, or a thousand Machines deleted so would leave a
    thousand VMs' entries behind."""
    sim, ovirt = sim_and_client
    conn = sim.connection()
    try:
        actuator, machine, vm, vms, progress = _removal_answer_lost(sim, conn, ovirt, "worker-g")
        assert _remembered(actuator.tracker, machine.key, vm.id)  # what the deletion needs until it ends
        delete_as_the_queue_would(actuator, machine, progress, retried=(OvirtError,))
        assert vms.list(search="name=worker-g") == []
        assert _remembered(actuator.tracker, machine.key, vm.id) == {}
    finally:
        conn.close()


def test_a_machine_that_records_no_vm_id_is_not_judged_by_a_list_older_than_the_removal_it_sent(sim_and_client):
    """The look after a removal whose answer was lost waits for a list taken after the removal, as it does for a
    Machine that records its VM's id: a list from before it still has the VM, and acting on it again fails (its
    disks are gone: 404) and is reported as a failed deletion."""
    sim, ovirt = sim_and_client
    conn = sim.connection()
    try:
        actuator, machine, vm, vms, progress = _removal_answer_lost(sim, conn, ovirt, "worker-h")
        sim.control.reset_counts()
        delete_as_the_queue_would(actuator, machine, progress)
        counts = sim.control.counts()
        assert "DELETE /vms/{vm}" not in counts and "GET /vms/{vm}/diskattachments" not in counts, counts
    finally:
        conn.close()
