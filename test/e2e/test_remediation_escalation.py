"""A power-cycle remediation that ends in the Machine's replacement, driven by this project's MachineHealthCheck:
what the events say must be what happened. Real API server, simulator and controller process."""

from __future__ import annotations

from test_machinehealthcheck import _machines, _power_cycled_set
from test_remediation import _crash_for_good, _events, _wait


def test_a_machine_deleted_by_escalation_is_not_reported_healthy_again(menv):
    """The engine never starts the VM again: the remediation deletes the Machine so its MachineSet replaces it, and
    the health check then closes the request. Neither the request nor the check calls that Machine healthy."""
    set_name, machine = _power_cycled_set(menv, "escset", strategy={"timeoutSeconds": 10, "retryLimit": 1},
                                          cooldownSeconds=0)
    name, vm_id = machine["metadata"]["name"], machine["metadata"]["annotations"]["VmId"]
    try:
        _crash_for_good(menv, vm_id, machine["status"]["nodeRef"]["name"])
        escalated = _wait(lambda: _events(menv, name, "RemediationEscalated"), "escalation", 120, menv)
        assert "has not started the VM" in escalated[0]["message"], escalated[0]["message"]
        _wait(lambda: all(m["metadata"]["name"] != name for m in _machines(menv, set_name)),
              "the Machine gone", 120, menv)
        closed = _wait(lambda: _events(menv, name, "ExternalRemediationCompleted"), "the request closed", 60, menv)
        messages = [e["message"] for e in closed] + [e["message"] for e in _events(menv, name, "NodeHealthy")]
        assert not any("healthy" in m.lower() for m in messages), messages
        assert any("being deleted" in m for m in messages), messages
    finally:
        menv.sim.control.clear_faults()
        menv.cluster.kubectl("-n", menv.namespace, "delete", "mhc", "fence", "--wait=false", check=False)
        menv.cluster.kubectl("-n", menv.namespace, "delete", "machineset", set_name, "--wait=false", check=False)
