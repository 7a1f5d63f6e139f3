"""No VM is duplicated or left half-built when the controller is killed (SIGKILL) at any step of Create, even
when the engine completes the request whose answer the dead controller never read."""

from __future__ import annotations

import time

import pytest

from machines import unique_name

# The oVirt requests of Create, in order (docs/compatibility.md#creating-a-vm; the sample spec grows the OS disk,
# tags the VM with the infra ID and adds it to the compute affinity group).
CREATE_STEPS = {
    "create_vm": ("POST", "/vms"),
    "grow_os_disk": ("PUT", "/disks/*"),
    "tag": ("POST", "/vms/*/tags"),
    "affinity_group": ("POST", "/clusters/*/affinitygroups/*/vms"),
    "start": ("POST", "/vms/*/start"),
}


@pytest.mark.parametrize("step", list(CREATE_STEPS))
def test_killing_the_controller_at_each_create_step_leaves_one_vm_and_a_running_machine(menv, step):
    method, path = CREATE_STEPS[step]
    control = menv.sim.control
    # Hold the step's request in the engine, kill the controller while it waits for the answer; the engine then
    # carries the request out anyway, as a real one does with a client that went away.
    rule = control.delay(path, 3.0, method=method, count=1)
    first = menv.controller()
    name = menv.create_machine(unique_name())
    deadline = time.monotonic() + 60
    while not any(r["id"] == rule and r["fired"] for r in control.faults()):
        assert time.monotonic() < deadline, f"the controller never reached {method} {path}\n{menv.controller_logs()}"
        time.sleep(0.05)
    first.kill()
    time.sleep(3.5)  # let the engine finish the orphaned request

    menv.controller()
    m = menv.wait_phase(name, "Running", timeout=120)
    vms = menv.vms_named(name)
    assert len(vms) == 1, vms
    assert vms[0]["status"] == "up"
    assert m["metadata"]["annotations"]["VmId"] == vms[0]["id"]
