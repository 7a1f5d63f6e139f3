"""The engine's VM status machine: which action is refused in which status, and the timed transitions.

The matrix is `common/ActionUtils.java` plus each command's `validate()` (docs/compatibility.md#vm-states); the messages
are those of 2.2. Transitions (docs/compatibility.md#vm-states) are scheduled on the store's timeline with the profile's
timings:

    create  -> image_locked -> down
    start   -> wait_for_launch -> powering_up -> up
    stop    -> powering_down -> down          (shutdown likewise, slower: the guest shuts down cleanly)
    reboot  -> reboot_in_progress -> up
"""

from __future__ import annotations

import datetime
import time
from enum import Enum

from ovirtsdk4 import types

from hack.ovirtsim.config import Timings
from hack.ovirtsim.errors import Msg, conflict
from hack.ovirtsim.store import Store

S = types.VmStatus


class VmAction(str, Enum):
    """Engine actions; the value is the verb its messages use (`VAR__ACTION__*`)."""

    START = "run"
    STOP = "stop"
    SHUTDOWN = "shutdown"
    REBOOT = "reboot"
    REMOVE = "remove"
    EDIT = "edit"
    EXTEND_DISK = "extend"
    HOTPLUG = "attach"


RUNNING = {S.WAIT_FOR_LAUNCH, S.POWERING_UP, S.UP, S.POWERING_DOWN, S.REBOOT_IN_PROGRESS, S.MIGRATING}
# Statuses in which a guest is executing (the Node's kubelet may run).
GUEST_RUNNING = {S.POWERING_UP, S.UP, S.REBOOT_IN_PROGRESS, S.MIGRATING}


def check(action: VmAction, status: S, force: bool = False) -> None:
    """Raise the engine's 409 if `action` is refused in `status` (docs/compatibility.md#vm-states)."""
    verb = action.value
    if action is VmAction.START:
        if status in (S.DOWN, S.PAUSED, S.SUSPENDED):
            return
        if status is S.IMAGE_LOCKED:
            raise conflict(Msg.vm_locked(verb))
        raise conflict(Msg.vm_status_illegal(verb, status.value))
    if action in (VmAction.STOP, VmAction.SHUTDOWN):
        if status in RUNNING or status in (S.PAUSED, S.SUSPENDED, S.NOT_RESPONDING):
            return
        if status is S.IMAGE_LOCKED:
            raise conflict(Msg.vm_locked(verb))
        if status in (S.SAVING_STATE, S.RESTORING_STATE):
            raise conflict(Msg.vm_status_illegal(verb, status.value))
        raise conflict(Msg.vm_not_running(verb))
    if action is VmAction.REBOOT:
        if status in (S.UP, S.POWERING_UP):
            return
        if status is S.IMAGE_LOCKED:
            raise conflict(Msg.vm_locked(verb))
        raise conflict(Msg.vm_status_illegal(verb, status.value))
    if action is VmAction.REMOVE:
        if status in (S.DOWN, S.UNASSIGNED):
            return
        if status is S.IMAGE_LOCKED:
            if force:
                return
            raise conflict(Msg.vm_locked(verb))
        if status is S.SUSPENDED:
            raise conflict(Msg.VM_REMOVE_NOT_DOWN)
        raise conflict(Msg.vm_is_running(verb))
    if action in (VmAction.EXTEND_DISK, VmAction.HOTPLUG):
        # Disk commands: the message's type is the disk (`VAR__TYPE__DISK`), the status the VM's.
        allowed = (S.DOWN, S.UP, S.SUSPENDED) if action is VmAction.EXTEND_DISK else (S.DOWN, S.UP, S.PAUSED)
        if status in allowed:
            return
        if status is S.IMAGE_LOCKED:
            raise conflict(Msg.vm_locked(verb, "Virtual Disk"))
        raise conflict(Msg.vm_status_illegal(verb, status.value, "Virtual Disk"))
    if action is VmAction.EDIT:
        if status is S.IMAGE_LOCKED:
            raise conflict(Msg.vm_locked(verb))
        return


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _begin(store: Store, vm: types.Vm, status: S) -> int:
    """Enter `status` now and invalidate the transitions of any earlier action."""
    rt = store.vm_runtime(vm.id)
    rt.gen += 1
    vm.status = status
    store.dirty = True
    return rt.gen


