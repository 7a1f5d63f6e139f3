"""Fencing is asked by providerID: one that names no oVirt VM (another provider's, or `ovirt://` followed by no VM
id) is refused with the seam's InstanceNotOwned, naming the providerID and the target, before anything is asked of
the engine (docs/architecture.md#acting-only-on-what-is-ours); a bare ValueError would have been an unclassified
crash of the caller's pass."""

from __future__ import annotations

import pytest

from machine_controller.controllers.provider import InstanceNotOwned
from machine_controller.ovirt.power import OvirtPower

NOT_OURS = ["aws:///us-east-1a/i-0123456789abcdef0", "ovirt://", "ovirt://bad id", "ovirt://worker-0", ""]
VERBS = {
    "power": lambda p, pid: p.power(pid, "worker-0"),
    "power_off": lambda p, pid: p.power_off(pid, "worker-0"),
    "power_off_under_way": lambda p, pid: p.power_off_under_way(pid, "worker-0"),
    "stopped_by_late_power_off": lambda p, pid: p.stopped_by_late_power_off(pid, "worker-0"),
    "power_on": lambda p, pid: p.power_on(pid, "worker-0"),
}


@pytest.mark.parametrize("pid", NOT_OURS)
@pytest.mark.parametrize("verb", VERBS.values(), ids=VERBS.keys())
def test_a_provider_id_naming_no_ovirt_vm_is_refused_before_the_engine_is_asked(module_sim_and_client, verb, pid):
    sim, client = module_sim_and_client
    before = sim.control.counts()
    with pytest.raises(InstanceNotOwned) as refused:
        verb(OvirtPower(client), pid)
    assert refused.value.provider_id == pid and not refused.value.instance_id
    assert repr(pid) in str(refused.value) and "worker-0" in str(refused.value), str(refused.value)
    assert sim.control.counts() == before
