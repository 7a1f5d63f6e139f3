"""The matrix of refused actions per VM status, row by row as the engine refuses them (docs/compatibility.md#vm-states)
(ActionUtils + validators)."""

from __future__ import annotations

import pytest
from ovirtsdk4 import types

from hack.ovirtsim.errors import ApiError
from hack.ovirtsim.statemachine import VmAction, check

S = types.VmStatus
A = VmAction
OK = None

# status: (start, stop, shutdown, reboot, remove, disk extend); OK or the expected 409 detail.
MATRIX = {
    S.DOWN: (OK, "[Cannot stop VM. VM is not running.]", "[Cannot shutdown VM. VM is not running.]",
             "[Cannot reboot VM because the VM is in Down status.]", OK, OK),
    S.IMAGE_LOCKED: ("[Cannot run VM: VM is locked. Please try again in a few minutes.]",
                     "[Cannot stop VM: VM is locked. Please try again in a few minutes.]",
                     "[Cannot shutdown VM: VM is locked. Please try again in a few minutes.]",
                     "[Cannot reboot VM: VM is locked. Please try again in a few minutes.]",
                     "[Cannot remove VM: VM is locked. Please try again in a few minutes.]",
                     "[Cannot extend Virtual Disk: VM is locked. Please try again in a few minutes.]"),
    S.WAIT_FOR_LAUNCH: ("[Cannot run VM because the VM is in Wait For Launch status.]", OK, OK,
                        "[Cannot reboot VM because the VM is in Wait For Launch status.]",
                        "[Cannot remove VM. VM is running.]",
                        "[Cannot extend Virtual Disk because the VM is in Wait For Launch status.]"),
    S.POWERING_UP: ("[Cannot run VM because the VM is in Powering Up status.]", OK, OK, OK,
                    "[Cannot remove VM. VM is running.]",
                    "[Cannot extend Virtual Disk because the VM is in Powering Up status.]"),
    S.UP: ("[Cannot run VM because the VM is in Up status.]", OK, OK, OK, "[Cannot remove VM. VM is running.]", OK),
    S.POWERING_DOWN: ("[Cannot run VM because the VM is in Powering Down status.]", OK, OK,
                      "[Cannot reboot VM because the VM is in Powering Down status.]",
                      "[Cannot remove VM. VM is running.]",
                      "[Cannot extend Virtual Disk because the VM is in Powering Down status.]"),
    S.REBOOT_IN_PROGRESS: ("[Cannot run VM because the VM is in Reboot In Progress status.]", OK, OK,
                           "[Cannot reboot VM because the VM is in Reboot In Progress status.]",
                           "[Cannot remove VM. VM is running.]",
                           "[Cannot extend Virtual Disk because the VM is in Reboot In Progress status.]"),
    S.PAUSED: (OK, OK, OK, "[Cannot reboot VM because the VM is in Paused status.]",
               "[Cannot remove VM. VM is running.]",
               "[Cannot extend Virtual Disk because the VM is in Paused status.]"),
    S.SUSPENDED: (OK, OK, OK, "[Cannot reboot VM because the VM is in Suspended status.]",
                  "[Cannot remove VM that its state is not down. -Please stop the VM first.]", OK),
    S.SAVING_STATE: ("[Cannot run VM because the VM is in Saving State status.]",
                     "[Cannot stop VM because the VM is in Saving State status.]",
                     "[Cannot shutdown VM because the VM is in Saving State status.]",
                     "[Cannot reboot VM because the VM is in Saving State status.]",
                     "[Cannot remove VM. VM is running.]",
                     "[Cannot extend Virtual Disk because the VM is in Saving State status.]"),
    S.NOT_RESPONDING: ("[Cannot run VM because the VM is in Not Responding status.]", OK, OK,
                       "[Cannot reboot VM because the VM is in Not Responding status.]",
                       "[Cannot remove VM. VM is running.]",
                       "[Cannot extend Virtual Disk because the VM is in Not Responding status.]"),
    S.UNKNOWN: ("[Cannot run VM because the VM is in Unknown status.]", "[Cannot stop VM. VM is not running.]",
                "[Cannot shutdown VM. VM is not running.]", "[Cannot reboot VM because the VM is in Unknown status.]",
                "[Cannot remove VM. VM is running.]",
                "[Cannot extend Virtual Disk because the VM is in Unknown status.]"),
}
ACTIONS = (A.START, A.STOP, A.SHUTDOWN, A.REBOOT, A.REMOVE, A.EXTEND_DISK)


@pytest.mark.parametrize("status", list(MATRIX), ids=lambda s: s.value)
@pytest.mark.parametrize("column", range(len(ACTIONS)), ids=[a.name.lower() for a in ACTIONS])
def test_action_is_allowed_or_refused_with_the_engine_message(status, column):
    expected = MATRIX[status][column]
    if expected is OK:
        check(ACTIONS[column], status)
        return
    with pytest.raises(ApiError) as info:
        check(ACTIONS[column], status)
    assert (info.value.status, info.value.reason, info.value.detail) == (409, "Operation Failed", expected)


def test_forced_remove_of_an_image_locked_vm_is_allowed():
    check(A.REMOVE, S.IMAGE_LOCKED, force=True)