def begin_create(store: Store, vm: types.Vm, t: Timings) -> float:
    gen = _begin(store, vm, S.IMAGE_LOCKED)
    store.schedule(t.vm_create, "vm", vm.id, S.DOWN.value, gen)
    return t.vm_create


def begin_start(store: Store, vm: types.Vm, host: types.Host, t: Timings, guest_agent: bool) -> None:
    rt = store.vm_runtime(vm.id)
    resuming = vm.status is S.PAUSED
    gen = _begin(store, vm, S.UP if resuming else S.WAIT_FOR_LAUNCH)
    rt.host_id = host.id
    rt.crashed = False
    rt.graceful_stop = False
    rt.has_agent = guest_agent
    vm.host = types.Host(id=host.id)
    vm.host.href = host.href
    if resuming:
        return
    vm.start_time = _now()
    vm.stop_time = None
    store.schedule(t.wait_for_launch, "vm", vm.id, S.POWERING_UP.value, gen)
    store.schedule(t.wait_for_launch + t.powering_up, "vm", vm.id, S.UP.value, gen)
    # The guest agent starts some time after the engine shows `up` (docs/compatibility.md#status).
    rt.guest_agent_at = (time.time() + t.wait_for_launch + t.powering_up + t.guest_agent) if guest_agent else None


def begin_stop(store: Store, vm: types.Vm, t: Timings, graceful: bool) -> None:
    store.vm_runtime(vm.id).graceful_stop = graceful
    if vm.status in (S.SUSPENDED, S.PAUSED) and not graceful:
        _enter_down(store, vm, _begin(store, vm, S.DOWN), reason=None)
        return
    gen = _begin(store, vm, S.POWERING_DOWN)
    delay = t.powering_down_shutdown if graceful else t.powering_down_stop
    store.schedule(delay, "vm", vm.id, S.DOWN.value, gen)


def begin_reboot(store: Store, vm: types.Vm, t: Timings) -> None:
    gen = _begin(store, vm, S.REBOOT_IN_PROGRESS)
    rt = store.vm_runtime(vm.id)
    store.schedule(t.reboot, "vm", vm.id, S.UP.value, gen)
    rt.guest_agent_at = time.time() + t.reboot + t.guest_agent if rt.has_agent else None


def crash(store: Store, vm: types.Vm, reason: str = "crashed") -> None:
    """The qemu process died (host OOM, guest panic with destroy-on-crash, host reboot): the engine sees the VM
    `down` with an error exit status at once; no shutdown happens inside the guest."""
    gen = _begin(store, vm, S.DOWN)
    store.vm_runtime(vm.id).crashed = True
    store.vm_runtime(vm.id).graceful_stop = False
    _enter_down(store, vm, gen, reason=reason)


def lose_contact(store: Store, vm: types.Vm) -> None:
    """Its host stopped responding: status `unknown`, the guest is unreachable (no agent data)."""
    _begin(store, vm, S.UNKNOWN)
    store.vm_runtime(vm.id).guest_agent_at = None


def regain_contact(store: Store, vm: types.Vm, now: float) -> None:
    """Its host responds again: the VM kept running all along."""
    _begin(store, vm, S.UP)
    rt = store.vm_runtime(vm.id)
    rt.guest_agent_at = now if rt.has_agent else None


def pause(store: Store, vm: types.Vm) -> None:
    """The VM paused itself (e.g. storage I/O error): status `paused`, guest frozen."""
    _begin(store, vm, S.PAUSED)


def _enter_down(store: Store, vm: types.Vm, gen: int, reason: str | None) -> None:
    rt = store.vm_runtime(vm.id)
    vm.status = S.DOWN
    vm.host = None
    vm.stop_time = _now()
    vm.stop_reason = reason
    rt.host_id = None
    rt.guest_agent_at = None
    store.dirty = True


def apply_vm_transition(store: Store, vm: types.Vm, status: str, gen: int) -> bool:
    """Apply a due transition; False if it was stale (an action since then superseded it)."""
    rt = store.vm_runtime(vm.id)
    if rt.gen != gen:
        return False
    if status == S.DOWN.value:
        _enter_down(store, vm, gen, reason=None)
    else:
        vm.status = S(status)
    if vm.status is S.UP:
        rt.first_boot_done = True
    store.dirty = True
    return True
